"""Read an ONNX model as TVM v0.14's VTA flow deploys it: its conv and dense layers (float
or int8) with the ReLU each fuses, its residual adds, and every other node in order.

Needs the ``onnx`` package (``pip install 'vtatune[onnx]'``). The layers are the nodes of
:data:`LAYER_OPS`: ``Conv`` (with ``group``), ``ConvTranspose``, ``Gemm`` and ``MatMul``
with a weight, and their quantized forms: QOperator (``QLinearConv``, ``QLinearMatMul``,
onnxruntime's ``com.microsoft`` ``QGemm``; ``ConvInteger``, ``MatMulInteger``), and QDQ
(a float node whose weight arrives through ``DequantizeLinear``, maybe also ``Transpose``
or ``Reshape``: the weight is followed back to its initializer). A layer the model
computes in int8 is marked ``quantized``. What follows a layer and what lies between them
(fused BatchNormalization, bias and ReLU; residual ``Add``/``QLinearAdd`` layers; the
CPU's nodes and what TVM's flow adds at the edges of the packed int8 region) is read by
:mod:`._onnx_steps`: the model's steps, in TVM's execution order.

Only shapes are read, never weights: the file is loaded without its external data, and
shape inference runs on a copy without the weights (:mod:`._onnx_shapes`, which also
folds shape arithmetic such as torch's ``chunk`` and knows onnxruntime's quantized
operators); the graph they leave is an :class:`~._onnx_graph.OnnxGraph`. The network is
named after the file (its stem), since every torch export's graph is called
``main_graph``. A graph input with a dynamic batch axis takes ``batch`` (default 1); a
fixed batch that differs from ``batch`` is refused.

A layer vtatune cannot read goes to the CPU with the reason (a
:class:`~vtatune.networks.CpuLayer` among the layers): a 1-D or 3-D convolution, a shape
that stays unknown (the reason names the node it comes from: a custom operator, a
dynamic height). A file that is not a readable, valid ONNX model, or has no layer, is
refused in one line. :func:`vtatune.networks.load_network` places the layers read.

Example:
    >>> from onnx import TensorProto, helper
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 14, 14])
    >>> w = helper.make_tensor("w", TensorProto.FLOAT, [128, 64, 3, 3], [0.0] * 73728)
    >>> conv = helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="c1")
    >>> relu = helper.make_node("Relu", ["c"], ["y"], name="relu")
    >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 128, 14, 14])
    >>> model = helper.make_model(helper.make_graph([conv, relu], "tiny", [x], [y], [w]))
    >>> read = layers_from_model(model)
    >>> [(s.describe(), s.relu) for s in read.layers if isinstance(s, Layer)]
    [('conv2d 1x64x14x14 -> 128, k3 p1 s1', True)]
    >>> [(s.name, s.ops) for s in read.layers if isinstance(s, CpuOp)]  # float in and out
    ... # doctest: +NORMALIZE_WHITESPACE
    [('c1.pack', 'reshape+transpose'), ('c1.quantize', 'multiply+round+clip'),
     ('c1.cast', 'cast'), ('y.unpack', 'cast+transpose+reshape'),
     ('y.dequantize', 'cast+multiply')]
    >>> node = read.graph.node_of("c1")  # what the layer was read from
    >>> node.op_type, [n.op_type for n in read.graph.consumers(node.output[0])]
    ('Conv', ['Relu'])
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vtatune.networks._layers import CpuLayer, CpuOp, Layer, NetworkError
from vtatune.networks._onnx_graph import OnnxGraph, format_dims
from vtatune.networks._onnx_shapes import STANDARD, infer, shapes_only
from vtatune.networks._onnx_steps import ReadLayer, deployed_steps

__all__ = ["LAYER_OPS", "LayerOp", "OnnxModel", "layers_from_model", "network_name",
           "read_onnx"]


@dataclass(frozen=True)
class LayerOp:
    """How one kind of node is read: the layer it is (``conv2d``, ``conv2d_transpose``,
    ``dense``), the input index of its activation and of its weight, and whether the node
    itself computes in int8 (QOperator and integer operators)."""

    operator: str
    data: int
    weight: int
    int8: bool = False


#: (domain, op_type) -> how it is read. ``""`` is the standard domain.
LAYER_OPS: dict[tuple[str, str], LayerOp] = {
    ("", "Conv"): LayerOp("conv2d", 0, 1),
    ("", "ConvTranspose"): LayerOp("conv2d_transpose", 0, 1),
    ("", "Gemm"): LayerOp("dense", 0, 1),
    ("", "MatMul"): LayerOp("dense", 0, 1),
    ("", "QLinearConv"): LayerOp("conv2d", 0, 3, int8=True),
    ("", "ConvInteger"): LayerOp("conv2d", 0, 1, int8=True),
    ("", "QLinearMatMul"): LayerOp("dense", 0, 3, int8=True),
    ("", "MatMulInteger"): LayerOp("dense", 0, 1, int8=True),
    ("com.microsoft", "QGemm"): LayerOp("dense", 0, 3, int8=True),
}

_GEMMS = ("Gemm", "QGemm")  # 2-D, with transA/transB; the others multiply like MatMul
@dataclass(frozen=True)
class OnnxModel:
    """What a model runs once deployed, in execution order: each layer (a :class:`Layer`,
    adds included, or a :class:`CpuLayer` when vtatune cannot read it) and each
    :class:`CpuOp` between them; ``graph`` is what they were read from."""

    name: str
    source: str
    layers: list[Layer | CpuLayer | CpuOp]
    notes: tuple[str, ...]
    graph: OnnxGraph | None = field(default=None, repr=False, compare=False)


def _onnx() -> Any:
    try:
        import onnx
    except ImportError:
        raise NetworkError("reading ONNX models needs the onnx package: "
                           "pip install 'vtatune[onnx]'") from None
    return onnx


def network_name(path: str | Path) -> str:
    """The network's name for a model file: its stem (letters, digits, ``_`` and ``-``;
    the rest become ``_``), so each file has its own tasks, studies and default log."""
    return re.sub(r"[^A-Za-z0-9_-]+", "_", Path(path).stem).strip("_") or "model"


def read_onnx(path: str | Path, *, batch: int | None = None) -> OnnxModel:
    """The deployed steps of the ONNX model at ``path`` (see the module docstring); a file
    that is not a readable, valid ONNX model (or has no layer) raises
    :class:`NetworkError`."""
    onnx = _onnx()
    path = Path(path)
    try:
        model = onnx.load(str(path), load_external_data=False)
    except FileNotFoundError:
        raise NetworkError(f"{path}: no such file") from None
    except Exception as exc:  # noqa: BLE001 - protobuf's decode errors have no common base
        raise NetworkError(f"{path}: not an ONNX model ({_first_line(exc)})") from None
    return layers_from_model(model, str(path), batch=batch, name=network_name(path),
                             base_dir=str(path.parent))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def layers_from_model(model: Any, where: str = "model", *, batch: int | None = None,
                      name: str | None = None, base_dir: str | None = None) -> OnnxModel:
    """The deployed steps of a loaded ``onnx.ModelProto`` (see the module docstring);
    ``model`` is not changed. ``name``: the network's (default the graph's); ``base_dir``: where its
    external data would be (small constants are read from there when they can be)."""
    onnx = _onnx()
    light, weights = shapes_only(model, base_dir)
    try:
        onnx.checker.check_model(light)
    except Exception as exc:  # noqa: BLE001 - ValidationError and friends
        raise NetworkError(f"{where}: invalid ONNX model ({_first_line(exc)})") from None
    notes = _set_batch(light, weights, batch, where)
    try:
        light = infer(light)
    except Exception as exc:  # noqa: BLE001 - inference errors are the model's
        raise NetworkError(f"{where}: shape inference failed ({_first_line(exc)})") from None
    graph = OnnxGraph.of(light, weights)
    read: dict[int, ReadLayer] = {}
    for i, node in enumerate(graph.nodes):
        spec = LAYER_OPS.get(("" if node.domain in STANDARD else node.domain, node.op_type))
        if spec is None:
            continue
        layer = _read_layer(graph, node, node.name or f"{node.op_type.lower()}{i}", spec)
        if isinstance(layer, str):
            notes.append(layer)
        else:
            read[i] = ReadLayer(layer, spec.data)
    if not read:
        raise NetworkError(f"{where}: no Conv, ConvTranspose, Gemm or MatMul layer (float or "
                           "quantized) to place")
    steps = deployed_steps(graph, read)
    layers = [x for x in steps if not isinstance(x, CpuOp)]
    kinds = {_int8_kind(graph.node_of(x.name)): None for x in layers if x.quantized}
    if kinds:
        notes.append(f"int8: {sum(x.quantized for x in layers)} of {len(layers)} layers are "
                     f"quantized in the model ({', '.join(kinds)})")
    return OnnxModel(name or network_name(model.graph.name or "model"), f"ONNX model {where}",
                     steps, tuple(notes), graph)


def _int8_kind(node: Any) -> str:
    """How a quantized layer is written: its operator, or ``QDQ <float operator>``."""
    spec = LAYER_OPS.get(("" if node.domain in STANDARD else node.domain, node.op_type))
    return node.op_type if (spec is not None and spec.int8) or \
        node.op_type.startswith("QLinear") else f"QDQ {node.op_type}"


def _set_batch(light: Any, weights: frozenset[str], batch: int | None,
               where: str) -> list[str]:
    """Give each graph input's dynamic batch axis ``batch`` (default 1), in place; refuse
    a fixed batch other than ``batch``. The notes say what was set."""
    notes = []
    constants = weights | {i.name for i in light.graph.initializer}
    for inp in light.graph.input:
        t = inp.type.tensor_type
        if inp.name in constants or not t.HasField("shape") or not t.shape.dim:
            continue
        first = t.shape.dim[0]
        if first.HasField("dim_value") and first.dim_value > 0:
            if batch is not None and first.dim_value != batch:
                raise NetworkError(
                    f"{where}: input {inp.name} has a fixed batch of {first.dim_value}, not "
                    f"{batch} (export the model with a dynamic batch axis to choose it)")
            continue
        symbol = f" ({first.dim_param})" if first.dim_param else ""
        first.dim_value = batch or 1
        notes.append(f"input {inp.name}: dynamic batch{symbol} set to {batch or 1}")
    return notes


def _read_layer(graph: OnnxGraph, node: Any, name: str, spec: LayerOp
                ) -> Layer | CpuLayer | str:
    """The layer ``node`` is; a CpuLayer when it cannot be read; a note (str) when it is no
    layer after all (a MatMul of two activations)."""
    from onnx import helper

    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    x = node.input[spec.data]
    w = node.input[spec.weight] if len(node.input) > spec.weight else ""
    weight = graph.weight(w)
    int8 = spec.int8 or (graph.dequantized_int8(x) and weight is not None and weight[1])
    shape_text = (f"{node.op_type} {format_dims(graph.dims.get(x))}, "
                  f"weight {format_dims(graph.dims.get(w))}")

    def cpu(operator: str, reason: str) -> CpuLayer:
        return CpuLayer(name, operator, shape_text, reason, quantized=bool(int8))

    if spec.operator == "dense":
        if weight is None and node.op_type not in _GEMMS:
            return _batch_matmul(graph, node, name, x, w)
        unknown = next((t for t in (x, w) if graph.shape(t) is None), None)
        if unknown is not None:
            return cpu("dense", graph.unknown_shape(unknown))
        a, b = graph.shape(x), graph.shape(w)
        if node.op_type in _GEMMS:
            m, k = (a[1], a[0]) if attrs.get("transA") else (a[0], a[1])
            n = b[0] if attrs.get("transB") else b[1]
        elif len(b) != 2:
            return cpu("dense", f"{len(b)}-D weight (a dense layer's weight is 2-D)")
        else:
            m, k, n = 1, a[-1], b[1]
            for d in a[:-1]:
                m *= d
        return Layer(name, "dense", m, k, n, quantized=bool(int8))
    op = spec.operator
    rank = next((len(d) for d in (graph.dims.get(x), graph.dims.get(w)) if d is not None), 4)
    if rank != 4:
        return cpu(op.replace("2d", f"{rank - 2}d"),
                   f"{rank - 2}-D convolution (VTA's templates take 2-D NCHW convolutions)")
    unknown = next((t for t in (x, w) if graph.shape(t) is None), None)
    if unknown is not None:
        return cpu(op, graph.unknown_shape(unknown))
    xs, ws = graph.shape(x), graph.shape(w)
    geometry = _conv_geometry(node.op_type == "ConvTranspose", xs, ws, attrs)
    if isinstance(geometry, str):
        return cpu(op, geometry)
    kernel, pad, stride, dilation, groups, output_padding = geometry
    n, c, h, wd = xs
    out_channels = ws[1] * groups if op == "conv2d_transpose" else ws[0]
    return Layer(name, op, n, c, out_channels, h, wd, kernel, pad, stride, dilation, groups,
                 output_padding, quantized=bool(int8))


def _batch_matmul(graph: OnnxGraph, node: Any, name: str, x: str, w: str
                  ) -> Layer | CpuLayer | str:
    """A MatMul of two activations [..., M, K] x [..., K, N] (attention's Q.K^T and P.V):
    one GEMM per leading index, the second operand its weight packed at run time; a note
    (str) when it is not that (a QOperator's, or operands that broadcast)."""
    if node.op_type != "MatMul":
        return f"{name}: {node.op_type} of two activations left to the CPU"
    int8 = graph.dequantized_int8(x) and graph.dequantized_int8(w)
    shape_text = (f"MatMul {format_dims(graph.dims.get(x))} by "
                  f"{format_dims(graph.dims.get(w))}")
    unknown = next((t for t in (x, w) if graph.shape(t) is None), None)
    if unknown is not None:
        return CpuLayer(name, "batch_matmul", shape_text, graph.unknown_shape(unknown),
                        quantized=bool(int8))
    a, b = graph.shape(x), graph.shape(w)
    if len(a) < 3 or len(a) != len(b) or a[:-2] != b[:-2] or a[-1] != b[-2]:
        return CpuLayer(name, "batch_matmul", shape_text,
                        "matmul of activations whose leading axes differ (VTA multiplies "
                        "matrices of equal leading axes, one GEMM each)", quantized=bool(int8))
    heads = 1
    for d in a[:-2]:
        heads *= d
    return Layer(name, "batch_matmul", a[-2], a[-1], b[-1], heads=heads, quantized=bool(int8))


def _conv_geometry(transpose: bool, x: tuple[int, ...], w: tuple[int, ...],
                   attrs: dict[str, Any]) -> tuple | str:
    """(kernel, pads as (top, left, bottom, right), stride, dilation, groups, output
    padding) of a 2-D Conv or ConvTranspose by ONNX's formulas, or why they cannot be."""
    groups = int(attrs.get("group", 1))
    kernel = tuple(attrs.get("kernel_shape", w[2:]))
    stride = tuple(attrs.get("strides", (1, 1)))
    dilation = tuple(attrs.get("dilations", (1, 1)))
    output_padding = tuple(attrs.get("output_padding", (0, 0))) if transpose else (0, 0)
    auto_pad = attrs.get("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    size = x[2:]
    same = auto_pad in ("SAME_UPPER", "SAME_LOWER")
    if transpose and ("output_shape" in attrs or same):
        # ONNX ConvTranspose: total = stride (in - 1) + output_padding + (k - 1) dilation + 1
        # - out, out = output_shape or in x stride (SAME).
        out = tuple(attrs["output_shape"][-2:]) if "output_shape" in attrs else \
            tuple(n * s for n, s in zip(size, stride, strict=True))
        totals = [s * (n - 1) + op + (k - 1) * d + 1 - o for n, s, op, k, d, o in
                  zip(size, stride, output_padding, kernel, dilation, out, strict=True)]
        if min(totals) < 0:
            return (f"output size {format_dims(out)} needs negative padding "
                    f"({format_dims(tuple(totals))} in all)")
        # The odd pixel goes to the end for SAME_UPPER, to the start otherwise.
        begin = [t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in totals]
    elif same:
        totals = []
        for n, k, s, d in zip(size, kernel, stride, dilation, strict=True):
            out_size = -(-n // s)
            totals.append(max(0, (out_size - 1) * s + (k - 1) * d + 1 - n))
        begin = [t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in totals]
    elif auto_pad == "VALID":
        totals, begin = [0, 0], [0, 0]
    else:
        p = tuple(attrs.get("pads", (0, 0, 0, 0)))
        totals, begin = [p[0] + p[2], p[1] + p[3]], [p[0], p[1]]
    pad = (begin[0], begin[1], totals[0] - begin[0], totals[1] - begin[1])
    return kernel, pad, stride, dilation, groups, output_padding
