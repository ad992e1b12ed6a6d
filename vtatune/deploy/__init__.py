"""Deploying with today's TVM: vtatune as VTA's backend through Relax BYOC.

A quantized ONNX model (QDQ format) is imported by ``tvm.relax.frontend.onnx``,
partitioned by VTA's pattern table (the int8 cores of conv2d, grouped conv2d,
conv2d_transpose, dense and residual adds, with the epilogue VTA fuses), and built: each
offloaded region by ``relax.ext.vta`` into vtatune programs with the schedules of a tuned
log, the rest by TVM for the CPU. Running it runs the offloaded layers on a
:class:`Device` (here vtatune's functional VTA, bit-exact, timed by the timing model).

This is the only package of vtatune that imports TVM (``apache-tvm``, the ``tvm`` extra),
and only when a function here needs it: ``import vtatune.deploy`` does not.

- ``_tvm``: the lazy import, the supported release (:data:`TVM_VERSION`);
- ``_match``: what a pattern match is (:class:`LayerSpec`) and whether VTA runs it (the
  same placement as ``network``: :func:`vtatune.networks.place`);
- ``_patterns``: the pattern table, registered as TVM's contrib backends register theirs;
- ``_partition``: the partitioning passes (:func:`partition`);
- ``_requantize``: requantization on VTA (a power-of-two shift in the fused epilogue) or on
  the CPU (:class:`Requantization`);
- ``_schedules``: the schedule of each offloaded layer, from a log or the fallback;
- ``_region``, ``_codegen``: the code generator and the offloaded calls;
- ``_device``: the device interface and the simulated device;
- ``_quantize``: quantizing a float model with onnxruntime (power-of-two scales);
- ``_model``: the ONNX model (:func:`load_model`, :func:`model_input`, ...);
- ``_deploy``: :func:`compile_model`, :func:`deploy`, :func:`reference`, :func:`agreement`,
  :func:`check_outputs` (a batch against both references);
- :mod:`vtatune.deploy.models`: float example models built with ``onnx.helper``.

Example (see ``docs/deploy.md``):
    >>> import vtatune.deploy as d
    >>> d.TVM_VERSION
    '0.27.0.post1'
    >>> result = d.deploy("model_int8.onnx", log="logs/resnet18-pynq.jsonl")  # doctest: +SKIP
    >>> [(c.layer, c.cycles) for c in result.offloaded][:1]  # doctest: +SKIP
    [('conv2d_1', 532899)]
"""

from vtatune.deploy._deploy import (
    Agreement,
    Check,
    CompiledModel,
    DeployResult,
    agreement,
    check_outputs,
    compile_model,
    deploy,
    input_batch,
    reference,
    references,
    top1,
)
from vtatune.deploy._device import Buffer, Device, SimulatedDevice
from vtatune.deploy._errors import DeployError
from vtatune.deploy._match import LayerSpec, QParams, refusal, spec_of, workload_of
from vtatune.deploy._model import (
    check_input,
    is_quantized,
    load_model,
    model_input,
    output_step,
    random_input,
)
from vtatune.deploy._partition import external_functions, partition
from vtatune.deploy._patterns import PREFIX, Partitioning, Refusal, pattern_entries, register
from vtatune.deploy._quantize import quantize
from vtatune.deploy._region import CpuOp, OffloadedCall, same_memory
from vtatune.deploy._requantize import Requantization
from vtatune.deploy._schedules import LayerBuilder, LayerPrograms
from vtatune.deploy._tvm import TVM_VERSION

__all__ = [
    "Agreement", "Buffer", "CompiledModel", "CpuOp", "DeployError", "DeployResult", "Device",
    "LayerBuilder", "LayerPrograms", "LayerSpec", "OffloadedCall", "PREFIX", "Partitioning",
    "QParams", "Refusal", "Requantization", "SimulatedDevice", "TVM_VERSION", "agreement",
    "check_input", "compile_model", "deploy", "external_functions", "is_quantized", "load_model",
    "model_input", "output_step", "partition", "pattern_entries", "quantize", "random_input",
    "reference", "refusal", "register", "same_memory", "spec_of", "workload_of",
    # a batch of inputs checked against the references
    "Check", "check_outputs", "input_batch", "references", "top1",
]
