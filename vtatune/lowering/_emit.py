"""Emitting a planned schedule: loop tree -> TVM's dependencies -> vthreads -> instructions.

The loop tree (with TVM's dependencies and vthreads) is recorded once per loop structure
(:mod:`._skeleton`) into the command queue's loop program: each loop variable is a slot,
each leaf is bound to its thread with the thread's SRAM bases, coordinates and kernels,
every DRAM address is recorded as its constant and per-slot coefficients, and the input
windows (origin and shape per tile row and column) are tables. The queue then runs the
whole nest in one compiled pass.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from simulator.isa import MemId, Opcode
from simulator.jit import njit
from simulator.program import Program, layout_tensors
from vtatune.lowering._carry import FRESH, Carry
from vtatune.lowering._context import channel_tile, context
from vtatune.lowering._dma import pattern_2d, window
from vtatune.lowering._plan import Plan, _alu_kernels
from vtatune.lowering._runtime import (
    _D_COEF,
    _D_DRAM,
    _D_GW,
    _D_MEM,
    _D_OPCODE,
    _D_REUSE,
    _D_SCOEF,
    _D_SRAM,
    _D_SRAM_LOOPS,
    _D_STAGE,
    _D_STRIDE,
    _D_WIDTH,
    _D_WINDOW,
    _D_X,
    _D_XSLOT,
    _D_Y,
    _D_YMUL,
    _D_YOFF,
    _D_YSLOT,
    _K_UOPS,
    _K_WIDTH,
    _OP_DMA,
    _OP_END,
    _OP_KERNEL,
    _OP_LOOP,
    _OP_MAX_ROWS,
    COMPUTE,
    LOAD,
    NSLOTS,
    STORE,
    _table_row,
    run_program,
    window_tables,
)
from vtatune.lowering._skeleton import (
    _B,
    _BI,
    _C,
    _G,
    _H,
    _K0,
    _M_ALU,
    _M_BIAS,
    _M_GEMM,
    _M_INP,
    _M_RESET,
    _M_STORE,
    _M_WGT,
    _NLOOPS,
    _SLOT,
    _W,
    _skeleton,
    epilogue_leaves,
)
from vtatune.workloads import CHANNEL_TENSORS, SHIFTS, GemmWorkload


@lru_cache(maxsize=256)
def _tensors(workload, hw, bias: bool):
    """The DRAM layout: a function of the workload (a per-channel shift its epilogue
    reads), hardware and bias only."""
    g = context(workload, hw)
    B, BI, BO = hw.batch, hw.block_in, hw.block_out
    gemm = isinstance(workload, GemmWorkload)
    if gemm:
        specs = [("data", (g.nb, g.cib, B, BI), "int8", "input"),
                 ("weight", (g.cob, g.cib, BO, BI), "int8", "input")]
        out_shape = (g.nb, g.cob, B, BO)
    else:
        # conv2d_transpose: "data" is the stride-dilated input (TVM's DilatedInput, which
        # the host writes to DRAM before VTA runs).
        # packed by BLOCK_OUT when BLOCK_OUT > BLOCK_IN (the previous layer's output layout)
        specs = [("data", (g.nb, g.in_blocks // g.in_pack, g.h, g.w, B, BI * g.in_pack),
                  "int8", "input"),
                 ("weight", (g.cob, g.cib, g.k, g.k, BO, BI), "int8", "input")]
        # packed by BLOCK_IN when BLOCK_IN > BLOCK_OUT (the next layer's input layout)
        out_shape = (g.nb, g.cob // g.out_pack, g.oh, g.ow, B, BO * g.out_pack)
    planes = workload.epilogue.shift_planes
    if bias:
        specs.append(("bias", (g.nb, g.cob, B, BO), "int32", "input"))
    if planes:  # one plane per shift the epilogue reads (SHIFTS), one after the other
        specs.append(("shift", (planes, g.nb, g.cob, B, BO)[planes == 1:], "int32", "input"))
    specs.append(("output", out_shape, "int8", "output"))
    align = max(hw.inp_elem_bytes, hw.wgt_elem_bytes, hw.acc_elem_bytes, hw.out_elem_bytes)
    return layout_tensors(specs, align)


@lru_cache(maxsize=256)
def _layout(workload, hw, bias: bool, channels: tuple[str, ...]):
    """(tensors, DRAM bytes, the DRAM bases of the data, weights, first per-channel tensor,
    output and second per-channel tensor in their elements (``channels``: the per-channel
    tensors in the order of their ACC tiles; 0 where none), and a shift plane's elements:
    the third and later tensors are the next planes): :func:`_tensors` and what the queue
    program reads of it."""
    tensors, dram_bytes = _tensors(workload, hw, bias)
    base = {t.name: t.address for t in tensors}
    g = context(workload, hw)
    plane = g.nb * g.cob  # a shift plane's ACC elements
    channel = [base["bias"] // hw.acc_elem_bytes if name == "bias" else
               base["shift"] // hw.acc_elem_bytes + SHIFTS.index(name) * plane
               for name in channels] + [0, 0]
    # the emitter finds channel c > 0 at the second's base + (c - 1) planes
    if any(channel[c] != channel[1] + (c - 1) * plane for c in range(2, len(channels))):
        raise ValueError(f"per-channel tensors {channels}: past the first, the emitter reads "
                         "shift planes in order")
    return tensors, dram_bytes, (
        base["data"] // hw.inp_elem_bytes, base["weight"] // hw.wgt_elem_bytes,
        channel[0], base["output"] // hw.out_elem_bytes, channel[1], plane)


@lru_cache(maxsize=4096)
def _load_patterns(tile_co: int, tile_ci: int, cib: int, kk: int, rows: int, cob: int
                   ) -> tuple[int, ...]:
    """The 2D DMA shapes (y, x, stride) of a weight tile load, then of a bias tile load
    (``rows`` rows of ``tile_co`` blocks: lowering.channel_tile)."""
    return (*pattern_2d([(tile_co, cib * kk), (tile_ci, kk), (kk, 1)]),
            *pattern_2d([(rows, cob), (tile_co, 1)]))


@lru_cache(maxsize=1024)
def _windows(p: int, s: int, k: int, ntiles: int, size: int, extent: int):
    """Per tile: (first row, id of its (rows, pads) shape); and the shapes by id."""
    ids: dict[tuple[int, int, int], int] = {}
    starts = []
    for tile in range(ntiles):
        y0, n, p0, p1 = window(p, s, k, tile, size, extent)
        starts.append((y0, ids.setdefault((n, p0, p1), len(ids))))
    return tuple(starts), tuple(ids)


@lru_cache(maxsize=1024)
def _input_windows(p: int, s: int, k: int, oh: int, ow: int, gh: int, gw: int, tile_h: int,
                   tile_w: int, nch: int, split: bool, pk: int, rows: bool = False):
    """The queue's window tables of the input loads (see CommandQueue.set_windows). With
    the input packed by BLOCK_OUT (``pk`` BLOCK_IN blocks a pixel, lowering.input_pack) a
    row's columns, pads and stride count pk elements a pixel. ``rows``: a GEMM's rows as
    pixels (lowering.rows_context), ``nch`` of each pixel's ``pk`` blocks."""
    ywin, yshapes = _windows(p, s, k, oh // tile_h, tile_h, gh)
    xwin, xshapes = _windows(p, s, k, ow // tile_w, tile_w, gw)
    xwin = [(x0 * pk, i) for x0, i in xwin]
    row_len = gw * pk
    shapes = []  # [y id][x id] -> (y_size, x_size, x_stride, y_pad_0, y_pad_1, x_pad_0, x_pad_1)
    for ny, py0, py1 in yshapes:
        row = []
        for nx, px0, px1 in xshapes:
            if p > 0:
                row.append((ny, nx * pk, row_len, py0, py1, px0 * pk, px1 * pk))
            elif rows:
                row.append((*pattern_2d([(ny, row_len), (nx, pk), (nch, 1)]), 0, 0, 0, 0))
            elif split:
                row.append((*pattern_2d([(ny, row_len), (nx * pk, 1)]), 0, 0, 0, 0))
            else:
                row.append((*pattern_2d([(nch // pk, gh * row_len), (ny, row_len),
                                         (nx * pk, 1)]), 0, 0, 0, 0))
        shapes.append(row)
    return window_tables(ywin, xwin, shapes)


def emit(plan: Plan, carry: Carry = FRESH, stream: str = "tvm"
         ) -> tuple[Program, tuple[tuple[int, int], ...]]:
    """The program of ``plan`` after a stream that left ``carry`` (tokens in the FIFOs,
    pops pending in the runtime's queue), and the pops it leaves pending itself.
    ``stream="v0.1"`` rebuilds the stream vtatune 0.1 emitted (see :func:`lower`)."""
    v01 = _stream_v01(stream)
    hw, g, sch = plan.hw, plan.geo, plan.schedule
    tensors, dram_bytes, bases = _layout(plan.workload, hw, plan.bias, plan.channels)
    tile_b, counts = sch.tile_b, g.counts
    # --- the loop structure (its queue program is cached) and this schedule's extents ----
    extents = [1] * NSLOTS
    for axis in sch.outer_order:
        extents[_SLOT[axis]] = counts[axis]
    extents[_BI], extents[_K0] = tile_b, g.cib // sch.tile_ci
    outer = sch.outer_order
    if plan.group_loop:
        outer = outer.replace("c", "gc")
        extents[_G], extents[_C] = g.groups, plan.group_loop
    looped = tuple(axis for axis in (*outer, "bi", "k0") if extents[_SLOT[axis]] > 1)
    # A tile is stored by one DMA per element of its looped dims (outermost first): one
    # store inside those loops, on the slots after the tile loops' (see _expand).
    store = [0] * 15  # (size, DRAM stride, ACC stride) of each store dim
    for j, (size, d_st, a_st) in enumerate(plan.store_loops):
        store[3 * j:3 * j + 3] = size, d_st, a_st
    split = g.p > 0 or plan.inp_split
    nchan = plan.inp_channels // g.in_pack if split else 1  # input loads per load step
    sk = _skeleton(looped, epilogue_leaves(plan.alu_steps), plan.nthreads, v01)
    windows = _input_windows(g.p, g.s, g.k, g.oh, g.ow, g.h, g.w, sch.tile_h, sch.tile_w,
                             plan.inp_channels, split, g.in_pack, g.rows)
    reset_axes, reset_folds, gemm_axes, gemm_folds, alu_rows, alu_uops, kbias = (
        _kernel_prototypes(plan))
    kk = g.k * g.k
    cht = channel_tile(g, sch)
    pv = np.array((
        sch.oc_nthread, sch.h_nthread, tile_b, sch.tile_co, sch.tile_ci, sch.tile_h,
        sch.tile_w, g.cib, g.cob, g.h, g.w, g.in_pack, kk, g.oh, g.ow, g.out_pack, g.in_blocks,
        plan.group_loop, plan.groups_per_tile, g.groups, *bases, plan.inp_tile, plan.wgt_tile,
        plan.acc_tile, plan.bias_tile, plan.nthreads, g.eh * g.ew * g.in_pack, int(sch.reuse),
        *_load_patterns(sch.tile_co, sch.tile_ci, g.cib, kk, cht // sch.tile_co, g.cob),
        *plan.store_pattern, *store,
        nchan, int(g.rows), cht, *extents), np.int64)
    ops, dmas, kernels, kernel_uops, capacity = _queue_tables(
        pv, sk.ops, reset_axes, reset_folds, gemm_axes, gemm_folds,
        alu_rows, alu_uops, kbias)
    pending = np.zeros(8, np.int64)
    for src, dst in carry.pending:
        pending[2 * dst + (0 if src < dst else 1)] = 1
    table, uops = run_program(ops, dmas, windows, kernels, kernel_uops, hw.uop_depth, pending,
                              int(v01), capacity)
    return Program(table, uops, tensors, dram_bytes, carry.tokens), sk.after_sync


# The DMA calls of a leaf: one row of the queue's DMA table each (_DMA_BIAS: a per-channel
# tensor's, the bias's or the shift's, its index among the plan's channels in column 2).
_DMA_INP, _DMA_WGT, _DMA_BIAS, _DMA_STORE = range(4)


@njit(inner=True)
def _open_loop(ops, open_at, runs, depth, w, slot, extent):
    """Write op ``w``: a loop on ``slot`` opened at ``depth`` (its end is filled in by
    :func:`_close_loop`); a call inside it runs ``extent`` times as often."""
    ops[w, 0], ops[w, 1], ops[w, 2], ops[w, 3] = _OP_LOOP, slot, extent, -1
    open_at[depth] = w
    runs[depth + 1] = runs[depth] * extent


@njit(inner=True)
def _close_loop(ops, open_at, depth, w):
    """Write op ``w``: the end of the loop open at ``depth``, which jumps back to it, and
    point the loop's op at it."""
    start = open_at[depth]
    ops[start, 3] = w
    ops[w, 0], ops[w, 1], ops[w, 2], ops[w, 3] = _OP_END, ops[start, 1], ops[start, 2], start


@njit(inner=True)
def _expand(template, ext, nchan, store_sizes, tile_b, nthreads, nalu):
    """A skeleton's queue program for a schedule: its ops (loops with their extents and
    matching ends), per DMA op (kind, thread, channel block) in order, and the table's
    first size (one row per executed call, plus a synchronize's). ``ext``: each slot's
    extent; ``nchan``: input loads per load step; ``store_sizes``: per store dim its size
    (a dim of size > 1 is a loop, on slot ``_NLOOPS + dim``). Kernel ids: reset (thread,
    batch row), GEMM (thread, batch row), ALU (thread, step), as :func:`_queue_tables`
    lays them out."""
    nstore = 0
    for j in range(store_sizes.shape[0]):
        if store_sizes[j] > 1:
            nstore += 1
    m = nd = 0
    for r in range(template.shape[0]):
        code = template[r, 0]
        if code == _M_INP:
            m += nchan
            nd += nchan
        elif code == _M_STORE:
            m += 2 * nstore + 1
            nd += 1
        else:
            m += 1
            if code == _M_WGT or code == _M_BIAS:
                nd += 1
    ops = np.zeros((m, 4), np.int64)
    dmas = np.zeros((nd, 3), np.int64)
    open_at = np.zeros(m + 1, np.int64)  # the open loops' LOOP ops
    runs = np.ones(m + 1, np.int64)  # runs[depth]: times a call at that depth runs
    depth = w = d = 0
    capacity = 2 * _OP_MAX_ROWS
    select = _BI if tile_b > 1 else -1  # the kernel of a batch row: first id + v[bi]
    for r in range(template.shape[0]):
        code, t = template[r, 0], template[r, 1]
        if code == _OP_LOOP:
            slot = template[r, 1]
            _open_loop(ops, open_at, runs, depth, w, slot, ext[slot])
            depth += 1
            w += 1
        elif code == _OP_END:
            depth -= 1
            _close_loop(ops, open_at, depth, w)
            w += 1
        elif code == _M_STORE:
            base = depth
            for j in range(store_sizes.shape[0]):
                if store_sizes[j] > 1:
                    _open_loop(ops, open_at, runs, depth, w, _NLOOPS + j, store_sizes[j])
                    depth += 1
                    w += 1
            ops[w, 0], ops[w, 1] = _OP_DMA, d
            dmas[d, 0], dmas[d, 1] = _DMA_STORE, t
            capacity += runs[depth]
            w += 1
            d += 1
            while depth > base:
                depth -= 1
                _close_loop(ops, open_at, depth, w)
                w += 1
        elif code == _M_INP or code == _M_WGT or code == _M_BIAS:
            kind = _DMA_INP if code == _M_INP else (_DMA_WGT if code == _M_WGT else _DMA_BIAS)
            for c in range(nchan if code == _M_INP else 1):
                ops[w, 0], ops[w, 1] = _OP_DMA, d
                # an input load's channel block, a per-channel tensor's index
                dmas[d, 0], dmas[d, 1] = kind, t
                dmas[d, 2] = c if code == _M_INP else template[r, 2]
                capacity += runs[depth]
                w += 1
                d += 1
        else:
            if code == _M_RESET:
                ops[w, 0], ops[w, 1], ops[w, 2] = _OP_KERNEL, t * tile_b, select
            elif code == _M_GEMM:
                ops[w, 0], ops[w, 1], ops[w, 2] = _OP_KERNEL, (nthreads + t) * tile_b, select
            elif code == _M_ALU:
                ops[w, 0], ops[w, 1], ops[w, 2] = (
                    _OP_KERNEL, 2 * nthreads * tile_b + t * nalu + template[r, 2], -1)
            else:  # push, pop, synchronize
                ops[w, 0], ops[w, 1], ops[w, 2] = code, template[r, 1], template[r, 2]
            capacity += runs[depth]
            w += 1
    return ops, dmas, capacity


def _kernel_prototypes(plan: Plan) -> tuple[np.ndarray, int, np.ndarray, int, np.ndarray,
                                             np.ndarray, np.ndarray]:
    """What :func:`_queue_tables` builds thread 0's first reset, GEMM and ALU kernels from
    (every thread and batch row shares a kernel's loops and uop offsets; only its SRAM bases
    move them): the reset's and the GEMM's axes (:func:`_axes_table`) and folds, and the
    ALU kernels (:func:`_alu_prototypes`)."""
    return (_axes_table(plan.reset_axes), plan.reset_folds, _axes_table(plan.gemm_axes),
            plan.gemm_folds, *_alu_prototypes(plan.channel_bases(0), plan.alu_flat,
                                              plan.alu_bias, plan.alu_steps))


@lru_cache(maxsize=4096)
def _axes_table(axes) -> np.ndarray:
    """A kernel's axes (name, extent, (dst, src, wgt) coefficients) as (extent, dst, src,
    wgt) rows, outermost first."""
    table = np.array([(e, *c) for _, e, c in axes], np.int64).reshape(-1, 4)
    table.flags.writeable = False
    return table


@lru_cache(maxsize=1024)
def _alu_prototypes(channel_at: tuple[tuple[str, int], ...], alu_flat, alu_bias, alu_steps
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Thread 0's ALU kernels: their kernel table rows (uop count, is ALU, fields, first
    uop in their uops), their uops, and per kernel whether it reads a per-channel tile."""
    kernels = _alu_kernels(0, channel_at, alu_flat, alu_bias, alu_steps)
    rows = np.zeros((len(kernels), _K_WIDTH), np.int64)
    if kernels:
        rows[:, :_K_UOPS] = [_table_row(k) for k in kernels]
        rows[1:, _K_UOPS] = np.cumsum(rows[:-1, 0])
    parts = (rows, np.concatenate([k.uop_table for k in kernels]) if kernels
             else np.zeros((0, 3), np.int64),
             np.array([tensor in CHANNEL_TENSORS for _, _, tensor in alu_steps], np.int64))
    for part in parts:
        part.flags.writeable = False
    return parts


@njit(inner=True)
def _unrolled_count(axes, folds):
    """Uops of a kernel over ``axes`` with ``folds`` of them folded."""
    count = 1
    for j in range(min(folds, axes.shape[0]), axes.shape[0]):
        count *= axes[j, 0]
    return count


@njit(inner=True)
def _fold_prototype(axes, folds, reset, row, uops, at):
    """A reset or GEMM kernel over ``axes`` (:func:`_axes_table`) at SRAM bases 0, as
    :func:`~vtatune.lowering._plan._fold_kernel` builds it: the ``folds`` (at most two)
    outermost axes fold into the instruction's loops, the rest unroll into uops (innermost
    fastest; a reset's uops name only their ACC row). Writes its kernel table row into
    ``row`` and its uops into ``uops`` from ``at`` on; returns the next free uop."""
    n = axes.shape[0]
    nf = min(folds, n)
    count = _unrolled_count(axes, folds)
    for u in range(count):
        rem = u
        d = s = w = 0
        for j in range(n - 1, nf - 1, -1):
            e = axes[j, 0]
            idx = rem % e
            rem //= e
            d += idx * axes[j, 1]
            if not reset:
                s += idx * axes[j, 2]
                w += idx * axes[j, 3]
        uops[at + u, 0] = d
        uops[at + u, 1] = s
        uops[at + u, 2] = w
    # (uop count, is ALU, reset, iter_out, iter_in, dst_o, dst_i, src_o, src_i, wgt_o,
    # wgt_i, 0, first uop): a missing loop is (1, 0, 0, 0)
    row[:] = 0
    row[0], row[2], row[3], row[4], row[_K_UOPS] = count, reset, 1, 1, at
    for j in range(nf):
        row[3 + j] = axes[j, 0]
        row[5 + j] = axes[j, 1]
        if not reset:
            row[7 + j] = axes[j, 2]
            row[9 + j] = axes[j, 3]
    return at + count


@njit(inner=True)
def _prototypes(reset_axes, reset_folds, gemm_axes, gemm_folds, alu_rows, alu_uops):
    """Thread 0's reset, GEMM and ALU kernels: kernel table rows (the last column: the
    kernel's first uop) and their uops, in that order."""
    nalu = alu_rows.shape[0]
    total = (_unrolled_count(reset_axes, reset_folds) + _unrolled_count(gemm_axes, gemm_folds)
             + alu_uops.shape[0])
    rows = np.zeros((2 + nalu, _K_WIDTH), np.int64)
    uops = np.zeros((total, 3), np.int64)
    at = _fold_prototype(reset_axes, reset_folds, 1, rows[0], uops, 0)
    at = _fold_prototype(gemm_axes, gemm_folds, 0, rows[1], uops, at)
    for i in range(nalu):
        for j in range(_K_WIDTH):
            rows[2 + i, j] = alu_rows[i, j]
        rows[2 + i, _K_UOPS] += at
    for u in range(alu_uops.shape[0]):
        for j in range(3):
            uops[at + u, j] = alu_uops[u, j]
    return rows, uops


# The plan vector :func:`_queue_tables` reads (see :func:`emit`). _P_BIAS0, _P_BIAS1: the
# DRAM bases of the first two per-channel tensors (the bias, the shift) in the order of their
# tiles; _P_CPLANE: how far each later one (the next shift plane) lies past the one before.
(_P_OCN, _P_HN, _P_TB, _P_TCO, _P_TCI, _P_TH, _P_TW, _P_CIB, _P_COB, _P_GH, _P_GW, _P_PK, _P_KK,
 _P_OH, _P_OW, _P_OPK, _P_INB, _P_GLOOP, _P_PERTILE, _P_GROUPS, _P_INP0, _P_WGT0, _P_BIAS0,
 _P_OUT0, _P_BIAS1, _P_CPLANE, _P_INPT, _P_WGTT, _P_ACCT, _P_BIAST, _P_NT, _P_CHAN, _P_REUSE,
 _P_WGT2D, _P_BIAS2D, _P_OUT2D, _P_STORE, _P_NCHAN, _P_ROWS, _P_CHT, _P_EXTENTS) = (
    *range(33), 33, 36, 39, 42, 57, 58, 59, 60)


@njit(cache=True)
def _queue_tables(pv, template, reset_axes, reset_folds, gemm_axes,
                  gemm_folds, alu_rows, alu_uops, kbias):
    """The queue program of a schedule (the command queue's ops, DMA table, kernel table,
    kernels' micro-ops and first table size) from its loop structure's skeleton and the
    plan vector ``pv``. Every DRAM address is affine in the loop variables (slots) and the
    thread's coordinates (t_h, t_oc) = divmod(thread, oc_nthread); each kernel is thread
    0's prototype (:func:`_prototypes`) moved by the thread's and the batch row's SRAM
    bases."""
    kproto, kuops = _prototypes(reset_axes, reset_folds, gemm_axes, gemm_folds, alu_rows,
                                alu_uops)
    ops, dma_ops, capacity = _expand(template, pv[_P_EXTENTS:], pv[_P_NCHAN],
                                     pv[_P_STORE:_P_STORE + 15:3], pv[_P_TB], pv[_P_NT],
                                     alu_rows.shape[0])
    oc_n, h_n, tile_b, tile_co = pv[_P_OCN], pv[_P_HN], pv[_P_TB], pv[_P_TCO]
    tile_ci, cib, cob = pv[_P_TCI], pv[_P_CIB], pv[_P_COB]
    kk, ohw, opk = pv[_P_KK], pv[_P_OH] * pv[_P_OW], pv[_P_OPK]
    plane = pv[_P_GH] * pv[_P_GW]
    rows = pv[_P_ROWS]  # a GEMM's rows as pixels: channel blocks are a pixel's elements
    ocs = 1 if rows else ohw  # DRAM elements from an output channel block to the next
    # The oc tile: (v[g] group_loop + v[c]) oc_n + t_oc, and the first group it reads
    # (group_conv2d; 0 otherwise): v[g] with a group loop, else oc tile x groups per tile.
    oc_g, oc_c = pv[_P_GLOOP] * oc_n, oc_n
    fg_g = fg_c = fg_t = 0
    if pv[_P_GROUPS] > 1:
        if pv[_P_GLOOP]:
            fg_g = 1
        else:
            per_tile = pv[_P_PERTILE]
            fg_g, fg_c, fg_t = oc_g * per_tile, oc_c * per_tile, per_tile
    nd = dma_ops.shape[0]
    dmas = np.zeros((nd, _D_WIDTH), np.int64)
    for d in range(nd):
        kind, t, c = dma_ops[d, 0], dma_ops[d, 1], dma_ops[d, 2]
        t_h, t_oc = t // oc_n, t % oc_n
        row = dmas[d]
        if kind == _DMA_INP:
            # ((v[b] tile_b + v[bi]) in_blocks + first group cib + v[k0] tile_ci) gh gw; the
            # window (origin and shape: the window tables) of row tile v[h] h_n + t_h and
            # column tile v[w]
            row[_D_OPCODE], row[_D_MEM], row[_D_STAGE] = Opcode.LOAD, MemId.INP, LOAD
            row[_D_SRAM] = t * pv[_P_INPT] + c * pv[_P_CHAN]
            row[_D_DRAM] = pv[_P_INP0] + (fg_t * t_oc * cib + c * pv[_P_PK]) * plane
            row[_D_COEF + _B] = tile_b * pv[_P_INB] * plane
            row[_D_COEF + _BI] = pv[_P_INB] * plane
            row[_D_COEF + _K0] = tile_ci * (1 if rows else plane)
            row[_D_COEF + _G] = fg_g * cib * plane
            row[_D_COEF + _C] = fg_c * cib * plane
            row[_D_REUSE] = pv[_P_REUSE]
            row[_D_WINDOW], row[_D_GW], row[_D_YSLOT] = 1, pv[_P_GW] * pv[_P_PK], _H
            row[_D_YMUL], row[_D_YOFF], row[_D_XSLOT] = h_n, t_h, _W
        elif kind == _DMA_WGT:
            # (oc tile tile_co cib + v[k0] tile_ci) k k
            row[_D_OPCODE], row[_D_MEM], row[_D_STAGE] = Opcode.LOAD, MemId.WGT, LOAD
            row[_D_SRAM] = t * pv[_P_WGTT]
            row[_D_DRAM] = pv[_P_WGT0] + t_oc * tile_co * cib * kk
            row[_D_COEF + _G] = oc_g * tile_co * cib * kk
            row[_D_COEF + _C] = oc_c * tile_co * cib * kk
            row[_D_COEF + _K0] = tile_ci * kk
            row[_D_Y], row[_D_X] = pv[_P_WGT2D], pv[_P_WGT2D + 1]
            row[_D_STRIDE] = pv[_P_WGT2D + 2]
            row[_D_REUSE] = pv[_P_REUSE]
        elif kind == _DMA_BIAS:
            # (v[b] tile_b + v[bi]) cob + oc tile tile_co, after every thread's ACC tile:
            # the thread's per-channel area, tensor c's tile_b x tile_co tile in it
            row[_D_OPCODE], row[_D_MEM], row[_D_STAGE] = Opcode.LOAD, MemId.ACC, COMPUTE
            row[_D_SRAM] = pv[_P_NT] * pv[_P_ACCT] + t * pv[_P_BIAST] + c * pv[_P_CHT]
            row[_D_DRAM] = (pv[_P_BIAS0] if c == 0 else pv[_P_BIAS1] + (c - 1) * pv[_P_CPLANE]
                            ) + t_oc * tile_co
            if rows:  # one per row: the tile's rows, (v[h] h_n + t_h) tile_h on
                row[_D_DRAM] += t_h * pv[_P_TH] * cob
                row[_D_COEF + _H] = h_n * pv[_P_TH] * cob
            row[_D_COEF + _B] = tile_b * cob
            row[_D_COEF + _BI] = cob
            row[_D_COEF + _G] = oc_g * tile_co
            row[_D_COEF + _C] = oc_c * tile_co
            row[_D_Y], row[_D_X] = pv[_P_BIAS2D], pv[_P_BIAS2D + 1]
            row[_D_STRIDE] = pv[_P_BIAS2D + 2]
        else:
            # the tile's first pixel: (v[b] tile_b cob + oc tile tile_co) oh ow + ((v[h] h_n
            # + t_h) tile_h ow + v[w] tile_w) out_pack (its first channel block starts a
            # BLOCK_IN block: store_layout rule); then the store's own loops
            row[_D_OPCODE], row[_D_MEM], row[_D_STAGE] = Opcode.STORE, MemId.OUT, STORE
            row[_D_SRAM] = t * pv[_P_ACCT]
            row[_D_DRAM] = (pv[_P_OUT0] + t_oc * tile_co * ocs
                            + t_h * pv[_P_TH] * pv[_P_OW] * opk)
            row[_D_COEF + _B] = tile_b * cob * ohw
            row[_D_COEF + _G] = oc_g * tile_co * ocs
            row[_D_COEF + _C] = oc_c * tile_co * ocs
            row[_D_COEF + _H] = h_n * pv[_P_TH] * pv[_P_OW] * opk
            row[_D_COEF + _W] = pv[_P_TW] * opk
            for j in range(5):
                if pv[_P_STORE + 3 * j] > 1:
                    row[_D_COEF + _NLOOPS + j] = pv[_P_STORE + 3 * j + 1]
                    row[_D_SCOEF + _NLOOPS + j] = pv[_P_STORE + 3 * j + 2]
                    row[_D_SRAM_LOOPS] = 1
            row[_D_Y], row[_D_X] = pv[_P_OUT2D], pv[_P_OUT2D + 1]
            row[_D_STRIDE] = pv[_P_OUT2D + 2]
    # kernels: reset (thread, batch row), GEMM (thread, batch row), ALU (thread, step)
    nt, acc_tile, inp_tile, wgt_tile = pv[_P_NT], pv[_P_ACCT], pv[_P_INPT], pv[_P_WGTT]
    acc_row = acc_tile // tile_b
    nalu = kproto.shape[0] - 2
    kernels = np.zeros((2 * nt * tile_b + nt * nalu, _K_WIDTH), np.int64)
    total = nt * tile_b * (kproto[0, 0] + kproto[1, 0])
    for i in range(nalu):
        total += nt * kproto[2 + i, 0]
    uops = np.zeros((total, 3), np.int64)
    k = at = 0
    for proto in range(2):
        for t in range(nt):
            for bi in range(tile_b):
                d = t * acc_tile + bi * acc_row  # the batch row's ACC row
                if proto == 0:  # reset: its ACC row only
                    at = _place(kernels, uops, k, at, kproto, kuops, 0, d, 0, 0)
                else:  # GEMM: and the thread's INP and WGT tiles
                    at = _place(kernels, uops, k, at, kproto, kuops, 1, d, t * inp_tile,
                                t * wgt_tile)
                k += 1
    for t in range(nt):
        for i in range(nalu):  # the thread's ACC tile (a bias kernel: and its bias tile)
            d = t * acc_tile
            at = _place(kernels, uops, k, at, kproto, kuops, 2 + i, d,
                        t * pv[_P_BIAST] if kbias[i] else d, 0)
            k += 1
    return ops, dmas, kernels, uops, capacity


@njit(inner=True)
def _place(kernels, uops, k, at, kproto, kuops, proto, d, s, w):
    """Kernel ``k``: prototype ``proto`` with its uops moved by (d, s, w), written from uop
    ``at`` on; returns the next free uop."""
    for j in range(_K_UOPS):
        kernels[k, j] = kproto[proto, j]
    kernels[k, _K_UOPS] = at
    first = kproto[proto, _K_UOPS]
    for u in range(kproto[proto, 0]):
        uops[at, 0] = kuops[first + u, 0] + d
        uops[at, 1] = kuops[first + u, 1] + s
        uops[at, 2] = kuops[first + u, 2] + w
        at += 1
    return at


#: The streams :func:`emit` can build: TVM's (``vta/runtime/runtime.cc`` and CoProcSync as
#: TVM v0.14 has them) and vtatune 0.1's, which merged a push into a load or compute NOP and
#: drained a single-thread tile loop before the synchronize (the RTL measurements in tests/data ran
#: those streams: :mod:`vtatune.fidelity` rebuilds them to score the timing model).
STREAMS = ("tvm", "v0.1")


def _stream_v01(stream: str) -> bool:
    if stream not in STREAMS:
        raise ValueError(f"unknown stream rules {stream!r} (known: {', '.join(STREAMS)})")
    return stream == "v0.1"
