"""A cheap analytic cost model of a config, and the warm starts it picks.

The model runs the timing model's rules (:mod:`simulator.timing`) on the tile-level skeleton
of the program a schedule lowers to, with every constant taken from the board's
:class:`~simulator.timing.TimingProfile` (bus width, request and bridge delays, burst
limits, GEMM / ALU pipelines, the narrow or the wide store unit, fetch chunks), so it
follows the timing model of whatever hardware is tuned, preset or ``vta_config.json``, and
has no fitted number:

- each instruction costs what the timing model charges for it: an input LOAD per channel
  block of the window (one 2D DMA for all the blocks when their dims fold into one, as
  TVM's pattern detection folds them), with its request, the bridge's delay or the zero
  fill of the pads (averaged over the tiles' windows, which the pads clip at the borders),
  its beats and completion; a weight LOAD; a GEMM of the tile's micro-op iterations; the
  reset; the ALU epilogue (shift, clips; the bias LOAD and add); the STOREs of a tile
  (TVM's 2D DMAs of it, their write bursts, the store unit's cycles per element or beat);
  each micro-op kernel's LOAD before its first use, once the read channel is free;
- the loop structure is TVM's: per output tile (one per virtual thread, the threads'
  copies adjacent) and per batch row of it a reset and the reduction steps (LOADs, GEMM),
  then the epilogue and the STORE; the three modules run in order and wait for TVM's
  dependency tokens: a LOAD for the compute instruction that frees its buffer (the
  thread's reset or its previous GEMM), a GEMM for its LOADs, a STORE for its epilogue,
  a thread's next reset for its last STORE;
- a LOAD of a tile already in its buffer is skipped (``reuse``): with a one-step
  reduction, the tile indexed by the innermost outer loop that iterates is loaded for
  every output tile, the other one only when it changes (weights: with the co tile; the
  input: with the spatial tile, and with the group of a grouped convolution), so the
  outer loop order matters (up to 10x for a batched dense layer); the inner order only
  through the size of the micro-op kernel (fewer uops when the two largest extents fold
  into the instruction), taken at its best;
- fetch shares the read channel with the LOADs (its beats are added to theirs) and reads
  the first chunk before anything runs.

The first three iterations of a tile's batch rows and of its reduction steps are run
event by event, and five groups of output tiles (a first group, groups that reload only
the tile that changes every time, one that reloads both); the rest advance at the period
of their kind. :class:`ShapeCosts` tabulates every tile shape with every outer order (a
compiled loop, about 1 µs a shape).

Measured against the exhaustive optima of 69 (board, layer) pairs no catalogue holds
(``scripts/bench_generalization.py``: conv2d of every kernel size, stride and batch,
dense, grouped and transposed, on pynq, ultra96, de10nano, 4x8 and 1x32) and of
ResNet-50's 22 tasks (``scripts/bench_cost_model.py``); the earlier model, partly fitted
on the catalogue, erred by 1.4% near the optimum, and its best tile shape was up to 10x
off (a 16x512x1024 dense) with the first legal loop orders. Figures: ``docs/generalization.md``.

It is only used to rank: the warm starts of the ``guided`` sampler, its startup draws, and
its candidates' acquisition. Every score the study sees comes from the simulator.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from simulator.jit import njit
from simulator.timing import TimingProfile
from vtatune.errors import IllegalSchedule
from vtatune.lowering import SHAPE_RULES, acc_coefficients, rows_context, window

__all__ = [
    "ShapeCosts", "WARM_STARTS", "compute_bound", "estimate", "warm_starts",
]

#: How many warm starts the guided sampler queues (after the default schedule).
WARM_STARTS = 6
_TILE_KNOBS = ("tile_b", "tile_h", "tile_w", "tile_ci", "tile_co", "oc_nthread", "h_nthread")


@functools.lru_cache(maxsize=16)
def _profile(hw: Any) -> TimingProfile:
    return TimingProfile.for_hw(hw)  # built and validated once per board, not per estimate


def compute_bound(template: Any, config: dict[str, Any]) -> int:
    """A lower bound on the simulated cycles of a legal config of a conv2d / dense template:
    the compute module's own work, which it runs in order, one instruction at a time, and
    which ends with FINISH (the end of the run).

    - GEMM micro-op iterations: the MACs (``gemm_floor``, the same for every schedule) and
      one reset iteration per output element; ALU: at least one cycle per iteration of each
      of the ``n_alu`` element-wise ops (shift, clip min, clip max; + bias) per output
      element;
    - per instruction its fixed pipeline cycles: at least one GEMM per reduction step of
      each (thread's) output tile, one reset GEMM and ``n_alu`` ALU instructions per tile.

    UOP / ACC loads (also the compute module's) are left out, so the bound never exceeds
    the compute module's busy time, hence the cycles. ``scripts/network_optima.py`` skips
    configs whose bound exceeds the best cycles found (tests check bound <= cycles)."""
    ctx = template.context
    if config.get("rows") == "spatial":  # a GEMM's rows as pixels: tile_h tiles them
        ctx = rows_context(ctx)
    p = _profile(template.hw)
    tb = config.get("tile_b", 1)
    th, tw = config.get("tile_h", 1), config.get("tile_w", 1)
    tiles = (ctx.nb // tb) * (ctx.oh // th) * (ctx.ow // tw) * (ctx.cob // config["tile_co"])
    steps = tiles * (ctx.cib // config["tile_ci"])
    out_elems = ctx.nb * ctx.oh * ctx.ow * ctx.cob
    n_alu = 4 if template.bias else 3
    gemm_floor = out_elems * ctx.cib * ctx.k * ctx.k
    return gemm_floor + out_elems * (1 + n_alu) + p.gemm_pipeline * (steps + tiles) \
        + p.alu_pipeline * n_alu * tiles


#: Loop iterations whose events are computed; later ones repeat the last one's period.
_EXACT = 3


@dataclass(frozen=True)
class _Tiles:
    """A workload's tile shapes (flat arrays, one element per shape) and the cycles of each
    piece of the program skeleton, as the timing model prices them."""

    threads: np.ndarray  # virtual threads
    rows: np.ndarray  # batch rows of a tile (tile_b)
    steps: np.ndarray  # reduction steps per batch row
    groups: np.ndarray  # output tiles per thread (the threads' tiles run together)
    reset: np.ndarray  # a batch row's reset GEMM
    gemm: np.ndarray  # a reduction step's GEMM
    inp: np.ndarray  # a reduction step's input LOADs (fetch's share included)
    wgt: np.ndarray  # its weight LOAD (likewise)
    epilogue: np.ndarray  # the tile's ALU instructions (and bias LOAD)
    store: np.ndarray  # the tile's STOREs
    kernels: np.ndarray  # rows: the first loads of the GEMM, reset and ALU kernels
    extents: dict[str, np.ndarray]  # the outer tile loops' extents: b, h, c, w
    input_groups: np.ndarray  # group_conv2d: the groups a thread's co loop visits (else 1)
    splits: np.ndarray  # the tiles split evenly between the threads (else it cannot run)
    start: np.ndarray  # from launch to the first instruction: the first fetch chunk


def _done(p: TimingProfile, elem_bytes: int) -> int:
    return p.wide_load_done_cycles if elem_bytes <= p.bus_bytes else p.load_done_cycles


def _window_table(ctx: Any, hw: Any, p: TimingProfile, th: list[int], tw: list[int]
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Per (tile_h, tile_w): the beats and the wait (request, top pad rows stepped over and
    bridge delay, or the zero fill when it outlasts them) of one channel block's input
    window, averaged over the tiles (border windows are clipped by the pads)."""
    # one pixel of a DRAM channel block (a GEMM's rows as pixels: one block of a row)
    eb = hw.inp_elem_bytes * (1 if ctx.rows else ctx.in_pack)

    def kinds(tile: int, out: int, extent: int) -> dict[tuple[int, int, int], int]:
        count: dict[tuple[int, int, int], int] = {}
        for t in range(out // tile):
            key = window(ctx.p, ctx.s, ctx.k, t, tile, extent)[1:]
            count[key] = count.get(key, 0) + 1
        return count

    beats = np.zeros((len(th), len(tw)))
    wait = np.zeros((len(th), len(tw)))
    xs = [kinds(c, ctx.ow, ctx.w) for c in tw]
    for a, rows in enumerate(th):
        ys = kinds(rows, ctx.oh, ctx.h)
        n_y = sum(ys.values())
        for b in range(len(tw)):
            n = n_y * sum(xs[b].values())
            for (ny, py0, py1), cy in ys.items():
                for (nx, px0, px1), cx in xs[b].items():
                    pads = ((py0 + ny + py1) * (px0 + nx + px1) - ny * nx) * ctx.in_pack
                    w = p.request_cycles + py0 + p.read_latency
                    if pads:
                        w = max(w, p.pad_start_cycles + pads)
                    beats[a, b] += cy * cx * ny * -(-nx * eb // p.bus_bytes) / n
                    wait[a, b] += cy * cx * w / n
    return beats, wait


def _fold(sizes: Sequence[np.ndarray], strides: Sequence[int]
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """TVM's DMA dim folding (:func:`vtatune.lowering.fold_2d`), elementwise: for dims of
    ``sizes`` (arrays, outer first) and ``strides``, how many dims the fold leaves and the
    sizes of the innermost two (rows, then elements of a row; 1 when absent)."""
    one = np.ones(np.broadcast_shapes(*(np.shape(x) for x in sizes)), np.int64)
    count, size, stride, first = 0 * one, one.copy(), 0 * one, 0 * one
    inner, outer = one.copy(), one.copy()
    for s, c in zip(reversed(sizes), reversed(strides), strict=True):
        real = s != 1
        merge = real & (count > 0) & (c == size * stride)
        new = real & ~merge
        inner = np.where(new & (count == 1), size, inner)  # the dim below is complete
        outer = np.where(new & (count == 2), size, outer)
        first = np.where(new & (count == 0), c, first)
        size = np.where(merge, size * s, np.where(new, s, size))
        stride = np.where(new, c, stride)
        count = count + new
    inner = np.where(count == 1, size, inner)
    outer = np.where(count == 2, size, outer)
    unit = (count == 0) | (first != 1)  # a unit-stride innermost dim is added
    return count + unit, np.where(unit, inner, outer), np.where(unit, 1, inner)


def _split(sizes: Sequence[np.ndarray], strides: Sequence[int]
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`vtatune.lowering.split_2d` elementwise: the 2D DMAs of the dims (the product
    of the fewest leading dims looped so that the rest folds into one), their rows and
    the elements of a row."""
    n = np.broadcast_shapes(*(np.shape(x) for x in sizes))
    loops, rows, x = np.ones(n, np.int64), np.ones(n, np.int64), np.ones(n, np.int64)
    done = np.zeros(n, bool)
    looped = np.ones(n, np.int64)
    for k in range(len(sizes) + 1):
        count, r, c = _fold(sizes[k:], strides[k:]) if k < len(sizes) else (1, 1, 1)
        now = ~done & (count <= 2)
        loops, rows, x = (np.where(now, a, b) for a, b in ((looped, loops), (r, rows),
                                                            (c, x)))
        done |= now
        if k < len(sizes):
            looped = looped * sizes[k]
    return loops, rows, x


def _stores(ctx: Any, hw: Any, p: TimingProfile, tb: np.ndarray, tco: np.ndarray,
            th: np.ndarray, tw: np.ndarray) -> np.ndarray:
    """Cycles of the STOREs of one thread's output tile: the fewest 2D DMAs that cover it
    (TVM's folding of the tile's dims), each its control cycles, a handshake per write
    burst (bursts end at a row of the DMA and at the burst boundary) and the store unit's
    cycles per element (narrow) or per beat (wide)."""
    ob, k = hw.out_elem_bytes, ctx.out_pack
    burst = min(p.burst_boundary, p.max_burst_beats * p.bus_bytes)
    dram = {"co": ctx.oh * ctx.ow * k, "h": ctx.ow * k, "w": k, "co%k": 1}
    dims = [(tb, ctx.cob * ctx.oh * ctx.ow)] + (
        # a GEMM's rows as pixels: the tile's rows of tile_co blocks, k = cob apart
        [(th, dram["h"]), (tw, dram["w"]), (tco, 1)] if ctx.rows else
        [(e, dram[a]) for a, e, _ in acc_coefficients(k, tco, th, tw)])
    insns, rows, x = _split([np.broadcast_to(e, tb.shape) for e, _ in dims],
                            [s for _, s in dims])
    # a row of x elements starts anywhere in a burst window: it crosses (x ob - ob) / burst
    # boundaries on average
    bursts = insns * rows * (1 + (x * ob - ob) / burst)
    if p.wide_store(hw):
        return (insns * p.store_insn_cycles + bursts * (p.write_handshake + p.store_read_cycles)
                + insns * rows * -(-x * ob // p.bus_bytes))
    return (insns * p.store_insn_cycles + bursts * p.write_handshake
            + tb * tco * th * tw * p.store_elem_cycles(hw))


def _tiles(template: Any, config: dict[str, Any]) -> tuple[_Tiles, tuple[int, ...]]:
    """The :class:`_Tiles` of ``config``'s tile knobs (flattened), and their shape."""
    ctx, hw = template.context, template.hw
    p = _profile(hw)
    bus = p.bus_bytes
    knobs = np.broadcast_arrays(*(np.asarray(config.get(k, 1)) for k in _TILE_KNOBS))
    shape = knobs[0].shape
    tb, th, tw, tci, tco, ocn, hn = (np.asarray(a).ravel().astype(np.int64) for a in knobs)
    threads = ocn * hn
    kk = ctx.k * ctx.k
    steps = ctx.cib // tci
    n_co = ctx.cob // (tco * ocn)
    # (a grid of shapes holds some that cannot run: at least one tile of each)
    spatial = np.maximum(1, (ctx.nb // tb) * (ctx.oh // (th * hn)) * (ctx.ow // tw))
    # group_conv2d: an oc tile over m whole groups loads its groups' channel span
    m = np.ones_like(tco)
    input_groups = np.ones_like(tco)
    if ctx.groups > 1:
        cobg = ctx.cob // ctx.groups
        m = np.where(tco % cobg == 0, tco // cobg, 1)
        # the input changes with the group: every co iteration, or every group_loop of them
        per_loop = np.maximum(1, cobg // np.maximum(1, tco * ocn))
        input_groups = np.maximum(1, n_co // np.where(tco * ocn < cobg, per_loop, 1))
    nch = (m - 1) * ctx.cib + tci
    pk = ctx.in_pack
    eh, ew = (th - 1) * ctx.s + ctx.k, (tw - 1) * ctx.s + ctx.k
    # --- a reduction step of one batch row: input and weight LOADs, GEMM ------------------
    rows_c, cols_c = np.unique(th), np.unique(tw)
    beats, wait = _window_table(ctx, hw, p, rows_c.tolist(), cols_c.tolist())
    at = (np.searchsorted(rows_c, th), np.searchsorted(cols_c, tw))
    if ctx.rows:  # a GEMM's rows as pixels: tile_h rows of tile_ci blocks, one 2D DMA
        n_inp, blocks = np.ones_like(tci), tci
    elif ctx.p > 0:
        n_inp = nch // pk  # a padded window is one LOAD per channel block
    else:  # one 2D DMA of all the blocks when their dims fold into one, else one per block
        count, _, _ = _fold([nch // pk, eh, ew * pk], [ctx.h * ctx.w * pk, ctx.w * pk, 1])
        n_inp = np.where(count <= 2, 1, nch // pk)
    if not ctx.rows:
        blocks = nch // pk  # DRAM channel blocks (pixels of beats[at]) a step loads
    inp = n_inp * (wait[at] + _done(p, hw.inp_elem_bytes)) + blocks * beats[at]
    load_latency = p.request_cycles + p.read_latency
    wgt = load_latency + _done(p, hw.wgt_elem_bytes) + tco * tci * kk * hw.wgt_elem_bytes / bus
    gemm = p.gemm_pipeline + tco * th * tw * tci * kk
    reset = p.gemm_pipeline + tco * th * tw
    # --- the tile's epilogue and stores --------------------------------------------------
    acc = tb * tco * th * tw
    n_alu = 4 if template.bias else 3
    epilogue = n_alu * p.alu_pipeline + acc * 3 * p.alu_imm_cycles
    if template.bias:  # the bias LOAD (an ACC load on the compute module) and a register add
        epilogue = epilogue + acc * p.alu_reg_cycles + load_latency \
            + _done(p, hw.acc_elem_bytes) \
            + (acc if ctx.rows else tb * tco) * hw.acc_elem_bytes / bus  # rows: per row
    store = _stores(ctx, hw, p, tb, tco, th, tw)
    # --- micro-op kernels: two axes fold into the instruction, the rest unroll ----------
    gemm_ext = -np.sort(-np.stack([tco, th, tw, tci, np.full_like(tco, ctx.k),
                                   np.full_like(tco, ctx.k)]), axis=0)
    gemm_uops = np.prod(gemm_ext[2:], axis=0)
    reset_uops = -np.sort(-np.stack([tco, th, tw]), axis=0)[2]
    kernel = load_latency + p.wide_load_done_cycles
    kernels = np.stack([kernel + gemm_uops * hw.uop_elem_bytes / bus,
                        kernel + reset_uops * hw.uop_elem_bytes / bus,
                        np.full(len(tco), n_alu * (kernel + hw.uop_elem_bytes / bus))])
    # --- fetch: each instruction's beats (and each chunk's request) on the read channel ---
    # a thread's instructions per group: per batch row a reset and the steps' LOADs and
    # GEMM, then the epilogue, a STORE and two dependency NOPs
    per_thread = tb * (1 + steps * (n_inp + 2)) + n_alu + 3
    per_insn = hw.insn_bytes / bus + load_latency / p.fetch_chunk_insns
    fetch = per_thread / (tb * steps * (n_inp + 1)) * per_insn  # per LOAD of a group
    groups = spatial * np.maximum(1, n_co)
    start = load_latency + np.minimum(p.fetch_chunk_insns, threads * per_thread * groups) \
        * hw.insn_bytes / bus
    extents = {"b": ctx.nb // tb, "h": np.maximum(1, ctx.oh // (th * hn)), "w": ctx.ow // tw,
               "c": np.maximum(1, n_co)}
    splits = ((ctx.cob // tco) % ocn == 0) & ((ctx.oh // th) % hn == 0)

    def real(x: Any) -> np.ndarray:  # one float per shape, contiguous (the compiled loop's)
        return np.ascontiguousarray(np.broadcast_to(np.asarray(x, float), threads.shape))

    return _Tiles(threads, tb, steps, groups, real(reset), real(gemm), real(inp + n_inp * fetch),
                  real(wgt + fetch), real(epilogue), real(store), kernels, extents, input_groups,
                  splits, real(start)), shape


#: State of the skeleton's run: the load, compute and store modules' free times, then
#: per virtual thread (at most 4) the time of its last g2l token (its reset or GEMM), of
#: its last LOAD's end and of its last STORE's end.
_LF, _CF, _SF, _TOK, _LEND, _SEND = 0, 1, 2, 3, 7, 11
_STATE = 15
_INTERVALS = 4 * _EXACT * _EXACT  # the first group's LOADs whose channel use is kept


@njit(inner=True)
def _channel(x, starts, ends, n):
    """When a micro-op kernel's LOAD asked for at ``x`` gets the read channel: after the
    LOAD in flight then, if any (a request queued behind it is served next)."""
    for i in range(n):
        if starts[i] < x < ends[i]:
            x = ends[i]
    return x


#: Output-tile groups run event by event: a group that loads every operand (the first),
#: two that load only the operand that changes every group, one that loads all, one more
#: (the periods of both kinds of group, after the pipeline has filled).
_KINDS = (True, False, False, True, False)


@njit(cache=True)
def _skeleton(threads, rows, steps, groups, changes, reset, gemm, loads, epilogue, store,
              kernels, out):
    """The skeleton's cycles per shape, into ``out``. ``loads[0..3]``: a step's LOADs in
    the first batch row of a group that loads every operand (the first group, and the
    ``changes - 1`` others where the rarely changing tile changes), in its later rows, in
    the first row of the other groups, in their later rows; ``kernels[0..2]``: the first
    loads of the GEMM, reset and ALU kernels. The first ``_EXACT`` iterations of a tile's
    batch rows and reduction steps run event by event, the others advance the state by
    the last one's period; likewise the groups past ``_KINDS``, at their kind's period."""
    S = np.zeros(_STATE)
    after = np.zeros((len(_KINDS), _STATE))
    r_prev = np.zeros(_STATE)
    k_prev = np.zeros(_STATE)
    starts = np.zeros(_INTERVALS)
    ends = np.zeros(_INTERVALS)
    done = np.zeros(4)
    for n in range(threads.shape[0]):
        S[:] = 0.0
        nt, kg, kr, G, C = threads[n], kernels[0, n], kernels[1, n], groups[n], changes[n]
        n_int = 0
        stride = max(1, G // max(1, C))
        for g in range(min(G, len(_KINDS))):
            first = g == 0
            full = (g % stride == 0) if G <= len(_KINDS) else _KINDS[g] or C >= G
            for b in range(min(rows[n], _EXACT)):
                if b == _EXACT - 1:
                    for q in range(_STATE):
                        r_prev[q] = S[q]
                for j in range(nt):  # resets; a thread's first waits for its last STORE
                    x = S[_CF]
                    if b == 0:
                        x = max(x, S[_SEND + j])
                    if first:
                        x = _channel(x, starts, ends, n_int) + kr
                    S[_CF] = x + reset[n]
                    S[_TOK + j] = S[_CF]
                load = loads[(0 if full else 2) + (0 if b == 0 else 1), n]
                for k in range(min(steps[n], _EXACT)):
                    if k == _EXACT - 1:
                        for q in range(_STATE):
                            k_prev[q] = S[q]
                    for j in range(nt):  # a LOAD waits for the compute freeing its buffer
                        x = max(S[_LF], S[_TOK + j])
                        S[_LF] = x + load
                        S[_LEND + j] = S[_LF]
                        if first and n_int < _INTERVALS:
                            starts[n_int], ends[n_int] = x, S[_LF]
                            n_int += 1
                    for j in range(nt):  # a GEMM waits for its LOADs
                        x = S[_CF]
                        if first and k == 0:
                            x = _channel(x, starts, ends, n_int) + kg
                        S[_CF] = max(x, S[_LEND + j]) + gemm[n]
                        S[_TOK + j] = S[_CF]
                if steps[n] > _EXACT:
                    for q in range(_STATE):
                        S[q] += (steps[n] - _EXACT) * (S[q] - k_prev[q])
            if rows[n] > _EXACT:
                for q in range(_STATE):
                    S[q] += (rows[n] - _EXACT) * (S[q] - r_prev[q])
            for j in range(nt):  # the epilogues, then the STOREs that wait for them
                S[_CF] += epilogue[n] + (kernels[2, n] if first else 0.0)
                done[j] = S[_CF]
            for j in range(nt):
                S[_SF] = max(S[_SF], done[j]) + store[n]
                S[_SEND + j] = S[_SF]
            for q in range(_STATE):
                after[g, q] = S[q]
        if G > len(_KINDS):  # the rest: C - 1 more groups that load all, the others not
            for q in range(_STATE):
                steady = after[2, q] - after[1, q]
                loads_all = after[4, q] - after[2, q] - steady
                S[q] = after[0, q] + (G - C) * steady + (C - 1) * loads_all
        out[n] = max(S[_SF], S[_CF])


#: Without an outer loop order, the better of these two: the co loop outermost (each
#: weight tile loaded once when the reduction is one step) or innermost (the input tile).
_EXTREME_ORDERS = ("cbhw", "bhwc")


def _changes(t: _Tiles, order: str, values: dict[str, np.ndarray]) -> np.ndarray:
    """How many times a thread's tile changes over its output tiles, visited in the outer
    loop ``order`` (outermost first), when it takes ``values[axis]`` values along each
    outer loop it depends on: each iteration of the loops outside the innermost of those
    (that takes more than one), times that one's values."""
    count = np.ones(len(t.threads))
    outer = np.ones(len(t.threads))
    for axis in order:
        if axis in values:
            count = np.where(values[axis] > 1, outer * values[axis], count)
        outer = outer * t.extents[axis]
    return count


def _loads(t: _Tiles, order: str, reuse: bool) -> tuple[np.ndarray, np.ndarray]:
    """A step's LOAD cycles in the first batch row of a group that loads every operand, in
    its later rows, in the first row of a group that does not, in its later rows; and how
    many groups load every operand. A LOAD of a tile already in its buffer is skipped
    (``reuse``), which happens when the reduction is one step: the weights stay across a
    tile's batch rows, and a tile stays across consecutive output tiles that share it: the
    tile indexed by the innermost outer loop that iterates changes every group, the other
    one less often."""
    one = (t.steps == 1) & reuse
    every = t.groups.astype(float)
    w_rows = np.where(one, 0.0, 1.0)
    weights = np.where(one, _changes(t, order, {"c": t.extents["c"]}), every)
    inputs = np.where(one & (t.rows == 1), _changes(
        t, order, {**{a: t.extents[a] for a in "bhw"}, "c": t.input_groups}), every)
    steady = np.where(inputs >= every, t.inp, 0.0) + np.where(weights >= every, t.wgt, 0.0)
    loads = np.stack([t.inp + t.wgt, t.inp + w_rows * t.wgt, steady, t.inp + w_rows * t.wgt])
    return loads, np.minimum(weights, inputs).astype(np.int64)


class _RowsView:
    """A GEMM template seen with its rows as pixels (``rows="spatial"``): its constants
    are :func:`vtatune.lowering.rows_context`'s, the rest the template's."""

    def __init__(self, template: Any) -> None:
        self._template = template
        self.context = rows_context(template.context)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._template, name)


def _order_cycles(template: Any, config: dict[str, Any], orders: Sequence[str | None]
                  ) -> tuple[list[np.ndarray], tuple[int, ...]]:
    """:func:`_mode_cycles` of each of a GEMM's row modes (``rows``): the spatial rows'
    shapes on :class:`_RowsView`; a shape that mixes the modes' knobs (rule ``row_mode``)
    costs ``inf``."""
    if "rows" not in config:
        return _mode_cycles(template, config, orders)
    values = np.broadcast_arrays(*(np.asarray(v) for v in config.values()))
    shape = values[0].shape
    flat = {k: v.ravel() for k, v in zip(config, values, strict=True)}
    spatial = flat.pop("rows") == "spatial"
    tb, th, hn = (flat.get(k, np.ones(spatial.shape, np.int64))
                  for k in ("tile_b", "tile_h", "h_nthread"))
    ok = np.where(spatial, tb == 1, (th == 1) & (hn == 1))
    out = [np.full(spatial.shape, np.inf) for _ in orders]
    for mode, view in ((False, template), (True, _RowsView(template))):
        at = ok & (spatial == mode)
        if at.any():
            part, _ = _mode_cycles(view, {k: v[at] for k, v in flat.items()}, orders)
            for o, c in zip(out, part, strict=True):
                o[at] = c
    return out, shape


def _mode_cycles(template: Any, config: dict[str, Any], orders: Sequence[str | None]
                 ) -> tuple[list[np.ndarray], tuple[int, ...]]:
    """The estimate of the tile shapes of ``config`` (flat) under each outer order (None:
    the better of :data:`_EXTREME_ORDERS`), and the shapes' array shape. A shape whose
    LOADs two orders skip alike (most: any whose reduction takes several steps) is run once;
    a shape whose tiles cannot split between its threads not at all."""
    t, shape = _tiles(template, config)
    p = _profile(template.hw)
    reuse = bool(dict(template.fixed).get("reuse", True))
    runs: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}  # order -> its run

    def run(order: str) -> np.ndarray:
        loads, changes = _loads(t, order, reuse)
        cycles = np.full(len(t.threads), np.inf)
        todo = t.splits.copy()
        for other, other_changes, other_cycles in runs.values():
            same = todo & (changes == other_changes) & (loads == other).all(axis=0)
            cycles[same] = other_cycles[same]
            todo &= ~same
        if todo.any():
            at = np.flatnonzero(todo)
            out = np.empty(len(at))
            _skeleton(t.threads[at], t.rows[at], t.steps[at], t.groups[at], changes[at],
                      t.reset[at], t.gemm[at], np.ascontiguousarray(loads[:, at]),
                      t.epilogue[at], t.store[at], np.ascontiguousarray(t.kernels[:, at]), out)
            cycles[at] = out + t.start[at] + 2 * p.nop_cycles
        runs[order] = (loads, changes, cycles)
        return cycles

    out = []
    for order in orders:
        if order is None:
            out.append(np.minimum(*(run(o) for o in _EXTREME_ORDERS)))
        else:
            out.append(runs[order][2] if order in runs else run(order))
    return out, shape


def estimate(template: Any, config: dict[str, Any]) -> Any:
    """Estimated cycles of a (legal) config: see the module docstring. The inner loop
    order is taken at its best (the fewest micro-ops); without an ``outer_order`` (a
    config of tile knobs only) the better of keeping the weights or the input resident.

    Elementwise: the knobs may be numpy arrays (one element per shape); plain values give
    a float."""
    values = {k: np.asarray(v) for k, v in config.items() if k in _TABLE_KNOBS}
    shape = np.broadcast_shapes(*(v.shape for v in values.values()))
    flat = {k: np.broadcast_to(v, shape).ravel() for k, v in values.items()}
    orders = flat.pop("outer_order", None)
    if orders is None:  # the template's fixed order (the autotvm space's), or the better
        (cycles,), _ = _order_cycles(template, flat, [dict(template.fixed).get("outer_order")])
    else:
        cycles = np.empty(len(orders))
        for order in np.unique(orders).tolist():
            at = orders == order
            (cycles[at],), _ = _order_cycles(template, {k: v[at] for k, v in flat.items()},
                                             [order])
    cycles = cycles.reshape(shape)
    return float(cycles) if cycles.ndim == 0 else cycles


#: The knobs :class:`ShapeCosts` tabulates: the tile shape and the outer loop order.
_TABLE_KNOBS = (*_TILE_KNOBS, "rows", "outer_order")


class ShapeCosts:
    """:func:`estimate` of every tile shape of a template with each outer loop order (the
    knobs it reads but the inner order, taken at its best), computed at once over the grid
    of their choices.

    ``log_cost(rows, names)`` gives the log of each row's estimate (at least one cycle),
    where ``rows`` hold choice indices of the knobs ``names`` (a tabulated knob left out
    takes its first choice): the guided sampler scores its candidates so, by lookup,
    without building a config. A shape found unable to run whatever its loop orders
    (:meth:`rule_out`) costs ``inf`` from then on. ``ranked()`` is every entry, best
    estimate first (ties in the knobs' product order)."""

    def __init__(self, template: Any) -> None:
        self.knobs = tuple(k for k in template.knobs if k.name in _TABLE_KNOBS)
        grid = np.meshgrid(*(np.array(k.choices) for k in self.knobs), indexing="ij")
        self.grid = {k.name: g for k, g in zip(self.knobs, grid, strict=True)}
        dims = tuple(len(k.choices) for k in self.knobs)
        names = [k.name for k in self.knobs]
        if "outer_order" in names:  # the tiles' pieces once, a skeleton run per order
            axis = names.index("outer_order")
            tiles = {k: g.take(0, axis=axis) for k, g in self.grid.items()
                     if k != "outer_order"}
            per_order, shape = _order_cycles(template, tiles, self.knobs[axis].choices)
            self.cycles = np.stack([c.reshape(shape) for c in per_order], axis=axis)
        else:
            self.cycles = np.broadcast_to(estimate(template, self.grid), dims)
        self._log = np.log(np.maximum(1.0, self.cycles))
        self._position = [{c: i for i, c in enumerate(k.choices)} for k in self.knobs]
        self._columns: dict[tuple[str, ...], tuple[int | None, ...]] = {}

    def shape(self, index: int) -> dict[str, Any]:
        """The tile shape (and outer order) at flat (product-order) ``index``."""
        at = np.unravel_index(index, self.cycles.shape)
        return {k.name: k.choices[i] for k, i in zip(self.knobs, at, strict=True)}

    def ranked(self) -> np.ndarray:
        """Flat indices of every entry, best estimate first (stable: product order)."""
        return np.argsort(self.cycles, axis=None, kind="stable")

    def log_cost(self, rows: np.ndarray, names: Sequence[str]) -> np.ndarray:
        columns = self._columns.get(tuple(names))
        if columns is None:
            where = {name: j for j, name in enumerate(names)}
            columns = self._columns[tuple(names)] = tuple(where.get(k.name) for k in self.knobs)
        return self._log[tuple(0 if j is None else rows[:, j] for j in columns)]

    def rule_out(self, config: dict[str, Any]) -> None:
        """``config``'s tile shape cannot run (a rule decided by the shape alone failed):
        whatever its outer order."""
        self._log[tuple(slice(None) if k.name == "outer_order" else p[config[k.name]]
                        for p, k in zip(self._position, self.knobs, strict=True))] = np.inf


def _uops_first(template: Any, base: dict[str, Any]) -> tuple[Any, ...]:
    """The inner loop orders, those whose GEMM micro-op kernel is smallest for ``base``'s
    tile first: the two outermost loops that iterate fold into the instruction, the others
    unroll into micro-ops (loaded into the uop buffer before the first GEMM)."""
    k = template.context.k
    extent = {"ci": base.get("tile_ci", 1), "co": base.get("tile_co", 1),
              "h": base.get("tile_h", 1), "w": base.get("tile_w", 1), "kh": k, "kw": k}

    def uops(order: str) -> int:
        looped = [extent[a] for a in order.split(",") if extent[a] > 1]
        return math.prod(looped[2:])

    return tuple(sorted(template.knob("gemm_order").choices, key=uops))


def _first_legal(template: Any, base: dict[str, Any]) -> dict[str, Any] | None:
    """``base`` completed with the first legal choices of the other knobs (the inner
    loop order with the fewest micro-ops first), or None."""
    names = template.knob_names
    free = [n for n in names if n not in base]
    rest = [_uops_first(template, base) if n == "gemm_order" else template.knob(n).choices
            for n in free]
    for values in itertools.product(*rest):
        c = {n: base[n] if n in base else values[free.index(n)] for n in names}
        try:
            template.check(c)
        except IllegalSchedule as exc:
            if exc.rule in SHAPE_RULES:
                return None  # decided before the orders: no order helps
            continue
        return c
    return None


def warm_starts(template: Any, n: int = WARM_STARTS, costs: ShapeCosts | None = None
                ) -> list[dict[str, Any]]:
    """The ``n`` best tile shapes by the estimate, each with its best outer loop order,
    preferring variety: the best of each thread layout first (in estimate order), then
    the next best overall."""
    costs = costs or ShapeCosts(template)
    names = [k.name for k in costs.knobs]
    cycles, tiles = costs.cycles, [k for k in costs.knobs if k.name != "outer_order"]
    if "outer_order" in names:  # each shape at its best outer order
        axis = names.index("outer_order")
        best_outer = np.argmin(cycles, axis=axis)
        cycles = np.min(cycles, axis=axis)
    order = np.argsort(cycles, axis=None, kind="stable")
    checked: dict[int, dict[str, Any] | None] = {}  # flat index -> legal config or None

    def legal(i: int) -> dict[str, Any] | None:
        if i not in checked:
            at = np.unravel_index(i, cycles.shape)
            base = {k.name: k.choices[j] for k, j in zip(tiles, at, strict=True)}
            if "outer_order" in names:
                base["outer_order"] = costs.knobs[axis].choices[best_outer[at]]
            checked[i] = _first_legal(template, base)
        return checked[i]

    # Each layout's best, scanning that layout's shapes only: a layout whose shapes all
    # rank low costs no legality check of the better shapes of the others.
    grid = {k: g.take(0, axis=axis) if "outer_order" in names else g
            for k, g in costs.grid.items()}
    layout = (grid.get("oc_nthread", 1) * 8 + grid.get("h_nthread", 1)
              + np.zeros(cycles.shape, dtype=int)).ravel()[order]
    firsts: list[tuple[int, dict[str, Any]]] = []  # (rank, config)
    for code in np.unique(layout):
        for rank in np.flatnonzero(layout == code).tolist():
            if (c := legal(int(order[rank]))) is not None:
                firsts.append((rank, c))
                break
    picked = [c for _, c in sorted(firsts, key=lambda rc: rc[0])]  # in estimate order
    for i in order.tolist():
        if len(picked) >= n:
            break
        c = legal(i)
        if c is not None and c not in picked:
            picked.append(c)
    return picked[:n]
