"""Operator workloads: packed conv2d (NCHW), GEMM (dense), grouped conv2d and transposed
conv2d, plus the named ones.

``resnet18.C2`` … ``resnet18.C11`` are the ten VTA conv tasks of ResNet-18 v1 as VTA's
tutorials deploy it (TopHub's ten; TVM's ``relay.testing`` ResNet-18 has an eleventh, see
``_RESNET18``).

A GEMM is lowered as a 1×1 convolution over a 1×1 image: the packed layouts coincide
(data (N/B, I/BI, B, BI), weight (O/BO, I/BI, BO, BI)), so one lowering serves both.

Example:
    >>> conv = WORKLOADS["conv2d"]["resnet18.C8"]
    >>> (conv.out_height, conv.out_width)
    (14, 14)
    >>> ct = WORKLOADS["conv2d_transpose"]["dcgan.CT1"]
    >>> (ct.out_height, ct.out_width), ct.macs
    ((8, 8), 536870912)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from simulator.hardware import HardwareConfig

from .errors import WorkloadError


def _require_positive(wl: object, keys: tuple[str, ...]) -> None:
    for key in keys:
        v = getattr(wl, key)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise WorkloadError(f"{key} must be a positive integer, got {v!r}")


def _require_non_negative(wl: object, keys: tuple[str, ...]) -> None:
    for key in keys:
        v = getattr(wl, key)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise WorkloadError(f"{key} must be a non-negative integer, got {v!r}")


def _require_output(wl: object) -> None:
    if wl.out_height < 1 or wl.out_width < 1:  # type: ignore[attr-defined]
        raise WorkloadError(
            f"kernel {wl.kernel} with pad {wl.pad} does not fit a "  # type: ignore[attr-defined]
            f"{wl.height}x{wl.width} input"  # type: ignore[attr-defined]
        )


def _check_blocks(hw: HardwareConfig, checks: tuple[tuple[str, int, int, str], ...]) -> None:
    """Each (what, value, block, block name): value must be a whole number of blocks."""
    for what, v, block, name in checks:
        if v % block:
            raise WorkloadError(f"{what} {v} is not a multiple of {name} {block} "
                                f"({hw.bitstream})")


def _conv_out(size: int, kernel: int, pad: int, stride: int) -> int:
    """Output size of a convolution along one dimension."""
    return (size + 2 * pad - kernel) // stride + 1


_CONV_FIELDS = ("batch", "height", "width", "in_channels", "out_channels", "kernel", "stride")


def _shape_args(wl: object) -> dict[str, int]:
    d = asdict(wl)  # type: ignore[call-overload]
    d.pop("name")
    return d


def _key(wl: object) -> str:
    """A stable identifier of the shape (used to match tuning records)."""
    return wl.operator + "." + ".".join(  # type: ignore[attr-defined]
        f"{k}{v}" for k, v in _shape_args(wl).items())


@dataclass(frozen=True)
class Conv2dWorkload:
    """conv2d on NCHW int8 data; square kernel, symmetric pad and stride."""

    batch: int
    height: int
    width: int
    in_channels: int
    out_channels: int
    kernel: int
    pad: int
    stride: int
    name: str = ""

    operator = "conv2d"

    def __post_init__(self) -> None:
        _require_positive(self, _CONV_FIELDS)
        _require_non_negative(self, ("pad",))
        _require_output(self)

    @property
    def out_height(self) -> int:
        return _conv_out(self.height, self.kernel, self.pad, self.stride)

    @property
    def out_width(self) -> int:
        return _conv_out(self.width, self.kernel, self.pad, self.stride)

    @property
    def macs(self) -> int:
        return (self.batch * self.out_channels * self.out_height * self.out_width
                * self.in_channels * self.kernel * self.kernel)

    def check(self, hw: HardwareConfig) -> None:
        """Shapes must be whole blocks of the hardware's tensor core."""
        _check_blocks(hw, (("batch", self.batch, hw.batch, "BATCH"),
                           ("in_channels", self.in_channels, hw.block_in, "BLOCK_IN"),
                           ("out_channels", self.out_channels, hw.block_out, "BLOCK_OUT")))

    def shape_args(self) -> dict[str, int]:
        return _shape_args(self)

    def describe(self) -> str:
        label = f"{self.name} " if self.name else ""
        return (f"{label}conv2d {self.batch}x{self.in_channels}x{self.height}x{self.width} -> "
                f"{self.out_channels}, k{self.kernel} p{self.pad} s{self.stride}")

    def key(self) -> str:
        """A stable identifier of the shape (used to match tuning records)."""
        return _key(self)

    def as_conv(self) -> Conv2dWorkload:
        return self


