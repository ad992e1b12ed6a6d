"""Functional simulation: bit-exact with numpy over random legal schedules; deadlocks."""

import random

import numpy as np
import pytest

from simulator.errors import DeadlockError
from simulator.functional import run
from simulator.hardware import DEFAULT, PRESETS
from simulator.isa import AluInsn, AluOp, FinishInsn, MemId, MemInsn, Opcode, Uop
from simulator.program import Program
from vtatune.errors import IllegalSchedule
from vtatune.lowering import lower, lower_vadd
from vtatune.schedule import GEMM_AXES, Schedule, tutorial_schedule
from vtatune.scoring import verify
from vtatune.workloads import WORKLOADS, Conv2dWorkload, GemmWorkload, VaddWorkload


def _divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def random_legal(rng, workloads, hws, count, max_insns=40000):
    """(workload, schedule, hw, bias) drawn at random until ``count`` lower legally."""
    found = []
    while len(found) < count:
        wl, hw = rng.choice(workloads), rng.choice(hws)
        c = wl.as_conv()
        if c.batch % hw.batch or c.in_channels % hw.block_in or c.out_channels % hw.block_out:
            continue
        order = list(GEMM_AXES)
        rng.shuffle(order)
        s = Schedule(
            tile_b=rng.choice(_divisors(c.batch // hw.batch)),
            tile_h=rng.choice(_divisors(c.out_height)),
            tile_w=rng.choice(_divisors(c.out_width)),
            tile_co=rng.choice(_divisors(c.out_channels // hw.block_out)),
            tile_ci=rng.choice(_divisors(c.in_channels // hw.block_in)),
            oc_nthread=rng.choice([1, 2]), h_nthread=rng.choice([1, 2]),
            outer_order="".join(rng.sample("bhcw", 4)), gemm_order=",".join(order),
            store=rng.choice(["tile", "element"]), reuse=rng.random() < 0.5,
            clip_order=rng.choice(["min_max", "max_min"]))
        bias = rng.random() < 0.5
        try:
            lowered = lower(wl, s, hw, bias)
        except IllegalSchedule:
            continue
        if len(lowered.program.instructions) <= max_insns:
            found.append(lowered)
    return found


SMALL = [GemmWorkload(16, 256, 128), GemmWorkload(1, 1024, 1024),
         Conv2dWorkload(2, 9, 9, 32, 48, 3, 2, 2), Conv2dWorkload(4, 8, 8, 32, 32, 1, 0, 1),
         WORKLOADS["conv2d"]["resnet18.C11"], WORKLOADS["conv2d"]["resnet18.C10"]]


@pytest.mark.parametrize("seed", range(3))
def test_random_schedules_bit_exact(seed):
    rng = random.Random(seed)
    for lowered in random_legal(rng, SMALL, [DEFAULT, PRESETS["4x8"]], 6):
        v = verify(lowered, seed)
        assert v.ok, (lowered.workload, lowered.schedule, lowered.hw.bitstream, v.mismatches)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(10))
def test_random_schedules_bit_exact_resnet18_sweep(seed):
    rng = random.Random(100 + seed)
    workloads = [*WORKLOADS["conv2d"].values(), *SMALL]
    for lowered in random_legal(rng, workloads, [DEFAULT, PRESETS["4x8"]], 10):
        assert verify(lowered, seed).ok, (lowered.workload, lowered.schedule)


@pytest.mark.parametrize("op", ["gemm", "conv2d"])
def test_tutorials_bit_exact(op):
    wl = WORKLOADS[op]["tutorial"]
    assert verify(lower(wl, tutorial_schedule(wl), DEFAULT), seed=1).ok


def test_vadd_end_to_end():
    program = lower_vadd(VaddWorkload(1024), DEFAULT)
    rng = np.random.default_rng(0)
    a = rng.integers(-(1 << 30), 1 << 30, (1, 64, 1, 16), dtype=np.int32)
    b = rng.integers(-(1 << 30), 1 << 30, (1, 64, 1, 16), dtype=np.int32)
    result = run(program, DEFAULT, {"a": a, "b": b})
    want = (a.astype(np.int64) + b).astype(np.int32).astype(np.int8)  # int32 wrap, truncate
    assert np.array_equal(result.machine.read_tensor(program, "output"), want)
    assert result.counters.alu_counter == 64
    assert result.counters.acc_load_nbytes == 2 * 64 * 64


def _program(insns):
    return Program(tuple(insns), (Uop(0, 0, 0),), (), 4096)


def test_deadlock_names_instruction_and_fifo():
    insns = [MemInsn(Opcode.LOAD, MemId.INP, 0, 0, 1, 1, 1, pop_next=True),
             FinishInsn()]
    with pytest.raises(DeadlockError, match=r"instruction #0 \(LOAD INP, load module\) waits "
                                            r"on FIFO g2l"):
        run(_program(insns), DEFAULT)


def test_alu_in_order_semantics_when_destinations_repeat():
    """ADD imm 1 over iterations that all hit ACC[0] adds once per iteration."""
    insns = [MemInsn(Opcode.LOAD, MemId.UOP, 0, 0, 1, 1, 1),
             AluInsn(AluOp.ADD, use_imm=True, imm=1, uop_bgn=0, uop_end=1, iter_in=5),
             AluInsn(AluOp.ADD, use_imm=False, uop_bgn=0, uop_end=1, iter_in=3,
                     src_factor_in=0),
             FinishInsn()]
    result = run(_program(insns), DEFAULT)
    assert (result.machine.acc[0] == 5 * 2 ** 3).all()
