"""A network's layers and where each runs: a :class:`Layer` (a conv, transposed conv or dense
as the model has it) is placed on VTA as a :class:`~vtatune.workloads.Workload` or sent to
the CPU with the reason (:func:`place`), and the VTA layers of one shape form a
:class:`Task` to tune once (:func:`tasks_of`). A layer a model reader could not read
arrives as a :class:`CpuLayer` already, with its reason.
"""


from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from simulator.hardware import HardwareConfig
from vtatune.errors import VtatuneError, WorkloadError
from vtatune.workloads import Conv2dWorkload, GemmWorkload, Workload


class NetworkError(VtatuneError):
    """An unknown network name, or a model file that cannot be read."""


@dataclass(frozen=True)
class Layer:
    """One compute layer as the model has it (``height``/``width`` are the input's).

    ``operator`` is ``conv2d`` (``groups`` > 1: grouped), ``conv2d_transpose`` or
    ``dense`` (``in_channels`` -> ``out_channels``; the spatial fields unused). ``pad`` is
    (top, left, bottom, right) as in ONNX. ``quantized``: the model computes the layer in
    int8 (an ONNX QOperator or QDQ layer); VTA runs every layer it takes in int8 either way.
    """

    name: str
    operator: str
    batch: int
    in_channels: int
    out_channels: int
    height: int = 1
    width: int = 1
    kernel: tuple[int, int] = (1, 1)
    pad: tuple[int, int, int, int] = (0, 0, 0, 0)
    stride: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    groups: int = 1
    output_padding: tuple[int, int] = (0, 0)
    label: str = ""  # the task name the catalogue gives this shape (e.g. ResNet-18's C8)
    quantized: bool = False

    def describe(self) -> str:
        if self.operator == "dense":
            return f"dense {self.batch}x{self.in_channels} -> {self.out_channels}"
        k = _pair(self.kernel)
        g = f" g{self.groups}" if self.groups > 1 else ""
        return (f"{self.operator} {self.batch}x{self.in_channels}x{self.height}x{self.width} "
                f"-> {self.out_channels}, k{k} p{_pads(self.pad)} s{_pair(self.stride)}{g}")


def _pair(v: tuple[int, int]) -> str:
    return str(v[0]) if v[0] == v[1] else f"{v[0]}x{v[1]}"


def _pads(p: tuple[int, int, int, int]) -> str:
    return str(p[0]) if len(set(p)) == 1 else ",".join(map(str, p))


@dataclass(frozen=True)
class Task:
    """Layers of one shape that VTA runs: tuned once, counted ``multiplicity`` times.

    ``skip`` is why the task cannot be tuned with this vtatune (its operator has no
    template yet), else ``""``.
    """

    workload: Workload
    multiplicity: int
    layers: tuple[str, ...]
    skip: str = ""

    @property
    def name(self) -> str:
        return self.workload.name

    @property
    def operator(self) -> str:
        return self.workload.operator


@dataclass(frozen=True)
class CpuLayer:
    """A layer VTA does not run, and why (``quantized`` as for :class:`Layer`)."""

    name: str
    operator: str
    shape: str
    reason: str
    quantized: bool = False


@dataclass(frozen=True)
class Network:
    """A network placed on one hardware config: VTA tasks and CPU layers; ``layers`` are
    the network's layers as read, in order."""

    name: str
    source: str
    hw: HardwareConfig
    tasks: tuple[Task, ...]
    cpu: tuple[CpuLayer, ...]
    notes: tuple[str, ...] = ()
    layers: tuple[Layer | CpuLayer, ...] = ()

    @property
    def tunable(self) -> tuple[Task, ...]:
        return tuple(t for t in self.tasks if not t.skip)

    @property
    def vta_layers(self) -> int:
        return sum(t.multiplicity for t in self.tasks)


@dataclass(frozen=True)
class NetworkSpec:
    """A catalogue entry: ``build(batch)`` gives the layers."""

    name: str
    source: str
    build: Callable[[int], list[Layer]] = field(repr=False)