@dataclass(frozen=True)
class GemmWorkload:
    """Dense: (batch × in_channels) int8 data times (out_channels × in_channels) weights."""

    batch: int
    in_channels: int
    out_channels: int
    name: str = ""

    operator = "gemm"

    def __post_init__(self) -> None:
        _require_positive(self, ("batch", "in_channels", "out_channels"))

    @property
    def macs(self) -> int:
        return self.batch * self.in_channels * self.out_channels

    def check(self, hw: HardwareConfig) -> None:
        self.as_conv().check(hw)

    def as_conv(self) -> Conv2dWorkload:
        return Conv2dWorkload(self.batch, 1, 1, self.in_channels, self.out_channels, 1, 0, 1,
                              self.name)

    def shape_args(self) -> dict[str, int]:
        return _shape_args(self)

    def describe(self) -> str:
        label = f"{self.name} " if self.name else ""
        return (f"{label}gemm {self.batch}x{self.in_channels} * "
                f"{self.in_channels}x{self.out_channels}")

    def key(self) -> str:
        return _key(self)


@dataclass(frozen=True)
class GroupConv2dWorkload:
    """Grouped conv2d on NCHW int8 data (TVM's ``group_conv2d_packed``): ``groups`` groups,
    each convolving ``in_channels / groups`` input channels into ``out_channels / groups``
    output channels; square kernel, symmetric pad and stride. VTA runs it when each group's
    channels are whole blocks (:meth:`check`).

    Example:
        >>> g = GroupConv2dWorkload(1, 14, 14, 512, 512, 3, 1, 2, 32)
        >>> (g.out_height, g.group_in_channels, g.macs)
        (7, 16, 3612672)
    """

    batch: int
    height: int
    width: int
    in_channels: int
    out_channels: int
    kernel: int
    pad: int
    stride: int
    groups: int
    name: str = ""

    operator = "group_conv2d"

    def __post_init__(self) -> None:
        _require_positive(self, (*_CONV_FIELDS, "groups"))
        _require_non_negative(self, ("pad",))
        for key in ("in_channels", "out_channels"):
            if getattr(self, key) % self.groups:
                raise WorkloadError(f"{key} {getattr(self, key)} is not divisible by "
                                    f"groups {self.groups}")
        _require_output(self)

    @property
    def group_in_channels(self) -> int:
        return self.in_channels // self.groups

    @property
    def group_out_channels(self) -> int:
        return self.out_channels // self.groups

    @property
    def out_height(self) -> int:
        return _conv_out(self.height, self.kernel, self.pad, self.stride)

    @property
    def out_width(self) -> int:
        return _conv_out(self.width, self.kernel, self.pad, self.stride)

    @property
    def macs(self) -> int:
        return (self.batch * self.out_channels * self.out_height * self.out_width
                * self.group_in_channels * self.kernel * self.kernel)

    def check(self, hw: HardwareConfig) -> None:
        """Batch and each group's channels must be whole blocks of the tensor core (TVM's
        graph packing leaves other grouped convolutions on the CPU)."""
        _check_blocks(hw, (
            ("batch", self.batch, hw.batch, "BATCH"),
            ("in_channels per group", self.group_in_channels, hw.block_in, "BLOCK_IN"),
            ("out_channels per group", self.group_out_channels, hw.block_out, "BLOCK_OUT")))

    def shape_args(self) -> dict[str, int]:
        return _shape_args(self)

    def describe(self) -> str:
        label = f"{self.name} " if self.name else ""
        return (f"{label}group_conv2d {self.batch}x{self.in_channels}x{self.height}x"
                f"{self.width} -> {self.out_channels}, k{self.kernel} p{self.pad} "
                f"s{self.stride} g{self.groups}")

    def key(self) -> str:
        """A stable identifier of the shape (used to match tuning records)."""
        return _key(self)


