"""QOperator models as QDQ models: each of onnxruntime's quantized operators (QLinearConv,
QLinearMatMul, QGemm, QLinearAdd, ...: ``quantize_static(..., quant_format=QOperator)``,
the format of the ONNX Model Zoo's int8 models) rewritten to the
``DequantizeLinear -> op -> QuantizeLinear`` form onnxruntime defines it as, so that the
QDQ path (TVM's importer, VTA's patterns) takes it.

The rewrite is the definition, term for term (onnxruntime's operator schemas:
``onnxruntime.capi.onnxruntime_pybind11_state.get_all_operator_schema()``):

- ``QLinearConv(x, xs, xz, w, ws, wz, ys, yz, B)``: ``Q(Conv(DQ(x), DQ(w), DQ(B, xs*ws)))``,
  the int32 bias at the accumulator's scale ``xs*ws`` (per output channel with per-channel
  weights) and zero point 0 (ONNX's QLinearConv);
- ``QLinearMatMul``: ``Q(MatMul(DQ(a), DQ(b)))``;
- ``QGemm(A, as, az, B, bs, bz, C, ys, yz)`` (alpha, transA, transB):
  ``Q(Gemm(DQ(A), DQ(B), DQ(C, alpha*as*bs)))`` (C's scale is ``alpha / beta * as * bs``,
  beta 1); without ``ys`` its output is the float Gemm;
- ``QLinearAdd`` / ``QLinearMul`` / ``QLinearWhere``, ``QLinearConcat``,
  ``QLinearSigmoid``, ``QLinearLeakyRelu``, ``QLinearSoftmax``, ``QLinearAveragePool``,
  ``QLinearGlobalAveragePool``, ``QLinearReduceMean``: ``Q(op(DQ(...)))`` with the op's
  attributes (``channels_last``: transposed to NCHW and back; a softmax of opset < 13,
  which normalizes over the flattened trailing axes: Flatten, Softmax, Reshape).

Operators with no such form (QAttention, QEmbedLayerNormalization, DynamicQuantizeMatMul,
...: onnxruntime's fused transformer kernels) are refused, naming the node and the fix.
Ops onnxruntime leaves on the 8-bit tensors themselves (MaxPool, Reshape, Transpose, ...)
stay as they are: they move values without changing them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from vtatune.deploy._tvm import onnx as _onnx
from vtatune.deploy.runtime._errors import DeployError

__all__ = ["QOPERATOR_OPS", "to_qdq"]

#: onnxruntime's quantized operators and the float op each stands for.
QOPERATOR_OPS = {"QLinearConv": "Conv", "QLinearMatMul": "MatMul", "QGemm": "Gemm",
                 "QLinearAdd": "Add", "QLinearMul": "Mul", "QLinearWhere": "Where",
                 "QLinearConcat": "Concat", "QLinearSigmoid": "Sigmoid",
                 "QLinearLeakyRelu": "LeakyRelu", "QLinearSoftmax": "Softmax",
                 "QLinearAveragePool": "AveragePool",
                 "QLinearGlobalAveragePool": "GlobalAveragePool",
                 "QLinearReduceMean": "ReduceMean"}
#: onnxruntime's quantized kernels that have no DequantizeLinear -> op -> QuantizeLinear form.
NO_QDQ_FORM = frozenset({"QAttention", "QEmbedLayerNormalization", "DynamicQuantizeMatMul",
                         "MatMulIntegerToFloat", "DynamicQuantizeLSTM", "QLinearConvTranspose",
                         "QOrderedMatMul", "QOrderedAttention", "QOrderedGelu",
                         "QOrderedLayerNormalization", "QOrderedLongformerAttention",
                         "QuantizeWithOrder", "DequantizeWithOrder", "QGemmNT", "QMoE"})
_FIX = ("quantize the float model in QDQ format (onnxruntime.quantization.quantize_static, "
        "quant_format=QuantFormat.QDQ, its default)")


def to_qdq(model: Any) -> Any:
    """``model`` with every QOperator node rewritten to its QDQ form (the model itself when
    it has none); DeployError naming the first node that has no QDQ form."""
    graph = model.graph
    for node in graph.node:
        if node.op_type in NO_QDQ_FORM:
            raise DeployError(
                f"node {node.name or node.output[0]} ({node.op_type}) is one of "
                f"onnxruntime's fused quantized kernels and has no QDQ form: {_FIX}")
    if not any(n.op_type in QOPERATOR_OPS for n in graph.node):
        return model
    onnx = _onnx()
    out = onnx.ModelProto()
    out.CopyFrom(model)
    rewriter = _Rewriter(out)
    nodes = []
    for node in out.graph.node:
        rule = _RULES.get(node.op_type) if node.op_type in QOPERATOR_OPS else None
        nodes.extend(rule(rewriter, node) if rule is not None else [node])
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    out.graph.initializer.extend(rewriter.new_initializers)
    try:
        onnx.checker.check_model(out)
    except Exception as exc:  # noqa: BLE001  (onnx raises ValidationError and others)
        raise DeployError(f"the QDQ form of the QOperator model is not valid ONNX: "
                          f"{str(exc).strip().splitlines()[0]}") from None
    return out


class _Rewriter:
    """The names taken in the model, its constants, and the new nodes' helpers."""

    def __init__(self, model: Any) -> None:
        onnx = _onnx()
        self.helper = onnx.helper
        graph = model.graph
        self.constants = {i.name: i for i in graph.initializer}
        self.taken = set(self.constants) | {v.name for v in graph.input} | {
            o for n in graph.node for o in n.output}
        self.types = {v.name: v.type.tensor_type.elem_type
                      for v in (*graph.input, *graph.value_info, *graph.output)}
        self.types.update({i.name: i.data_type for i in graph.initializer})
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
                          0)
        self.new_initializers: list[Any] = []

    def fresh(self, base: str) -> str:
        name, n = base, 0
        while name in self.taken:
            n += 1
            name = f"{base}_{n}"
        self.taken.add(name)
        return name

    def constant(self, base: str, value: np.ndarray) -> str:
        onnx = _onnx()
        name = self.fresh(base)
        self.new_initializers.append(onnx.numpy_helper.from_array(value, name))
        self.constants[name] = self.new_initializers[-1]
        return name

    def value(self, name: str) -> np.ndarray | None:
        """A constant input's value (None when it is computed)."""
        tensor = self.constants.get(name)
        return None if tensor is None else _onnx().numpy_helper.to_array(tensor)

    def node(self, op: str, inputs: list[str], base: str, **attrs: Any) -> tuple[Any, str]:
        out = self.fresh(base)
        return self.helper.make_node(op, inputs, [out], name=out, **attrs), out

    def dequantize(self, node: Any, x: str, scale: str, zp: str, axis: int | None = None
                   ) -> tuple[Any, str]:
        """``DequantizeLinear(x, scale, zp)``, per axis ``axis`` when the scale has more than
        one element."""
        attrs = {}
        scale_value = self.value(scale)
        if axis is not None and scale_value is not None and scale_value.size > 1:
            attrs["axis"] = axis
        return self.node("DequantizeLinear", [x, scale, zp] if zp else [x, scale],
                         f"{_base(node)}/dq_{x}", **attrs)

    def quantize(self, node: Any, f: str, scale: str, zp: str, out: str,
                 like: tuple[str, ...] = ()) -> Any:
        """``QuantizeLinear(f, scale, zp) -> out``; without ``zp`` a zero of the element
        type of the first of ``like`` whose type is known (the input's zero point, the
        input: QLinear ops keep their input's type), else uint8 (QuantizeLinear's
        default)."""
        if not zp:
            dtype = next((self.types[n] for n in like if n in self.types),
                         _onnx().TensorProto.UINT8)
            zp = self.constant(f"{_base(node)}/zero_point", np.zeros(
                (), _onnx().helper.tensor_dtype_to_np_dtype(dtype)))
        return self.helper.make_node("QuantizeLinear", [f, scale, zp], [out],
                                     name=f"{_base(node)}/q")


