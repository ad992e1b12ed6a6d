"""Quantizing a float ONNX model for VTA with onnxruntime's quantizer (``quantize_static``,
QDQ format), from calibration inputs the user gives.

VTA requantizes by shifting, so by default every scale is a power of two: the quantizer
runs once to calibrate, then again with each activation's and weight's scale rounded up to
a power of two (``TensorQuantOverrides``; up, so nothing calibrated clips), symmetric int8
(zero points 0: VTA pads with 0), per tensor, and the two inputs of every Add at the larger
of their scales (VTA's ALU adds int8 values as they are). Biases follow as onnxruntime
quantizes them (int32 at input scale x weight scale).
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from vtatune.deploy._model import load_model, model_input
from vtatune.deploy._tvm import INSTALL_HINT
from vtatune.deploy._tvm import onnx as _onnx
from vtatune.deploy.runtime._errors import DeployError


class _Reader:
    """onnxruntime's CalibrationDataReader over the given samples."""

    def __init__(self, name: str, samples: np.ndarray) -> None:
        self.items = [{name: s} for s in samples]
        self.next = iter(self.items)

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self.next, None)

    def rewind(self) -> None:
        self.next = iter(self.items)


def _samples(calibration: Any, shape: tuple[int, ...]) -> np.ndarray:
    """Calibration samples, each of the model's input shape: an array of the input's shape,
    or several of them stacked along a new first axis."""
    arr = np.asarray(calibration, np.float32)
    if arr.shape == tuple(shape):
        return arr[None]
    if arr.ndim == len(shape) + 1 and arr.shape[1:] == tuple(shape):
        return arr
    raise DeployError(f"calibration inputs of shape {list(arr.shape)}: give the model's input "
                      f"shape {list(shape)}, or several of them stacked")


#: Ops whose input and output onnxruntime quantizes at one scale.
_SAME_SCALE = ("Relu", "MaxPool", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze",
               "Identity")


def _pow2_up(scale: float) -> float:
    return float(2.0 ** np.ceil(np.log2(scale))) if scale > 0 else 1.0


def quantize(model: Any, calibration: Any, *, power_of_two: bool = True) -> Any:
    """``model`` (an ONNX ModelProto or path, float) quantized in QDQ format, int8, per
    tensor, symmetric, calibrated on ``calibration`` (see the module docstring); with
    ``power_of_two`` every scale a power of two (what VTA requantizes by a shift)."""
    onnx = _onnx()
    try:
        from onnxruntime.quantization import QuantFormat, QuantType, quantize_static
    except ImportError:
        raise DeployError(f"quantizing needs onnxruntime: {INSTALL_HINT}") from None
    proto, _ = load_model(model)
    name, shape, _ = model_input(proto)
    samples = _samples(calibration, shape)
    options: dict[str, Any] = {"ActivationSymmetric": True, "WeightSymmetric": True}
    quiet = logging.getLogger()
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # the quantizer's "consider pre-processing" advice
    try:
        with tempfile.TemporaryDirectory() as tmp:
            src, dst = Path(tmp) / "float.onnx", Path(tmp) / "int8.onnx"
            onnx.save(proto, str(src))

            def run(extra: dict[str, Any]) -> Any:
                quantize_static(str(src), str(dst), _Reader(name, samples),
                                quant_format=QuantFormat.QDQ, activation_type=QuantType.QInt8,
                                weight_type=QuantType.QInt8, per_channel=False,
                                extra_options={**options, **extra})
                return onnx.load(str(dst))

            quantized = run({})
            if power_of_two:
                quantized = run({"TensorQuantOverrides": _pow2_overrides(proto, quantized)})
    finally:
        quiet.setLevel(level)
    return quantized


def _pow2_overrides(float_model: Any, quantized: Any) -> dict[str, list[dict[str, Any]]]:
    """Every calibrated activation and weight scale rounded up to a power of two, an Add's
    inputs at their larger scale."""
    onnx = _onnx()
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in quantized.graph.initializer}
    floats = {i.name for i in float_model.graph.initializer}
    tensors = {i.name for i in float_model.graph.input} | floats | {
        o for n in float_model.graph.node for o in n.output}
    scales: dict[str, float] = {}
    for node in quantized.graph.node:
        if node.op_type == "QuantizeLinear":
            source = node.input[0].removesuffix("_QuantizeLinear_Input")
        elif node.op_type == "DequantizeLinear" and node.input[0].endswith("_quantized"):
            source = node.input[0].removesuffix("_quantized")
            if inits.get(node.input[0], np.zeros(0)).dtype != np.int8:
                continue  # an int32 bias: its scale follows from the others
        else:
            continue
        if source in tensors and node.input[1] in inits:
            scales[source] = _pow2_up(float(inits[node.input[1]].reshape(-1)[0]))
    # tensors that must share a scale: an Add's inputs (VTA's ALU adds int8 values as they
    # are) and the two sides of the ops onnxruntime quantizes at one scale (a ReLU's input
    # and output: a ReLU then fuses into the layer before it)
    parent = {t: t for t in scales}

    def root(t: str) -> str:
        while parent[t] != t:
            t = parent[t]
        return t

    for node in float_model.graph.node:
        if node.op_type == "Add":
            group = [i for i in node.input[:2] if i in scales and i not in floats]
        elif node.op_type in _SAME_SCALE:
            group = [t for t in (node.input[0], node.output[0]) if t in scales]
        else:
            continue
        for t in group[1:]:
            parent[root(t)] = root(group[0])
    top: dict[str, float] = {}
    for t, s in scales.items():
        top[root(t)] = max(top.get(root(t), 0.0), s)
    scales = {t: top[root(t)] if t not in floats else s for t, s in scales.items()}
    return {t: [{"scale": np.array(s, np.float32), "zero_point": np.array(0, np.int8)}]
            for t, s in scales.items()}
