"""VTA's pattern table for Relax BYOC, registered as TVM's contrib backends register theirs
(``tvm.relax.backend.pattern_registry.register_patterns``, names ``vta.*``).

Each pattern matches the integer core of a QDQ layer as ``tvm.relax.frontend.onnx`` imports
it, from the int8 inputs to the int8 output:

- ``vta.qconv2d[_bias][_relu]``, ``vta.qconv2d_transpose[...]``, ``vta.qdense[...]``:
  ``quantize([relu]([add](op(dequantize(x), dequantize(W)), [reshape](dequantize(B)))))``
  (``B`` quantized, or a float32 constant the quantizer left in float) with ``op``
  conv2d (groups included), conv2d_transpose or matmul (a Gemm's weight
  through ``permute_dims``): int8 operands, int32 accumulation, the bias add, ReLU, and the
  requantization (right shift, clip, cast) VTA's epilogue fuses;
- ``vta.qadd[_relu]``: ``quantize([relu](add(dequantize(a), dequantize(b))))``, a residual
  add (an ALU-only kernel);
- ``vta.qrelu``: ``quantize(relu(dequantize(x)))``, the ReLU symmetric quantization keeps
  as a layer of its own, fused into the layer before it;
- ``vta.qbatch_matmul``: ``quantize(matmul(dequantize(x), dequantize(w)))`` of two int8
  activations [..., M, K] x [..., K, N] (attention's Q.K^T and P.V): one GEMM per leading
  index, ``w`` packed as its weight at run time;
- ``vta.qconv2d_acc``, ``vta.qdense_acc``: ``op(dequantize(x, 1), dequantize(W, 1))``, no
  quantize after it: the integer GEMM of a dynamically quantized model (``_dynamic``), its
  int32 accumulators handed to the CPU as float32 (lowest priority; unit scales only).

Later entries have higher priority (the registry's rule), so the longest pattern wins.

Each pattern's check function reads the match (``_match.spec_of``) and accepts it only when
VTA runs the layer on the deploy's hardware (``_match.refusal``: ``network``'s placement,
quantization VTA can compute, a schedule that fits); a ReLU only when it fuses into an
offloaded producer that nothing else reads; no match whose intermediate value is used
outside it. Each refusal is recorded with its reason in the active :class:`Partitioning`
(a check function can only answer yes or no). Used outside :func:`partitioning`, the
checks decide for the default hardware (pynq) and record nothing.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from simulator.hardware import DEFAULT, HardwareConfig
from vtatune.deploy._match import (
    ANCHORS,
    LayerSpec,
    Unsupported,
    refusal,
    spec_of,
)
from vtatune.deploy._tvm import tvm

#: The prefix of every pattern name (and the ``Codegen`` attribute TVM derives from it).
PREFIX = "vta"


@dataclass(frozen=True, eq=False)
class Refusal:
    """A match VTA does not take: the layer's kind, what it is, why, and the Relax call at its
    core (to name the CPU op it leaves)."""

    kind: str
    what: str
    reason: str
    expr: Any = field(repr=False, default=None)
    var: str = ""  # the name of the variable the core call is bound to


@dataclass
class Partitioning:
    """What the check functions decide for: the hardware, and the refusals they record."""

    hw: HardwareConfig
    refusals: list[Refusal] = field(default_factory=list)

    def reason_for(self, expr: Any, var: str = "") -> str | None:
        """Why the match around ``expr`` (a Relax call bound to ``var``) was refused, if
        one was (the first refusal: the longest pattern's)."""
        for r in self.refusals:
            if r.expr is not None and r.expr.same_as(expr):
                return r.reason
        for r in self.refusals:
            if var and r.var == var:
                return r.reason
        return None


_ACTIVE: contextvars.ContextVar[Partitioning | None] = contextvars.ContextVar(
    "vtatune_partitioning", default=None)


@contextmanager
def partitioning(hw: HardwareConfig) -> Iterator[Partitioning]:
    """The check functions decide for ``hw`` and record their refusals here meanwhile."""
    state = Partitioning(hw)
    token = _ACTIVE.set(state)
    try:
        yield state
    finally:
        _ACTIVE.reset(token)


# --- the patterns -----------------------------------------------------------------------------
def _dequantize(x: Any, prefix: str, ann: dict[str, Any]) -> Any:
    from tvm.relax.dpl import is_const, is_op

    scale, zp = is_const(), is_const()
    ann[f"{prefix}_q"], ann[f"{prefix}_scale"], ann[f"{prefix}_zp"] = x, scale, zp
    return is_op("relax.dequantize")(x, scale, zp)


def _quantize(x: Any, ann: dict[str, Any]) -> Any:
    from tvm.relax.dpl import is_const, is_op

    scale, zp = is_const(), is_const()
    ann["out_scale"], ann["out_zp"] = scale, zp
    ann["root"] = is_op("relax.quantize")(x, scale, zp)
    return ann["root"]


def _relu(x: Any, ann: dict[str, Any]) -> Any:
    from tvm.relax.dpl import is_op

    ann["relu"] = is_op("relax.nn.relu")(x)
    return ann["relu"]


def _float_bias(ann: dict[str, Any]) -> Any:
    from tvm.relax.dpl import is_const

    ann["b_f"] = is_const()
    return ann["b_f"]


def _core(op: str, ann: dict[str, Any]) -> Any:
    """``op(dq(x), dq(W))``, a matmul's weight transposed or not: the layer's operator on
    its dequantized operands (``ann["core"]``)."""
    from tvm.relax.dpl import is_const, is_op, wildcard

    x = _dequantize(wildcard(), "x", ann)
    w = _dequantize(is_const(), "w", ann)
    if op == "relax.matmul":
        ann["w_perm"] = is_op("relax.permute_dims")(w)
        w = w | ann["w_perm"]
    ann["core"] = is_op(op)(x, w)
    return ann["core"]


def anchor_pattern(op: str, bias: bool, relu: bool) -> tuple[Any, dict[str, Any]]:
    """``quantize([relu]([add](op(dq(x), dq(W)), [reshape](dq(B)))))`` and its annotations."""
    from tvm.relax.dpl import is_const, is_op, wildcard

    ann: dict[str, Any] = {}
    core = _core(op, ann)
    if bias:
        # quantized (int32 at the accumulator's scale, or at another layer's when shared),
        # or left in float32 (a bias reached through an Identity: quantize_static skips it)
        b = _dequantize(is_const(), "b", ann) | _float_bias(ann)
        core = is_op("relax.add")(core, is_op("relax.reshape")(b, wildcard()) | b)
    if relu:
        core = _relu(core, ann)
    return _quantize(core, ann), ann


def accumulator_pattern(op: str) -> tuple[Any, dict[str, Any]]:
    """``op(dq(x), dq(W))`` with no quantize after it: a layer whose output is its
    accumulators (a dynamically quantized model's integer GEMM as ``_dynamic`` writes
    it: unit scales)."""
    ann: dict[str, Any] = {}
    ann["root"] = _core(op, ann)
    return ann["root"], ann


def add_pattern(relu: bool) -> tuple[Any, dict[str, Any]]:
    """``quantize([relu](add(dq(a), dq(r))))``."""
    from tvm.relax.dpl import is_op, wildcard

    ann: dict[str, Any] = {}
    core = ann["core"] = is_op("relax.add")(_dequantize(wildcard(), "a", ann),
                                            _dequantize(wildcard(), "r", ann))
    return _quantize(_relu(core, ann) if relu else core, ann), ann


def relu_pattern() -> tuple[Any, dict[str, Any]]:
    """``quantize(relu(dq(x)))``."""
    from tvm.relax.dpl import wildcard

    ann: dict[str, Any] = {}
    return _quantize(_relu(_dequantize(wildcard(), "x", ann), ann), ann), ann


def batch_matmul_pattern() -> tuple[Any, dict[str, Any]]:
    """``quantize(matmul(dq(x), dq(w)))`` of two activations: attention's Q.K^T and P.V (a
    constant ``w`` is a dense layer's weight: the dense patterns, of higher priority, take
    it, and ``spec_of`` refuses it here)."""
    from tvm.relax.dpl import is_op, wildcard

    ann: dict[str, Any] = {}
    core = ann["core"] = is_op("relax.matmul")(_dequantize(wildcard(), "x", ann),
                                               _dequantize(wildcard(), "w", ann))
    return _quantize(core, ann), ann


def pattern_entries() -> list[tuple[str, Any, dict[str, Any], str]]:
    """``(name, pattern, annotations, kind)`` of every pattern, lowest priority first."""
    entries = [(f"{PREFIX}.q{kind}_acc", *accumulator_pattern(op), kind)
               for op, kind in ANCHORS.items() if kind != "conv2d_transpose"]
    entries += [(f"{PREFIX}.qrelu", *relu_pattern(), "relu"),
               (f"{PREFIX}.qbatch_matmul", *batch_matmul_pattern(), "batch_matmul")]
    for relu in (False, True):
        entries.append((f"{PREFIX}.qadd" + "_relu" * relu, *add_pattern(relu), "add"))
    for op, kind in ANCHORS.items():
        for bias in (False, True):
            for relu in (False, True):
                name = f"{PREFIX}.q{kind}" + "_bias" * bias + "_relu" * relu
                entries.append((name, *anchor_pattern(op, bias, relu), kind))
    return entries


_REGISTERED: list[tuple[str, Any, dict[str, Any], str]] = []


def register() -> list[Any]:
    """Register the table with TVM's pattern registry (once per process); the patterns,
    highest priority first (what ``FuseOpsByPattern`` takes)."""
    tvm()  # the supported release, or a DeployError saying how to install it
    from tvm.relax.backend.pattern_registry import get_patterns_with_prefix, register_patterns

    if not _REGISTERED:
        entries = pattern_entries()
        register_patterns([(name, pat, ann, _check(name, kind))
                           for name, pat, ann, kind in entries])
        _REGISTERED[:] = entries[::-1]
    return list(get_patterns_with_prefix(f"{PREFIX}."))


def kind_of(name: str) -> str:
    """The layer kind of a pattern name (``vta.qconv2d_bias_relu`` -> ``conv2d``)."""
    for entry_name, _, _, kind in _REGISTERED:
        if entry_name == name:
            return kind
    raise KeyError(name)


def annotations(name: str, expr: Any, var2val: dict[Any, Any]) -> dict[str, Any] | None:
    """The annotated expressions of pattern ``name`` matched at ``expr``, or None."""
    for entry_name, pat, ann, _ in _REGISTERED:
        if entry_name == name:
            found = pat.extract_matched_expr(expr, var2val)
            if found is None:
                return None
            return {k: found[p] for k, p in ann.items() if p in found}
    raise KeyError(name)


# --- the check functions ----------------------------------------------------------------------
def _check(name: str, kind: str) -> Callable[[Any], bool]:
    def check(ctx: Any) -> bool:
        state = _ACTIVE.get()
        hw = state.hw if state is not None else DEFAULT
        ann = dict(ctx.annotated_expr)
        if name.endswith("_acc") and not _unit_scales(ann):
            return False  # a float layer of a QDQ model: as before, no pattern of ours
        var2val = {v: e for e, v in ctx.value_to_bound_var.items()}
        spec: LayerSpec | None = None
        try:
            spec = spec_of(kind, ann)
            reason = refusal(spec, hw)
            if reason is None and kind == "relu":
                reason = _relu_refusal(spec, ann, ctx, var2val, hw)
        except Unsupported as exc:
            reason = str(exc)
        except Exception as exc:  # noqa: BLE001  (a form the reader does not know: the CPU runs it)
            text = str(exc).strip().splitlines()
            reason = (f"not read as a VTA layer ({type(exc).__name__}"
                      + (f": {text[0]}" if text else "") + ")")
        if reason is None:
            reason = _leak(ctx)
        if reason is None:
            return True
        if state is not None:
            what = spec.describe() if spec is not None and kind != "relu" else kind
            core = ann.get("core", ann.get("relu"))
            var = ctx.value_to_bound_var.get(core) if core is not None else None
            state.refusals.append(Refusal(kind, what, reason, core,
                                          var.name if var is not None else ""))
        return False

    return check


def _unit_scales(ann: dict[str, Any]) -> bool:
    """Whether an accumulator match dequantizes both operands at scale 1 (what
    ``_dynamic`` writes; a QDQ model's unquantized layer has its real scales)."""
    try:
        return all(float(ann[k].value.numpy().reshape(-1)[0]) == 1.0 and
                   ann[k].value.numpy().size == 1 for k in ("x_scale", "w_scale"))
    except (AttributeError, KeyError):
        return False


def _relu_refusal(spec: LayerSpec, ann: dict[str, Any], ctx: Any, var2val: dict[Any, Any],
                  hw: HardwareConfig) -> str | None:
    """A ReLU runs on VTA only fused into the layer before it: an offloaded conv, dense or
    add at the same quantization whose output nothing else reads."""
    if spec.x != spec.out:
        return (f"a ReLU that requantizes ({spec.x.describe()} -> {spec.out.describe()}): VTA "
                "fuses a ReLU into the layer before it")
    producer = ann["x_q"]
    bound = ctx.value_to_bound_var.get(producer)
    users = ctx.var_usages.get(bound, []) if bound is not None else []
    if bound is None or len(users) != 1:
        return "a ReLU whose input is read elsewhere too: VTA fuses a ReLU into the layer before it"
    if _is_composite_call(producer):
        return None  # a higher-priority pattern took the producer: its check accepted it
    for entry_name, _, _, kind in _REGISTERED:
        if kind == "relu":
            continue
        found = annotations(entry_name, producer, var2val)
        if found is None:
            continue
        try:
            before = spec_of(kind, found)
        except Unsupported:
            continue
        if before.out == spec.x and refusal(before, hw) is None:
            return None
    return ("a ReLU after a layer VTA does not run: VTA fuses a ReLU into the layer before it "
            "(the CPU runs both)")


def _leak(ctx: Any) -> str | None:
    """A match whose intermediate value is also read outside it cannot be offloaded whole."""
    matched = set(ctx.matched_bindings.keys())
    root = ctx.value_to_bound_var.get(ctx.matched_expr)
    for var in matched:
        if root is not None and var.same_as(root):
            continue
        for user in ctx.var_usages.get(var, []):
            if user not in matched:
                return f"its intermediate value {var.name} is read outside the layer"
    return None


def _is_composite_call(expr: Any) -> bool:
    """Whether ``expr`` calls a function FuseOpsByPattern already made of a ``vta.*`` match
    (the matcher sees the call, not the function, so any function call: only our patterns
    make them while partitioning)."""
    tvm()
    from tvm import relax

    return isinstance(expr, relax.Call) and isinstance(expr.op, relax.GlobalVar | relax.Var)
