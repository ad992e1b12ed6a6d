"""The exact reference: a QDQ model's graph computed in float64 (``--check``'s third
engine, ``reference(model, x, "exact")``).

A QDQ model defines its output by real arithmetic: ``DequantizeLinear`` is ``(q - zp) *
scale``, every float operator computes on real values, ``QuantizeLinear`` is
``saturate(round_half_even(x / scale) + zp)``. TVM's CPU build and onnxruntime compute it in
float32, whose sums round on the way: where the exact value lies near a half step (an
exact -37.499998, say), float32 can land on the other side of it, and the two float32
engines may agree with each other and not with exact arithmetic. VTA sums int8 products
exactly in int32. This reference rewrites the model in float64 (every float tensor,
constant and cast; each ``DequantizeLinear`` as ``Cast``, ``Sub``, ``Mul``, each
``QuantizeLinear`` as ``Div``, ``Round`` (half to even), ``Add``, ``Clip``, ``Cast``: their
float64 forms, which ONNX's own quantize operators do not have) and evaluates it with
ONNX's reference implementation (``onnx.reference.ReferenceEvaluator``: numpy, in the
tensors' own float64, a tenth of the CPU time TVM took to build the same graph, the same
outputs on ResNet-50 bit for bit). Its products of int8 values and float32 scales are exact
in float64 or within 2^-53 of it, so it rounds as exact arithmetic does everywhere but
within about 1e-15 of a tie (a power-of-two scale's ties are exact: it rounds those to
even, as the model defines them).

What it cannot rewrite or evaluate (a float operator with no float64 form, a scale that is
not a constant, an operator outside ONNX's standard domain, as onnxruntime's contrib
operators are) fails as a reference fails: one line.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vtatune.deploy._tvm import onnx as _onnx
from vtatune.deploy.runtime._errors import DeployError

__all__ = ["evaluate_exact", "float64_model"]

_FLOAT, _DOUBLE, _UINT8, _INT8 = 1, 11, 2, 3
_RANGES = {2: (0, 255), 3: (-128, 127), 4: (0, 65535), 5: (-32768, 32767)}


def float64_model(model: Any) -> Any:
    """``model`` (a QDQ ModelProto) with every float32 tensor in float64 and its quantize
    and dequantize nodes in float64 arithmetic (see the module docstring); ``model`` is
    not changed. DeployError for a quantize or dequantize whose scale is not a constant
    of known rank."""
    onnx = _onnx()
    from onnx import helper, numpy_helper

    inferred = onnx.shape_inference.infer_shapes(model)
    ranks = {vi.name: len(vi.type.tensor_type.shape.dim)
             for vi in (*inferred.graph.input, *inferred.graph.value_info,
                        *inferred.graph.output)
             if vi.type.tensor_type.HasField("shape")}
    types = {vi.name: vi.type.tensor_type.elem_type
             for vi in (*inferred.graph.input, *inferred.graph.value_info,
                        *inferred.graph.output)}
    g = model.graph
    consts = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    for i in g.initializer:
        ranks[i.name], types[i.name] = len(i.dims), i.data_type
    inits = [numpy_helper.from_array(v.astype(np.float64), k) if v.dtype == np.float32
             else numpy_helper.from_array(v, k) for k, v in consts.items()]
    nodes: list[Any] = []
    fresh = iter(range(1 << 30))

    def new(prefix: str) -> str:
        return f"__f64_{prefix}_{next(fresh)}"

    def const(value: np.ndarray) -> str:
        name = new("c")
        inits.append(numpy_helper.from_array(value, name))
        return name

    def scale_for(node: Any, x: str) -> str:
        """The node's scale as float64, shaped to broadcast along its ``axis``."""
        s = node.input[1]
        if s not in consts:
            raise DeployError(f"the exact reference needs constant scales: {node.op_type} "
                              f"{node.name or node.output[0]} has scale {s}")
        value = consts[s].astype(np.float64)
        if value.size == 1:
            return const(value.reshape(()))
        rank = ranks.get(x)
        if rank is None:
            raise DeployError(f"the exact reference needs the rank of {x} ({node.op_type})")
        axis = next((a.i for a in node.attribute if a.name == "axis"), 1) % rank
        shape = [1] * rank
        shape[axis] = value.size
        return const(value.reshape(shape))

    def zero_point(node: Any, x: str, qtype: int) -> str | None:
        zp = node.input[2] if len(node.input) > 2 and node.input[2] else ""
        if not zp:
            return None
        if zp in consts:
            value = consts[zp].astype(np.float64)
            if value.size == 1:
                return const(value.reshape(()))
            rank = ranks.get(x, 1)
            axis = next((a.i for a in node.attribute if a.name == "axis"), 1) % rank
            shape = [1] * rank
            shape[axis] = value.size
            return const(value.reshape(shape))
        out = new("zp")
        nodes.append(helper.make_node("Cast", [zp], [out], to=_DOUBLE))
        return out

    for node in g.node:
        if node.op_type == "DequantizeLinear" and node.domain in ("", "ai.onnx"):
            x = node.input[0]
            xd = new("x")
            nodes.append(helper.make_node("Cast", [x], [xd], to=_DOUBLE))
            zp = zero_point(node, x, types.get(x, _INT8))
            if zp is not None:
                shifted = new("d")
                nodes.append(helper.make_node("Sub", [xd, zp], [shifted]))
                xd = shifted
            nodes.append(helper.make_node("Mul", [xd, scale_for(node, x)], [node.output[0]]))
        elif node.op_type == "QuantizeLinear" and node.domain in ("", "ai.onnx"):
            x = node.input[0]
            zp_name = node.input[2] if len(node.input) > 2 else ""
            qtype = (consts[zp_name].dtype if zp_name in consts else None)
            qtype = {np.dtype(np.uint8): _UINT8, np.dtype(np.int8): _INT8,
                     np.dtype(np.uint16): 4, np.dtype(np.int16): 5}.get(qtype) or \
                types.get(zp_name) or next((a.i for a in node.attribute
                                            if a.name == "output_dtype"), 0) or _UINT8
            if qtype not in _RANGES:
                raise DeployError(f"the exact reference cannot quantize to type {qtype} "
                                  f"({node.name or node.output[0]})")
            lo, hi = _RANGES[qtype]
            r = new("r")
            q = new("q")
            nodes.append(helper.make_node("Div", [x, scale_for(node, x)], [q]))
            nodes.append(helper.make_node("Round", [q], [r]))
            zp = zero_point(node, x, qtype)
            if zp is not None:
                shifted = new("a")
                nodes.append(helper.make_node("Add", [r, zp], [shifted]))
                r = shifted
            c = new("clip")
            nodes.append(helper.make_node("Clip", [r, const(np.array(lo, np.float64)),
                                                   const(np.array(hi, np.float64))], [c]))
            nodes.append(helper.make_node("Cast", [c], [node.output[0]], to=qtype))
        else:
            nodes.append(_to_double(node))
    graph = helper.make_graph(nodes, g.name, [_value_double(v) for v in g.input
                                              if v.name not in consts],
                              [_value_double(v) for v in g.output], inits)
    out = helper.make_model(graph, opset_imports=list(model.opset_import))
    out.ir_version = model.ir_version
    return out


