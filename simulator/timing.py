"""Event-driven timing model of the VTA hardware, calibrated against VTA's Chisel RTL.

Four modules run concurrently — fetch, load, compute and store — each executing its own
queue strictly in order, one instruction at a time. They are joined by the four token FIFOs
(a pop waits for the matching push, posted when the pushing instruction completes) and
share the memory's read channel; the store module owns the write channel.

How time is spent (every constant is a field of :class:`TimingProfile`; the pynq defaults are
the cycles the RTL (apache/tvm-vta, ``DefaultPynqConfig``) measured under tsim's simulated
memory, see ``scripts/bench_fidelity.py``):

* Reads. A reader's request reaches the memory bridge ``request_cycles`` after it starts
  (``+ y_pad_0`` for a padded LOAD: the loader steps over the top pad rows first). The bridge
  serves requests one after another, in arrival order (ties: fetch > uop > inp > wgt > acc),
  streaming one ``bus_bytes`` beat per cycle with no gap between bursts; a request that finds
  the bridge's queue empty first waits ``read_latency`` cycles (its delay counter only runs
  while requests queue, so consecutive loads never overlap their delays, while a request
  queued behind another one is served as soon as the channel frees).
* Fetch reads the stream in chunks of ``fetch_chunk_insns`` instructions, two beats each
  on a 64-bit bus, and hands the chunk over only when all of it has arrived, one instruction
  per cycle; it reads the next chunk once the last one is handed over. A full module queue
  (``queue_depth``) stalls it. The run starts with the first chunk's request.
* LOAD (INP/WGT/ACC/UOP): its beats, then ``load_done_cycles`` (``wide_load_done_cycles``
  for a loader whose element fits in one beat, as UOP on a 64-bit bus). Zero padding is
  written one element per cycle from ``pad_start_cycles`` after the start, in every cycle
  that no data beat arrives: it is free while the request waits, and costs a cycle per
  element only once it outlasts that wait.
* GEMM: one micro-op iteration per cycle (reset ones too) plus ``gemm_pipeline``. ALU:
  ``alu_imm_cycles`` per iteration with an immediate, ``alu_reg_cycles`` without (one ACC
  read port), plus ``alu_pipeline``. NOP and FINISH: ``nop_cycles``.
* STORE: ``store_insn_cycles``, ``write_handshake`` per write burst (bursts split at
  ``burst_boundary`` and at every row), and per element one cycle per beat of each of its
  BATCH rows plus ``store_read_cycles`` to read the next row from SRAM. That is the RTL's
  narrow store unit (``TensorStoreNarrowVME``), which stops for an SRAM read after every
  row but the burst's last. Where an output element fits in one beat (BATCH x BLOCK_OUT
  bytes <= ``bus_bytes``) the RTL uses its wide store unit instead (``TensorStoreWideVME``,
  chosen in ``TensorStore.scala``): one beat per cycle, each carrying every element of the
  row that falls in that bus word, with no SRAM-read stops. A wide STORE costs
  ``store_insn_cycles``, ``write_handshake + store_read_cycles`` per burst (the same
  command and acknowledgement; the narrow unit's skipped last read is no longer skipped)
  and one cycle per beat, a row's beats counted from its first bus word to its last.
* The cycle count runs from launch to the end of FINISH.

The engine is deterministic: the same program and profile always give the same cycles.
A pop that can never be satisfied, or fetch blocked forever on a full queue, raises
:class:`DeadlockError` naming the instruction.

Speed: the engine runs on the program's instruction table (:mod:`simulator.rows`) in two
numba-compiled passes — :func:`_costs` prices every instruction, :func:`_engine` runs the
events — at a few tens of nanoseconds per instruction. ``tests/_slow_timing.py`` keeps a
plain-Python engine with the same rules; the two give identical results on every test program.

Example:
    >>> from simulator.hardware import DEFAULT
    >>> from simulator.isa import FinishInsn, MemId, MemInsn, Opcode
    >>> from simulator.program import NO_TOKENS, Program
    >>> load = MemInsn(Opcode.LOAD, MemId.INP, 0, 0, 1, 16, 16, push_next=True)
    >>> prog = Program((load, FinishInsn(pop_prev=True)), (), (), 4096)
    >>> r = time_program(prog, DEFAULT)
    >>> r.cycles  # launch, fetch 2 instructions, LOAD of 32 beats, FINISH: as the RTL counts
    82
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, fields, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

import simulator.rows as R
from simulator._jsonfile import load_json
from simulator.errors import ConfigError, DeadlockError, ProgramError
from simulator.functional import FIFOS, pops_of, pushes_of
from simulator.hardware import HardwareConfig
from simulator.isa import FinishInsn, MemId, MemInsn, Opcode
from simulator.jit import njit
from simulator.program import NO_TOKENS, Program, mem_elem_bytes

__all__ = [
    "MODEL_VERSION", "MODULES", "ModuleTime", "TimingProfile", "TimingResult", "TraceRow",
    "time_program",
]

MODULES = ("load", "compute", "store")
_FIFO_IDS = {name: i for i, name in enumerate(FIFOS)}
# Read-channel priority (lower wins a tie): fetch > uop > inp > wgt > acc (VME client order).
_PRIORITY = {MemId.UOP: 1, MemId.INP: 2, MemId.WGT: 3, MemId.ACC: 4,
             MemId.ACC_8BIT: 4}

#: The timing model's rules. Bump it when a rule (not a constant) changes: a profile's
#: :meth:`TimingProfile.fingerprint` covers both, so scores made under other rules are known.
#: rtl-2: the wide store unit (an output element of one beat), after rtl-1 (the RTL calibration).
MODEL_VERSION = "rtl-2"

#: AXI burst length limit (beats) of each board's shell: AXI4's 256 (VTA's ``lenBits`` 8),
#: except the de10nano shell, which limits bursts to 16 beats (AXI3).
_BURST_BEATS = {"de10nano": 16}


@dataclass(frozen=True)
class TimingProfile:
    """Every timing constant of the model, with the pynq defaults measured on VTA's RTL.

    Use :meth:`for_hw` to derive the profile of a hardware preset (bus width, burst limit and
    fetch chunk follow the board; the other constants carry over from the pynq measurements)
    and :meth:`from_json` to override fields from a file.

    >>> p = TimingProfile()
    >>> p.read_latency, p.request_cycles, p.gemm_pipeline, p.fingerprint()[:6] == \\
    ...     TimingProfile().fingerprint()[:6]
    (16, 5, 7, True)
    """

    bus_bytes: int = 8  # bytes per beat (64-bit AXI)
    max_burst_beats: int = 256  # AXI burst length limit (lenBits 8)
    burst_boundary: int = 2048  # bytes; a burst never crosses it (max_burst_beats * bus_bytes)
    read_latency: int = 16  # memory bridge delay of a request that finds its queue empty
    request_cycles: int = 5  # from a reader's start to its request at the bridge
    load_done_cycles: int = 2  # last beat (or pad) to LOAD completion, element wider than a beat
    wide_load_done_cycles: int = 1  # the same for a loader whose element fits in a beat (UOP)
    pad_start_cycles: int = 1  # from a LOAD's start to its first zero-pad write
    write_handshake: int = 3  # cycles per write burst (command and acknowledgement)
    store_insn_cycles: int = 1  # control cycles of a STORE
    store_read_cycles: int = 1  # SRAM read between the rows of beats a STORE writes
    fetch_chunk_insns: int = 128  # instructions per fetch read (max_burst_beats beats)
    queue_depth: int = 512  # per-module instruction queue
    nop_cycles: int = 2  # a NOP (any module) or FINISH
    gemm_pipeline: int = 7  # fixed cycles of a GEMM: decode, uop read, pipeline fill/drain
    alu_imm_cycles: int = 1
    alu_reg_cycles: int = 2
    alu_pipeline: int = 7  # fixed cycles of an ALU instruction

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            low = 0 if f.name in _MAY_BE_ZERO else 1
            if not isinstance(v, int) or isinstance(v, bool) or v < low:
                raise ConfigError(f"timing profile {f.name}: must be an integer >= {low}, "
                                  f"got {v!r}")

    @classmethod
    def for_hw(cls, hw: HardwareConfig) -> TimingProfile:
        """The board's profile, derived by the RTL's rules: beats of the board's bus, bursts of
        its shell's AXI length limit (never crossing their own size), fetch chunks of one
        burst of instructions. Only pynq's (64-bit, 256-beat bursts) is measured."""
        bus = hw.bus_bits // 8
        beats = _BURST_BEATS.get(hw.target, cls.max_burst_beats)
        return cls(bus_bytes=bus, max_burst_beats=beats, burst_boundary=beats * bus,
                   fetch_chunk_insns=max(1, beats * bus // hw.insn_bytes))

    @classmethod
    def from_dict(cls, data: Any, base: TimingProfile | None = None) -> TimingProfile:
        if not isinstance(data, dict):
            raise ConfigError("a timing profile must be a JSON object of fields")
        known = {f.name for f in fields(cls)}
        for key in data:
            if key not in known:
                raise ConfigError(f"timing profile {key}: unknown field (known: "
                                  f"{', '.join(sorted(known))})")
        return replace(base or cls(), **data)

    @classmethod
    def from_json(cls, path: str | Path, base: TimingProfile | None = None) -> TimingProfile:
        data = load_json(path, "timing profile")
        return cls.from_dict(data, base)

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    def fingerprint(self) -> str:
        """``<MODEL_VERSION>:<12 hex digits>`` naming the rules and every constant: two
        profiles with the same fingerprint give the same cycles on every program."""
        return _fingerprint(self)

    def wide_store(self, hw: HardwareConfig) -> bool:
        """Whether ``hw``'s store unit is the RTL's wide one: an output element (BATCH x
        BLOCK_OUT bytes) fits in one beat (``TensorStore.scala``: ``mp.dataBits >=
        tp.tensorSizeBits``). Stock 1x16 on a 128-bit bus is wide, on a 64-bit bus narrow."""
        return hw.out_elem_bytes <= self.bus_bytes

    def store_elem_cycles(self, hw: HardwareConfig) -> float:
        """Cycles a STORE spends per output element. The narrow unit writes each of its
        BATCH rows in beats, then reads the next row from SRAM (3 on pynq: 2 beats + 1
        read); the wide unit writes a beat per cycle, so an element costs its share of a
        beat (1 for 1x16 on a 128-bit bus; bus-word alignment at a row's ends aside)."""
        if self.wide_store(hw):
            return hw.out_elem_bytes / self.bus_bytes
        row_bytes = hw.block_out * hw.out_width // 8
        return hw.batch * (-(-row_bytes // self.bus_bytes) + self.store_read_cycles)


@lru_cache(maxsize=64)
def _fingerprint(p: TimingProfile) -> str:  # every evaluation names its profile: hash once
    text = json.dumps(p.to_dict(), sort_keys=True)
    return f"{MODEL_VERSION}:{hashlib.sha256(f'{MODEL_VERSION}|{text}'.encode()).hexdigest()[:12]}"


_MAY_BE_ZERO = frozenset({"read_latency", "request_cycles", "load_done_cycles",
                          "wide_load_done_cycles", "pad_start_cycles", "write_handshake",
                          "store_insn_cycles", "store_read_cycles", "nop_cycles",
                          "gemm_pipeline", "alu_pipeline"})


@dataclass(frozen=True)
class ModuleTime:
    """Where one module's cycles went."""

    busy: int  # executing instructions (including waits for the read channel)
    stall: int  # ready to start but waiting for a dependency token
    idle: int  # the rest: nothing fetched yet, or done
    mem_wait: int  # part of busy spent waiting for the read channel


@dataclass(frozen=True)
class TraceRow:
    index: int
    module: str
    kind: str
    start: int
    end: int
    token_wait: int  # cycles spent waiting for tokens before starting
    pops: str  # FIFOs popped, e.g. "l2g+s2g"


@dataclass(frozen=True)
class TimingResult:
    """The timing of one run."""

    cycles: int
    modules: dict[str, ModuleTime]
    gemm_cycles: int  # GEMM micro-op cycles doing MACs (fsim's gemm_counter)
    read_bytes: int  # DMA reads including instruction fetch
    write_bytes: int
    serial_cycles: int  # every instruction and fetch read run alone, one after another
    profile: TimingProfile
    trace: tuple[TraceRow, ...] | None = None
    #: tokens left in each FIFO when the stream ends (l2g, g2l, g2s, s2g), for the stream
    #: that runs next (:attr:`simulator.program.Program.tokens_in`)
    tokens_out: tuple[int, int, int, int] = NO_TOKENS

    @property
    def compute_floor(self) -> int:
        """No schedule can beat one GEMM micro-op per cycle."""
        return self.gemm_cycles

    @property
    def memory_floor(self) -> int:
        """Bytes over the busier AXI channel (reads and writes travel separately)."""
        return math.ceil(max(self.read_bytes, self.write_bytes) / self.profile.bus_bytes)

    @property
    def utilization(self) -> float:
        return self.gemm_cycles / self.cycles if self.cycles else 0.0

    def seconds(self, hw: HardwareConfig) -> float:
        return self.cycles / (hw.clock_mhz * 1e6)


# --- per-instruction costs -----------------------------------------------------------------
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
def _board_profile(hw: HardwareConfig) -> TimingProfile:
    return TimingProfile.for_hw(hw)


@lru_cache(maxsize=64)
def _profile_vector(p: TimingProfile) -> np.ndarray:
    vector = np.array([getattr(p, name) for name in _PROFILE_FIELDS], np.int64)
    vector.flags.writeable = False
    return vector


@njit(cache=True)
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


@njit(cache=True)
def _log2(n):
    """log2 of ``n`` if it is a power of two, else -1."""
    if n < 1 or n & (n - 1):
        return -1
    k = 0
    while (1 << k) < n:
        k += 1
    return k


@njit(cache=True)
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


@njit(cache=True)
def _gcd(a, b):
    while b:
        a, b = b, a % b
    return a


@njit(cache=True)
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


@njit(cache=True)
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


@njit(cache=True)
def _read_duration(pre, xfer, post, pads, latency, pad_start):
    """Cycles of a LOAD run alone: its request, the bridge's delay and the beats, or the
    zero padding if it outlasts the wait, then completion. (Scalars only: an array argument
    would cost a reference count per call.)"""
    wait = pre + latency
    if pads and pad_start + pads > wait:
        wait = pad_start + pads
    return wait + xfer + post


# --- the event engine ------------------------------------------------------------------------
# Rows of the engine's working array: each module's queue (0-2), each instruction's position
# in its queue, start, end, dispatch time and token wait, then each FIFO's push times.
_QPOS, _START, _END, _DISPATCH, _TOKEN_WAIT, _PUSH_TIMES = 3, 4, 5, 6, 7, 8
_SCRATCH = _PUSH_TIMES + 4
# Rows of the engine's per-module (busy, stall, memory wait) and per-FIFO state (4 columns).
_BUSY, _STALL, _MEM_WAIT, _HEAD, _POPS_DONE, _NPUSHED = range(6)
_STATE_ROWS = _NPUSHED + 1


@njit(cache=True)
def _engine(costs, P, insn_bytes, scratch, state, tokens_in, consumer):
    """Run the modules over ``costs`` (see :func:`_costs`), using the ``_SCRATCH`` rows of
    ``scratch`` and leaving there per instruction its start, end and token wait (rows
    :data:`_START`, :data:`_END`, :data:`_TOKEN_WAIT`), and in the rows of ``state``
    (:data:`_STATE_ROWS` x 4) per module its busy, stall and memory-wait cycles and, for a
    deadlock, where it stopped: module heads, pops done and pushes made per FIFO. Returns
    (status: 1 on a deadlock, the FINISH time, the serial sum, next to dispatch, chunk
    end). (Only scalars come back: numba boxes each returned array at a cost.)"""
    mod, pops, pushes, kind = costs[0], costs[1], costs[2], costs[3]
    pre, xfer, post, prio, pads = costs[4], costs[5], costs[6], costs[7], costs[8]
    n = mod.shape[0]
    lat, depth, chunk = P[_LATENCY], P[_DEPTH], P[_CHUNK]
    request, pad_start = P[_REQUEST], P[_PAD_START]
    queues = scratch[0:3]
    qlen = np.zeros(3, np.int64)
    qpos = scratch[_QPOS]  # position of each instruction in its module's queue
    for i in range(n):
        m = mod[i]
        qpos[i] = qlen[m]
        queues[m, qlen[m]] = i
        qlen[m] += 1
    start, end, token_wait = scratch[_START], scratch[_END], scratch[_TOKEN_WAIT]
    dispatch = scratch[_DISPATCH]
    start[:] = -1
    dispatch[:] = -1
    push_times = scratch[_PUSH_TIMES:]  # per FIFO, completion time of k-th push
    npushed = np.zeros(4, np.int64)
    for f in range(4):  # tokens left by the stream before: there from the start
        for k in range(tokens_in[f]):
            push_times[f, k] = 0
        npushed[f] = tokens_in[f]
    state[:] = 0
    busy, stall, mem_wait = state[_BUSY], state[_STALL], state[_MEM_WAIT]
    head, pops_done, npushed_out = state[_HEAD], state[_POPS_DONE], state[_NPUSHED]
    free = np.zeros(3, np.int64)  # when each module finishes its current instruction
    # The memory bridge: when its channel frees, and when it last took a request off its
    # queue (a request arriving by then finds the queue busy: no fresh delay).
    chan_free = 0
    last_take = -1
    # Each module's next instruction as a candidate (cand_ok 0: none: its queue is done, its
    # head not dispatched or waiting for a token), kept until something it reads changes:
    # the module ran an instruction (head, free time, pops), its head was dispatched, or a
    # FIFO it pops was pushed (each FIFO has one consumer module).
    stale = np.ones(3, np.int64)
    cand_ok = np.zeros(3, np.int64)
    cand_key = np.zeros(3, np.int64)
    cand_prio = np.zeros(3, np.int64)
    cand_s = np.zeros(3, np.int64)

    # Fetch: chunk reads over the read channel, then dispatch one per cycle.
    beat_per_insn = max(1, insn_bytes // P[_BUS])
    last_size = n - (n - 1) // chunk * chunk
    fetch_next = 0  # next instruction to dispatch
    fetch_req = 0  # when fetch can request the next chunk (if fetch_next starts a chunk)
    chunk_ready = 0  # when the current chunk has fully arrived
    fetch_last = -1  # dispatch time of the previous instruction
    chunk_start = chunk_end = 0  # the chunk being dispatched: [chunk_start, chunk_end)

    serial = 0
    for i in range(n):
        if kind[i] == _READ:
            serial += _read_duration(pre[i], xfer[i], post[i], pads[i], lat, pad_start)
        else:
            serial += pre[i]
    for c in range(0, n, chunk):
        size = min(chunk, n - c)
        serial += request + lat + size * beat_per_insn + size

    finish_time = 0
    remaining = n
    # Run every instruction, not just up to FINISH: one that can never run is a deadlock.
    while remaining:
        # Dispatch what has arrived, as far as queue space allows (no channel use).
        while fetch_next < chunk_end:
            i = fetch_next
            m = mod[i]
            t = max(fetch_last + 1, chunk_ready + i - chunk_start)
            k = qpos[i] - depth
            if k >= 0:
                j = queues[m, k]
                if start[j] < 0:
                    break  # queue full until that instruction starts
                t = max(t, start[j] + 1)
            dispatch[i] = t
            if qpos[i] == head[m]:
                stale[m] = 1  # its module's candidate was waiting for it
            fetch_last = t
            fetch_next += 1
        fetch_waits = fetch_next == chunk_end and chunk_end < n
        if fetch_waits:
            fetch_req = max(fetch_req, fetch_last + 1)

        # Candidates: each module's next instruction, and fetch's next chunk read, keyed by
        # when they start (a read: when its request reaches the bridge). The earliest goes
        # next (ties: read priority), so time only moves forward.
        best_m = -2
        best_key = best_prio = best_s = 0
        if fetch_waits:
            best_s = fetch_req
            best_key = fetch_req + request
            best_m = -1
            best_prio = _FETCH_PRIORITY
        for m in range(3):
            if stale[m]:
                stale[m] = 0
                cand_ok[m] = 0
                h = head[m]
                if h >= qlen[m]:
                    continue
                i = queues[m, h]
                d = dispatch[i]
                if d < 0:
                    continue
                s = free[m] if free[m] > d else d
                pm = pops[i]
                if pm:
                    ready = True
                    for f in range(4):
                        if pm >> f & 1:
                            k = pops_done[f]
                            if k >= npushed[f]:
                                ready = False
                                break
                            if push_times[f, k] > s:
                                s = push_times[f, k]
                    if not ready:
                        continue
                cand_ok[m] = 1
                cand_s[m] = s
                if kind[i] == _READ:
                    cand_key[m], cand_prio[m] = s + pre[i], prio[i]
                else:
                    cand_key[m], cand_prio[m] = s, _NO_READ
            if not cand_ok[m]:
                continue
            key, p = cand_key[m], cand_prio[m]
            if best_m == -2 or key < best_key or (key == best_key and p < best_prio):
                best_m, best_key, best_prio, best_s = m, key, p, cand_s[m]
        if best_m == -2:
            npushed_out[:] = npushed
            return 1, finish_time, serial, fetch_next, chunk_end
        m, s = best_m, best_s
        data = 0
        if best_prio != _NO_READ:  # a request reaches the bridge at best_key
            ready_at = best_key if best_key <= last_take else best_key + lat
            data = chan_free if chan_free > ready_at else ready_at
            last_take = data
        if m < 0:  # fetch reads the next chunk
            size = chunk if chunk_end + chunk <= n else last_size
            chan_free = data + size * beat_per_insn
            chunk_ready = chan_free
            chunk_start = chunk_end
            chunk_end = min(chunk_end + chunk, n)
            continue
        i = queues[m, head[m]]
        ready_at = max(free[m], dispatch[i])
        stall[m] += s - ready_at
        token_wait[i] = s - ready_at
        pm = pops[i]
        if pm:
            for f in range(4):
                if pm >> f & 1:
                    pops_done[f] += 1
        if kind[i] == _READ:
            if data > best_key + lat:
                mem_wait[m] += data - best_key - lat
            chan_free = data + xfer[i]
            e = chan_free
            if pads[i] and s + pad_start + pads[i] + xfer[i] > e:
                e = s + pad_start + pads[i] + xfer[i]  # zero-fill waits out the beats
            e += post[i]
        else:
            e = s + pre[i]
        start[i] = s
        end[i] = e
        busy[m] += e - s
        free[m] = e
        head[m] += 1
        stale[m] = 1
        pm = pushes[i]
        if pm:
            for f in range(4):
                if pm >> f & 1:
                    push_times[f, npushed[f]] = e
                    npushed[f] += 1
                    stale[consumer[f]] = 1
        remaining -= 1
        if i == n - 1:
            finish_time = e
    npushed_out[:] = npushed
    return 0, finish_time, serial, fetch_next, chunk_end


@lru_cache(maxsize=64)
def _elem_tables(hw: HardwareConfig) -> tuple[np.ndarray, np.ndarray]:
    """Bytes per element and read priority, indexed by MemId."""
    elem = np.zeros(len(MemId), np.int64)
    prio = np.zeros(len(MemId), np.int64)
    for mem in MemId:
        elem[mem] = mem_elem_bytes(mem, hw)
        prio[mem] = _PRIORITY.get(mem, _NO_READ)
    elem.flags.writeable = prio.flags.writeable = False
    return elem, prio


@lru_cache(maxsize=64)
def _store_unit(p: TimingProfile, hw: HardwareConfig) -> tuple[int, bool]:
    """(narrow unit's cycles per element, whether the unit is the wide one)."""
    if p.wide_store(hw):
        return 0, True
    return int(p.store_elem_cycles(hw)), False


@lru_cache(maxsize=64)
def _setup(hw: HardwareConfig, profile: TimingProfile | None):
    """What timing on ``hw`` with ``profile`` (None: the board's) reads besides the program:
    the profile, its vector, the element tables, the store unit (one cache lookup a run)."""
    p = profile or _board_profile(hw)
    return (p, _profile_vector(p), *_elem_tables(hw), *_store_unit(p, hw),
            hw.out_elem_bytes, hw.insn_bytes)


def time_program(program: Program, hw: HardwareConfig, profile: TimingProfile | None = None,
             trace: bool = False) -> TimingResult:
    """Time ``program`` on ``hw``; ``trace=True`` also records one row per instruction."""
    p, P, elem, priority, store_elem, wide_store, out_bytes, insn_bytes = _setup(hw, profile)
    rows = program.rows
    n = len(rows)
    if not n or rows[-1, 0] != R.FINISH:
        raise ProgramError("a program must end with FINISH")
    # numpy allocates the working arrays (not numba): its allocator reuses freed memory,
    # where fresh pages for ~100k instructions would cost more than the simulation.
    costs = np.empty((_COST_ROWS, n), np.int64)
    read_bytes, write_bytes, gemm_cycles, bad = _costs(
        rows, elem, priority, out_bytes, store_elem, wide_store, P, _POP_MASK,
        _PUSH_MASK, costs)
    if bad >= 0:
        insn = program.instructions[bad]
        pops_of(insn), pushes_of(insn)  # raises the precise ProgramError
    tokens_in = program.tokens_in
    scratch = np.empty((_SCRATCH, n + sum(tokens_in)), np.int64)
    state = np.empty((_STATE_ROWS, 4), np.int64)
    status, total, serial, fetch_next, chunk_end = _engine(
        costs, P, insn_bytes, scratch, state, _tokens_array(tokens_in), _CONSUMER)
    busy, stall, mem_wait, head, pops_done, npushed = state.tolist()
    mod = costs[0]
    if status:
        _deadlock(program, mod, head, pops_done, npushed, fetch_next, chunk_end)
    # Instructions after FINISH in other queues never matter: FINISH is last in the stream.
    modules = {name: ModuleTime(busy[k], stall[k], max(0, total - busy[k] - stall[k]),
                                mem_wait[k])
               for k, name in enumerate(MODULES)}
    trace_rows = None
    if trace:
        insns = program.instructions
        start, end, token_wait = (scratch[row].tolist() for row in (_START, _END, _TOKEN_WAIT))
        trace_rows = tuple(
            TraceRow(i, MODULES[mod[i]], insns[i].kind, start[i], end[i], token_wait[i],
                     "+".join(f for f in pops_of(insns[i])))
            for i in range(n) if start[i] >= 0
        )
    return TimingResult(total, modules, int(gemm_cycles), int(read_bytes) + n * insn_bytes,
                        int(write_bytes), serial, p, trace_rows,
                        tuple(a - b for a, b in zip(npushed, pops_done, strict=True)))


@lru_cache(maxsize=256)
def _tokens_array(tokens: tuple[int, int, int, int]) -> np.ndarray:
    array = np.array(tokens, np.int64)
    array.flags.writeable = False
    return array


def _deadlock(program, mod, head, pops_done, npushed, fetch_next, chunk_end) -> None:
    insns = program.instructions
    n = len(insns)
    queues = [[i for i in range(n) if mod[i] == m] for m in range(3)]

    def unmet(i):
        """The first FIFO instruction i pops that has no token left, if any."""
        return next((f for f in pops_of(insns[i])
                     if pops_done[_FIFO_IDS[f]] >= npushed[_FIFO_IDS[f]]), None)

    blocked = []
    for m in range(3):
        if head[m] < len(queues[m]):
            i = queues[m][head[m]]
            fifo = unmet(i)
            if fifo is not None:
                blocked.append((i, m, fifo))
    stuck_fetch = fetch_next < n and fetch_next < chunk_end
    if blocked and not stuck_fetch:
        i, m, fifo = min(blocked)
        src, dst = FIFOS[fifo]
        raise DeadlockError(
            f"deadlock: instruction #{i} ({insns[i].kind}, {MODULES[m]} module) waits on FIFO "
            f"{fifo} ({src.name.lower()}->{dst.name.lower()}) and no remaining instruction "
            "can push it")
    if stuck_fetch:
        m = mod[fetch_next]
        head_insn = queues[m][head[m]]
        fifo = unmet(head_insn)
        why = f" waits on FIFO {fifo}" if fifo is not None else " never starts"
        raise DeadlockError(
            f"deadlock: fetch cannot hand instruction #{fetch_next} ({insns[fetch_next].kind}) "
            f"to the full {MODULES[m]} queue: its head, #{head_insn} "
            f"({insns[head_insn].kind}),{why}")
    raise DeadlockError("deadlock: no module can make progress")  # pragma: no cover
