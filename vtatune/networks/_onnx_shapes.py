"""The shapes of an ONNX model's tensors, as far as they can be known without running it.

The reader needs shapes, never weights. So it works on a *shapes-only* copy of the model
(:func:`shapes_only`): every weight becomes a declared graph input of its type and shape,
and only small constants (shape arithmetic, scales, zero points) keep their values. That
copy is cheap to check and to infer on, whatever the size of the weights and wherever
they live (a missing external-data file does not matter).

:func:`infer` then runs ONNX shape inference to a fixed point with two helpers of its own,
because one tensor of unknown shape leaves every layer after it unknown:

- shape arithmetic is folded into constants (:func:`fold_constants`): torch exports
  ``chunk`` (ShuffleNet-v2) as ``Slice`` with ends computed from ``Shape`` -> ``Gather`` ->
  ``Add`` -> ``Div`` -> ``Mul``, which ONNX inference does not evaluate; folded, the
  ``Slice`` has constant ends and inference gets through;
- the output shapes of onnxruntime's quantized contrib operators (``com.microsoft``
  ``QGemm``, ``QLinearAdd``, ``QLinearConcat``, ``QLinearGlobalAveragePool`` ...: what
  ``quantize_static(..., QuantFormat.QOperator)`` writes) are computed here
  (:func:`contrib_shape`); ONNX does not know these operators.

A tensor whose shape stays unknown (a custom operator, a dynamic height) is left unknown:
the reader names the node it comes from.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["Dims", "INT8_TYPES", "STANDARD", "contrib_shape", "fold_constants", "infer",
           "shapes_only", "tensor_dims"]

#: A tensor's shape as inference leaves it: an int per known dimension, the symbol of a
#: named unknown one, None for an unnamed unknown one.
Dims = tuple[int | str | None, ...]

# Constants up to this many elements keep their values in the shapes-only copy and may be
# folded: shape arithmetic, scales and zero points are far smaller; weights far larger.
SMALL = 4096

STANDARD = ("", "ai.onnx")
INT8_TYPES = (2, 3)  # TensorProto.UINT8, TensorProto.INT8


def shapes_only(model: Any, base_dir: str | None) -> tuple[Any, frozenset[str]]:
    """A copy of ``model`` without its weights, and the names of the weights it had.

    Each initializer of more than :data:`SMALL` elements (or stored outside the file and
    unreadable) becomes a graph input with its type and shape. ``model`` is not changed.
    """
    import onnx
    from onnx import external_data_helper, helper

    g = model.graph
    light = onnx.ModelProto()
    light.ir_version = model.ir_version
    light.opset_import.extend(model.opset_import)
    light.functions.extend(model.functions)
    lg = light.graph
    lg.name = g.name
    lg.node.extend(g.node)
    lg.input.extend(g.input)
    lg.output.extend(g.output)
    lg.value_info.extend(g.value_info)
    declared = {i.name for i in g.input}
    weights = set()
    for init in g.initializer:
        small = int(np.prod(init.dims, dtype=np.int64)) <= SMALL
        if small and external_data_helper.uses_external_data(init):
            small = _load_small_external(init, base_dir)
        if small:
            lg.initializer.append(init)
            continue
        weights.add(init.name)
        if init.name not in declared:
            lg.input.append(helper.make_tensor_value_info(init.name, init.data_type,
                                                          list(init.dims)))
    for sparse in g.sparse_initializer:
        weights.add(sparse.values.name)
        if sparse.values.name not in declared:
            lg.input.append(helper.make_tensor_value_info(
                sparse.values.name, sparse.values.data_type, list(sparse.dims)))
    return light, frozenset(weights)


def _load_small_external(init: Any, base_dir: str | None) -> bool:
    """Read a small initializer kept in an external file (a shape constant saved with
    ``size_threshold=0``); False when the file cannot be read (it is then a weight)."""
    from onnx import external_data_helper

    if base_dir is None:
        return False
    try:
        external_data_helper.load_external_data_for_tensor(init, base_dir)
    except Exception:  # noqa: BLE001 - a missing file is onnx's ValidationError, or OSError
        return False
    init.data_location = init.DEFAULT
    del init.external_data[:]
    return True


def tensor_dims(value_info: Any) -> Dims | None:
    """The dims of a ValueInfoProto, or None when it has no shape."""
    t = value_info.type.tensor_type
    if not value_info.type.HasField("tensor_type") or not t.HasField("shape"):
        return None
    return tuple(d.dim_value if d.HasField("dim_value") else _symbol(d.dim_param)
                 for d in t.shape.dim)


def _symbol(dim_param: str) -> str | None:
    """A dimension's name, or None for none or one ONNX inference made up (``unk__3``)."""
    return None if not dim_param or dim_param.startswith("unk__") else dim_param


