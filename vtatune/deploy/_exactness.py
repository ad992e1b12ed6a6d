"""How exactly deploy requantizes when the user does not say (``exact=None``): a model that
normalizes rounds exactly where VTA can in its one pass.

One pass per layer rounds within one step of the exact result (``_fixed_point``: about 7 %
of the elements one step off). A CNN's output stays within 1-2 steps of TVM's and
onnxruntime's; a model that normalizes does not: LayerNorm divides by a standard deviation
computed from all the elements, softmax exponentiates, and each step one layer is off moves
many outputs of the next (measured: transformers 3-14 steps from onnxruntime where TVM's CPU
build is 0-9; ``scripts/bench_formats.py``). Such a model gets VTA's exact fixed point
(``_exact_fixed_point``: bit for bit, still one pass, more ALU instructions), each layer
without one (per-channel multipliers) rounding within a step as before.
"""

from __future__ import annotations

from typing import Any

from vtatune.deploy.runtime._requantize import IN_PASS

#: ONNX operators that normalize over many elements (the standard domain's and
#: onnxruntime's contrib fusions).
NORMALIZING = frozenset({
    "LayerNormalization", "SimplifiedLayerNormalization", "SkipLayerNormalization",
    "SkipSimplifiedLayerNormalization", "RMSNormalization", "GroupNormalization",
    "InstanceNormalization", "MeanVarianceNormalization", "LpNormalization", "Softmax",
    "LogSoftmax",
})


def normalizing_ops(proto: Any) -> tuple[str, ...]:
    """The operators of ``proto``'s graph that normalize, sorted: :data:`NORMALIZING`'s, and
    a normalization written out (``ReduceMean`` with ``Sqrt``: T5's RMSNorm, LayerNorm as
    older exporters write it)."""
    ops = {n.op_type for n in proto.graph.node}
    found = ops & NORMALIZING
    if {"ReduceMean", "Sqrt"} <= ops:
        found.add("ReduceMean/Sqrt")
    return tuple(sorted(found))


def resolve_exact(exact: bool | str | None, proto: Any) -> bool | str:
    """``exact`` as given, or when None :data:`IN_PASS` for a model that normalizes
    (:func:`normalizing_ops`) and False for any other."""
    if exact is not None:
        return exact
    return IN_PASS if normalizing_ops(proto) else False
