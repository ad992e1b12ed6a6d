"""Partitioning a Relax module for VTA: the QDQ layers VTA runs grouped into external
functions, one per maximal region of consecutive offloaded layers.

The passes, in order:

1. :func:`duplicate_shared_dequantize` (ours): ONNX QDQ shares one ``DequantizeLinear``
   between the consumers of a tensor (a conv and the residual add after it); a shared
   float intermediate would become an extra float output of the offloaded function, so
   each consumer gets its own ``dequantize``.
2. ``FuseOpsByPattern(vta patterns, bind_constants=True, annotate_codegen=False)``: each
   accepted match becomes a composite function, its weights, biases and scales bound inside
   it (the code generator packs them once).
3. ``MergeCompositeFunctions``: consecutive composites become one function with
   ``Codegen="vta"``, so activations stay on VTA between them.
4. Each external function gets a short ``global_symbol`` (the merged name lists every op in
   it), unique across processes (a bundle's symbols are registered again where it is
   loaded), the symbol its offloaded call is found by.

Never fold constants before this: ``FoldConstant`` turns ``dequantize(int8 W)`` into a float
weight, and no conv matches any more.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from simulator.hardware import HardwareConfig
from vtatune.deploy._patterns import PREFIX, Partitioning, partitioning, register
from vtatune.deploy._tvm import tvm
from vtatune.deploy.runtime._tvm import ffi

#: Each partitioned module's count of its regions in this process, by the module's digest.
_SYMBOLS: dict[str, Iterator[int]] = {}


def duplicate_shared_dequantize(mod: Any) -> Any:
    """``mod`` with a private ``dequantize`` for every consumer of one."""
    t = tvm()
    from tvm import relax

    @relax.expr_functor.mutator
    class _Duplicate(relax.PyExprMutator):
        def visit_call_(self, call: Any) -> Any:
            call = super().visit_call_(call)
            if isinstance(call.op, t.ir.Op) and call.op.name == "relax.dequantize":
                return call
            args, changed = [], False
            for arg in call.args:
                bound = self.lookup_binding(arg) if isinstance(arg, relax.Var) else None
                if isinstance(bound, relax.Call) and isinstance(bound.op, t.ir.Op) \
                        and bound.op.name == "relax.dequantize":
                    arg = self.builder_.emit(relax.Call(bound.op, bound.args, bound.attrs))
                    changed = True
                args.append(arg)
            if not changed:
                return call
            return relax.Call(call.op, args, call.attrs, call.ty_args)

    out = t.IRModule(dict(mod.functions), attrs=mod.attrs)
    for gv, func in mod.functions.items():
        if isinstance(func, relax.Function):
            out[gv] = _Duplicate().visit_expr(func)
    return relax.transform.DeadCodeElimination()(out)


def partition(mod: Any, hw: HardwareConfig) -> tuple[Any, Partitioning]:
    """``mod`` partitioned for VTA on ``hw`` (the passes above), and the check functions'
    record of what they refused and why."""
    tvm()
    from tvm import relax

    patterns = register()
    with partitioning(hw) as state:
        mod = duplicate_shared_dequantize(mod)
        mod = relax.transform.FuseOpsByPattern(patterns, bind_constants=True,
                                               annotate_codegen=False)(mod)
        mod = relax.transform.MergeCompositeFunctions()(mod)
    # Each region's symbol names the module partitioned (its structural hash, constants
    # included) and counts its regions: the same model built in any fresh process has the
    # same symbols, so its CPU part (which calls them by name) is the same library, which
    # the cache of CPU builds keeps (``_cpu_build``); another model's symbols differ, so
    # bundles of different models load into one process side by side (TVM's registry is
    # global), and a model built again in one process counts on
    digest = f"{ffi().structural_hash(mod):016x}"[:12]
    count = _SYMBOLS.setdefault(digest, itertools.count(1))
    for gv in _in_call_order(mod):
        mod[gv] = mod[gv].with_attr("global_symbol", f"vtatune_vta_{digest}_{next(count)}")
    return mod, state


def _in_call_order(mod: Any) -> list[Any]:
    """The functions the partitioning made for VTA, in the order ``main`` calls them first
    (a process-independent order, as the functions' map's is not)."""
    relax = tvm().relax
    offloaded = {gv for gv, func in mod.functions.items()
                 if isinstance(func, relax.Function) and func.attrs is not None
                 and func.attrs.get("Codegen") == PREFIX}
    order: list[Any] = []
    for block in mod["main"].body.blocks:
        for binding in block.bindings:
            value = binding.value
            if isinstance(value, relax.Call) and value.op in offloaded \
                    and value.op not in order:
                order.append(value.op)
    return order + sorted(offloaded - set(order), key=lambda gv: gv.name_hint)


def external_functions(mod: Any) -> list[tuple[str, Any]]:
    """``(global_symbol, function)`` of every VTA function of a partitioned module."""
    tvm()
    from tvm import relax

    return [(str(f.attrs["global_symbol"]), f) for _, f in mod.functions.items()
            if isinstance(f, relax.Function) and f.attrs is not None
            and f.attrs.get("Codegen") == PREFIX]
