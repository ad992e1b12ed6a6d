"""Read an ONNX model's compute layers: Conv (with ``group``), ConvTranspose, Gemm and MatMul.

Needs the ``onnx`` package (``pip install 'vtatune[onnx]'``). The shapes come from the
model: each layer's input shape from ONNX shape inference (run when the graph does not
carry it), its weight shape from the initializer (or the inferred shape of a weight input).
A graph input with a symbolic batch dimension is read as batch 1 (the network's notes say
so). :func:`vtatune.networks.load_network` then places the layers on a hardware config.

Example:
    >>> from onnx import TensorProto, helper
    >>> x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 14, 14])
    >>> w = helper.make_tensor("w", TensorProto.FLOAT, [128, 64, 3, 3], [0.0] * 73728)
    >>> node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], name="c1")
    >>> y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 128, 14, 14])
    >>> model = helper.make_model(helper.make_graph([node], "tiny", [x], [y], [w]))
    >>> [layer.describe() for layer in layers_from_model(model).layers]
    ['conv2d 1x64x14x14 -> 128, k3 p1 s1']
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vtatune.networks._layers import Layer, NetworkError

__all__ = ["OnnxModel", "layers_from_model", "read_onnx"]

_OPS = ("Conv", "ConvTranspose", "Gemm", "MatMul")


@dataclass(frozen=True)
class OnnxModel:
    name: str
    source: str
    layers: list[Layer]
    notes: tuple[str, ...]


def _onnx() -> Any:
    try:
        import onnx
    except ImportError:
        raise NetworkError("reading ONNX models needs the onnx package: "
                           "pip install 'vtatune[onnx]'") from None
    return onnx


def read_onnx(path: str | Path) -> OnnxModel:
    """The compute layers of the ONNX model at ``path``; a file that is not a readable,
    valid ONNX model (or has no such layer) raises :class:`NetworkError` in one line."""
    onnx = _onnx()
    path = Path(path)
    try:
        model = onnx.load(str(path))
    except FileNotFoundError:
        raise NetworkError(f"{path}: no such file") from None
    except Exception as exc:  # noqa: BLE001 - protobuf's decode errors have no common base
        raise NetworkError(f"{path}: not an ONNX model ({_first_line(exc)})") from None
    return layers_from_model(model, str(path))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def layers_from_model(model: Any, where: str = "model") -> OnnxModel:
    """The compute layers of a loaded ``onnx.ModelProto`` (see the module docstring)."""
    onnx = _onnx()
    from onnx import shape_inference

    try:
        onnx.checker.check_model(model)
    except Exception as exc:  # noqa: BLE001 - ValidationError and friends
        raise NetworkError(f"{where}: invalid ONNX model ({_first_line(exc)})") from None
    graph = model.graph
    notes = []
    inits = {i.name for i in graph.initializer}
    for inp in graph.input:
        if inp.name in inits or not inp.type.tensor_type.HasField("shape"):
            continue
        dims = inp.type.tensor_type.shape.dim
        if dims and not dims[0].HasField("dim_value"):
            dims[0].dim_value = 1
            notes.append(f"input {inp.name}: symbolic batch read as 1")
    try:
        model = shape_inference.infer_shapes(model)
    except Exception as exc:  # noqa: BLE001 - inference errors are the model's
        raise NetworkError(f"{where}: shape inference failed ({_first_line(exc)})") from None
    graph = model.graph
    shapes: dict[str, list[int] | None] = {}
    for vi in (*graph.input, *graph.value_info, *graph.output):
        t = vi.type.tensor_type
        if t.HasField("shape"):
            dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
            shapes[vi.name] = None if None in dims else dims
    for init in graph.initializer:
        shapes[init.name] = list(init.dims)
    consts = {i.name: i for i in graph.initializer}
    layers = []
    for i, node in enumerate(graph.node):
        if node.op_type not in _OPS:
            continue
        name = node.name or f"{node.op_type.lower()}{i}"
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}

        def shape(k: int, node: Any = node, name: str = name) -> list[int]:
            s = shapes.get(node.input[k]) if len(node.input) > k else None
            if s is None:
                raise NetworkError(f"{where}: {node.op_type} {name}: the shape of input "
                                   f"{node.input[k] if len(node.input) > k else k} is unknown")
            return s

        if node.op_type in ("Conv", "ConvTranspose"):
            layers.append(_conv(node.op_type, name, shape(0), shape(1), attrs, where))
        elif node.op_type == "Gemm":
            a, b = shape(0), shape(1)
            m, k = (a[1], a[0]) if attrs.get("transA") else (a[0], a[1])
            n = b[0] if attrs.get("transB") else b[1]
            layers.append(Layer(name, "dense", m, k, n))
        else:  # MatMul: a dense layer when the right side is a 2-D weight
            a, b = shape(0), shape(1)
            if node.input[1] not in consts or len(b) != 2 or len(a) < 2:
                notes.append(f"{name}: MatMul of two activations (not a dense layer) left to "
                             "the CPU")
                continue
            batch = 1
            for d in a[:-1]:
                batch *= d
            layers.append(Layer(name, "dense", batch, a[-1], b[1]))
    if not layers:
        raise NetworkError(f"{where}: no Conv, ConvTranspose, Gemm or MatMul layer to place")
    name = graph.name or Path(where).stem
    return OnnxModel(name, f"ONNX model {where}", layers, tuple(notes))


def _conv(op: str, name: str, x: list[int], w: list[int], attrs: dict[str, Any],
          where: str) -> Layer:
    if len(x) != 4 or len(w) != 4:
        raise NetworkError(f"{where}: {op} {name}: only 2-D convolutions (NCHW) are "
                           f"supported, got input shape {x}")
    n, c, h, wd = x
    groups = int(attrs.get("group", 1))
    kernel = tuple(attrs.get("kernel_shape", w[2:]))
    stride = tuple(attrs.get("strides", (1, 1)))
    dilation = tuple(attrs.get("dilations", (1, 1)))
    auto_pad = attrs.get("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads = []
        for size, k, s, d in zip((h, wd), kernel, stride, dilation, strict=True):
            out = -(-size // s)
            total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
            small, big = total // 2, total - total // 2
            pads.append((small, big) if auto_pad == "SAME_UPPER" else (big, small))
        pad = (pads[0][0], pads[1][0], pads[0][1], pads[1][1])
    elif auto_pad == "VALID":
        pad = (0, 0, 0, 0)
    else:
        pad = tuple(attrs.get("pads", (0, 0, 0, 0)))
    if op == "Conv":
        out_channels = w[0]
        return Layer(name, "conv2d", n, c, out_channels, h, wd, kernel, pad, stride, dilation,
                     groups)
    out_channels = w[1] * groups
    if "output_shape" in attrs:
        raise NetworkError(f"{where}: ConvTranspose {name}: output_shape is not supported; "
                           "give pads and output_padding")
    output_padding = tuple(attrs.get("output_padding", (0, 0)))
    return Layer(name, "conv2d_transpose", n, c, out_channels, h, wd, kernel, pad, stride,
                 dilation, groups, output_padding)
