"""The named workloads: ResNet-18's ten VTA conv tasks, the tutorials' layers, TVM's
grouped (MobileNet) and transposed (DCGAN) benchmarks, and naming a workload by text.

``resnet18.C2`` … ``resnet18.C11`` are the ten VTA conv tasks of ResNet-18 v1 as VTA's
tutorials deploy it (TopHub's ten; TVM's ``relay.testing`` ResNet-18 has an eleventh, see
``_RESNET18``).

Example:
    >>> conv = WORKLOADS["conv2d"]["resnet18.C8"]
    >>> (conv.out_height, conv.out_width)
    (14, 14)
    >>> ct = WORKLOADS["conv2d_transpose"]["dcgan.CT1"]
    >>> (ct.out_height, ct.out_width), ct.macs
    ((8, 8), 536870912)
"""

from __future__ import annotations

from simulator.hardware import HardwareConfig
from vtatune.errors import WorkloadError
from vtatune.workloads._operators import (
    Conv2dTransposeWorkload,
    Conv2dWorkload,
    GemmWorkload,
    GroupConv2dWorkload,
    Workload,
)

#: ResNet-18 v1 as VTA's tutorials deploy it (MXNet Gluon / torchvision ``resnet18``): the
#: ten VTA conv tasks TopHub tunes, C1 (the 7x7 stem) staying on the CPU. Identity shortcuts
#: in the first stage, 1x1 stride-2 projections where a stage downsamples (C4, C7, C10). TVM's
#: ``relay.testing`` ResNet-18 has a projection shortcut on the first unit of every stage,
#: first included, hence an eleventh task (1x1, 64->64, 56x56, stride 1) absent here and
#: from TopHub.
_RESNET18 = {
    # name: (H=W, CI, CO, K, pad, stride)
    "C2": (56, 64, 64, 3, 1, 1),
    "C3": (56, 64, 128, 3, 1, 2),
    "C4": (56, 64, 128, 1, 0, 2),
    "C5": (28, 128, 128, 3, 1, 1),
    "C6": (28, 128, 256, 3, 1, 2),
    "C7": (28, 128, 256, 1, 0, 2),
    "C8": (14, 256, 256, 3, 1, 1),
    "C9": (14, 256, 512, 3, 1, 2),
    "C10": (14, 256, 512, 1, 0, 2),
    "C11": (7, 512, 512, 3, 1, 1),
}

#: How often each ResNet-18 layer shape occurs in the network.
RESNET18_COUNTS = {"C2": 4, "C3": 1, "C4": 1, "C5": 3, "C6": 1, "C7": 1, "C8": 3, "C9": 1,
                   "C10": 1, "C11": 3}

WORKLOADS: dict[str, dict[str, Workload]] = {
    "conv2d": {
        f"resnet18.{n}": Conv2dWorkload(1, hw_, hw_, ci, co, k, p, s, f"resnet18.{n}")
        for n, (hw_, ci, co, k, p, s) in _RESNET18.items()
    },
    "gemm": {
        "tutorial": GemmWorkload(1, 1024, 1024, "tutorial"),
        "dense128": GemmWorkload(128, 128, 128, "dense128"),
    },
}
# The seed conv2d tutorial layer is ResNet-18's C8 shape.
WORKLOADS["conv2d"]["tutorial"] = Conv2dWorkload(1, 14, 14, 256, 256, 3, 1, 1, "tutorial")

