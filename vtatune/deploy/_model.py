"""The ONNX model a deploy takes: reading it, its input (shape, dtype; checking one and a
seeded random one: the runtime's, re-exported), whether it is quantized, and its output's
quantization step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from vtatune.deploy._tvm import onnx as _onnx
from vtatune.deploy.runtime import check_input, random_input
from vtatune.deploy.runtime._errors import DeployError

#: (check_input and random_input, which the runtime needs too, live there)
__all__ = ["QUANTIZED_OPS", "check_input", "is_quantized", "load_model", "model_input",
           "output_step", "random_input"]

#: ONNX ops that make a model quantized (QDQ, QOperator, integer ops).
QUANTIZED_OPS = frozenset({"QuantizeLinear", "DequantizeLinear", "QLinearConv",
                           "QLinearMatMul", "ConvInteger", "MatMulInteger"})


def load_model(model: Any) -> tuple[Any, str]:
    """An ONNX ModelProto and its name, from a path or a ModelProto."""
    onnx = _onnx()
    if isinstance(model, str | Path):
        path = Path(model)
        if not path.is_file():
            raise DeployError(f"model {model} not found")
        try:
            proto = onnx.load(str(path))
            onnx.checker.check_model(proto)
        except Exception as exc:  # onnx raises DecodeError, ValidationError, ...
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise DeployError(f"{model} is not a valid ONNX model: {first}") from None
        return proto, path.name
    if isinstance(model, onnx.ModelProto):
        return model, model.graph.name or "model"
    raise DeployError(f"a model is an ONNX file or an onnx.ModelProto, got "
                      f"{type(model).__name__}")


def model_input(model: Any) -> tuple[str, tuple[int, ...], np.dtype]:
    """The graph input's name, shape (a symbolic dimension read as 1) and dtype."""
    onnx = _onnx()
    inits = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in inits]
    if len(inputs) != 1:
        raise DeployError(f"the model has {len(inputs)} inputs: deploy takes models with one")
    t = inputs[0].type.tensor_type
    shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in t.shape.dim)
    return inputs[0].name, shape, np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.elem_type))


def is_quantized(model: Any) -> bool:
    return any(n.op_type in QUANTIZED_OPS for n in model.graph.node)


def output_step(model: Any) -> float:
    """The quantization step of the model's output: the scale of the DequantizeLinear that
    produces it (1 for an integer output); DeployError when a float op follows."""
    onnx = _onnx()
    out = model.graph.output[0]
    if out.type.tensor_type.elem_type in (onnx.TensorProto.INT8, onnx.TensorProto.UINT8):
        return 1.0
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "DequantizeLinear" and node.output[0] == out.name \
                and node.input[1] in inits:
            return float(inits[node.input[1]].reshape(-1)[0])
    raise DeployError(f"the model's output {out.name} is not a dequantized int8 tensor")


#: The ONNX ops whose multiply-accumulates :func:`model_macs` counts.
MAC_OPS = ("Conv", "ConvTranspose", "Gemm", "MatMul")


def model_macs(model: Any) -> int:
    """The model's multiply-accumulates, counted from its own Conv, ConvTranspose, Gemm and
    MatMul nodes (shapes by ONNX shape inference, a symbolic dimension read as 1): per
    output element, a conv's ``I/g x KH x KW``, a Gemm's or MatMul's inner dimension; per
    input element, a transposed conv's ``O/g x KH x KW`` (how ``network`` counts a layer's,
    :attr:`vtatune.networks.Layer.macs`). 0 when a shape is unknown."""
    onnx = _onnx()
    try:
        graph = onnx.shape_inference.infer_shapes(model).graph
    except Exception:  # noqa: BLE001  (a model shape inference cannot read: count what is known)
        graph = model.graph
    shapes = {i.name: tuple(i.dims) for i in graph.initializer}
    for v in (*graph.input, *graph.value_info, *graph.output):
        dims = v.type.tensor_type.shape.dim
        if v.type.tensor_type.HasField("shape"):
            shapes[v.name] = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in dims)
    total = 0
    for node in graph.node:
        if node.op_type not in MAC_OPS:
            continue
        a, b = (shapes.get(n) for n in node.input[:2])
        out = shapes.get(node.output[0])
        if a is None or b is None or out is None or not a or not b:
            continue
        if node.op_type == "Conv":
            total += int(np.prod(out)) * int(np.prod(b[1:]))
        elif node.op_type == "ConvTranspose":
            total += int(np.prod(a)) * int(np.prod(b[1:]))
        else:
            trans_a = any(x.name == "transA" and x.i for x in node.attribute)
            inner = a[-2] if node.op_type == "Gemm" and trans_a else a[-1]
            total += int(np.prod(out)) * int(inner)
    return total
