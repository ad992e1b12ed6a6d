"""The timing engine in plain Python: a test oracle.

Plain Python over instruction objects, with the same event rules as :mod:`simulator.timing`
(written separately from it, from the rules in its docstring); the compiled engine must give
identical results on every program (tests/simulator/test_timing_equivalence.py).
"""

from __future__ import annotations

from simulator.errors import DeadlockError, ProgramError
from simulator.functional import FIFOS, pops_of, pushes_of
from simulator.hardware import HardwareConfig
from simulator.isa import AluInsn, FinishInsn, GemmInsn, MemId, MemInsn, Opcode
from simulator.program import Program, mem_elem_bytes
from simulator.timing import MODULES, ModuleTime, TimingProfile, TimingResult, TraceRow

_FIFO_IDS = {name: i for i, name in enumerate(FIFOS)}
# Read-channel priority (lower wins a tie): fetch > uop > inp > wgt > acc.
_PRIORITY = {"fetch": 0, MemId.UOP: 1, MemId.INP: 2, MemId.WGT: 3, MemId.ACC: 4,
             MemId.ACC_8BIT: 4}


# --- per-instruction costs -----------------------------------------------------------------
# Transfer costs depend only on the profile and a few integers: memoised per profile.
_TRANSFER_MEMO: dict[TimingProfile, dict[tuple[int, int, int, int], tuple[int, int, int]]] = {}


def _memo(p: TimingProfile) -> dict[tuple[int, int, int, int], tuple[int, int, int]]:
    memo = _TRANSFER_MEMO.get(p)
    if memo is None:
        if len(_TRANSFER_MEMO) > 64:
            _TRANSFER_MEMO.clear()
        memo = _TRANSFER_MEMO[p] = {}
    return memo


def _rows_transfer(offset: int, row_bytes: int, stride_bytes: int, rows: int,
                   p: TimingProfile, memo: dict | None = None) -> tuple[int, int]:
    """(beats, bursts) to move ``rows`` rows of ``row_bytes``, ``stride_bytes`` apart, the
    first starting ``offset`` bytes into a burst-boundary window."""
    key = (offset, row_bytes, stride_bytes, rows)
    memo = _memo(p) if memo is None else memo
    hit = memo.get(key)
    if hit is not None:
        return hit
    beats = bursts = 0
    for r in range(rows):  # every row: no period shortcut here, the oracle counts them all
        b, n = _region_transfer((offset + r * stride_bytes) % p.burst_boundary, row_bytes, p)
        beats += b
        bursts += n
    memo[key] = (beats, bursts)
    return beats, bursts


