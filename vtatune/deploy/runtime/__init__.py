"""vtatune's deployed runtime: what a board needs to run a built model, apart from the
compiler (import, partitioning, code generation, tuning), as TVM keeps its runtime apart.

It imports numpy, TVM's runtime (``tvm_ffi`` and ``libtvm_runtime.so``, when a bundle is
loaded; never the ``tvm`` package and its compiler) and vtatune's numpy-only layers below
it (the hardware config, program images, workloads and their DRAM layouts); never the
lowering, the tuner, Optuna or numba (only :class:`SimulatedDevice` runs the simulator's
engines, imported when it first runs a program).

- ``_device``: the device interface (:class:`Device`, :class:`Buffer`) and vtatune's
  functional VTA behind it (:class:`SimulatedDevice`);
- ``_select``: a device by name (:func:`device_from_spec`: ``sim``, ``libvta:PATH``);
- ``_libvta``: VTA's driver libraries loaded (probed in a child process first; tsim
  started; :func:`end_process`: the status a process that started tsim leaves with);
- ``_region``: an offloaded region as it runs (:class:`RegionRunner`: packing, unpacking,
  dilating, repacking activations around the VTA calls, the CPU's part of a
  requantization) and the packed function TVM's VM calls;
- ``_inputs``: a model's input as a user gives it (:class:`ModelInput`: one, a batch, the
  ``--input`` file or folder), checked against what the model takes;
- ``_model``: a model ready to run (:class:`DeployedModel`) and one inference
  (:class:`DeployResult`);
- ``_tvm``: TVM's runtime (the relax VM of an exported library);
- ``_bundle``: a saved model loaded (:func:`load`).
- ``_errors``: :class:`DeployError`; ``_requantize``: a layer's requantization
  (:class:`Requantization`: the epilogues VTA runs, the CPU's part where VTA cannot),
  the compiler's and the runtime's alike.

Example (a bundle saved by ``python -m vtatune deploy MODEL --save DIR``):
    >>> from vtatune.deploy.runtime import load
    >>> model = load("resnet18.bundle", device="sim")  # doctest: +SKIP
    >>> model.run(x).output.shape  # doctest: +SKIP
    (1, 1000)
"""

from vtatune.deploy.runtime._bundle import load, read_manifest
from vtatune.deploy.runtime._device import Buffer, Device, SimulatedDevice, tokens_left
from vtatune.deploy.runtime._exact_fixed_point import (
    ExactFixedPoint,
    exact_fixed_point,
    rounding_breakpoints,
)
from vtatune.deploy.runtime._fixed_point import (
    ChannelFixedPoint,
    FixedPoint,
    channel_fixed_point,
    fixed_point,
)
from vtatune.deploy.runtime._inputs import ModelInput, check_input, input_batch
from vtatune.deploy.runtime._libvta import end_process
from vtatune.deploy.runtime._model import (
    INDEX_VALUES,
    DeployedModel,
    DeployResult,
    output_file,
    output_sha256,
    random_input,
    reraised,
    save_output,
)
from vtatune.deploy.runtime._region import (
    Border,
    CpuOp,
    OffloadedCall,
    RegionLayer,
    RegionRunner,
    Trace,
    dilate_packed,
    from_int8,
    packed_function,
    pad_channels,
    same_memory,
    to_int8,
)
from vtatune.deploy.runtime._select import SPECS, device_from_spec

__all__ = [
    "ChannelFixedPoint", "FixedPoint", "channel_fixed_point", "fixed_point", "Border", "Buffer",
    "ExactFixedPoint", "exact_fixed_point", "rounding_breakpoints",
    "CpuOp", "DeployResult", "DeployedModel", "Device", "INDEX_VALUES", "ModelInput",
    "OffloadedCall", "RegionLayer", "RegionRunner", "SPECS", "SimulatedDevice", "Trace",
    "check_input", "device_from_spec", "dilate_packed", "end_process", "from_int8", "input_batch",
    "load", "output_file", "output_sha256", "packed_function", "pad_channels", "random_input",
    "read_manifest", "reraised", "same_memory", "save_output", "to_int8", "tokens_left",
]
