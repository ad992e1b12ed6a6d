"""The default schedule's candidates: simple, reasonable tile shapes derived from the
workload, the buffers and the layout rules, judged by the legality rules alone (no
template). :func:`search_spaces.default_schedule` takes the first legal one and falls back
to the template's legal configs only when none is."""

from __future__ import annotations

from collections.abc import Iterator

from simulator.hardware import HardwareConfig
from vtatune.errors import IllegalSchedule
from vtatune.lowering import Context, check, context, rules
from vtatune.schedule import AUTOTVM_GEMM_ORDER, Schedule
from vtatune.workloads import AddWorkload, Workload

#: Most output-channel blocks a default tile takes (when the layout allows fewer).
_MAX_TILE_CO = 8

#: Most batch blocks (rows) a default GEMM tile takes. Each row of a tile is one input
#: LOAD and one reset and one GEMM instruction, so rows per tile amortise only the tile's
#: own instructions (its epilogue, stores, weight loads, synchronisation): past ~16 rows the
#: gain is below 1% on issue 38's shapes (128-3136 rows) and each further row costs
#: micro-op kernels (``scripts/bench_dense.py``).
_MAX_TILE_B = 16

#: The second pass's inner order: the axes with no ACC stride (ci, kh, kw) outermost, so
#: they fold into the GEMM instruction's loops and the unrolled micro-ops step through
#: (co, h, w), each writing another ACC row: the order that can never trip the
#: dst-distinct rule (rule ``dst_dependency``) when the AutoTVM order does.
_DST_INNERMOST = "ci,kh,kw,co,h,w"

#: A GEMM's default inner order with its rows as pixels: the rows and the input channels
#: fold into the GEMM instruction's loops, the output channels unroll (distinct ACC rows).
_ROWS_FOLDED = "h,ci,co,w,kh,kw"


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def default_candidates(ctx: Context) -> Iterator[Schedule]:
    """The default schedule's candidates on ``ctx``, best first. Deterministic: a GEMM's
    :func:`gemm_candidates`, then (every workload's) :func:`stock_candidates`."""
    if ctx.dense:
        yield from gemm_candidates(ctx)
    yield from stock_candidates(ctx)


def stock_candidates(ctx: Context) -> Iterator[Schedule]:
    """The stock default's candidates (every workload's until issue 38; the RTL reference
    runs named ``default`` ran them, the GEMM ones included), best first.

    The layout rules fix two knobs: a load step takes whole input elements of the DRAM
    layout, ``tile_ci`` = BLOCK_OUT / BLOCK_IN blocks when BLOCK_OUT > BLOCK_IN, else one
    block (rule ``load_layout``); an output tile holds whole BLOCK_IN blocks, ``tile_co`` a
    multiple of BLOCK_IN / BLOCK_OUT (rule ``store_layout``). First pass (the stock
    default, unchanged where it was legal): full-width rows, as many output-channel blocks
    (up to 8, or the fewest the layout allows) and rows as fit, two threads on the output
    channels when possible, AutoTVM's inner order. Second pass, for small buffers: also
    narrower rows, and the inner order that keeps consecutive micro-ops on distinct ACC
    rows."""
    tile_ci = ctx.in_pack if ctx.cib % ctx.in_pack == 0 else 1
    whole = [d for d in _divisors(ctx.cob) if d % ctx.out_pack == 0]
    tile_cos = sorted((d for d in whole if d <= max(_MAX_TILE_CO, ctx.out_pack)), reverse=True)
    tile_hs = sorted(_divisors(ctx.oh), reverse=True)

    def shapes(tile_ws: list[int], orders: tuple[str, ...]) -> Iterator[Schedule]:
        for order in orders:
            for tile_w in tile_ws:
                for tile_co in tile_cos:
                    for tile_h in tile_hs:
                        for oc_nthread in (2, 1):
                            yield Schedule(tile_b=1, tile_h=tile_h, tile_w=tile_w,
                                           tile_co=tile_co, tile_ci=tile_ci,
                                           oc_nthread=oc_nthread, gemm_order=order)

    yield from shapes([ctx.ow], (AUTOTVM_GEMM_ORDER,))
    narrower = sorted(_divisors(ctx.ow), reverse=True)[1:]
    yield from shapes(narrower, (AUTOTVM_GEMM_ORDER,))
    yield from shapes([ctx.ow, *narrower], (_DST_INNERMOST,))


def gemm_candidates(ctx: Context) -> Iterator[Schedule]:
    """A GEMM's default candidates, best first: its rows as a 1x1 conv's pixels
    (``rows="spatial"``: a tile's rows in one input load and in the GEMM instruction's loops,
    two threads on them), the whole reduction in one load step (``tile_ci`` as large as
    the buffers allow), the most output channels per tile with two threads on them (the
    weights, loaded once, stay resident across the row tiles: ``reuse``), then the most
    rows per tile; the rows folded with the input channels into the instruction, the
    output channels unrolled. Then the same with the rows as batch blocks (``tile_b`` up
    to :data:`_MAX_TILE_B`). Capacities are left to the legality rules, which skip what does
    not fit.

    (The conv2d candidates' one input-channel block per load step and single row per tile
    made a dense layer's default 18-20x slower than its tuned schedule: e.g. 3136x96x384,
    19,245,933 cycles against 1,056,050 for 50 trials of the batch-rows space;
    ``scripts/bench_dense.py``.)"""
    tile_cis = sorted(_divisors(ctx.cib), reverse=True)
    tile_cos = sorted(_divisors(ctx.cob), reverse=True)
    rows = sorted(_divisors(ctx.nb), reverse=True)
    for tile_ci in tile_cis:
        for oc_nthread in (2, 1):
            for tile_co in tile_cos:
                for h_nthread in (2, 1):
                    for tile_h in rows:
                        yield Schedule(tile_h=tile_h, tile_co=tile_co, tile_ci=tile_ci,
                                       oc_nthread=oc_nthread, h_nthread=h_nthread,
                                       gemm_order=_ROWS_FOLDED, reuse=True, rows="spatial")
    tile_bs = [d for d in rows if d <= _MAX_TILE_B]
    for tile_ci in tile_cis:
        for oc_nthread in (2, 1):
            for tile_co in tile_cos:
                for tile_b in tile_bs:
                    yield Schedule(tile_b=tile_b, tile_co=tile_co, tile_ci=tile_ci,
                                   oc_nthread=oc_nthread, gemm_order=AUTOTVM_GEMM_ORDER,
                                   reuse=True)


def first_legal_candidate(workload: Workload, hw: HardwareConfig,
                          bias: bool = False) -> tuple[Schedule | None, IllegalSchedule | None]:
    """The first legal schedule of :func:`default_candidates` (None if none is) and the
    first candidate's failure (None if it passed, or there was no candidate). An ALU-only
    operator takes TVM's fallback config (entity 0 of add.vta's space: one block a tile), as
    AutoTVM does for a task its log lacks."""
    if isinstance(workload, AddWorkload):  # and MultiplyWorkload
        s = Schedule(tile_h=1, tile_w=1, tile_co=1, tvm_strict=True)
        try:
            check(workload, s, hw, bias)
            return s, None
        except IllegalSchedule as exc:
            return None, exc
    first: IllegalSchedule | None = None
    ctx = context(workload, hw)
    for s in default_candidates(ctx):
        try:
            rules(ctx, s, bias)
            return s, first
        except IllegalSchedule as exc:
            first = first or exc
    return None, first