def _region_transfer(offset: int, nbytes: int, p: TimingProfile) -> tuple[int, int]:
    """(beats, bursts) of ``nbytes`` contiguous bytes starting ``offset`` bytes into a
    burst-boundary window."""
    max_bytes = min(p.max_burst_beats * p.bus_bytes, p.burst_boundary)
    beats = bursts = 0
    pos, end = offset, offset + nbytes
    while pos < end:
        # A burst ends at the next boundary, or after max_burst_beats beats.
        limit = min((pos // p.burst_boundary + 1) * p.burst_boundary,
                    (pos // p.bus_bytes) * p.bus_bytes + max_bytes, end)
        beats += (limit - 1) // p.bus_bytes - pos // p.bus_bytes + 1
        bursts += 1
        pos = limit
    return beats, bursts


# Kinds of per-instruction work in the compiled table.
_PLAIN, _READ = 0, 1


def _flag_table() -> dict[tuple[int, int], tuple[tuple[int, ...], tuple[int, ...]] | None]:
    """(module 0..2, flag bits) -> (FIFO ids popped, FIFO ids pushed); None if invalid."""
    table = {}
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
                table[m, bits] = (tuple(_FIFO_IDS[f] for f in pops_of(insn)),
                                  tuple(_FIFO_IDS[f] for f in pushes_of(insn)))
            except ProgramError:
                table[m, bits] = None
    return table


_FLAGS = _flag_table()


def _compile(program: Program, hw: HardwareConfig, p: TimingProfile):
    """Per instruction: (module, pops, pushes, kind, pre, beats, post, priority, pads); and
    the bytes read, bytes written and GEMM micro-op cycles of the whole stream."""
    elem = {mem: (hw.uop_elem_bytes if mem == MemId.UOP else mem_elem_bytes(mem, hw))
            for mem in MemId}
    ob = hw.out_elem_bytes
    # A STORE writes each BATCH row of an element in beats, then reads the next from SRAM;
    # where an element fits in a beat (the wide store unit), a beat per cycle and a read per
    # burst.
    row_beats = -(-(hw.block_out * hw.out_width // 8) // p.bus_bytes)
    store_elem = hw.batch * (row_beats + p.store_read_cycles)
    wide_store = ob <= p.bus_bytes
    boundary = p.burst_boundary
    memo = _memo(p)

    def cost(insn) -> tuple[tuple, int, int, int]:
        """(row, bytes read, bytes written, GEMM cycles) of one instruction."""
        t = type(insn)
        bits = insn.pop_prev | insn.pop_next << 1 | insn.push_prev << 2 | insn.push_next << 3
        if t is MemInsn:
            mem = insn.mem
            if insn.opcode == Opcode.STORE:
                m = 2
            else:
                m = 0 if mem == MemId.INP or mem == MemId.WGT else 1
            fifos = _FLAGS[m, bits]
            if fifos is None:
                pops_of(insn), pushes_of(insn)  # raises the precise ProgramError
            if insn.x_size == 0:
                return (m, *fifos, _PLAIN, p.nop_cycles, 0, 0, 9, 0), 0, 0, 0
            x, y = insn.x_size, insn.y_size
            if m == 2:
                beats, bursts = _rows_transfer(insn.dram_base * ob % boundary, x * ob,
                                               insn.x_stride * ob, y, p, memo)
                if wide_store:
                    cycles = (p.store_insn_cycles
                              + bursts * (p.write_handshake + p.store_read_cycles) + beats)
                else:
                    cycles = (p.store_insn_cycles + bursts * p.write_handshake
                              + x * y * store_elem)
                return (2, *fifos, _PLAIN, cycles, 0, 0, 9, 0), 0, x * y * ob, 0
            eb = elem[mem]
            beats = _rows_transfer(insn.dram_base * eb % boundary, x * eb, insn.x_stride * eb,
                                   y, p, memo)[0]
            pads = ((insn.y_pad_0 + y + insn.y_pad_1) * (insn.x_pad_0 + x + insn.x_pad_1)
                    - x * y)
            done = p.wide_load_done_cycles if eb <= p.bus_bytes else p.load_done_cycles
            return ((m, *fifos, _READ, p.request_cycles + insn.y_pad_0, beats, done,
                     _PRIORITY[mem], pads), x * y * eb, 0, 0)
        fifos = _FLAGS[1, bits]
        if fifos is None:  # pragma: no cover - every flag is valid on compute
            raise ProgramError(f"{insn.kind}: invalid dependency flags")
        if t is GemmInsn:
            iters = insn.iter_out * insn.iter_in * (insn.uop_end - insn.uop_bgn)
            return ((1, *fifos, _PLAIN, p.gemm_pipeline + iters, 0, 0, 9, 0), 0, 0,
                    0 if insn.reset else iters)
        if t is AluInsn:
            iters = insn.iter_out * insn.iter_in * (insn.uop_end - insn.uop_bgn)
            per = p.alu_imm_cycles if insn.use_imm else p.alu_reg_cycles
            return (1, *fifos, _PLAIN, p.alu_pipeline + iters * per, 0, 0, 9, 0), 0, 0, 0
        if t is FinishInsn:
            return (1, *fifos, _PLAIN, p.nop_cycles, 0, 0, 9, 0), 0, 0, 0
        raise ProgramError(f"unknown instruction {insn!r}")  # pragma: no cover

    # A lowered stream repeats the same instruction objects (only ~1 in 6 is distinct):
    # cost each object once. The program holds them, so their ids are stable meanwhile.
    seen: dict[int, tuple[tuple, int, int, int]] = {}
    table = []
    append = table.append
    read_bytes = write_bytes = gemm_cycles = 0
    for insn in program.instructions:
        entry = seen.get(id(insn))
        if entry is None:
            entry = seen[id(insn)] = cost(insn)
        append(entry[0])
        if entry[1]:
            read_bytes += entry[1]
        elif entry[2]:
            write_bytes += entry[2]
        elif entry[3]:
            gemm_cycles += entry[3]
    return table, read_bytes, write_bytes, gemm_cycles


# --- the event engine ------------------------------------------------------------------------
def time_program(program: Program, hw: HardwareConfig, profile: TimingProfile | None = None,
             trace: bool = False) -> TimingResult:
    """Time ``program`` on ``hw``; ``trace=True`` also records one row per instruction."""
    p = profile or TimingProfile.for_hw(hw)
    insns = program.instructions
    n = len(insns)
    if not n or not isinstance(insns[-1], FinishInsn):
        raise ProgramError("a program must end with FINISH")
    table, read_bytes, write_bytes, gemm_cycles = _compile(program, hw, p)
    insn_bytes = hw.insn_bytes
    read_bytes += n * insn_bytes

    queues: list[list[int]] = [[], [], []]
    qpos = [0] * n  # position of each instruction in its module's queue
    for i, row in enumerate(table):
        qpos[i] = len(queues[row[0]])
        queues[row[0]].append(i)

    start = [-1] * n
    end = [0] * n
    dispatch = [-1] * n
    token_wait = [0] * n
    # per FIFO, completion time of k-th push; tokens the stream before left: there at 0
    push_times: list[list[int]] = [[0] * t for t in program.tokens_in]
    pops_done = [0, 0, 0, 0]
    head = [0, 0, 0]  # next queue position per module
    free = [0, 0, 0]  # when each module finishes its current instruction
    busy = [0, 0, 0]
    stall = [0, 0, 0]
    mem_wait = [0, 0, 0]
    # The memory bridge: a FIFO of requests served one after another; a request that finds
    # it idle (nothing queued since the last one was taken) first waits read_latency.
    chan_free = 0  # when the channel finishes its last transfer
    last_take = -1  # when the bridge last took a request off its queue

    def bridge(arrival: int) -> int:
        """When the data of a request reaching the bridge at ``arrival`` starts."""
        nonlocal last_take
        ready = arrival if arrival <= last_take else arrival + p.read_latency
        last_take = max(chan_free, ready)
        return last_take

    # Fetch state: a whole chunk is read, then handed over one instruction per cycle.
    chunk = p.fetch_chunk_insns
    fetch_next = 0  # next instruction to dispatch
    fetch_req = 0  # when fetch can request the next chunk (if fetch_next starts a chunk)
    chunk_ready = 0  # when the current chunk has fully arrived
    fetch_last = -1  # dispatch time of the previous instruction
    chunk_start = chunk_end = 0  # the chunk being dispatched: [chunk_start, chunk_end)
    beat_per_insn = max(1, insn_bytes // p.bus_bytes)

    def alone(row) -> int:
        """Cycles of one instruction run by itself (after its dispatch)."""
        if row[3] != _READ:
            return row[4]
        wait = row[4] + p.read_latency
        if row[8]:
            wait = max(wait, p.pad_start_cycles + row[8])
        return wait + row[5] + row[6]

    serial = sum(alone(row) for row in table)
    serial += sum(p.request_cycles + p.read_latency + size * (beat_per_insn + 1)
                  for size in (min(chunk, n - c) for c in range(0, n, chunk)))
    depth = p.queue_depth
    finish_time = 0
    remaining = n
    # Run every instruction, not just up to FINISH: one that can never run is a deadlock.
    while remaining:
        # Hand over what has arrived, as far as queue space allows (no channel use).
        while fetch_next < chunk_end:
            i = fetch_next
            m = table[i][0]
            t = max(fetch_last + 1, chunk_ready + i - chunk_start)
            k = qpos[i] - depth
            if k >= 0:
                j = queues[m][k]
                if start[j] < 0:
                    break  # queue full until that instruction starts
                t = max(t, start[j] + 1)
            dispatch[i] = fetch_last = t
            fetch_next += 1
        if fetch_next == chunk_end and chunk_end < n:
            fetch_req = max(fetch_req, fetch_last + 1)

        # Candidates: each module's next instruction, and fetch's next chunk read, keyed by
        # their start (a read: its request's arrival at the bridge). The earliest goes next
        # (ties: read priority), so time only moves forward.
        best_m = -2
        best_key = best_prio = best_s = 0
        if fetch_next == chunk_end and chunk_end < n:
            best_s = fetch_req
            best_key = fetch_req + p.request_cycles
            best_m = -1
        for m in (0, 1, 2):
            h = head[m]
            q = queues[m]
            if h >= len(q):
                continue
            i = q[h]
            d = dispatch[i]
            if d < 0:
                continue
            row = table[i]
            s = free[m] if free[m] > d else d
            for f in row[1]:
                k = pops_done[f]
                pt = push_times[f]
                if k >= len(pt):
                    break
                if pt[k] > s:
                    s = pt[k]
            else:
                if row[3] == _READ:
                    key, prio = s + row[4], row[7]
                else:
                    key, prio = s, 9
                if best_m == -2 or key < best_key or (key == best_key and prio < best_prio):
                    best_m, best_key, best_prio, best_s = m, key, prio, s
        if best_m == -2:
            _deadlock(program, table, queues, head, pops_done, push_times, fetch_next,
                      chunk_end, n)
        key, m, s = best_key, best_m, best_s
        if m < 0:  # fetch reads the next chunk
            size = min(chunk, n - chunk_end)
            chan_free = chunk_ready = bridge(key) + size * beat_per_insn
            chunk_start, chunk_end = chunk_end, chunk_end + size
            continue
        i = queues[m][head[m]]
        row = table[i]
        ready = max(free[m], dispatch[i])
        stall[m] += s - ready
        token_wait[i] = s - ready
        for f in row[1]:
            pops_done[f] += 1
        if row[3] == _READ:
            data = bridge(key)
            mem_wait[m] += max(0, data - key - p.read_latency)
            chan_free = data + row[5]
            e = chan_free
            if row[8]:  # zero padding: one element a cycle, in the cycles no beat arrives
                e = max(e, s + p.pad_start_cycles + row[8] + row[5])
            e += row[6]
        else:
            e = s + row[4]
        start[i], end[i] = s, e
        busy[m] += e - s
        free[m] = e
        head[m] += 1
        for f in row[2]:
            push_times[f].append(e)
        remaining -= 1
        if i == n - 1:
            finish_time = e

    total = finish_time
    # Instructions after FINISH in other queues never matter: FINISH is last in the stream.
    modules = {
        name: ModuleTime(busy[k], stall[k], max(0, total - busy[k] - stall[k]), mem_wait[k])
        for k, name in enumerate(MODULES)
    }
    rows = None
    if trace:
        rows = tuple(
            TraceRow(i, MODULES[table[i][0]], insns[i].kind, start[i], end[i], token_wait[i],
                     "+".join(f for f in pops_of(insns[i])))
            for i in range(n) if start[i] >= 0
        )
    return TimingResult(total, modules, gemm_cycles, read_bytes, write_bytes, serial, p, rows,
                        tuple(len(push_times[f]) - pops_done[f] for f in range(4)))


def _deadlock(program, table, queues, head, pops_done, push_times, fetch_next, chunk_end,
              n) -> None:
    insns = program.instructions
    names = list(FIFOS)
    blocked = []
    for m in (0, 1, 2):
        if head[m] < len(queues[m]):
            i = queues[m][head[m]]
            for f in table[i][1]:
                if pops_done[f] >= len(push_times[f]):
                    blocked.append((i, m, names[f]))
                    break
    stuck_fetch = fetch_next < n and fetch_next < chunk_end
    if blocked and not stuck_fetch:
        i, m, fifo = min(blocked)
        src, dst = FIFOS[fifo]
        raise DeadlockError(
            f"deadlock: instruction #{i} ({insns[i].kind}, {MODULES[m]} module) waits on FIFO "
            f"{fifo} ({src.name.lower()}->{dst.name.lower()}) and no remaining instruction "
            "can push it")
    if stuck_fetch:
        m = table[fetch_next][0]
        head_insn = queues[m][head[m]]
        why = next((f" waits on FIFO {names[f]}" for f in table[head_insn][1]
                    if pops_done[f] >= len(push_times[f])), " never starts")
        raise DeadlockError(
            f"deadlock: fetch cannot hand instruction #{fetch_next} ({insns[fetch_next].kind}) "
            f"to the full {MODULES[m]} queue: its head, #{head_insn} "
            f"({insns[head_insn].kind}),{why}")
    raise DeadlockError("deadlock: no module can make progress")  # pragma: no cover
