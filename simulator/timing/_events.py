"""The second compiled pass of the timing model: the event engine (:func:`_engine`), which
runs fetch, the three modules, the token FIFOs and the read channel over the costs
:func:`simulator.timing._pricing._costs` priced."""

from __future__ import annotations

import numpy as np

from simulator.jit import njit
from simulator.timing._pricing import (
    _BUS,
    _CHUNK,
    _DEPTH,
    _FETCH_PRIORITY,
    _LATENCY,
    _NO_READ,
    _PAD_START,
    _READ,
    _REQUEST,
)


@njit(inner=True)
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
            for f in range(4):
                npushed_out[f] = npushed[f]
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
    for f in range(4):
        npushed_out[f] = npushed[f]
    return 0, finish_time, serial, fetch_next, chunk_end