def _base(node: Any) -> str:
    return node.name or node.output[0]


def _inputs(node: Any, n: int) -> list[str]:
    """The node's first ``n`` inputs, a missing optional one as ``""``."""
    return [node.input[i] if i < len(node.input) else "" for i in range(n)]


def _attrs(node: Any, drop: tuple[str, ...] = ()) -> dict[str, Any]:
    helper = _onnx().helper
    return {a.name: helper.get_attribute_value(a) for a in node.attribute if a.name not in drop}


def _unary(r: _Rewriter, node: Any) -> list[Any]:
    """``Q(op(DQ(X)))`` for the elementwise and pooling ops (X, xs, xz, ys, yz)."""
    x, xs, xz, ys, yz = _inputs(node, 5)
    op = QOPERATOR_OPS[node.op_type]
    attrs = _attrs(node, ("channels_last", "opset"))
    dq, f = r.dequantize(node, x, xs, xz)
    nodes = [dq]
    channels_last = any(a.name == "channels_last" and a.i for a in node.attribute)
    if channels_last:  # NHWC -> NCHW, and back after the op (onnxruntime's are 4-D images)
        t, f = r.node("Transpose", [f], f"{_base(node)}/to_nchw", perm=[0, 3, 1, 2])
        nodes.append(t)
    if node.op_type == "QLinearSoftmax":
        nodes += _softmax(r, node, f, attrs)
        f = nodes[-1].output[0]
    elif node.op_type == "QLinearReduceMean" and r.opset >= 18:
        axes = r.constant(f"{_base(node)}/axes", np.asarray(attrs.pop("axes"), np.int64))
        n, f = r.node(op, [f, axes], f"{_base(node)}/{op}", **attrs)
        nodes.append(n)
    else:
        n, f = r.node(op, [f], f"{_base(node)}/{op}", **attrs)
        nodes.append(n)
    if channels_last:
        t, f = r.node("Transpose", [f], f"{_base(node)}/to_nhwc", perm=[0, 2, 3, 1])
        nodes.append(t)
    return [*nodes, r.quantize(node, f, ys, yz, node.output[0], like=(xz, x))]


