"""Whole networks: their layers, which of them VTA runs, and the tasks to tune.

A network is a list of compute layers (:class:`Layer`: convolutions, transposed
convolutions, dense layers) with the shapes the model gives them. :func:`load_network`
decides for each layer, on one hardware config, whether VTA runs it the way TVM's VTA
graph packing (``vta/python/vta/top/graphpack.py``) does, and turns the layers VTA runs
into tasks (:class:`Task`): identical layers are one task with a multiplicity. Every layer
left on the CPU keeps the reason (:class:`CpuLayer`).

The packing rules (TVM packs activations as ``NCHW{BATCH}n{BLOCK_IN}c`` and weights as
``OIHW{BLOCK_OUT}o{BLOCK_IN}i``, so a packed layer needs whole blocks):

- the batch is a multiple of BATCH;
- input channels per group are a multiple of BLOCK_IN and output channels per group a
  multiple of BLOCK_OUT. So the first convolution (3 input channels) and depthwise
  convolutions (one channel per group) stay on the CPU. (TVM's graph packing pads a
  convolution's output channels up to the block; vtatune leaves such a layer on the CPU
  and says so instead of tuning a padded shape.);
- VTA's templates take square kernels and strides, symmetric padding and no dilation;
- a dense layer (Gemm/MatMul with a weight) is a ``gemm`` task under the same block rules.

The catalogue (:data:`NETWORKS`, :func:`network_names`) holds ImageNet-size models at
batch 1, each with its source; any ONNX model loads the same way (``vtatune.onnx_import``).

Example:
    >>> net = load_network("resnet18", "pynq")
    >>> [(t.name, t.multiplicity) for t in net.tasks][:3]
    [('resnet18.C2', 4), ('resnet18.C3', 1), ('resnet18.C4', 1)]
    >>> net.cpu[0].name, net.cpu[0].reason  # doctest: +NORMALIZE_WHITESPACE
    ('conv1', '3 input channels are not a multiple of BLOCK_IN 16 (the first convolution
     stays on the CPU)')
    >>> sum(t.multiplicity for t in load_network("resnet50", "pynq").tasks)
    52
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from simulator.hardware import HardwareConfig

from .errors import VtatuneError, WorkloadError
from .workloads import Conv2dWorkload, GemmWorkload, Workload

__all__ = ["NETWORKS", "CpuLayer", "Layer", "Network", "NetworkError", "NetworkSpec", "Task",
           "load_network", "network_names", "place", "tasks_of"]


class NetworkError(VtatuneError):
    """An unknown network name, or a model file that cannot be read."""


@dataclass(frozen=True)
class Layer:
    """One compute layer as the model has it (``height``/``width`` are the input's).

    ``operator`` is ``conv2d`` (``groups`` > 1: grouped), ``conv2d_transpose`` or
    ``dense`` (``in_channels`` -> ``out_channels``; the spatial fields unused). ``pad`` is
    (top, left, bottom, right) as in ONNX.
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
    """A layer VTA does not run, and why."""

    name: str
    operator: str
    shape: str
    reason: str


@dataclass(frozen=True)
class Network:
    """A network placed on one hardware config: VTA tasks and CPU layers."""

    name: str
    source: str
    hw: HardwareConfig
    tasks: tuple[Task, ...]
    cpu: tuple[CpuLayer, ...]
    notes: tuple[str, ...] = ()

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


# --- packing decisions -----------------------------------------------------------------------

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
    from . import workloads

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


def tasks_of(layers: list[Layer], hw: HardwareConfig, network: str
             ) -> tuple[tuple[Task, ...], tuple[CpuLayer, ...]]:
    """Place every layer; identical VTA layers become one task (first occurrence order).

    A task is named ``<network>.<label>`` after the catalogue's label for its shape, else
    ``<network>.T<i>`` in order of first occurrence.
    """
    groups: dict[tuple[str, str], list] = {}
    cpu = []
    for layer in layers:
        placed = place(layer, hw)
        if isinstance(placed, str):
            cpu.append(CpuLayer(layer.name, layer.operator, layer.describe(), placed))
            continue
        key = (placed.operator, placed.key())
        groups.setdefault(key, [placed, layer.label, []])[2].append(layer.name)
    tasks = []
    for i, (wl, label, names) in enumerate(groups.values(), start=1):
        from dataclasses import replace

        named = replace(wl, name=f"{network}.{label or f'T{i}'}")
        tasks.append(Task(named, len(names), tuple(names), _untunable(named, hw)))
    return tuple(tasks), tuple(cpu)


# --- the catalogue ---------------------------------------------------------------------------

def _conv(name: str, batch: int, size: int, ci: int, co: int, k: int, s: int = 1,
          groups: int = 1, p: int | None = None, label: str = "") -> Layer:
    p = k // 2 if p is None else p
    return Layer(name, "conv2d", batch, ci, co, size, size, (k, k), (p, p, p, p), (s, s),
                 groups=groups, label=label)


# ResNet-18's offloaded layer shapes as TVM's VTA benchmarks name them (docs section 10):
# (H=W, CI, CO, K, stride) -> label.
_RESNET18_LABELS = {(56, 64, 64, 3, 1): "C2", (56, 64, 128, 3, 2): "C3",
                    (56, 64, 128, 1, 2): "C4", (28, 128, 128, 3, 1): "C5",
                    (28, 128, 256, 3, 2): "C6", (28, 128, 256, 1, 2): "C7",
                    (14, 256, 256, 3, 1): "C8", (14, 256, 512, 3, 2): "C9",
                    (14, 256, 512, 1, 2): "C10", (7, 512, 512, 3, 1): "C11"}


def _resnet(depth: int, batch: int) -> list[Layer]:
    """torchvision's ResNet (v1.5: a bottleneck strides in its 3x3) at 224x224."""
    blocks = {18: (2, 2, 2, 2), 34: (3, 4, 6, 3), 50: (3, 4, 6, 3)}[depth]
    bottleneck = depth >= 50
    labels = _RESNET18_LABELS if depth == 18 else {}
    layers = [_conv("conv1", batch, 224, 3, 64, 7, 2)]
    size, ci = 56, 64  # after the 3x3 stride-2 max pool
    for stage, n in enumerate(blocks):
        width = 64 << stage
        out = width * 4 if bottleneck else width
        for b in range(n):
            s = 2 if stage > 0 and b == 0 else 1
            pre = f"layer{stage + 1}.{b}"

            def conv(suffix: str, sz: int, c_in: int, c_out: int, k: int, st: int,
                     pre: str = pre) -> Layer:
                return _conv(f"{pre}.{suffix}", batch, sz, c_in, c_out, k, st,
                             label=labels.get((sz, c_in, c_out, k, st), ""))

            # The downsample reads the block's input: listed after conv1 (any order of a
            # block's convolutions is a valid one; this one gives ResNet-18 C2, C3, C4, ...).
            down = [conv("downsample", size, ci, out, 1, s)] if s != 1 or ci != out else []
            if bottleneck:
                layers += [conv("conv1", size, ci, width, 1, 1), *down,
                           conv("conv2", size, width, width, 3, s),
                           conv("conv3", size // s, width, out, 1, 1)]
            else:
                layers += [conv("conv1", size, ci, width, 3, s), *down,
                           conv("conv2", size // s, width, width, 3, 1)]
            size, ci = size // s, out
    layers.append(Layer("fc", "dense", batch, ci, 1000))
    return layers


# MobileNet v1's depthwise-separable blocks: (output channels, stride).
_MOBILENET_BLOCKS = ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), *[(512, 1)] * 5,
                     (1024, 2), (1024, 1))


def _mobilenet_v1(batch: int, grouped: bool = False) -> list[Layer]:
    """MobileNet v1 (1.0, 224x224). ``grouped``: TVM's VTA variant, whose 3x3 convs have 16
    channels per group instead of 1 (``test_benchmark_topi_group_conv2d.py``, D1-D9)."""
    layers = [_conv("conv1", batch, 224, 3, 32, 3, 2)]
    size, ci = 112, 32
    for i, (co, s) in enumerate(_MOBILENET_BLOCKS, start=1):
        groups = ci // 16 if grouped else ci
        layers.append(_conv(f"block{i}.dw", batch, size, ci, ci, 3, s, groups=groups))
        size //= s
        layers.append(_conv(f"block{i}.pw", batch, size, ci, co, 1))
        ci = co
    layers.append(Layer("fc", "dense", batch, ci, 1000))
    return layers


def _yolov3_tiny(batch: int) -> list[Layer]:
    """Darknet's yolov3-tiny.cfg at 416x416 (max pools halve the size; the route after
    layer 19 concatenates the upsampled 128 channels with layer 8's 256)."""
    specs = [("conv0", 416, 3, 16, 3), ("conv2", 208, 16, 32, 3), ("conv4", 104, 32, 64, 3),
             ("conv6", 52, 64, 128, 3), ("conv8", 26, 128, 256, 3), ("conv10", 13, 256, 512, 3),
             ("conv12", 13, 512, 1024, 3), ("conv13", 13, 1024, 256, 1),
             ("conv14", 13, 256, 512, 3), ("conv15", 13, 512, 255, 1),
             ("conv18", 13, 256, 128, 1), ("conv21", 26, 384, 256, 3), ("conv22", 26, 256, 255, 1)]
    return [_conv(n, batch, size, ci, co, k) for n, size, ci, co, k in specs]


def _dcgan(batch: int) -> list[Layer]:
    """The DCGAN generator (TVM's relay.testing.dcgan, ngf 128, 64x64 images): a dense
    layer from the 100-d code to 4x4x1024, then four 4x4 stride-2 transposed convolutions."""
    layers = [Layer("g1.dense", "dense", batch, 100, 4 * 4 * 1024)]
    for i, (size, ci, co) in enumerate(((4, 1024, 512), (8, 512, 256), (16, 256, 128),
                                        (32, 128, 3)), start=2):
        layers.append(Layer(f"g{i}.deconv", "conv2d_transpose", batch, ci, co, size, size,
                            (4, 4), (1, 1, 1, 1), (2, 2)))
    return layers


NETWORKS: dict[str, NetworkSpec] = {s.name: s for s in (
    NetworkSpec("resnet18", "He et al. 2016, torchvision resnet18 (224x224); tasks named as "
                "TVM's VTA benchmarks (C2-C11)", lambda b: _resnet(18, b)),
    NetworkSpec("resnet34", "He et al. 2016, torchvision resnet34 (224x224)",
                lambda b: _resnet(34, b)),
    NetworkSpec("resnet50", "He et al. 2016, torchvision resnet50 v1.5 (224x224; the "
                "bottleneck strides in its 3x3)", lambda b: _resnet(50, b)),
    NetworkSpec("mobilenet_v1", "Howard et al. 2017, MobileNet v1 1.0 (224x224); depthwise "
                "3x3 convs", _mobilenet_v1),
    NetworkSpec("mobilenet_v1_grouped", "TVM's VTA grouped MobileNet v1 (its "
                "test_benchmark_topi_group_conv2d.py: 16 channels per group in the 3x3 convs)",
                lambda b: _mobilenet_v1(b, grouped=True)),
    NetworkSpec("yolov3_tiny", "Redmon & Farhadi 2018, darknet yolov3-tiny.cfg (416x416)",
                _yolov3_tiny),
    NetworkSpec("dcgan", "Radford et al. 2016, DCGAN generator as TVM's relay.testing.dcgan "
                "(ngf 128, 64x64)", _dcgan),
)}


def network_names() -> list[str]:
    return list(NETWORKS)


def load_network(network: str | Path, hw: HardwareConfig | str | None = None, *,
                 batch: int | None = None) -> Network:
    """A catalogue network by name, or an ONNX model file, placed on ``hw``.

    ``batch`` sets a catalogue network's batch (default 1; an ONNX model has its own).

    Example:
        >>> net = load_network("mobilenet_v1")
        >>> len(net.tasks), net.cpu[1].name, len(net.cpu)
        (9, 'block1.dw', 15)
    """
    if not isinstance(hw, HardwareConfig):
        hw = HardwareConfig.resolve(hw)
    spec = NETWORKS.get(str(network))
    notes: tuple[str, ...] = ()
    if spec is not None:
        if batch is not None and (not isinstance(batch, int) or batch < 1):
            raise NetworkError(f"batch must be a positive integer, got {batch!r}")
        name, source, layers = spec.name, spec.source, spec.build(batch or 1)
    elif str(network).endswith(".onnx") or Path(network).is_file():
        from .onnx_import import read_onnx

        model = read_onnx(network)
        name, source, layers, notes = model.name, model.source, model.layers, model.notes
    else:
        raise NetworkError(f"unknown network {str(network)!r} (known: "
                           f"{', '.join(NETWORKS)}; or an ONNX model file)")
    tasks, cpu = tasks_of(layers, hw, name)
    return Network(name, source, hw, tasks, cpu, notes)