def _known(dims: Dims | None) -> tuple[int, ...] | None:
    return dims if dims is not None and all(isinstance(d, int) for d in dims) else None


def _run_onnx_inference(model: Any) -> Any:
    from onnx import shape_inference

    try:  # data propagation gets through some shape arithmetic, but is the younger code
        return shape_inference.infer_shapes(model, check_type=False, strict_mode=False,
                                            data_prop=True)
    except Exception:  # noqa: BLE001 - retried without it; a second failure is the model's
        return shape_inference.infer_shapes(model, check_type=False, strict_mode=False)


def infer(light: Any) -> Any:
    """``light`` (a shapes-only model) with every shape ONNX inference, constant folding and
    the contrib rules can find, to a fixed point. Raises what ONNX inference raises on the
    model as given; a later round that fails keeps the shapes found so far."""
    model = _run_onnx_inference(light)
    for _ in range(len(light.graph.node) + 1):  # each round folds or shapes a node more
        dims = _all_dims(model)
        progress = fold_constants(model, dims) + _apply_contrib_rules(model, dims)
        if not progress:
            break
        try:
            model = _run_onnx_inference(model)
        except Exception:  # noqa: BLE001 - keep what is known; the layers say what is not
            break
    return model


def _all_dims(model: Any) -> dict[str, Dims | None]:
    g = model.graph
    dims: dict[str, Dims | None] = {}
    for vi in (*g.input, *g.value_info, *g.output):
        dims[vi.name] = tensor_dims(vi)
    for init in g.initializer:
        dims[init.name] = tuple(init.dims)
    return dims


def _elem_types(model: Any) -> dict[str, int]:
    g = model.graph
    types = {vi.name: vi.type.tensor_type.elem_type for vi in (*g.input, *g.value_info,
                                                                 *g.output)}
    types.update({i.name: i.data_type for i in g.initializer})
    return types


# --- constant folding ----------------------------------------------------------------------
def fold_constants(model: Any, dims: dict[str, Dims | None]) -> int:
    """Replace each standard node whose outputs are small constants (``Constant``; ``Shape``
    of a tensor of known shape; shape arithmetic on constants) by initializers, in place.
    Returns how many nodes were folded."""
    from onnx import numpy_helper

    g = model.graph
    opset = next((o.version for o in model.opset_import if o.domain in STANDARD), 1)
    values = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    outputs = {o.name for o in g.output}
    keep, folded, nodes = [], [], 0
    for node in g.node:
        result = None
        if node.domain in STANDARD and not outputs.intersection(node.output):
            try:
                result = _evaluate(node, values, dims, opset)
            except (ValueError, IndexError, TypeError, KeyError, ZeroDivisionError,
                    OverflowError, AttributeError):
                result = None  # not shape arithmetic vtatune can evaluate: leave it
        if result is None or any(np.asarray(r).size > SMALL for r in result):
            keep.append(node)
            continue
        nodes += 1
        for name, value in zip(node.output, result, strict=False):
            value = np.asarray(value)
            values[name] = value
            folded.append(numpy_helper.from_array(value, name))
    if folded:
        del g.node[:]
        g.node.extend(keep)
        g.initializer.extend(folded)
        names = {t.name for t in folded}
        kept = [vi for vi in g.value_info if vi.name not in names]
        del g.value_info[:]
        g.value_info.extend(kept)
    return nodes


