"""The first compiled pass of the timing model: every instruction's module, FIFO masks and
cycles (:func:`_costs`), on the program's instruction table (:mod:`simulator.rows`)."""

from __future__ import annotations

from dataclasses import fields
from functools import lru_cache

import numpy as np

import simulator.rows as R
from simulator.errors import ProgramError
from simulator.functional import FIFOS, pops_of, pushes_of
from simulator.isa import FinishInsn, MemId, MemInsn, Opcode
from simulator.jit import njit
from simulator.timing.profile import TimingProfile

_FIFO_IDS = {name: i for i, name in enumerate(FIFOS)}
# Read-channel priority (lower wins a tie): fetch > uop > inp > wgt > acc (VME client order).
_PRIORITY = {MemId.UOP: 1, MemId.INP: 2, MemId.WGT: 3, MemId.ACC: 4,
             MemId.ACC_8BIT: 4}

# The engine works on the instruction table (simulator.rows) with numba: a profile travels
# as an int64 vector indexed by these positions.
_PROFILE_FIELDS = tuple(f.name for f in fields(TimingProfile))
(_BUS, _MAX_BURST, _BOUNDARY, _LATENCY, _REQUEST, _LOAD_DONE, _WIDE_DONE, _PAD_START,
 _HANDSHAKE, _STORE_INSN, _STORE_READ, _CHUNK, _DEPTH, _NOP, _GEMM_PIPE, _ALU_IMM, _ALU_REG,
 _ALU_PIPE) = range(len(_PROFILE_FIELDS))
# Kinds of per-instruction work.
_PLAIN, _READ = 0, 1
_FETCH_PRIORITY = 0  # fetch wins every read-channel tie
_NO_READ = 9  # priority of a candidate that does not read
_COST_ROWS = 9  # rows of the cost table (see _costs)


@lru_cache(maxsize=64)
def _profile_vector(p: TimingProfile) -> np.ndarray:
    vector = np.array([getattr(p, name) for name in _PROFILE_FIELDS], np.int64)
    vector.flags.writeable = False
    return vector


