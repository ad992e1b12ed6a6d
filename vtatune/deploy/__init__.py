"""Deploying with today's TVM: vtatune as VTA's backend through Relax BYOC.

A quantized ONNX model (QDQ format) is imported by ``tvm.relax.frontend.onnx``,
partitioned by VTA's pattern table (the int8 cores of conv2d, grouped conv2d,
conv2d_transpose, dense and residual adds, with the epilogue VTA fuses), and built: each
offloaded region by ``relax.ext.vta`` into vtatune programs with the schedules of a tuned
log, the rest by TVM for the CPU. Running it runs the offloaded layers on a
:class:`Device` (here vtatune's functional VTA, bit-exact, timed by the timing model).

This is the only package of vtatune that imports TVM (``apache-tvm``, the ``tvm`` extra),
and only when a function here needs it: ``import vtatune.deploy`` does not. Its names are
loaded on first use (as ``vtatune``'s are), so that ``vtatune.deploy.runtime`` and
:func:`load` import none of the compiler.

- ``_tvm``: the lazy import, the supported release (:data:`TVM_VERSION`);
- ``_match``: what a pattern match is (:class:`LayerSpec`) and whether VTA runs it (the
  same placement as ``network``: :func:`vtatune.networks.place`);
- ``_patterns``: the pattern table, registered as TVM's contrib backends register theirs;
- ``_partition``: the partitioning passes (:func:`partition`);
- ``_requantize``: requantization on VTA (a power-of-two shift in the fused epilogue) or on
  the CPU (:class:`Requantization`);
- ``_schedules``: the schedule of each offloaded layer, from a log or the fallback (the
  cost model's pick: :func:`cost_model_pick`);
- ``_tuning``: what ``deploy`` tunes by default before it builds (:func:`tune_workloads`,
  into the hardware's cache log: :func:`cache_log`);
- ``_region``, ``_codegen``: the code generator and the offloaded calls;
- ``_bundle``: a compiled model saved as a bundle (:func:`save`);
- ``_cpu_build``: TVM's build of the CPU part, kept in the deploy cache (:func:`build_cpu`);
- ``_cpu_target``: the CPU the CPU part is compiled for (:func:`resolve_cpu_target`: this
  machine's, a board's, any TVM llvm target) and its cross compiler;
- :mod:`vtatune.deploy.runtime`: what runs a built or loaded model, apart from the compiler
  (a board needs it, numpy and TVM's runtime only): the device interface and the simulated
  device, the regions as they run, :func:`load` of a bundle;
- ``runtime._driver``: the device over VTA's C driver API (:class:`DriverDevice`, any
  ``libvta``), chosen by :func:`device_from_spec` (``sim`` or ``libvta:PATH``);
- ``_quantize``: quantizing a float model with onnxruntime (power-of-two scales);
- ``_qoperator``: a QOperator model (QLinearConv, QGemm, ...) as its QDQ form
  (:func:`to_qdq`);
- ``_dynamic``: a dynamically quantized model's integer GEMMs in the form VTA runs
  (:func:`to_accumulators`);
- ``_import``: TVM's import, retried after the standard preparation when it fails;
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

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: The public API: each name and the module that defines it.
_API = {
    **dict.fromkeys(("ENGINES", "Agreement", "Check", "CompiledModel", "agreement",
                     "check_outputs", "compile_model", "deploy", "reference", "references",
                     "top1"), "vtatune.deploy._deploy"),
    **dict.fromkeys(("bundle_target", "save"), "vtatune.deploy._bundle"),
    **dict.fromkeys(("CpuTarget", "resolve_cpu_target"), "vtatune.deploy._cpu_target"),
    **dict.fromkeys(("CpuBuild", "build_cpu"), "vtatune.deploy._cpu_build"),
    "DeployError": "vtatune.deploy.runtime._errors",
    **dict.fromkeys(("LayerSpec", "QParams", "refusal", "refusals", "spec_of",
                     "workload_of"), "vtatune.deploy._match"),
    **dict.fromkeys(("Imported", "PREPARATION", "import_model"), "vtatune.deploy._import"),
    **dict.fromkeys(("MAC_OPS", "is_quantized", "load_model", "model_input",
                     "output_step"), "vtatune.deploy._model"),
    **dict.fromkeys(("call_macs", "float_macs", "model_macs", "module_macs"),
                    "vtatune.deploy._macs"),
    **dict.fromkeys(("external_functions", "partition"), "vtatune.deploy._partition"),
    **dict.fromkeys(("PREFIX", "Partitioning", "Refusal", "pattern_entries", "register"),
                    "vtatune.deploy._patterns"),
    **dict.fromkeys(("PlacedLayer", "Placement", "load_placed", "placed_network", "placement"),
                    "vtatune.deploy._placement"),
    "float64_model": "vtatune.deploy._exact",
    "quantize": "vtatune.deploy._quantize",
    **dict.fromkeys(("IN_PASS", "Requantization"), "vtatune.deploy.runtime._requantize"),
    **dict.fromkeys(("NORMALIZING", "normalizing_ops", "resolve_exact"),
                    "vtatune.deploy._exactness"),
    **dict.fromkeys(("LayerBuilder", "LayerPrograms", "cost_model_pick"),
                    "vtatune.deploy._schedules"),
    **dict.fromkeys(("CACHE_ENV", "DEFAULT_TUNE_TRIALS", "Tuning", "cache_dir", "cache_log",
                     "tune_workloads"), "vtatune.deploy._tuning"),
    **dict.fromkeys(("QOPERATOR_OPS", "to_qdq"), "vtatune.deploy._qoperator"),
    **dict.fromkeys(("INTEGER_OPS", "to_accumulators"), "vtatune.deploy._dynamic"),
    "TVM_VERSION": "vtatune.deploy._tvm",
    **dict.fromkeys(("ChannelFixedPoint", "FixedPoint", "channel_fixed_point", "fixed_point",
                     "ExactFixedPoint", "exact_fixed_point"), "vtatune.deploy.runtime"),
    **dict.fromkeys(("Buffer", "CpuOp", "DeployResult", "DeployedModel", "Device",
                     "ModelInput", "OffloadedCall", "SimulatedDevice", "check_input",
                     "device_from_spec", "input_batch", "load", "output_file", "output_sha256",
                     "random_input", "same_memory", "save_output"),
                    "vtatune.deploy.runtime"),
    **dict.fromkeys(("DriverDevice", "program_words"), "vtatune.deploy.runtime._driver"),
}

__all__ = [
    "MAC_OPS", "Agreement", "Buffer", "Check", "check_outputs", "input_batch", "references",
    "top1", "CompiledModel", "CpuOp", "CpuTarget", "resolve_cpu_target", "DeployError",
    "CpuBuild", "build_cpu",
    "DeployResult", "DeployedModel", "Device", "DriverDevice", "FixedPoint", "fixed_point",
    "ChannelFixedPoint", "channel_fixed_point",
    "LayerBuilder", "LayerPrograms",
    "LayerSpec", "OffloadedCall", "PREFIX", "Partitioning", "QParams", "Refusal",
    "Requantization", "SimulatedDevice", "TVM_VERSION", "agreement", "check_input",
    "compile_model", "deploy", "device_from_spec", "external_functions", "is_quantized",
    "load", "load_model", "model_input", "model_macs", "output_sha256", "output_step",
    "partition", "pattern_entries", "program_words", "quantize", "random_input", "reference",
    "refusal", "refusals", "register", "same_memory", "save", "spec_of", "workload_of",
    "output_file", "save_output", "CACHE_ENV", "DEFAULT_TUNE_TRIALS", "Tuning", "cache_dir",
    "cache_log", "cost_model_pick", "tune_workloads",
    "output_file", "save_output", "ModelInput", "bundle_target",
    "output_file", "save_output", "ENGINES", "float64_model", "PlacedLayer", "Placement",
    "placed_network", "placement", "load_placed", "call_macs", "float_macs", "module_macs",
    "import_model",
    "output_file", "save_output", "QOPERATOR_OPS", "to_qdq",
    "INTEGER_OPS", "to_accumulators", "Imported", "PREPARATION",
    "ExactFixedPoint", "exact_fixed_point", "IN_PASS", "NORMALIZING", "normalizing_ops",
    "resolve_exact",
]

if TYPE_CHECKING:
    from vtatune.deploy._bundle import bundle_target, save
    from vtatune.deploy._deploy import (
        ENGINES,
        Agreement,
        Check,
        CompiledModel,
        agreement,
        check_outputs,
        compile_model,
        deploy,
        reference,
        references,
        top1,
    )
    from vtatune.deploy._dynamic import INTEGER_OPS, to_accumulators
    from vtatune.deploy._exact import float64_model
    from vtatune.deploy._exactness import NORMALIZING, normalizing_ops, resolve_exact
    from vtatune.deploy._import import PREPARATION, Imported, import_model
    from vtatune.deploy._macs import call_macs, float_macs, model_macs, module_macs
    from vtatune.deploy._match import (
        LayerSpec,
        QParams,
        refusal,
        refusals,
        spec_of,
        workload_of,
    )
    from vtatune.deploy._model import (
        MAC_OPS,
        is_quantized,
        load_model,
        model_input,
        output_step,
    )
    from vtatune.deploy._partition import external_functions, partition
    from vtatune.deploy._patterns import PREFIX, Partitioning, Refusal, pattern_entries, register
    from vtatune.deploy._placement import (
        PlacedLayer,
        Placement,
        load_placed,
        placed_network,
        placement,
    )
    from vtatune.deploy._qoperator import QOPERATOR_OPS, to_qdq
    from vtatune.deploy._quantize import quantize
    from vtatune.deploy._schedules import LayerBuilder, LayerPrograms, cost_model_pick
    from vtatune.deploy._tuning import (
        CACHE_ENV,
        DEFAULT_TUNE_TRIALS,
        Tuning,
        cache_dir,
        cache_log,
        tune_workloads,
    )
    from vtatune.deploy._tvm import TVM_VERSION
    from vtatune.deploy.runtime import (
        Buffer,
        ChannelFixedPoint,
        CpuOp,
        DeployedModel,
        DeployResult,
        Device,
        ExactFixedPoint,
        FixedPoint,
        ModelInput,
        OffloadedCall,
        SimulatedDevice,
        channel_fixed_point,
        check_input,
        device_from_spec,
        exact_fixed_point,
        fixed_point,
        input_batch,
        load,
        output_file,
        output_sha256,
        random_input,
        same_memory,
        save_output,
    )
    from vtatune.deploy.runtime._driver import DriverDevice, program_words
    from vtatune.deploy.runtime._errors import DeployError
    from vtatune.deploy.runtime._requantize import IN_PASS, Requantization


def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'vtatune.deploy' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