def _attrs(node: Any) -> dict[str, Any]:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _evaluate(node: Any, values: dict[str, np.ndarray], dims: dict[str, Dims | None],
              opset: int) -> list[np.ndarray] | None:
    op, attrs = node.op_type, _attrs(node)
    if op == "Constant":
        return [_constant_value(attrs)]
    if op in ("Shape", "Size"):
        shape = _known(dims.get(node.input[0]))
        if shape is None:
            return None
        if op == "Size":
            return [np.array(int(np.prod(shape, dtype=np.int64)), dtype=np.int64)]
        rank = len(shape)
        start, end = attrs.get("start", 0), attrs.get("end", rank)
        return [np.array(shape[slice(start, end)], dtype=np.int64)]
    rule = _EVAL.get(op)
    if rule is None or any(name and name not in values for name in node.input):
        return None
    ins = [values[name] if name else None for name in node.input]
    out = rule(ins, attrs, opset)
    return out if isinstance(out, list) else [out]


def _constant_value(attrs: dict[str, Any]) -> np.ndarray:
    from onnx import numpy_helper

    if "value" in attrs:
        return numpy_helper.to_array(attrs["value"])
    for key, dtype in (("value_int", np.int64), ("value_ints", np.int64),
                       ("value_float", np.float32), ("value_floats", np.float32)):
        if key in attrs:
            return np.array(attrs[key], dtype=dtype)
    raise ValueError("no dense value")  # sparse or string constants are not folded


def _axes(ins: list, attrs: dict[str, Any], opset: int, since: int) -> list[int] | None:
    """An axes argument: an attribute before opset ``since``, an input from it on."""
    if opset < since:
        return list(attrs["axes"]) if "axes" in attrs else None
    return [int(a) for a in ins[1]] if len(ins) > 1 and ins[1] is not None else None


def _unsqueeze(ins: list, attrs: dict[str, Any], opset: int) -> np.ndarray:
    x, axes = ins[0], _axes(ins, attrs, opset, 13)
    rank = x.ndim + len(axes)
    for axis in sorted(a % rank for a in axes):
        x = np.expand_dims(x, axis)
    return x


def _squeeze(ins: list, attrs: dict[str, Any], opset: int) -> np.ndarray:
    x, axes = ins[0], _axes(ins, attrs, opset, 13)
    return np.squeeze(x) if axes is None else np.squeeze(x, tuple(a % x.ndim for a in axes))


def _div(ins: list, attrs: dict[str, Any], opset: int) -> np.ndarray:
    a, b = ins
    if np.issubdtype(a.dtype, np.integer):  # ONNX's integer Div truncates towards zero
        return (np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))).astype(a.dtype)
    return (a / b).astype(a.dtype)


def _slice(ins: list, attrs: dict[str, Any], opset: int) -> np.ndarray:
    x = ins[0]
    if opset < 10:
        starts, ends = attrs["starts"], attrs["ends"]
        axes, steps = attrs.get("axes", range(len(starts))), [1] * len(starts)
    else:
        starts, ends = ins[1], ins[2]
        axes = ins[3] if len(ins) > 3 and ins[3] is not None else range(len(starts))
        steps = ins[4] if len(ins) > 4 and ins[4] is not None else [1] * len(starts)
    index = [slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps, strict=True):
        index[int(a) % x.ndim] = slice(int(s), int(e), int(st))
    return x[tuple(index)]


