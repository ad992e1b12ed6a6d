"""Instruction tables and the programs and queues built on them."""

from __future__ import annotations

import pickle
import random

import numpy as np
import pytest

from simulator.hardware import DEFAULT
from simulator.isa import AluInsn, AluOp, FinishInsn, GemmInsn, MemId, MemInsn, Opcode
from simulator.program import Program
from simulator.rows import FLAGS, WIDTH, instructions_of, rows_of
from simulator.timing import time_program
from vtatune.lowering import COMPUTE, LOAD, CommandQueue, Kernel, KernelLoop, lower
from vtatune.schedule import tutorial_schedule
from vtatune.workloads import WORKLOADS


def _random_insn(rng: random.Random):
    flags = [rng.random() < 0.3 for _ in range(4)]
    kind = rng.randrange(4)
    if kind == 0:
        return MemInsn(rng.choice(list(Opcode)[:2]), rng.choice(list(MemId)),
                       *(rng.randrange(1 << 16) for _ in range(5)),
                       *(rng.randrange(16) for _ in range(4)), *flags)
    if kind == 1:
        return GemmInsn(rng.random() < 0.5, *(rng.randrange(1 << 12) for _ in range(10)),
                        *flags)
    if kind == 2:
        return AluInsn(rng.choice(list(AluOp)), rng.random() < 0.5,
                       rng.randrange(-(1 << 15), 1 << 15), rng.random() < 0.5,
                       *(rng.randrange(1 << 12) for _ in range(8)), *flags)
    return FinishInsn(*flags)


def test_tables_round_trip_every_field_with_its_type():
    rng = random.Random(3)
    insns = tuple(_random_insn(rng) for _ in range(500))
    table = rows_of(insns)
    assert table.shape == (500, WIDTH)
    back = instructions_of(table)
    assert back == insns
    assert [type(a) for a in back] == [type(b) for b in insns]
    # Equal rows share one object; the flags column holds the four flags as bits.
    again = instructions_of(np.concatenate([table, table]))
    assert again[0] is again[500]
    assert table[0, FLAGS] == sum(1 << k for k, f in enumerate(
        ("pop_prev", "pop_next", "push_prev", "push_next")) if getattr(insns[0], f))


def test_program_from_table_or_instructions_is_one_value():
    wl = WORKLOADS["gemm"]["tutorial"]
    lowered = lower(wl, tutorial_schedule(wl), DEFAULT).program
    table_form = Program(lowered.rows, lowered.uop_table, lowered.tensors, lowered.dram_bytes)
    object_form = Program(lowered.instructions, lowered.uops, lowered.tensors,
                          lowered.dram_bytes)
    assert table_form == object_form == lowered
    assert len(table_form) == len(object_form) == 142
    assert pickle.loads(pickle.dumps(table_form)) == lowered
    assert time_program(table_form, DEFAULT) == time_program(object_form, DEFAULT)
    with pytest.raises(AttributeError, match="immutable"):
        table_form.dram_bytes = 0
    assert not lowered.rows.flags.writeable
    other = Program(lowered.instructions[:-2] + lowered.instructions[-1:], lowered.uops,
                    lowered.tensors, lowered.dram_bytes)
    assert other != lowered


def _gemm_kernel(uops: int, dst: int) -> Kernel:
    return Kernel(np.array([[dst + i, 0, 0] for i in range(uops)], np.int64),
                  (KernelLoop(2, 1, 0, 0),))


def test_queue_grows_its_table_when_kernel_reloads_outrun_the_estimate():
    # Two kernels that cannot both be resident: every use reloads its uops, so each kernel
    # call emits two instructions where the first table size assumed one.
    q = CommandQueue(DEFAULT)
    half = DEFAULT.uop_depth // 2 + 1
    a, b = q.kernel_id(("a",), _gemm_kernel(half, 0)), q.kernel_id(("b",), _gemm_kernel(half, 8))
    q.begin_loop(0, 50)
    q.push_kernel(a)
    q.push_kernel(b)
    q.end_loop()
    q.synchronize()
    table, uops = q.run()
    program = instructions_of(table)
    kinds = [i.kind for i in program]
    assert kinds[:4] == ["LOAD UOP", "GEMM", "LOAD UOP", "GEMM"]
    assert kinds.count("LOAD UOP") == 100 and kinds.count("GEMM") == 100
    assert len(uops) == 2 * half  # each kernel is placed in DRAM once
    assert isinstance(program[-1], FinishInsn)


def test_queue_rejects_a_kernel_larger_than_the_uop_buffer():
    q = CommandQueue(DEFAULT)
    q.push_kernel(q.kernel_id(("big",), _gemm_kernel(DEFAULT.uop_depth + 1, 0)))
    q.synchronize()
    with pytest.raises(ValueError, match=rf"micro-op kernel of {DEFAULT.uop_depth + 1} uops "
                                         rf"exceeds the uop buffer \({DEFAULT.uop_depth}\)"):
        q.run()


def test_queue_loops_give_the_calls_they_stand_for():
    """A loop program and the same calls written out give the same stream."""
    looped, flat = CommandQueue(DEFAULT), CommandQueue(DEFAULT)
    looped.begin_loop(0, 3)
    looped.begin_loop(6, 2)
    looped.store_2d(10, 100, 1, 4, 4, coefs={0: 64, 6: 8}, sram_coefs={6: 4})
    looped.end_loop()
    looped.dep_push(COMPUTE, LOAD)
    looped.dep_pop(COMPUTE, LOAD)
    looped.end_loop()
    for i in range(3):
        for j in range(2):
            flat.store_2d(10 + 4 * j, 100 + 64 * i + 8 * j, 1, 4, 4)
        flat.dep_push(COMPUTE, LOAD)
        flat.dep_pop(COMPUTE, LOAD)
    for q in (looped, flat):
        q.synchronize()
    (a, ua), (b, ub) = looped.run(), flat.run()
    assert np.array_equal(a, b) and np.array_equal(ua, ub)
    # store, store, the compute push's NOP; then the next outer iteration
    assert [(i.kind, i.sram_base, i.dram_base) for i in instructions_of(a)[:5]] == [
        ("STORE OUT", 10, 100), ("STORE OUT", 14, 108), ("NOP", 0, 0),
        ("STORE OUT", 10, 164), ("STORE OUT", 14, 172)]