def _softmax(r: _Rewriter, node: Any, f: str, attrs: dict[str, Any]) -> list[Any]:
    """Softmax as the node's ``opset`` defines it: from 13 over ``axis`` (default -1);
    before, over the axes from ``axis`` on, flattened (default 1)."""
    opset = next((a.i for a in node.attribute if a.name == "opset"), 13)
    axis = attrs.get("axis", -1 if opset >= 13 else 1)
    if opset >= 13 or axis == -1:
        n, _ = r.node("Softmax", [f], f"{_base(node)}/Softmax", axis=axis)
        return [n]
    shape, _ = r.node("Shape", [f], f"{_base(node)}/shape")
    flat, g = r.node("Flatten", [f], f"{_base(node)}/flatten", axis=axis)
    soft, g = r.node("Softmax", [g], f"{_base(node)}/Softmax", axis=-1)
    back, _ = r.node("Reshape", [g, shape.output[0]], f"{_base(node)}/reshape")
    return [shape, flat, soft, back]


def _binary(r: _Rewriter, node: Any) -> list[Any]:
    """``Q(op(DQ(A), DQ(B)))`` (A, As, Az, B, Bs, Bz, Cs, Cz)."""
    a, as_, az, b, bs, bz, cs, cz = _inputs(node, 8)
    dqa, fa = r.dequantize(node, a, as_, az)
    dqb, fb = r.dequantize(node, b, bs, bz)
    op = QOPERATOR_OPS[node.op_type]
    n, f = r.node(op, [fa, fb], f"{_base(node)}/{op}")
    return [dqa, dqb, n, r.quantize(node, f, cs, cz, node.output[0], like=(az, a))]


def _where(r: _Rewriter, node: Any) -> list[Any]:
    cond, x, xs, xz, y, ys, yz, zs, zz = _inputs(node, 9)
    dqx, fx = r.dequantize(node, x, xs, xz)
    dqy, fy = r.dequantize(node, y, ys, yz)
    n, f = r.node("Where", [cond, fx, fy], f"{_base(node)}/Where")
    return [dqx, dqy, n, r.quantize(node, f, zs, zz, node.output[0], like=(xz, x))]


def _concat(r: _Rewriter, node: Any) -> list[Any]:
    ys, yz, *rest = list(node.input)
    nodes, floats = [], []
    for i in range(0, len(rest), 3):
        dq, f = r.dequantize(node, *rest[i:i + 3])
        nodes.append(dq)
        floats.append(f)
    n, f = r.node("Concat", floats, f"{_base(node)}/Concat", **_attrs(node))
    like = (*rest[2:3], rest[0])  # the first input's zero point, the input
    return [*nodes, n, r.quantize(node, f, ys, yz, node.output[0], like=like)]