def place(layer: Layer, hw: HardwareConfig, name: str = "") -> Workload | str:
    """The workload VTA runs ``layer`` as (named ``name``), or why it stays on the CPU.

    Example:
        >>> from simulator.hardware import DEFAULT
        >>> place(Layer("dw", "conv2d", 1, 32, 32, 112, 112, (3, 3), (1, 1, 1, 1),
        ...             groups=32), DEFAULT)
        'depthwise convolution (1 input channel per group; VTA needs multiples of BLOCK_IN 16)'
    """
    op = layer.operator
    if op == "dense":
        checks = [(layer.batch, hw.batch, "batch", "BATCH"),
                  (layer.in_channels, hw.block_in, "input channels", "BLOCK_IN"),
                  (layer.out_channels, hw.block_out, "output channels", "BLOCK_OUT")]
        for v, block, what, const in checks:
            if v % block:
                return f"{v} {what} are not a multiple of {const} {block}"
        return GemmWorkload(layer.batch, layer.in_channels, layer.out_channels, name)
    if op not in ("conv2d", "conv2d_transpose"):
        return f"{op} has no VTA template"
    kh, kw = layer.kernel
    if kh != kw:
        return f"non-square kernel {kh}x{kw} (VTA's templates take square kernels)"
    if layer.stride[0] != layer.stride[1]:
        return f"stride {layer.stride[0]}x{layer.stride[1]} (VTA's templates take one stride)"
    if len(set(layer.pad)) != 1:
        return f"asymmetric padding {_pads(layer.pad)} (VTA's templates pad all sides alike)"
    if layer.dilation != (1, 1):
        return f"dilation {_pair(layer.dilation)} (VTA's templates do not dilate)"
    g = layer.groups
    if g > 1 and op == "conv2d_transpose":
        return f"grouped transposed convolution ({g} groups; no VTA template)"
    if g > 1 and g == layer.in_channels:
        return (f"depthwise convolution (1 input channel per group; VTA needs multiples of "
                f"BLOCK_IN {hw.block_in})")
    ci, co = layer.in_channels // g, layer.out_channels // g
    per = " per group" if g > 1 else ""
    if ci % hw.block_in:
        first = " (the first convolution stays on the CPU)" if layer.in_channels == 3 else ""
        return f"{ci} input channels{per} are not a multiple of BLOCK_IN {hw.block_in}{first}"
    if co % hw.block_out:
        return f"{co} output channels{per} are not a multiple of BLOCK_OUT {hw.block_out}"
    if layer.batch % hw.batch:
        return f"batch {layer.batch} is not a multiple of BATCH {hw.batch}"
    if op == "conv2d" and g == 1:
        cls, extra = Conv2dWorkload, {}
    else:
        cls, extra = _operator_class(op, g)
        if isinstance(cls, str):
            return cls
    if op == "conv2d_transpose":
        if layer.output_padding[0] != layer.output_padding[1]:
            return f"output padding {_pair(layer.output_padding)} differs by axis"
        extra = {"output_padding": layer.output_padding[0]}
    elif g > 1:
        extra = {"groups": g}
    try:
        return cls(layer.batch, layer.height, layer.width, layer.in_channels,
                   layer.out_channels, kh, layer.pad[0], layer.stride[0], **extra, name=name)
    except WorkloadError as exc:
        return str(exc)


def _operator_class(op: str, groups: int) -> tuple[type | str, dict]:
    """The workload class of a grouped or transposed convolution (when this vtatune has it)."""
    from vtatune import workloads

    cls_name = "Conv2dTransposeWorkload" if op == "conv2d_transpose" else "GroupConv2dWorkload"
    cls = getattr(workloads, cls_name, None)
    if cls is None:
        what = "transposed" if op == "conv2d_transpose" else "grouped"
        return f"this vtatune has no {what} convolution workload", {}
    return cls, {}


def _untunable(workload: Workload, hw: HardwareConfig) -> str:
    """Why ``workload`` cannot be tuned here (no template for its operator yet), else ''."""
    from search_spaces import get_template

    try:
        get_template(workload, hw)
    except VtatuneError as exc:
        return f"not tunable yet: {exc}"
    except (TypeError, AttributeError, KeyError, NotImplementedError):
        return f"not tunable yet: no {workload.operator} template in this vtatune"
    return ""


def tasks_of(layers: list[Layer | CpuLayer], hw: HardwareConfig, network: str
             ) -> tuple[tuple[Task, ...], tuple[CpuLayer, ...]]:
    """Place every layer; identical VTA layers become one task (first occurrence order).
    A CpuLayer (a layer its reader could not read) stays on the CPU as it is.

    A task is named ``<network>.<label>`` after the catalogue's label for its shape, else
    ``<network>.T<i>`` in order of first occurrence.
    """
    groups: dict[tuple[str, str], list] = {}
    cpu = []
    for layer in layers:
        if isinstance(layer, CpuLayer):
            cpu.append(layer)
            continue
        placed = place(layer, hw)
        if isinstance(placed, str):
            cpu.append(CpuLayer(layer.name, layer.operator, layer.describe(), placed,
                                layer.quantized))
            continue
        key = (placed.operator, placed.key())
        groups.setdefault(key, [placed, layer.label, []])[2].append(layer.name)
    tasks = []
    for i, (wl, label, names) in enumerate(groups.values(), start=1):
        from dataclasses import replace

        named = replace(wl, name=f"{network}.{label or f'T{i}'}")
        tasks.append(Task(named, len(names), tuple(names), _untunable(named, hw)))
    return tuple(tasks), tuple(cpu)