def _reshape(ins: list, attrs: dict[str, Any], opset: int) -> np.ndarray:
    x, shape = ins[0], [int(d) for d in ins[1]]
    if not attrs.get("allowzero", 0):
        shape = [x.shape[i] if d == 0 else d for i, d in enumerate(shape)]
    return x.reshape(shape)


def _reduce_prod(ins: list, attrs: dict[str, Any], opset: int) -> np.ndarray:
    axes = _axes(ins, attrs, opset, 18)
    keep = bool(attrs.get("keepdims", 1))
    return np.prod(ins[0], axis=None if not axes else tuple(axes), keepdims=keep)


def _cast(ins: list, attrs: dict[str, Any], opset: int) -> np.ndarray:
    from onnx import helper

    return ins[0].astype(helper.tensor_dtype_to_np_dtype(attrs["to"]))


def _constant_of_shape(ins: list, attrs: dict[str, Any], opset: int) -> np.ndarray:
    from onnx import numpy_helper

    value = numpy_helper.to_array(attrs["value"]) if "value" in attrs else \
        np.zeros(1, np.float32)
    shape = [int(d) for d in ins[0]]
    if int(np.prod(shape, dtype=np.int64)) > SMALL:
        raise ValueError("too large to fold")
    return np.full(shape, value.reshape(-1)[0], dtype=value.dtype)


def _same_dtype(fn: Callable[..., np.ndarray]) -> Callable[[list, dict, int], np.ndarray]:
    return lambda ins, attrs, opset: np.asarray(fn(*ins)).astype(ins[0].dtype)


_EVAL: dict[str, Callable[[list, dict[str, Any], int], Any]] = {
    "Identity": lambda ins, attrs, opset: ins[0],
    "Cast": _cast,
    "Gather": lambda ins, attrs, opset: np.take(ins[0], ins[1], axis=attrs.get("axis", 0)),
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Concat": lambda ins, attrs, opset: np.concatenate(ins, axis=attrs["axis"]),
    "Add": _same_dtype(np.add),
    "Sub": _same_dtype(np.subtract),
    "Mul": _same_dtype(np.multiply),
    "Div": _div,
    "Neg": _same_dtype(np.negative),
    "Abs": _same_dtype(np.abs),
    "Floor": _same_dtype(np.floor),
    "Ceil": _same_dtype(np.ceil),
    "Max": lambda ins, attrs, opset: np.maximum.reduce(ins),
    "Min": lambda ins, attrs, opset: np.minimum.reduce(ins),
    "Equal": lambda ins, attrs, opset: np.equal(*ins),
    "Not": lambda ins, attrs, opset: np.logical_not(ins[0]),
    "Where": lambda ins, attrs, opset: np.where(*ins),
    "Range": lambda ins, attrs, opset: np.arange(*ins).astype(ins[0].dtype),
    "Slice": _slice,
    "Reshape": _reshape,
    "Transpose": lambda ins, attrs, opset: np.transpose(ins[0], attrs.get("perm")),
    "Expand": lambda ins, attrs, opset: np.broadcast_to(
        ins[0], np.broadcast_shapes(ins[0].shape, tuple(int(d) for d in ins[1]))).copy(),
    "ReduceProd": _reduce_prod,
    "ConstantOfShape": _constant_of_shape,
}


# --- onnxruntime's quantized contrib operators -----------------------------------------------
def _broadcast(*shapes: tuple[int, ...] | None) -> tuple[int, ...] | None:
    if any(s is None for s in shapes):
        return None
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        return None