def _bias(r: _Rewriter, node: Any, bias: str, scales: tuple[str, str],
          alpha: float = 1.0) -> tuple[list[Any], str]:
    """``DQ(bias)`` at the accumulator's scale ``alpha * scale_a * scale_b`` (float32, as
    onnxruntime's quantizer computes it), zero point 0; no nodes without a bias."""
    if not bias:
        return [], ""
    value = r.value(bias)
    if value is not None and value.dtype != np.int32:
        raise DeployError(f"node {_base(node)} ({node.op_type}): its bias {bias} is "
                          f"{value.dtype}, the operator takes int32 (onnxruntime cannot run "
                          f"the model either): {_FIX}")
    a, b = (r.value(s) for s in scales)
    if a is None or b is None:
        raise DeployError(f"node {_base(node)} ({node.op_type}): its scales are computed, "
                          f"not constants: {_FIX}")
    scale = (np.float32(alpha) * a.astype(np.float32) * b.astype(np.float32)).astype(
        np.float32)
    name = r.constant(f"{_base(node)}/bias_scale", scale.reshape(-1) if scale.size > 1
                      else scale.reshape(()))
    dq, f = r.dequantize(node, bias, name, "", axis=0)
    return [dq], f


def _conv(r: _Rewriter, node: Any) -> list[Any]:
    x, xs, xz, w, ws, wz, ys, yz, b = _inputs(node, 9)
    dqx, fx = r.dequantize(node, x, xs, xz)
    dqw, fw = r.dequantize(node, w, ws, wz, axis=0)
    bias, fb = _bias(r, node, b, (xs, ws))
    n, f = r.node("Conv", [fx, fw, fb] if fb else [fx, fw], f"{_base(node)}/Conv",
                  **_attrs(node))
    return [dqx, dqw, *bias, n, r.quantize(node, f, ys, yz, node.output[0], like=(xz, x))]


def _matmul(r: _Rewriter, node: Any) -> list[Any]:
    a, as_, az, b, bs, bz, ys, yz = _inputs(node, 8)
    dqa, fa = r.dequantize(node, a, as_, az, axis=-2)
    dqb, fb = r.dequantize(node, b, bs, bz, axis=-1)
    n, f = r.node("MatMul", [fa, fb], f"{_base(node)}/MatMul")
    return [dqa, dqb, n, r.quantize(node, f, ys, yz, node.output[0], like=(az, a))]


def _gemm(r: _Rewriter, node: Any) -> list[Any]:
    a, as_, az, b, bs, bz, c, ys, yz = _inputs(node, 9)
    attrs = _attrs(node)
    dqa, fa = r.dequantize(node, a, as_, az)
    dqb, fb = r.dequantize(node, b, bs, bz, axis=0 if attrs.get("transB", 0) else 1)
    bias, fc = _bias(r, node, c, (as_, bs), float(attrs.get("alpha", 1.0)))
    if not ys:  # a float output (QGemm's y_scale is optional)
        n = r.helper.make_node("Gemm", [fa, fb, fc] if fc else [fa, fb], [node.output[0]],
                               name=f"{_base(node)}/Gemm", **attrs)
        return [dqa, dqb, *bias, n]
    n, f = r.node("Gemm", [fa, fb, fc] if fc else [fa, fb], f"{_base(node)}/Gemm", **attrs)
    return [dqa, dqb, *bias, n, r.quantize(node, f, ys, yz, node.output[0], like=(az, a))]


_RULES: dict[str, Callable[[_Rewriter, Any], list[Any]]] = {
    "QLinearConv": _conv, "QLinearMatMul": _matmul, "QGemm": _gemm,
    "QLinearAdd": _binary, "QLinearMul": _binary, "QLinearWhere": _where,
    "QLinearConcat": _concat,
    **dict.fromkeys(("QLinearSigmoid", "QLinearLeakyRelu", "QLinearSoftmax",
                     "QLinearAveragePool", "QLinearGlobalAveragePool", "QLinearReduceMean"),
                    _unary),
}
