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
batch 1, each with its source; any ONNX model loads the same way
(:func:`vtatune.networks.read_onnx`).

Example:
    >>> net = load_network("resnet18", "pynq")
    >>> [(t.name, t.multiplicity) for t in net.tasks][:3]
    [('resnet18.C2', 4), ('resnet18.C3', 1), ('resnet18.C5', 3)]
    >>> net.cpu[0].name, net.cpu[0].reason  # doctest: +NORMALIZE_WHITESPACE
    ('conv1', '3 input channels are not a multiple of BLOCK_IN 16 (the first convolution
     stays on the CPU)')
    >>> sum(t.multiplicity for t in load_network("resnet50", "pynq").tasks)
    52
"""


from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from simulator.hardware import HardwareConfig
from vtatune.networks._layers import (
    CpuLayer,
    CpuOp,
    Layer,
    Network,
    NetworkError,
    NetworkSpec,
    tasks_of,
)


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


def _resnet(depth: int, batch: int) -> list[Layer | CpuOp]:
    """torchvision's ResNet (v1.5: a bottleneck strides in its 3x3) at 224x224, as VTA's
    deploy tutorial runs it: the stem and max pool in float on the CPU, then packed and
    quantized to int8 (``graph_pack`` from the max pool to the global pool), every conv with
    its fused epilogue (ReLU where the block has one), each block's residual add (with ReLU)
    after its convs, then unpacked, pooled and classified on the CPU. Execution order is
    TVM's: a block's convs, its downsample, its add."""
    blocks = {18: (2, 2, 2, 2), 34: (3, 4, 6, 3), 50: (3, 4, 6, 3)}[depth]
    bottleneck = depth >= 50
    labels = _RESNET18_LABELS if depth == 18 else {}
    n = batch
    items: list[Layer | CpuOp] = [
        _conv("conv1", batch, 224, 3, 64, 7, 2),
        CpuOp("maxpool", "nn.max_pool2d", f"{n}x64x112x112 -> {n}x64x56x56 float32",
              bytes=4 * n * 64 * (112 * 112 + 56 * 56)),
        *_quantize_in(n, 64, 56)]
    size, ci = 56, 64  # after the 3x3 stride-2 max pool
    for stage, count in enumerate(blocks):
        width = 64 << stage
        out = width * 4 if bottleneck else width
        for b in range(count):
            s = 2 if stage > 0 and b == 0 else 1
            pre = f"layer{stage + 1}.{b}"

            def conv(suffix: str, sz: int, c_in: int, c_out: int, k: int, st: int,
                     relu: bool, pre: str = pre) -> Layer:
                layer = _conv(f"{pre}.{suffix}", batch, sz, c_in, c_out, k, st,
                              label=labels.get((sz, c_in, c_out, k, st), ""))
                return replace(layer, relu=relu)

            identity = s == 1 and ci == out
            if bottleneck:
                items += [conv("conv1", size, ci, width, 1, 1, True),
                          conv("conv2", size, width, width, 3, s, True),
                          conv("conv3", size // s, width, out, 1, 1, False)]
            else:
                items += [conv("conv1", size, ci, width, 3, s, True),
                          conv("conv2", size // s, width, width, 3, 1, False)]
            rhs_bits = 8
            if not identity:
                items.append(conv("downsample", size, ci, out, 1, s, False))
            elif stage == 0 and b == 0:
                # the shortcut is the network's quantized input, still float: cast to int32
                # for the add (TVM's cast float32 -> int32: 8 bytes an element moved)
                items.append(CpuOp(f"{pre}.cast", "cast",
                                   f"{n}x{ci}x{size}x{size} float32 -> int32",
                                   bytes=8 * n * ci * size * size))
                rhs_bits = 32
            size, ci = size // s, out
            items.append(Layer(f"{pre}.add", "add", batch, out, out, size, size, relu=True,
                               rhs_bits=rhs_bits, label=f"A{stage + 1}"))
    items += [
        CpuOp("unpack", "cast+transpose+reshape", f"{n}x{ci}x{size}x{size} int8 -> int32",
              bytes=5 * n * ci * size * size),
        CpuOp("avgpool", "nn.global_avg_pool2d", f"{n}x{ci}x{size}x{size} -> {n}x{ci}x1x1",
              bytes=4 * n * ci * (size * size + 1)),
        CpuOp("dequantize", "reshape+cast+multiply+squeeze", f"{n}x{ci} int32 -> float32",
              bytes=8 * n * ci),
        Layer("fc", "dense", batch, ci, 1000)]
    return items


def _quantize_in(n: int, c: int, size: int) -> list[CpuOp]:
    """What graph_pack and relay.quantize put before the first packed layer: the float
    activations packed to NCHW1n16c, scaled, rounded and clipped, cast to int8."""
    elems = n * c * size * size
    shape = f"{n}x{c}x{size}x{size}"
    return [CpuOp("pack", "reshape+transpose", f"{shape} float32 packed", bytes=8 * elems),
            CpuOp("quantize", "multiply+round+clip", f"{shape} float32", bytes=8 * elems),
            CpuOp("cast", "cast", f"{shape} float32 -> int8", bytes=5 * elems)]


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
                 batch: int | None = None, tasks: str = "deployed",
                 placement: str | None = None) -> Network:
    """A catalogue network by name, or an ONNX model file, placed on ``hw``.

    ``batch`` (default 1) sets a catalogue network's batch, or an ONNX model's dynamic
    batch axis; an ONNX model whose batch is fixed at another number is refused. ``tasks``:
    ``deployed`` (one task per workload, its epilogue included) or ``autotvm`` (one per
    AutoTVM key, as TVM v0.14 tunes and applies them: :data:`~vtatune.networks.TASK_KINDS`).
    ``placement`` (:data:`~vtatune.networks.PLACEMENTS`): ``deploy`` places the layers as
    ``vtatune deploy`` runs them with today's TVM (channel counts padded to whole blocks),
    ``tvm014`` as TVM v0.14's graph packing does; default ``deploy`` for an ONNX model
    (unless ``tasks`` is ``autotvm``: TVM v0.14 builds those), ``tvm014`` for a catalogue
    network (its TVM v0.14 deployment).

    Example:
        >>> net = load_network("mobilenet_v1")
        >>> len(net.tasks), net.cpu[1].name, len(net.cpu)
        (9, 'block1.dw', 15)
    """
    if not isinstance(hw, HardwareConfig):
        hw = HardwareConfig.resolve(hw)
    if batch is not None and (not isinstance(batch, int) or isinstance(batch, bool)
                              or batch < 1):
        raise NetworkError(f"batch must be a positive integer, got {batch!r}")
    spec = NETWORKS.get(str(network))
    notes: tuple[str, ...] = ()
    layers: list[Layer | CpuLayer]
    if spec is not None:
        name, source, layers = spec.name, spec.source, spec.build(batch or 1)
    elif str(network).endswith(".onnx") or Path(network).is_file():
        from vtatune.networks._onnx import read_onnx

        model = read_onnx(network, batch=batch)
        name, source, layers, notes = model.name, model.source, model.layers, model.notes
    else:
        raise NetworkError(f"unknown network {str(network)!r} (known: "
                           f"{', '.join(NETWORKS)}; or an ONNX model file)")
    if placement is None:
        placement = "deploy" if spec is None and tasks != "autotvm" else "tvm014"
    grouped, cpu, steps = tasks_of(layers, hw, name, tasks, placement)
    return Network(name, source, hw, grouped, cpu, notes,
                   tuple(x for x in layers if not isinstance(x, CpuOp)), steps, placement)
