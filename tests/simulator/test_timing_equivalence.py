"""The compiled timing engine gives exactly what the plain-Python event engine gave.

``_slow_timing`` is the engine as it was before it was compiled: per instruction objects,
per event Python. Every field of the result must be equal — cycles, per-module busy /
stall / idle / memory wait, floors, serial sum, and the whole trace — and so must the
error of a program that deadlocks, on lowered programs of every kind and on profiles that
stress each rule (narrow and wide buses, long latency, immediate requests, tiny queues,
small fetch chunks, odd burst boundaries, padding that outlasts the wait).
"""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from search_spaces import get_template
from simulator.errors import DeadlockError
from simulator.hardware import DEFAULT, PRESETS
from simulator.isa import FinishInsn, GemmInsn, MemId, MemInsn, Opcode, Uop
from simulator.program import Program
from simulator.timing import TimingProfile, time_program
from tests.simulator import _slow_timing
from vtatune.lowering import lower, lower_vadd
from vtatune.schedule import tutorial_schedule
from vtatune.workloads import WORKLOADS, Conv2dWorkload, GemmWorkload, VaddWorkload, resnet18_layers


def _profiles(hw):
    p = TimingProfile.for_hw(hw)
    return [
        p,
        replace(p, bus_bytes=2 * p.bus_bytes, burst_boundary=2 * p.burst_boundary),
        replace(p, read_latency=97, request_cycles=0, load_done_cycles=9),
        replace(p, queue_depth=6, fetch_chunk_insns=8),
        replace(p, burst_boundary=96, max_burst_beats=5, write_handshake=0, pad_start_cycles=30,
                store_read_cycles=7, alu_reg_cycles=5, wide_load_done_cycles=0),
    ]


def _cases(count: int, seed: int, max_insns: int):
    rng = random.Random(seed)
    wls = [(wl, DEFAULT) for wl in resnet18_layers()]
    wls += [(WORKLOADS["gemm"]["dense128"], DEFAULT), (WORKLOADS["gemm"]["tutorial"], DEFAULT),
            (WORKLOADS["conv2d"]["resnet18.C9"], PRESETS["ultra96"]),
            (WORKLOADS["conv2d"]["resnet18.C5"], PRESETS["de10nano"]),
            (Conv2dWorkload(4, 14, 14, 64, 64, 3, 1, 1), PRESETS["4x8"]),
            (GemmWorkload(16, 256, 128), PRESETS["4x8"])]
    cases = []
    while len(cases) < count:
        wl, hw = rng.choice(wls)
        bias = rng.random() < 0.3
        tpl = get_template(wl, hw, bias=bias)
        for _ in range(200):
            c = {k.name: rng.choice(k.choices) for k in tpl.knobs}
            if tpl.legal(c):
                program = lower(wl, tpl.to_schedule(c), hw, bias).program
                if len(program) <= max_insns:
                    cases.append((program, hw, rng.choice(_profiles(hw))))
                    break
    return cases


def _assert_same(program, hw, profile):
    fast = time_program(program, hw, profile, trace=True)
    slow = _slow_timing.time_program(program, hw, profile, trace=True)
    assert fast == slow


#: 1x8x8 on ultra96's 128-bit bus (buffers shrunk to fit the instruction): two output
#: elements a beat.
_U96_1X8 = replace(PRESETS["ultra96"], log_block=3, log_inp_buff_size=14, log_wgt_buff_size=16,
                   log_acc_buff_size=16)


def _fixed_cases():
    cases = []
    for wl in (WORKLOADS["conv2d"]["tutorial"], WORKLOADS["gemm"]["tutorial"]):
        # ultra96's 1x16 and 1x8x8 on its 128-bit bus: the wide store unit (one and
        # two elements a beat)
        for hw in (DEFAULT, PRESETS["ultra96"], _U96_1X8):
            program = lower(wl, tutorial_schedule(wl), hw).program
            cases += [(program, hw, p) for p in _profiles(hw)]
    vadd = lower_vadd(VaddWorkload(), DEFAULT)
    cases += [(vadd, DEFAULT, p) for p in _profiles(DEFAULT)]
    return cases


@pytest.mark.parametrize("case", _fixed_cases() + _cases(24, 0, 3000),
                         ids=lambda c: f"{len(c[0])}insns")
def test_compiled_engine_equals_the_event_engine(case):
    _assert_same(*case)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_compiled_engine_equals_the_event_engine_sweep(seed):
    for case in _cases(60, 100 + seed, 40000):
        _assert_same(*case)


def _program(insns):
    return Program(tuple(insns), (Uop(0, 0, 0),), (), 1 << 16)


STORE = MemInsn(Opcode.STORE, MemId.OUT, 0, 0, 1, 1, 1, pop_prev=True)
RESET_PUSH = GemmInsn(reset=True, uop_bgn=0, uop_end=1, push_next=True)


@pytest.mark.parametrize("insns, depth", [
    ([MemInsn(Opcode.LOAD, MemId.INP, 0, 0, 1, 1, 1, pop_next=True), FinishInsn()], 512),
    ([STORE, STORE, STORE, RESET_PUSH, RESET_PUSH, RESET_PUSH, FinishInsn()], 2),
    ([STORE, RESET_PUSH, FinishInsn(pop_next=True)], 512),
    ([GemmInsn(uop_bgn=0, uop_end=1, pop_prev=True), FinishInsn()], 512),
])
def test_deadlocks_raise_the_same_error(insns, depth):
    profile = replace(TimingProfile.for_hw(DEFAULT), queue_depth=depth)
    with pytest.raises(DeadlockError) as fast:
        time_program(_program(insns), DEFAULT, profile)
    with pytest.raises(DeadlockError) as slow:
        _slow_timing.time_program(_program(insns), DEFAULT, profile)
    assert str(fast.value) == str(slow.value)
