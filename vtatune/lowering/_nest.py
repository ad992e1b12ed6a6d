"""The loops inside a load step (the micro-op kernels' nest) and the kernels' rules: which
loops fold into a GEMM instruction, the uop count, loop extents and the dst-distinct rule
(see :mod:`._rules`, which applies them)."""
from __future__ import annotations

from typing import Any

from vtatune.errors import IllegalSchedule
from vtatune.lowering._context import Context, tile_pack
from vtatune.lowering._layouts import acc_coefficients

Axes = tuple[tuple[str, int, tuple[int, int, int]], ...]


_RESET_AXES = frozenset(("co", "h", "w", "co%k"))  # the reset kernel's axes (with a dst stride)


def kernel_rules(what: str, axes: Axes, folds: int, ctx: Context) -> int:
    """uop capacity, loop extents and dst-distinct of a kernel over ``axes`` (the ``folds``
    outermost fold into the instruction, the rest unroll); returns the uop count."""
    unrolled = axes[folds:]
    nuops = 1
    for _, e, _ in unrolled:
        nuops *= e
    if nuops > ctx.uop_depth:
        raise IllegalSchedule(
            "uop_capacity",
            f"{what} micro-op kernel has {nuops} uops, the uop buffer holds {ctx.uop_depth}",
        )
    for _, e, _ in axes[:folds]:
        if e > ctx.loop_limit:
            raise IllegalSchedule("loop_extent", f"{what} loop extent {e} exceeds "
                                                 f"the {ctx.loop_limit} an instruction encodes")
    clash = 0
    if unrolled:
        if unrolled[-1][2][0] == 0:
            clash = 1  # innermost unrolled axis has no dst stride: uops #0, #1
        elif len(unrolled) > 1 and unrolled[-1][1] == 2 and unrolled[-2][2][0] == 0:
            clash = 2  # uops #0, #2 differ only in a dst-free axis
    if clash:
        raise IllegalSchedule(
            "dst_dependency",
            f"{what} micro-ops #0 and #{clash} both write ACC[0] within two micro-ops (the GEMM "
            "pipeline has no forwarding; TVM rejects it: 'seq_[i].dst_idx != dst_index')",
        )
    return nuops


#: TVM's conv2d_transpose_packed inner loop nest: rows split by 4, columns by 2, and the
#: inner parts and the kernel window unrolled (``s[conv].unroll``): (axis, split factor of
#: the tile, part) from outer to inner; ``outer``/``inner`` parts of split axes.
_TVM_TRANSPOSE_NEST = (("ci", 1, "all"), ("w", 2, "outer"), ("co", 1, "all"),
                       ("h", 4, "outer"), ("w", 2, "inner"), ("kw", 1, "all"),
                       ("kh", 1, "all"), ("h", 4, "inner"))


_UNROLLED = frozenset({("w", "inner"), ("kw", "all"), ("kh", "all"), ("h", "inner")})


def inner_nest(ctx: Context, sch: Any) -> list[tuple[str, int, tuple[int, int, int], bool]]:
    """The loops inside a load step, outer to inner: (axis, extent, (dst, src, wgt)
    coefficients, whether TVM's FoldUopLoop may fold it). vtatune's schedules (and
    AutoTVM's conv2d/group_conv2d/dense points) follow ``gemm_order``; AutoTVM's
    conv2d_transpose points follow that template's own nest."""
    tile_h, tile_w, tile_ci, tile_co = sch.tile_h, sch.tile_w, sch.tile_ci, sch.tile_co
    k, s = ctx.k, ctx.s
    ipk, pack = tile_pack(ctx, tile_ci, tile_co)
    eh, ew = (tile_h - 1) * s + k, (tile_w - 1) * s + k
    kk = k * k
    acc = {a: c for a, _, c in acc_coefficients(pack, tile_co, tile_h, tile_w)}
    # the INP tile is (ci // ipk, y, x, ci % ipk) (input_pack; ipk = 1: (ci, y, x))
    coeffs = {
        "ci": (tile_ci // ipk, (0, eh * ew * ipk, ipk * kk)),
        "co": (tile_co // pack, (acc["co"], 0, pack * tile_ci * kk)),
        "h": (tile_h, (acc["h"], s * ew * ipk, 0)),
        "w": (tile_w, (acc["w"], s * ipk, 0)),
        "kh": (k, (0, ew * ipk, k)),
        "kw": (k, (0, ipk, 1)),
        "co%k": (pack, (1, 0, tile_ci * kk)),
        "ci%k": (ipk, (0, 1, kk)),
    }

    def axes(name: str) -> tuple[str, ...]:
        # a channel loop over an interleaved tile is two: c // k, c % k
        if name == "co" and pack > 1:
            return ("co", "co%k")
        if name == "ci" and ipk > 1:
            return ("ci", "ci%k")
        return (name,)

    if not (sch.tvm_strict and ctx.transpose):
        return [(a, *coeffs[a], True) for name in sch.gemm_order.split(",")
                for a in axes(name)]
    nest = []
    for axis, factor, part in ((a, f, p) for name, f, p in _TVM_TRANSPOSE_NEST
                               for a in axes(name)):
        extent, coef = coeffs[axis]
        if factor > 1:
            inner = factor if extent > factor else extent  # a tile within one split
            if part == "outer":
                extent, coef = extent // inner, tuple(inner * c for c in coef)
            else:
                extent = inner
        nest.append((axis, extent, coef, (axis, part) not in _UNROLLED))
    return nest


def folds(nest) -> int:
    """How many loops fold into the instruction: TVM's FoldUopLoop folds the outermost
    loop, then the next, and stops at the first it cannot fold (an unrolled axis, or an
    index that is not linear in the loop variable)."""
    folds = 0
    for a in nest[:2]:
        if not a[3]:
            break
        folds += 1
    return folds
