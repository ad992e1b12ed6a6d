"""Operator workloads: packed conv2d (NCHW), GEMM (dense), grouped conv2d, transposed
conv2d and the getting-started vector add.

A GEMM is lowered as a 1×1 convolution over a 1×1 image: the packed layouts coincide
(data (N/B, I/BI, B, BI), weight (O/BO, I/BI, BO, BI)), so one lowering serves both.

Example:
    >>> conv = Conv2dWorkload(1, 14, 14, 256, 256, 3, 1, 1)
    >>> (conv.out_height, conv.out_width), conv.macs
    ((14, 14), 115605504)
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from simulator.hardware import HardwareConfig
from vtatune.errors import WorkloadError
from vtatune.workloads._epilogue import BENCHMARK, RESIDUAL, Epilogue


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


#: Fields of a workload that are not its shape.
_NOT_SHAPE = ("name", "epilogue")


def _shape_args(wl: object) -> dict[str, int]:
    return {f.name: getattr(wl, f.name) for f in fields(wl)  # type: ignore[arg-type]
            if f.name not in _NOT_SHAPE}


def shape_fields(cls: type) -> tuple[str, ...]:
    """The shape fields of a workload class, in order (its constructor's first arguments)."""
    return tuple(f.name for f in fields(cls) if f.name not in _NOT_SHAPE)


def autotvm_key(wl: Workload) -> tuple[str, str]:
    """A workload's AutoTVM task key as far as vtatune tells workloads apart: its operator
    and shapes. TVM's key leaves out the fused epilogue (its template is the conv alone) and
    types both operands of ``add.vta`` as int32 tensors, so neither tells two keys apart:
    one tuned config serves every variant, as ``apply_history_best`` applies it."""
    default = type(wl).__dataclass_fields__["epilogue"].default
    if isinstance(wl, AddWorkload):
        wl = replace(wl, rhs_bits=8)
    return wl.operator, replace(wl, name="", epilogue=default).key()


def _key(wl: object) -> str:
    """A stable identifier of the shape and the epilogue (used to match tuning records):
    the shape alone for the benchmark epilogues, which a record's ``bias`` tells apart."""
    shape = wl.operator + "." + ".".join(  # type: ignore[attr-defined]
        f"{k}{v}" for k, v in _shape_args(wl).items())
    epilogue = wl.epilogue  # type: ignore[attr-defined]
    default = type(wl).__dataclass_fields__["epilogue"].default
    if epilogue == default or epilogue.is_benchmark and default.is_benchmark:
        return shape  # a record's bias flag tells the two benchmark epilogues apart
    return f"{shape}.{epilogue.key()}"


def _with_epilogue(label: str, wl: object) -> str:
    """``describe()`` with the epilogue when it is not the workload's default."""
    epilogue: Epilogue = wl.epilogue  # type: ignore[attr-defined]
    default = type(wl).__dataclass_fields__["epilogue"].default
    plain = epilogue == default or epilogue.is_benchmark
    return label if plain else f"{label}, epilogue {epilogue.describe()}"


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
    epilogue: Epilogue = BENCHMARK

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
        return _with_epilogue(
            f"{label}conv2d {self.batch}x{self.in_channels}x{self.height}x{self.width} -> "
            f"{self.out_channels}, k{self.kernel} p{self.pad} s{self.stride}", self)

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
    epilogue: Epilogue = BENCHMARK

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
                              self.name, self.epilogue)

    def shape_args(self) -> dict[str, int]:
        return _shape_args(self)

    def describe(self) -> str:
        label = f"{self.name} " if self.name else ""
        return _with_epilogue(f"{label}gemm {self.batch}x{self.in_channels} * "
                              f"{self.in_channels}x{self.out_channels}", self)

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
    epilogue: Epilogue = BENCHMARK

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
        return _with_epilogue(
            f"{label}group_conv2d {self.batch}x{self.in_channels}x{self.height}x"
            f"{self.width} -> {self.out_channels}, k{self.kernel} p{self.pad} "
            f"s{self.stride} g{self.groups}", self)

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
    epilogue: Epilogue = BENCHMARK

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
        return _with_epilogue(
            f"{label}conv2d_transpose {self.batch}x{self.in_channels}x{self.height}x"
            f"{self.width} -> {self.out_channels}, k{self.kernel} p{self.pad} "
            f"s{self.stride}{opad}", self)

    def key(self) -> str:
        """A stable identifier of the shape (used to match tuning records)."""
        return _key(self)


