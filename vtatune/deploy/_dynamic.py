"""Dynamically quantized models (``quantize_dynamic``: DynamicQuantizeLinear, then
MatMulInteger / ConvInteger, then the rescale by ``input scale x weight scale``) in the
form VTA's patterns take (:func:`to_accumulators`).

MatMulInteger and ConvInteger are int8 x int8 -> int32: VTA's GEMM. What keeps them from
it is the input's zero point, computed per call by DynamicQuantizeLinear on the CPU (a
uint8 ``a`` at zero point ``za``). The rewrite splits it exactly:

    sum (a - za)(w - zw) = sum (a - 128)(w - zw) + (128 - za) * sum (w - zw)

- the first term: ``op(DequantizeLinear(a, 1, 128), DequantizeLinear(w, 1, zw))``, the
  accumulators as float32 values (the int8 ``a - 128`` the project folds uint8 into, scale
  1): the pattern VTA runs as a layer whose int32 accumulators go to the CPU
  (``vta.q*_acc``);
- the second, on the CPU: ``(128 - za)`` times the constant sums of the weight over what
  each output reads (a MatMul's column sums; a Conv's, per output position where its
  padding cuts the window: the weight convolved with ones, by onnx's reference
  evaluator).

The int32 result the model casts to float is then that sum, as float32: exact while it is
below 2^24 in magnitude (onnxruntime's own ``MatMulIntegerToFloat`` fusion rounds alike).
The rescale and bias add that follow stay as the model has them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vtatune.deploy._tvm import onnx as _onnx
from vtatune.deploy.runtime._errors import DeployError

__all__ = ["INTEGER_OPS", "to_accumulators"]

#: The integer GEMM ops of a dynamically quantized model.
INTEGER_OPS = ("MatMulInteger", "ConvInteger")
#: The zero point of uint8 read as int8 (``u - 128``).
_UINT8_ZERO = 128


def to_accumulators(model: Any) -> Any:
    """``model`` with each MatMulInteger / ConvInteger by a constant weight rewritten as
    above (the model itself when it has none)."""
    if not any(n.op_type in INTEGER_OPS for n in model.graph.node):
        return model
    onnx = _onnx()
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    shapes = _shapes(out)
    consts = {i.name: onnx.numpy_helper.to_array(i) for i in graph.initializer}
    readers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    outputs = {o.name for o in graph.output}
    new_inits: list[Any] = []
    dropped: set[int] = set()
    nodes: list[Any] = []
    for node in graph.node:
        if id(node) in dropped:
            continue
        if node.op_type not in INTEGER_OPS or len(node.input) < 2 \
                or node.input[1] not in consts:
            nodes.append(node)
            continue
        rewritten, casts = _rewrite(node, consts, shapes, readers.get(node.output[0], []),
                                    node.output[0] in outputs, new_inits)
        dropped.update(id(c) for c in casts)
        nodes.extend(rewritten)
    del graph.node[:]
    graph.node.extend(nodes)
    graph.initializer.extend(new_inits)
    return out


def _shapes(model: Any) -> dict[str, tuple[int, ...]]:
    """Static shapes by ONNX shape inference (a symbolic dimension: absent)."""
    onnx = _onnx()
    try:
        graph = onnx.shape_inference.infer_shapes(model).graph
    except Exception:  # noqa: BLE001  (what inference cannot read stays unknown)
        graph = model.graph
    shapes = {}
    for v in (*graph.input, *graph.value_info, *graph.output):
        t = v.type.tensor_type
        if t.HasField("shape") and all(d.HasField("dim_value") for d in t.shape.dim):
            shapes[v.name] = tuple(d.dim_value for d in t.shape.dim)
    return shapes


def _rewrite(node: Any, consts: dict[str, np.ndarray], shapes: dict[str, tuple[int, ...]],
             readers: list[Any], is_output: bool, new_inits: list[Any]
             ) -> tuple[list[Any], list[Any]]:
    """The nodes that replace ``node``, and the Casts to float of its int32 output they
    make redundant (their outputs produced directly)."""
    onnx = _onnx()
    helper, nh = onnx.helper, onnx.numpy_helper
    base = node.name or node.output[0]
    a, w = node.input[0], node.input[1]
    za = node.input[2] if len(node.input) > 2 else ""
    zw = node.input[3] if len(node.input) > 3 else ""
    weight = consts[w]
    zw_value = consts.get(zw, np.zeros((), weight.dtype)) if zw else np.zeros((), weight.dtype)
    if zw and zw not in consts:
        raise DeployError(f"node {base} ({node.op_type}): its weight zero point is computed, "
                          "not a constant")
    if np.asarray(zw_value).size != 1:
        raise DeployError(f"node {base} ({node.op_type}): per-channel weight zero points")

    def const(name: str, value: np.ndarray) -> str:
        full = f"{base}/{name}"
        new_inits.append(nh.from_array(np.asarray(value), full))
        return full

    nodes = []
    one = const("one", np.array(1.0, np.float32))
    if za and za not in consts:  # computed per call (DynamicQuantizeLinear): uint8
        a_zero, correct = const("a_zero", np.array(_UINT8_ZERO, np.uint8)), True
    else:
        a_zero, correct = za, False
    fa, fw = f"{base}/a_float", f"{base}/w_float"
    nodes.append(helper.make_node("DequantizeLinear", [a, one, a_zero] if a_zero else [a, one],
                                  [fa], name=fa))
    nodes.append(helper.make_node("DequantizeLinear", [w, one, zw] if zw else [w, one], [fw],
                                  name=fw))
    acc = f"{base}/acc"
    attrs = {x.name: helper.get_attribute_value(x) for x in node.attribute}
    op = "MatMul" if node.op_type == "MatMulInteger" else "Conv"
    nodes.append(helper.make_node(op, [fa, fw], [acc], name=acc, **attrs))
    result = acc
    if correct:
        sums = _weight_sums(node, weight.astype(np.float32) - np.float32(zw_value), attrs,
                            shapes.get(a))
        zf, d, c = f"{base}/a_zero_float", f"{base}/zero_shift", f"{base}/correction"
        nodes += [helper.make_node("Cast", [za], [zf], name=zf, to=onnx.TensorProto.FLOAT),
                  helper.make_node("Sub", [const("uint8_zero", np.array(
                      _UINT8_ZERO, np.float32)), zf], [d], name=d),
                  helper.make_node("Mul", [d, const("weight_sums", sums)], [c], name=c)]
        result = f"{base}/sum"
        nodes.append(helper.make_node("Add", [acc, c], [result], name=result))
    casts = [r for r in readers if r.op_type == "Cast" and any(
        x.name == "to" and x.i == onnx.TensorProto.FLOAT for x in r.attribute)]
    for cast in casts:  # the float the model wanted, directly
        nodes.append(helper.make_node("Identity", [result], [cast.output[0]],
                                      name=f"{base}/as_{cast.output[0]}"))
    if is_output or len(casts) != len(readers):  # someone reads the int32: give it
        nodes.append(helper.make_node("Cast", [result], [node.output[0]],
                                      name=f"{base}/int32", to=onnx.TensorProto.INT32))
    return nodes, casts


def _weight_sums(node: Any, weight: np.ndarray, attrs: dict[str, Any],
                 a_shape: tuple[int, ...] | None) -> np.ndarray:
    """What a unit input zero point adds to each output: a MatMul's column sums [N]; a
    Conv's weight convolved with ones of the input's shape (per output position: the
    padding cuts the windows at the border), one per channel where every position's is
    the same."""
    if node.op_type == "MatMulInteger":
        return weight.sum(axis=-2).astype(np.float32)
    if a_shape is None:
        raise DeployError(f"node {node.name or node.output[0]} (ConvInteger): its input's "
                          "shape is not known (run onnxruntime's quant_pre_process on the "
                          "float model before quantizing it)")
    onnx = _onnx()
    from onnx.reference import ReferenceEvaluator

    helper = onnx.helper
    # every input channel is all ones: the weight summed over them, on one channel
    taps = weight.sum(axis=1, keepdims=True)
    one_channel = {k: v for k, v in attrs.items() if k != "group"}
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], **one_channel)], "weight_sums",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 1, *a_shape[2:]]),
         helper.make_tensor_value_info("w", onnx.TensorProto.FLOAT, list(taps.shape))],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)])
    sums = ReferenceEvaluator(helper.make_model(graph)).run(
        None, {"x": np.ones((1, 1, *a_shape[2:]), np.float32), "w": taps})[0]
    flat = sums.reshape(sums.shape[1], -1)
    if (flat == flat[:, :1]).all():
        return flat[:, :1].reshape(1, -1, 1, 1).astype(np.float32)
    return sums.astype(np.float32)