def _pool_out(size: int, k: int, s: int, pad: int, ceil: bool) -> int:
    span = size + pad - k
    return (-(-span // s) if ceil else span // s) + 1


def _qlinear_average_pool(x: tuple[int, ...], attrs: dict[str, Any]) -> tuple[int, ...]:
    last = bool(attrs.get("channels_last", 0))
    spatial = x[1:-1] if last else x[2:]
    kernel = attrs["kernel_shape"]
    strides = attrs.get("strides", [1] * len(kernel))
    pads = attrs.get("pads", [0] * 2 * len(kernel))
    auto_pad = attrs.get("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    ceil = bool(attrs.get("ceil_mode", 0))
    out = []
    for i, (n, k, s) in enumerate(zip(spatial, kernel, strides, strict=True)):
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            out.append(-(-n // s))
        elif auto_pad == "VALID":
            out.append(_pool_out(n, k, s, 0, True))
        else:
            out.append(_pool_out(n, k, s, pads[i] + pads[i + len(kernel)], ceil))
    return (x[0], *out, x[-1]) if last else (x[0], x[1], *out)


def contrib_shape(node: Any, dims: dict[str, Dims | None]) -> tuple[int, ...] | None:
    """The output shape of a ``com.microsoft`` quantized operator from its inputs' shapes,
    or None (another operator, or an input of unknown shape)."""
    if node.domain != "com.microsoft":
        return None
    op, attrs = node.op_type, _attrs(node)

    def shape(k: int) -> tuple[int, ...] | None:
        return _known(dims.get(node.input[k])) if len(node.input) > k and node.input[k] \
            else None

    x = shape(0)
    if op in ("QLinearSigmoid", "QLinearLeakyRelu", "QLinearSoftmax"):
        return x
    if op in ("QLinearAdd", "QLinearMul"):
        return _broadcast(x, shape(3))
    if op == "QLinearWhere":
        return _broadcast(x, shape(1), shape(4))
    if op == "QGemm":
        a, b = x, shape(3)
        if a is None or b is None or len(a) != 2 or len(b) != 2:
            return None
        m = a[1] if attrs.get("transA") else a[0]
        n = b[0] if attrs.get("transB") else b[1]
        return (m, n)
    if op == "QLinearGlobalAveragePool" and x is not None:
        if attrs.get("channels_last"):
            return (x[0], *[1] * (len(x) - 2), x[-1])
        return (x[0], x[1], *[1] * (len(x) - 2))
    if op == "QLinearAveragePool" and x is not None:
        return _qlinear_average_pool(x, attrs)
    if op == "QLinearConcat":  # inputs: y_scale, y_zero_point, then (x, scale, zero point)s
        parts = [shape(k) for k in range(2, len(node.input), 3)]
        if not parts or any(p is None for p in parts):
            return None
        axis = attrs["axis"] % len(parts[0])
        total = sum(p[axis] for p in parts)
        return (*parts[0][:axis], total, *parts[0][axis + 1:])
    return None


def _contrib_elem_type(node: Any, types: dict[str, int]) -> int:
    from onnx import TensorProto

    if node.op_type == "QGemm":  # int8 when it has an output zero point, else float
        return types.get(node.input[8], 0) if len(node.input) > 8 and node.input[8] \
            else TensorProto.FLOAT
    x = node.input[2] if node.op_type == "QLinearConcat" else node.input[0]
    return types.get(x, 0)


def _apply_contrib_rules(model: Any, dims: dict[str, Dims | None]) -> int:
    """Give each contrib operator whose output shape is unknown the shape
    :func:`contrib_shape` computes, in place; returns how many it gave."""
    from onnx import helper

    g = model.graph
    given = {}
    types = None
    for node in g.node:
        if node.domain != "com.microsoft" or not node.output or \
                _known(dims.get(node.output[0])) is not None:
            continue
        shape = contrib_shape(node, dims)
        if shape is None:
            continue
        types = _elem_types(model) if types is None else types
        elem_type = _contrib_elem_type(node, types)
        given[node.output[0]] = helper.make_tensor_value_info(node.output[0], elem_type,
                                                              list(shape))
        dims[node.output[0]], types[node.output[0]] = shape, elem_type
    if given:
        kept = [vi for vi in g.value_info if vi.name not in given]
        del g.value_info[:]
        g.value_info.extend([*kept, *given.values()])
    return len(given)
