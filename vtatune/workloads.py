"""Operator workloads: packed conv2d (NCHW) and GEMM (dense), plus the named ones.

A GEMM is lowered as a 1×1 convolution over a 1×1 image: the packed layouts coincide
(data (N/B, I/BI, B, BI), weight (O/BO, I/BI, BO, BI)), so one lowering serves both.

Example:
    >>> conv = WORKLOADS["conv2d"]["resnet18.C8"]
    >>> (conv.out_height, conv.out_width)
    (14, 14)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from simulator.hardware import HardwareConfig

from .errors import WorkloadError


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
        for key in ("batch", "height", "width", "in_channels", "out_channels", "kernel",
                    "stride"):
            v = getattr(self, key)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise WorkloadError(f"{key} must be a positive integer, got {v!r}")
        if not isinstance(self.pad, int) or self.pad < 0:
            raise WorkloadError(f"pad must be a non-negative integer, got {self.pad!r}")
        if self.out_height < 1 or self.out_width < 1:
            raise WorkloadError(
                f"kernel {self.kernel} with pad {self.pad} does not fit a "
                f"{self.height}x{self.width} input"
            )

    @property
    def out_height(self) -> int:
        return (self.height + 2 * self.pad - self.kernel) // self.stride + 1

    @property
    def out_width(self) -> int:
        return (self.width + 2 * self.pad - self.kernel) // self.stride + 1

    @property
    def macs(self) -> int:
        return (self.batch * self.out_channels * self.out_height * self.out_width
                * self.in_channels * self.kernel * self.kernel)

    def check(self, hw: HardwareConfig) -> None:
        """Shapes must be whole blocks of the hardware's tensor core."""
        for key, block, what in (
            ("batch", hw.batch, "BATCH"),
            ("in_channels", hw.block_in, "BLOCK_IN"),
            ("out_channels", hw.block_out, "BLOCK_OUT"),
        ):
            v = getattr(self, key)
            if v % block:
                raise WorkloadError(f"{key} {v} is not a multiple of {what} {block} "
                                    f"({hw.bitstream})")

    def shape_args(self) -> dict[str, int]:
        d = asdict(self)
        d.pop("name")
        return d

    def describe(self) -> str:
        label = f"{self.name} " if self.name else ""
        return (f"{label}conv2d {self.batch}x{self.in_channels}x{self.height}x{self.width} -> "
                f"{self.out_channels}, k{self.kernel} p{self.pad} s{self.stride}")

    def key(self) -> str:
        """A stable identifier of the shape (used to match tuning records)."""
        return ("conv2d." + ".".join(f"{k}{v}" for k, v in self.shape_args().items()))

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
        for key in ("batch", "in_channels", "out_channels"):
            v = getattr(self, key)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise WorkloadError(f"{key} must be a positive integer, got {v!r}")

    @property
    def macs(self) -> int:
        return self.batch * self.in_channels * self.out_channels

    def check(self, hw: HardwareConfig) -> None:
        self.as_conv().check(hw)

    def as_conv(self) -> Conv2dWorkload:
        return Conv2dWorkload(self.batch, 1, 1, self.in_channels, self.out_channels, 1, 0, 1,
                              self.name)

    def shape_args(self) -> dict[str, int]:
        d = asdict(self)
        d.pop("name")
        return d

    def describe(self) -> str:
        label = f"{self.name} " if self.name else ""
        return (f"{label}gemm {self.batch}x{self.in_channels} * "
                f"{self.in_channels}x{self.out_channels}")

    def key(self) -> str:
        return "gemm." + ".".join(f"{k}{v}" for k, v in self.shape_args().items())


Workload = Conv2dWorkload | GemmWorkload

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


def get_workload(operator: str, name: str) -> Workload:
    """A named workload; unknown names raise WorkloadError listing the known ones."""
    table = WORKLOADS.get(operator)
    if table is None:
        raise WorkloadError(f"unknown operator {operator!r} (known: conv2d, gemm)")
    if name in table:
        return table[name]
    # Accept the short layer name (C8) too.
    if f"resnet18.{name}" in table:
        return table[f"resnet18.{name}"]
    raise WorkloadError(f"unknown {operator} workload {name!r} (known: {', '.join(table)})")


def resolve(workload: Workload | str, hw: HardwareConfig | str | None = None
            ) -> tuple[Workload, HardwareConfig]:
    """The workload (or ``"conv2d"``, ``"gemm:dense128"``, ``"conv2d:resnet18.C8"``) and the
    hardware (a config, a preset name, a ``vta_config.json`` path or None for the default),
    checked against each other: the Python API's way of naming what to tune or build."""
    if isinstance(workload, str):
        op, _, name = workload.partition(":")
        workload = get_workload(op, name or "tutorial")
    if not isinstance(hw, HardwareConfig):
        hw = HardwareConfig.resolve(hw)
    workload.check(hw)
    return workload, hw


def resnet18_layers() -> list[Conv2dWorkload]:
    return [WORKLOADS["conv2d"][f"resnet18.{n}"] for n in _RESNET18]