@dataclass(frozen=True)
class Conv2dTransposeWorkload:
    """Transposed conv2d on NCHW int8 data (TVM's ``conv2d_transpose_packed``): each input
    pixel scatters a ``kernel`` x ``kernel`` patch, ``stride`` apart, cropped by ``pad``
    on every side; ``output_padding`` extends the bottom and right edge. ``height`` and
    ``width`` are the input's.

    ``macs`` counts what the hardware multiplies (TVM's ``add_flop`` / 2): a window of the
    stride-dilated input per output pixel, zeros included.

    Example:
        >>> t = Conv2dTransposeWorkload(1, 8, 8, 512, 256, 4, 1, 2, 0)
        >>> (t.out_height, t.out_width)
        (16, 16)
        >>> Conv2dTransposeWorkload(1, 8, 8, 16, 16, 4, 1, 2, 2).out_height
        Traceback (most recent call last):
        ...
        vtatune.errors.WorkloadError: output_padding 2 must be smaller than stride 2
    """

    batch: int
    height: int
    width: int
    in_channels: int
    out_channels: int
    kernel: int
    pad: int
    stride: int
    output_padding: int
    name: str = ""

    operator = "conv2d_transpose"

    def __post_init__(self) -> None:
        _require_positive(self, _CONV_FIELDS)
        _require_non_negative(self, ("pad", "output_padding"))
        if self.output_padding >= self.stride:
            raise WorkloadError(f"output_padding {self.output_padding} must be smaller than "
                                f"stride {self.stride}")
        _require_output(self)

    @property
    def out_height(self) -> int:
        return ((self.height - 1) * self.stride - 2 * self.pad + self.kernel
                + self.output_padding)

    @property
    def out_width(self) -> int:
        return ((self.width - 1) * self.stride - 2 * self.pad + self.kernel
                + self.output_padding)

    @property
    def macs(self) -> int:
        return (self.batch * self.out_channels * self.out_height * self.out_width
                * self.in_channels * self.kernel * self.kernel)

    def check(self, hw: HardwareConfig) -> None:
        """Shapes must be whole blocks of the tensor core, and the pad at most
        ``kernel - 1``: TVM's compute pads the dilated input by ``kernel - 1 - pad``."""
        _check_blocks(hw, (("batch", self.batch, hw.batch, "BATCH"),
                           ("in_channels", self.in_channels, hw.block_in, "BLOCK_IN"),
                           ("out_channels", self.out_channels, hw.block_out, "BLOCK_OUT")))
        if self.pad > self.kernel - 1:
            raise WorkloadError(
                f"pad {self.pad} exceeds kernel - 1 = {self.kernel - 1}: conv2d_transpose_packed "
                f"pads the dilated input by kernel - 1 - pad, which would be negative")

    def shape_args(self) -> dict[str, int]:
        return _shape_args(self)

    def describe(self) -> str:
        label = f"{self.name} " if self.name else ""
        opad = f" op{self.output_padding}" if self.output_padding else ""
        return (f"{label}conv2d_transpose {self.batch}x{self.in_channels}x{self.height}x"
                f"{self.width} -> {self.out_channels}, k{self.kernel} p{self.pad} "
                f"s{self.stride}{opad}")

    def key(self) -> str:
        """A stable identifier of the shape (used to match tuning records)."""
        return _key(self)


Workload = Conv2dWorkload | GemmWorkload | GroupConv2dWorkload | Conv2dTransposeWorkload

#: The workload class of each operator name (``Workload.operator``).
WORKLOAD_CLASSES: dict[str, type] = {
    cls.operator: cls
    for cls in (Conv2dWorkload, GemmWorkload, GroupConv2dWorkload, Conv2dTransposeWorkload)
}

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
