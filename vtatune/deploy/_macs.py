"""A model's multiply-accumulates, counted from the shapes TVM's import gives every tensor
(the model's input shape fixed, every shape the frontend computes static): each
``nn.conv2d``, ``nn.conv2d_transpose`` and ``matmul`` call of a Relax function, float or
quantized, offloaded or not. ONNX shape inference alone leaves tensors after a
``Reshape`` of computed shape unknown (a transformer's attention), and a count from it
misses their MatMuls; the shapes TVM builds with do not.

Per output element, a conv's ``I/g x KH x KW`` and a matmul's inner dimension; per input
element, a transposed conv's ``O/g x KH x KW`` (how ``network`` counts a layer,
:attr:`vtatune.networks.Layer.macs`).
"""

from __future__ import annotations

import math
from typing import Any

from vtatune.deploy._dynamic import to_accumulators
from vtatune.deploy._import import import_model
from vtatune.deploy._model import load_model
from vtatune.deploy._qoperator import to_qdq
from vtatune.deploy._tvm import tvm

__all__ = ["MAC_CALLS", "call_macs", "float_macs", "float_operands", "model_macs",
           "module_macs"]

#: The Relax ops that multiply, by name (without ``relax.``).
MAC_CALLS = ("nn.conv2d", "nn.conv2d_transpose", "matmul")


def _static(expr: Any) -> tuple[int, ...] | None:
    shape = getattr(getattr(expr, "ty", None), "shape", None)
    try:
        return tuple(int(s) for s in shape)
    except (TypeError, ValueError):  # no shape, or a symbolic one
        return None


def call_macs(call: Any, out: Any = None) -> int | None:
    """The multiply-accumulates of one Relax call of :data:`MAC_CALLS` (``out``: the var it
    is bound to, for its output shape); None when a shape is not static, 0 for another op."""
    t = tvm()
    if not isinstance(call, t.relax.Call) or not isinstance(call.op, t.ir.Op):
        return 0
    name = call.op.name.removeprefix("relax.")
    if name not in MAC_CALLS:
        return 0
    a, b = (_static(x) for x in call.args[:2])
    result = _static(out if out is not None else call)
    if a is None or b is None or result is None:
        return None
    if name == "nn.conv2d":
        return math.prod(result) * math.prod(b[1:])
    if name == "nn.conv2d_transpose":
        return math.prod(a) * math.prod(b[1:])
    return math.prod(result) * a[-1] if a else 0


#: The ops through which an operand still is the tensor it reshapes or transposes (a Gemm's
#: weight through ``permute_dims``, attention's heads split by ``reshape``).
_VIEWS = ("relax.permute_dims", "relax.reshape")


def float_operands(call: Any, values: dict[Any, Any]) -> tuple[bool, ...]:
    """Per operand of a conv or matmul ``call`` (its first two): whether it is a float
    tensor, not an 8-bit one dequantized (through :data:`_VIEWS`); ``values``: what each
    variable of the function is bound to."""
    t = tvm()

    def source(expr: Any) -> Any:
        expr = values.get(expr, expr)
        while isinstance(expr, t.relax.Call) and isinstance(expr.op, t.ir.Op) and \
                expr.op.name in _VIEWS:
            expr = values.get(expr.args[0], expr.args[0])
        return expr

    return tuple(not (isinstance(x, t.relax.Call) and isinstance(x.op, t.ir.Op)
                      and x.op.name == "relax.dequantize")
                 for x in map(source, call.args[:2]))


def float_macs(mod: Any) -> int:
    """The multiply-accumulates of the :data:`MAC_CALLS` calls of ``mod``'s ``main`` (an
    imported quantized model) that the model computes in float: an operand not an 8-bit
    tensor dequantized (:func:`float_operands`; the activation x activation MatMuls that
    ``quantize_dynamic`` leaves, say); 0 in a model with no quantized layer at all."""
    t = tvm()
    func = mod["main"]
    values = {b.var: b.value for block in func.body.blocks for b in block.bindings}
    total, quantized = 0, False
    for expr, var in ((b.value, b.var) for block in func.body.blocks for b in block.bindings):
        macs = call_macs(expr, var)
        if not macs or not isinstance(expr.op, t.ir.Op):
            continue
        if any(float_operands(expr, values)):
            total += macs
        else:
            quantized = True
    return total if quantized else 0


def module_macs(mod: Any) -> int:
    """The multiply-accumulates of every :data:`MAC_CALLS` call in ``mod``'s Relax
    functions (an imported model: its ``main``); a call of no static shape counts 0."""
    t = tvm()
    total = 0
    for _, func in mod.functions.items():
        if not isinstance(func, t.relax.Function):
            continue
        for block in func.body.blocks:
            for b in block.bindings:
                total += call_macs(b.value, b.var) or 0
    return total


def model_macs(model: Any) -> int:
    """The multiply-accumulates of ``model`` (an ONNX path or ModelProto), counted over its
    Conv, ConvTranspose, Gemm and MatMul nodes with the shapes TVM's import gives them
    (:func:`module_macs`; a symbolic input dimension read as 1, as deploy reads it)."""
    proto, _ = load_model(model)
    return module_macs(import_model(to_accumulators(to_qdq(proto))).module)