@dataclass(frozen=True)
class VaddWorkload:
    """``C = (A + B).astype(int8)`` over ``elements`` int32 lanes: the getting-started
    program (two vectors loaded into ACC, one ALU ADD, stored int8)."""

    elements: int = 1024
    name: str = "vadd"

    operator = "vadd"

    def check(self, hw: HardwareConfig) -> None:
        lanes = hw.batch * hw.block_out
        if not isinstance(self.elements, int) or self.elements < 1 or self.elements % lanes:
            raise WorkloadError(f"elements must be a positive multiple of BATCH*BLOCK_OUT "
                                f"{lanes}, got {self.elements!r}")

    def describe(self) -> str:
        return f"vadd {self.elements} int32 elements"

    def key(self) -> str:
        return f"vadd.elements{self.elements}"

    def shape_args(self) -> dict[str, int]:
        return {"elements": self.elements}


@dataclass(frozen=True)
class AddWorkload:
    """An elementwise add of two packed tensors on VTA's ALU alone (TVM's ``add.vta``, the
    residual add of a deployed network): ``lhs`` int8 and ``rhs`` int8 (or int32: a tensor
    still in its quantized int32 form) loaded into the accumulators, one ALU ADD, then the
    epilogue (by default the deployed residual's ReLU and clip to [-127, 127]) and the int8
    store. NCHW shapes; the channels a whole number of BLOCK_OUT blocks."""

    batch: int
    channels: int
    height: int
    width: int
    rhs_bits: int = 8
    name: str = ""
    epilogue: Epilogue = RESIDUAL

    operator = "add"
    alu_op = "add"

    def __post_init__(self) -> None:
        _require_positive(self, ("batch", "channels", "height", "width"))
        if self.rhs_bits not in (8, 32):
            raise WorkloadError(f"rhs_bits is 8 (int8) or 32 (int32), got {self.rhs_bits!r}")

    # The output's shape, as the conv workloads name it.
    out_channels = property(lambda self: self.channels)
    out_height = property(lambda self: self.height)
    out_width = property(lambda self: self.width)

    @property
    def macs(self) -> int:
        return 0  # no multiply-accumulate: the work is its elements

    @property
    def elements(self) -> int:
        return self.batch * self.channels * self.height * self.width

    def check(self, hw: HardwareConfig) -> None:
        _check_blocks(hw, (("batch", self.batch, hw.batch, "BATCH"),
                           ("channels", self.channels, hw.block_out, "BLOCK_OUT")))

    def shape_args(self) -> dict[str, int]:
        return _shape_args(self)

    def describe(self) -> str:
        label = f"{self.name} " if self.name else ""
        rhs = "" if self.rhs_bits == 8 else f" (rhs int{self.rhs_bits})"
        return _with_epilogue(f"{label}{self.operator} {self.batch}x{self.channels}x"
                              f"{self.height}x{self.width}{rhs}", self)

    def key(self) -> str:
        return _key(self)


@dataclass(frozen=True)
class MultiplyWorkload(AddWorkload):
    """An elementwise product on VTA's ALU alone (TVM's ``multiply.vta``): as
    :class:`AddWorkload` with an ALU MUL (fsim's; the HLS and Chisel ALUs have none)."""

    operator = "multiply"
    alu_op = "mul"


#: The operators that run on VTA's ALU alone (no GEMM).
ElementwiseWorkload = AddWorkload | MultiplyWorkload
Workload = (Conv2dWorkload | GemmWorkload | GroupConv2dWorkload | Conv2dTransposeWorkload
            | AddWorkload | MultiplyWorkload)

#: The workload class of each operator name (``Workload.operator``).
WORKLOAD_CLASSES: dict[str, type] = {
    cls.operator: cls
    for cls in (Conv2dWorkload, GemmWorkload, GroupConv2dWorkload, Conv2dTransposeWorkload,
                AddWorkload, MultiplyWorkload)
}
