"""vtatune's deployed runtime: what a board needs to run a built model, apart from the
compiler (import, partitioning, code generation, tuning), as TVM keeps its runtime apart.

It imports numpy, TVM's runtime (lazily, when a bundle is loaded) and vtatune's numpy-only
layers below it (the hardware config, programs, workloads and their DRAM layouts); never
the lowering, the tuner, Optuna or numba (only :class:`SimulatedDevice` runs the
simulator's engines, imported when it first runs a program).

- ``_device``: the device interface (:class:`Device`, :class:`Buffer`) and vtatune's
  functional VTA behind it (:class:`SimulatedDevice`);
- ``_region``: an offloaded region as it runs (:class:`RegionRunner`: packing, unpacking,
  dilating, repacking activations around the VTA calls, the CPU's part of a
  requantization) and the packed function TVM's VM calls.
"""

from vtatune.deploy.runtime._device import Buffer, Device, SimulatedDevice
from vtatune.deploy.runtime._region import (
    CpuOp,
    OffloadedCall,
    RegionLayer,
    RegionRunner,
    Trace,
    dilate_packed,
    packed_function,
    same_memory,
)

__all__ = [
    "Buffer", "CpuOp", "Device", "OffloadedCall", "RegionLayer", "RegionRunner",
    "SimulatedDevice", "Trace", "dilate_packed", "packed_function", "same_memory",
]