def evaluate_exact(model: Any, input_name: str, inputs: Any) -> list[np.ndarray]:
    """The output of ``model`` (a QDQ ModelProto) in exact arithmetic for each of ``inputs``
    (arrays of its input): :func:`float64_model` evaluated by ONNX's reference
    implementation, built once."""
    _onnx()
    from onnx.reference import ReferenceEvaluator

    evaluator = ReferenceEvaluator(float64_model(model))
    return [np.asarray(evaluator.run(None, {input_name: x.astype(np.float64)
                                            if x.dtype == np.float32 else x})[0])
            for x in inputs]


def _to_double(node: Any) -> Any:
    """``node`` with its float32 attributes (a Cast's target, a Constant's value) in
    float64."""
    from onnx import helper, numpy_helper

    new = type(node)()
    new.CopyFrom(node)
    for a in new.attribute:
        if node.op_type == "Cast" and a.name == "to" and a.i == _FLOAT:
            a.i = _DOUBLE
        elif a.type == a.TENSOR and a.t.data_type == _FLOAT:
            a.t.CopyFrom(numpy_helper.from_array(
                numpy_helper.to_array(a.t).astype(np.float64), a.t.name))
    if node.op_type == "Constant":
        for a in list(new.attribute):
            if a.name in ("value_float", "value_floats"):
                value = np.array(helper.get_attribute_value(a), np.float64)
                new.attribute.remove(a)
                new.attribute.append(helper.make_attribute("value",
                                                           numpy_helper.from_array(value)))
    return new


def _value_double(v: Any) -> Any:
    new = type(v)()
    new.CopyFrom(v)
    if new.type.tensor_type.elem_type == _FLOAT:
        new.type.tensor_type.elem_type = _DOUBLE
    return new
