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
__all__ = ["MAC_OPS", "QUANTIZED_OPS", "check_input", "float_model_error",
           "is_quantized", "load_model", "model_input", "output_step", "random_input"]

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


def float_model_error(name: str) -> DeployError:
    """What deploy says of a float model (VTA runs 8-bit integers)."""
    return DeployError(
        f"{name} is a float model: VTA runs 8-bit integers. Quantize it in QDQ "
        "format (onnxruntime.quantization.quantize_static, any of its options) or "
        "give calibration inputs (--calibration X.npy) to have vtatune do it")


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


#: The ONNX ops that multiply (what a model's multiply-accumulates are counted over:
#: :func:`vtatune.deploy.model_macs`, from the shapes TVM's import gives them).
MAC_OPS = ("Conv", "ConvTranspose", "Gemm", "MatMul")