# TVM's VTA benchmarks (vta/tests/python/integration/test_benchmark_topi_group_conv2d.py and
# ..._conv2d_transpose.py at apache/tvm db6d2059a2): MobileNet's grouped variant (16 channels
# per group) and DCGAN's generator.
_MOBILENET_GROUPED = {
    # name: (H=W, CI=CO, groups, stride); 3x3 kernels, pad 1
    "D1": (112, 32, 2, 1), "D2": (112, 64, 4, 2), "D3": (56, 128, 8, 1),
    "D4": (56, 128, 8, 2), "D5": (28, 256, 16, 1), "D6": (28, 256, 16, 2),
    "D7": (14, 512, 32, 1), "D8": (14, 512, 32, 2), "D9": (7, 1024, 64, 1),
}
WORKLOADS["group_conv2d"] = {
    f"mobilenet.{n}": GroupConv2dWorkload(1, hw_, hw_, c, c, 3, 1, s, g, f"mobilenet.{n}")
    for n, (hw_, c, g, s) in _MOBILENET_GROUPED.items()
}
WORKLOADS["group_conv2d"]["tutorial"] = GroupConv2dWorkload(1, 14, 14, 512, 512, 3, 1, 1, 32,
                                                            "tutorial")
_DCGAN = {
    # name: (H=W, CI, CO); 4x4 kernels, pad 1, stride 2
    "CT1": (4, 1024, 512), "CT2": (8, 512, 256), "CT3": (16, 256, 128),
}
WORKLOADS["conv2d_transpose"] = {
    f"dcgan.{n}": Conv2dTransposeWorkload(1, hw_, hw_, ci, co, 4, 1, 2, 0, f"dcgan.{n}")
    for n, (hw_, ci, co) in _DCGAN.items()
}
WORKLOADS["conv2d_transpose"]["tutorial"] = Conv2dTransposeWorkload(1, 8, 8, 512, 256, 4, 1, 2,
                                                                    0, "tutorial")


def get_workload(operator: str, name: str) -> Workload:
    """A named workload; unknown names raise WorkloadError listing the known ones."""
    table = WORKLOADS.get(operator)
    if table is None:
        raise WorkloadError(f"unknown operator {operator!r} (known: {', '.join(WORKLOADS)})")
    if name in table:
        return table[name]
    # Accept the short layer name (C8, D3, CT1) too.
    short = [full for full in table if full.endswith(f".{name}")]
    if len(short) == 1:
        return table[short[0]]
    raise WorkloadError(f"unknown {operator} workload {name!r} (known: {', '.join(table)})")


def _by_name(text: str) -> Workload:
    """``operator[:name]``, or a workload name alone when one operator has it (``C8``,
    ``resnet18.C8``, ``dense128``); ``tutorial`` alone is ambiguous."""
    op, colon, name = text.partition(":")
    if colon or op in WORKLOADS:
        return get_workload(op, name or "tutorial")
    found = []
    for operator in WORKLOADS:
        try:
            found.append(get_workload(operator, text))
        except WorkloadError:
            continue
    if len(found) == 1:
        return found[0]
    if found:
        raise WorkloadError(f"workload {text!r} is ambiguous: say "
                            + " or ".join(f"'{w.operator}:{text}'" for w in found))
    names = ", ".join(n for table in WORKLOADS.values() for n in table if n != "tutorial")
    raise WorkloadError(f"unknown workload {text!r}: give an operator ({', '.join(WORKLOADS)}), "
                        f"a workload name ({names}; short names such as C8 too) or "
                        "operator:name")


def resolve(workload: Workload | str, hw: HardwareConfig | str | None = None
            ) -> tuple[Workload, HardwareConfig]:
    """The workload (or ``"conv2d"``, ``"gemm:dense128"``, ``"conv2d:resnet18.C8"``, a name
    alone such as ``"resnet18.C8"``, ``"C8"`` or ``"dense128"``) and the
    hardware (a config, a preset name, a ``vta_config.json`` path or None for the default),
    checked against each other: the Python API's way of naming what to tune or build."""
    if isinstance(workload, str):
        workload = _by_name(workload)
    if not isinstance(hw, HardwareConfig):
        hw = HardwareConfig.resolve(hw)
    workload.check(hw)
    return workload, hw


def resnet18_layers() -> list[Conv2dWorkload]:
    return [WORKLOADS["conv2d"][f"resnet18.{n}"] for n in _RESNET18]