@njit(inner=True)
def _rows_beats(offset, row_bytes, stride_bytes, rows, bus, shift):
    """Beats to read ``rows`` rows of ``row_bytes``, ``stride_bytes`` apart, the first
    starting ``offset`` bytes into a bus word: bursts stream back to back, so only each row's
    alignment to the bus matters. ``shift``: log2 of ``bus`` when it is a power of two (the
    divisions become shifts and masks), else -1. Sizes are non-negative."""
    if row_bytes == 0 or rows == 0:
        return 0
    if shift >= 0:
        mask = bus - 1
        if stride_bytes & mask == 0:  # every row starts at the first one's offset
            return (((offset & mask) + row_bytes - 1 >> shift) + 1) * rows
    rem = stride_bytes % bus
    period = min(rows, bus // _gcd(rem if rem else bus, bus))
    full, rest = rows // period, rows % period
    beats = 0
    for r in range(period):
        o = (offset + r * stride_bytes) % bus
        beats += ((o + row_bytes - 1) // bus + 1) * (full + (1 if r < rest else 0))
    return beats


@njit(inner=True)
def _log2(n):
    """log2 of ``n`` if it is a power of two, else -1."""
    if n < 1 or n & (n - 1):
        return -1
    k = 0
    while (1 << k) < n:
        k += 1
    return k


@njit(inner=True)
def _region_bursts(offset, nbytes, P):
    """Bursts to write ``nbytes`` contiguous bytes starting ``offset`` bytes into a
    burst-boundary window."""
    bus, boundary = P[_BUS], P[_BOUNDARY]
    max_bytes = min(P[_MAX_BURST] * bus, boundary)
    bursts = 0
    pos, end = offset, offset + nbytes
    while pos < end:
        # A burst ends at the next boundary, or after max_burst_beats beats.
        pos = min((pos // boundary + 1) * boundary, (pos // bus) * bus + max_bytes, end)
        bursts += 1
    return bursts


@njit(inner=True)
def _gcd(a, b):
    while b:
        a, b = b, a % b
    return a


@njit(inner=True)
def _rows_bursts(offset, row_bytes, stride_bytes, rows, P):
    """Bursts to write ``rows`` rows of ``row_bytes``, ``stride_bytes`` apart, the first
    starting ``offset`` bytes into a burst-boundary window (a burst never spans rows)."""
    if row_bytes == 0 or rows == 0:
        return 0
    # Row start offsets repeat with a period that divides the boundary: cost one period.
    boundary = P[_BOUNDARY]
    rem = stride_bytes % boundary
    period = min(rows, boundary // _gcd(rem if rem else boundary, boundary))
    full, rest = rows // period, rows % period
    bursts = 0
    for r in range(period):
        n = _region_bursts((offset + r * stride_bytes) % boundary, row_bytes, P)
        bursts += n * (full + (1 if r < rest else 0))
    return bursts


_MEMO_SLOTS = 1 << 12  # distinct store shapes memoised per program (more are computed)


@njit(inner=True)
def _memo_bursts(memo_keys, memo_vals, offset, row_bytes, stride_bytes, rows, P):
    """:func:`_rows_bursts` through an open-addressing table: a stream repeats the same
    few store shapes thousands of times."""
    mask = memo_keys.shape[0] - 1
    h = (offset * 1000003 ^ row_bytes * 8191 ^ stride_bytes * 131071 ^ rows * 524287) & mask
    for _ in range(64):
        k = memo_keys[h]
        if k[0] < 0:
            n = _rows_bursts(offset, row_bytes, stride_bytes, rows, P)
            k[0], k[1], k[2], k[3] = offset, row_bytes, stride_bytes, rows
            memo_vals[h] = n
            return n
        if k[0] == offset and k[1] == row_bytes and k[2] == stride_bytes and k[3] == rows:
            return memo_vals[h]
        h = (h + 1) & mask
    return _rows_bursts(offset, row_bytes, stride_bytes, rows, P)


def _flag_masks() -> tuple[np.ndarray, np.ndarray]:
    """Per (module 0..2, flag bits): bit masks of the FIFOs popped and pushed; -1 if the
    flags are invalid on that module."""
    pops = np.full((3, 16), -1, np.int64)
    pushes = np.full((3, 16), -1, np.int64)
    for m in range(3):
        for bits in range(16):
            pop_prev, pop_next, push_prev, push_next = (bool(bits >> k & 1) for k in range(4))
            probe = FinishInsn(pop_prev, pop_next, push_prev, push_next)
            # FinishInsn is a compute instruction; re-home the flags on module m's NOP.
            insn = probe if m == 1 else MemInsn(
                Opcode.STORE if m == 2 else Opcode.LOAD, MemId.OUT if m == 2 else MemId.INP,
                pop_prev=pop_prev, pop_next=pop_next, push_prev=push_prev,
                push_next=push_next)
            try:
                pops[m, bits] = sum(1 << _FIFO_IDS[f] for f in pops_of(insn))
                pushes[m, bits] = sum(1 << _FIFO_IDS[f] for f in pushes_of(insn))
            except ProgramError:
                pass
    return pops, pushes


_POP_MASK, _PUSH_MASK = _flag_masks()


def _fifo_consumers(pop_mask: np.ndarray) -> np.ndarray:
    """The module that pops each FIFO: every FIFO has exactly one."""
    consumers = np.full(4, -1, np.int64)
    for m in range(3):
        for mask in pop_mask[m]:
            for f in range(4):
                if mask > 0 and mask >> f & 1:
                    assert consumers[f] in (-1, m), "a FIFO popped by two modules"
                    consumers[f] = m
    consumers.flags.writeable = False
    return consumers


_CONSUMER = _fifo_consumers(_POP_MASK)


@njit(cache=True)
def _costs(rows, elem, priority, out_bytes, store_elem, wide_store, P, pop_mask, push_mask,
           out):
    """Per instruction, into the rows of ``out``: module, FIFO masks popped / pushed, kind,
    ``pre`` (a read: cycles to its request; else: all its cycles), ``xfer`` (beats read),
    ``post`` (cycles after the last beat), read priority, and zero-pad elements. A STORE
    costs ``store_elem`` per element on the narrow store unit, its beats on the wide one
    (``wide_store``). Returns the bytes read and written, the GEMM micro-op cycles, and the
    first instruction whose flags its module cannot carry (-1 if none)."""
    n = rows.shape[0]
    mod, pops, pushes, kind = out[0], out[1], out[2], out[3]
    pre, xfer, post, prio, pads = out[4], out[5], out[6], out[7], out[8]
    boundary = P[_BOUNDARY]
    read_bytes = write_bytes = gemm_cycles = 0
    bad = -1
    memo_keys = np.full((_MEMO_SLOTS, 4), -1, np.int64)
    memo_vals = np.empty(_MEMO_SLOTS, np.int64)
    bus = P[_BUS]
    shift = _log2(bus)
    for i in range(n):
        cls = rows[i, 0]
        m = 1
        if cls == R.MEM:  # LOAD / STORE
            mem = rows[i, R.MEM_MEM]
            if rows[i, R.MEM_OPCODE] == Opcode.STORE:
                m = 2
            elif mem == MemId.WGT or mem == MemId.INP:
                m = 0
        bits = rows[i, R.FLAGS]
        mod[i] = m
        kind[i] = _PLAIN
        pre[i] = xfer[i] = post[i] = pads[i] = 0
        prio[i] = _NO_READ
        pops[i] = pop_mask[m, bits]
        pushes[i] = push_mask[m, bits]
        if pops[i] < 0 or pushes[i] < 0:
            if bad < 0:
                bad = i
            continue
        if cls == R.MEM:
            x, y = rows[i, R.MEM_X], rows[i, R.MEM_Y]
            if x == 0:
                pre[i] = P[_NOP]
                continue
            if m == 2:
                bursts = _memo_bursts(memo_keys, memo_vals, rows[i, R.MEM_DRAM] * out_bytes
                                      % boundary, x * out_bytes,
                                      rows[i, R.MEM_STRIDE] * out_bytes, y, P)
                if wide_store:  # a beat per cycle, no SRAM-read stops (TensorStoreWideVME)
                    beats = _rows_beats(rows[i, R.MEM_DRAM] * out_bytes % bus, x * out_bytes,
                                        rows[i, R.MEM_STRIDE] * out_bytes, y, bus, shift)
                    pre[i] = (P[_STORE_INSN] + bursts * (P[_HANDSHAKE] + P[_STORE_READ])
                              + beats)
                else:
                    pre[i] = P[_STORE_INSN] + bursts * P[_HANDSHAKE] + x * y * store_elem
                write_bytes += x * y * out_bytes
            else:
                eb = elem[mem]
                kind[i] = _READ
                y0 = rows[i, R.MEM_Y0]
                pre[i] = P[_REQUEST] + y0
                dram = rows[i, R.MEM_DRAM] * eb
                xfer[i] = _rows_beats(dram & (bus - 1) if shift >= 0 else dram % bus, x * eb,
                                      rows[i, R.MEM_STRIDE] * eb, y, bus, shift)
                post[i] = P[_WIDE_DONE] if eb <= bus else P[_LOAD_DONE]
                pads[i] = ((y0 + y + rows[i, R.MEM_Y1])
                           * (rows[i, R.MEM_X0] + x + rows[i, R.MEM_X1]) - x * y)
                prio[i] = priority[mem]
                read_bytes += x * y * eb
        elif cls == R.GEMM:
            iters = (rows[i, R.GEMM_ITER_OUT] * rows[i, R.GEMM_ITER_IN]
                     * (rows[i, R.GEMM_UOP_END] - rows[i, R.GEMM_UOP_BGN]))
            pre[i] = P[_GEMM_PIPE] + iters
            if not rows[i, R.GEMM_RESET]:
                gemm_cycles += iters
        elif cls == R.ALU:
            iters = (rows[i, R.ALU_ITER_OUT] * rows[i, R.ALU_ITER_IN]
                     * (rows[i, R.ALU_UOP_END] - rows[i, R.ALU_UOP_BGN]))
            per = P[_ALU_IMM] if rows[i, R.ALU_USE_IMM] else P[_ALU_REG]
            pre[i] = P[_ALU_PIPE] + iters * per
        else:  # FINISH
            pre[i] = P[_NOP]
    return read_bytes, write_bytes, gemm_cycles, bad

