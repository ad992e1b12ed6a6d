"""Timing a program: the two compiled passes (:mod:`simulator.timing._pricing`,
:mod:`simulator.timing._events`) between the set-up a hardware config and profile need and
the :class:`~simulator.timing.result.TimingResult` (or the deadlock's error) they give."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

import simulator.rows as R
from simulator.errors import DeadlockError, ProgramError
from simulator.functional import FIFOS, pops_of, pushes_of
from simulator.hardware import HardwareConfig
from simulator.isa import MemId
from simulator.program import Program, mem_elem_bytes
from simulator.timing import _events as E
from simulator.timing import _pricing as C
from simulator.timing._events import _END, _SCRATCH, _START, _STATE_ROWS, _TOKEN_WAIT
from simulator.timing._pricing import (
    _CONSUMER,
    _COST_ROWS,
    _FIFO_IDS,
    _NO_READ,
    _POP_MASK,
    _PRIORITY,
    _PUSH_MASK,
    _profile_vector,
)
from simulator.timing.profile import TimingProfile
from simulator.timing.result import MODULES, ModuleTime, TimingResult, TraceRow


@lru_cache(maxsize=64)
def _board_profile(hw: HardwareConfig) -> TimingProfile:
    return TimingProfile.for_hw(hw)


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
    read_bytes, write_bytes, gemm_cycles, bad = C._costs(
        rows, elem, priority, out_bytes, store_elem, wide_store, P, _POP_MASK,
        _PUSH_MASK, costs)
    if bad >= 0:
        insn = program.instructions[bad]
        pops_of(insn), pushes_of(insn)  # raises the precise ProgramError
    tokens_in = program.tokens_in
    scratch = np.empty((_SCRATCH, n + sum(tokens_in)), np.int64)
    state = np.empty((_STATE_ROWS, 4), np.int64)
    status, total, serial, fetch_next, chunk_end = E._engine(
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
