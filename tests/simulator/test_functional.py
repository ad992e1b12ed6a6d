"""Functional simulation: bit-exact with numpy over random legal schedules; deadlocks."""

import random
from collections import Counter

import numpy as np
import pytest

from simulator.errors import DeadlockError, ProgramError
from simulator.functional import count, decode, execution_order, pops_of, pushes_of, run
from simulator.hardware import DEFAULT, PRESETS, HardwareConfig
from simulator.isa import AluInsn, AluOp, FinishInsn, GemmInsn, MemId, MemInsn, Opcode, Uop
from simulator.program import Program, layout_tensors, mem_elem_bytes
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
        if len(lowered.program) <= max_insns:  # the table's length: nothing decoded
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


def test_each_module_pops_and_pushes_the_fifos_beside_it():
    """The FIFO of each flag (producer -> consumer as TVM names them)."""
    load = MemInsn(Opcode.LOAD, MemId.INP, x_size=1, pop_next=True, push_next=True)
    gemm = GemmInsn(pop_prev=True, pop_next=True, push_prev=True, push_next=True)
    store = MemInsn(Opcode.STORE, MemId.OUT, x_size=1, pop_prev=True, push_prev=True)
    assert [(pops_of(i), pushes_of(i)) for i in (load, gemm, store)] == [
        (("g2l",), ("l2g",)), (("l2g", "s2g"), ("g2l", "g2s")), (("g2s",), ("s2g",))]


@pytest.mark.parametrize("opcode, mem, flag, message", [
    (Opcode.LOAD, MemId.INP, "pop_prev", "LOAD INP: the load module has no previous stage to pop"),
    (Opcode.LOAD, MemId.WGT, "push_prev",
     "LOAD WGT: the load module has no previous stage to push"),
    (Opcode.STORE, MemId.OUT, "pop_next", "STORE OUT: the store module has no next stage to pop"),
    (Opcode.STORE, MemId.OUT, "push_next",
     "STORE OUT: the store module has no next stage to push"),
])
def test_a_token_flag_toward_a_stage_the_module_lacks_is_refused(opcode, mem, flag, message):
    insn = MemInsn(opcode, mem, x_size=1, **{flag: True})
    with pytest.raises(ProgramError) as info:
        pops_of(insn) + pushes_of(insn)
    assert str(info.value) == message


def test_alu_in_order_semantics_when_destinations_repeat():
    """ADD imm 1 over iterations that all hit ACC[0] adds once per iteration."""
    insns = [MemInsn(Opcode.LOAD, MemId.UOP, 0, 0, 1, 1, 1),
             AluInsn(AluOp.ADD, use_imm=True, imm=1, uop_bgn=0, uop_end=1, iter_in=5),
             AluInsn(AluOp.ADD, use_imm=False, uop_bgn=0, uop_end=1, iter_in=3,
                     src_factor_in=0),
             FinishInsn()]
    result = run(_program(insns), DEFAULT)
    assert (result.machine.acc[0] == 5 * 2 ** 3).all()


# --- the decoded engine against fsim's semantics, one iteration at a time ------------------
# A small machine with BATCH 2, BLOCK_IN 8, BLOCK_OUT 4 (every layout transposition shows) and
# short buffers (random indices collide: repeated destinations, overlapping loads).
TINY = HardwareConfig(log_batch=1, log_block_in=3, log_block_out=2, log_uop_buff_size=10,
                      log_inp_buff_size=10, log_wgt_buff_size=10, log_acc_buff_size=10)
_DRAM = 4096


def _wrap32(x):
    return ((np.asarray(x, np.int64) + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int64)


def _iterations(insn, uop):
    """(dst, src, wgt) of each iteration, in fsim's loop order."""
    for i in range(insn.iter_out):
        for j in range(insn.iter_in):
            for k in range(insn.uop_bgn, insn.uop_end):
                d, s, w = (int(v) for v in uop[k])
                yield (d + i * insn.dst_factor_out + j * insn.dst_factor_in,
                       s + i * insn.src_factor_out + j * insn.src_factor_in,
                       w + i * getattr(insn, "wgt_factor_out", 0)
                       + j * getattr(insn, "wgt_factor_in", 0))


def _reference(program, hw, inputs):
    """fsim's semantics, element by element: (DRAM, INP, WGT, ACC, UOP) after the run."""
    dram = np.zeros(program.dram_bytes, np.uint8)
    for name, value in inputs.items():
        t = program.tensor(name)
        raw = np.ascontiguousarray(value, t.dtype).view(np.uint8).reshape(-1)
        dram[t.address:t.address + t.nbytes] = raw
    b, ci, co = hw.batch, hw.block_in, hw.block_out
    inp = np.zeros((hw.inp_depth, b, ci), np.int64)
    wgt = np.zeros((hw.wgt_depth, co, ci), np.int64)
    acc = np.zeros((hw.acc_depth, b, co), np.int64)
    uop = np.zeros((hw.uop_depth, 3), np.int64)

    def element(mem, index):
        if mem == MemId.UOP:
            return program.uop_table[index]
        n = mem_elem_bytes(mem, hw)
        raw = dram[index * n:(index + 1) * n]
        dtype = np.int32 if mem == MemId.ACC else np.int8
        return raw.view(dtype).astype(np.int64)

    srams = {MemId.INP: inp, MemId.WGT: wgt, MemId.ACC: acc, MemId.ACC_8BIT: acc,
             MemId.UOP: uop}
    for index in execution_order(program):
        insn = program.instructions[index]
        if isinstance(insn, MemInsn) and not insn.is_nop and insn.opcode == Opcode.LOAD:
            sram = srams[insn.mem]
            cols = insn.x_pad_0 + insn.x_size + insn.x_pad_1
            for y in range(insn.y_pad_0 + insn.y_size + insn.y_pad_1):
                for x in range(cols):
                    yy, xx = y - insn.y_pad_0, x - insn.x_pad_0
                    inside = 0 <= yy < insn.y_size and 0 <= xx < insn.x_size
                    at = insn.sram_base + y * cols + x
                    sram[at] = np.reshape(element(insn.mem, insn.dram_base + yy * insn.x_stride
                                                  + xx), sram.shape[1:]) if inside else 0
        elif isinstance(insn, MemInsn) and not insn.is_nop:
            n = mem_elem_bytes(MemId.OUT, hw)
            for y in range(insn.y_size):
                for x in range(insn.x_size):
                    a = insn.dram_base + y * insn.x_stride + x
                    lanes = acc[insn.sram_base + y * insn.x_size + x].reshape(-1)
                    dram[a * n:(a + 1) * n] = lanes.astype(np.int8).view(np.uint8)
        elif isinstance(insn, GemmInsn):
            for d, s, w in _iterations(insn, uop):
                acc[d] = 0 if insn.reset else _wrap32(acc[d] + inp[s] @ wgt[w].T)
        elif isinstance(insn, AluInsn):
            for d, s, _ in _iterations(insn, uop):
                a, v = acc[d], np.int64(insn.imm) if insn.use_imm else acc[s]
                v = np.broadcast_to(v, a.shape)
                r = {AluOp.MIN: np.minimum, AluOp.MAX: np.maximum, AluOp.ADD: np.add,
                     AluOp.MUL: np.multiply}.get(insn.alu_op)
                if r is not None:
                    acc[d] = _wrap32(r(a, v))
                else:  # SHR: right by a non-negative amount, left by a negative one
                    acc[d] = _wrap32(np.where(v >= 0, a >> np.clip(v, 0, 63),
                                              a << np.clip(-v, 0, 63)))
    return dram, inp, wgt, acc, uop


def _random_program(rng, hw):
    """A stream of every kind of instruction with random fields (indices in range), no
    dependency tokens: the load module's loads run first, then the compute module's queue,
    then the stores."""
    depth = {MemId.INP: hw.inp_depth, MemId.WGT: hw.wgt_depth, MemId.ACC: hw.acc_depth,
             MemId.ACC_8BIT: hw.acc_depth, MemId.UOP: hw.uop_depth}
    n_uops = 24
    uops = np.stack([rng.integers(0, hw.acc_depth // 2, n_uops),
                     rng.integers(0, min(hw.inp_depth, hw.acc_depth) // 2, n_uops),
                     rng.integers(0, hw.wgt_depth // 2, n_uops)], axis=1)

    def load(mem):
        while True:
            ys, xs = int(rng.integers(0, 4)), int(rng.integers(1, 5))
            stride = int(rng.integers(max(0, xs - 2), xs + 3))
            pads = [int(p) for p in rng.integers(0, 3, 4) * (rng.random() < 0.5)]
            n = (pads[0] + ys + pads[1]) * (pads[2] + xs + pads[3])
            elems = n_uops if mem == MemId.UOP else _DRAM // mem_elem_bytes(mem, hw)
            last = max(0, (ys - 1) * stride + xs)
            if n <= depth[mem] and last < elems:
                return MemInsn(Opcode.LOAD, mem, int(rng.integers(0, depth[mem] - n + 1)),
                               int(rng.integers(0, elems - last + 1)) if last else 0,
                               ys, xs, stride, *pads)

    def loop(cls, **fields):
        factors = ("dst", "src", "wgt") if cls is GemmInsn else ("dst", "src")
        while True:
            bgn = int(rng.integers(0, n_uops))
            insn = cls(uop_bgn=bgn, uop_end=int(rng.integers(bgn, min(bgn + 5, n_uops) + 1)),
                       iter_out=int(rng.integers(1, 5)), iter_in=int(rng.integers(1, 5)),
                       **{f"{f}_factor_{lvl}": int(rng.choice([0, 0, 1, 1, 2, 5]))
                          for f in factors for lvl in ("out", "in")}, **fields)
            its = list(_iterations(insn, uops))
            if (not its or max(d for d, _, _ in its) < hw.acc_depth and
                    max(s for _, s, _ in its) < min(hw.inp_depth, hw.acc_depth) and
                    max(w for _, _, w in its) < hw.wgt_depth):
                return insn

    insns = [load(rng.choice([MemId.INP, MemId.WGT])) for _ in range(rng.integers(2, 8))]
    insns.append(MemInsn(Opcode.LOAD, MemId.UOP, 0, 0, 1, n_uops, n_uops))
    for _ in range(rng.integers(4, 16)):
        kind = rng.integers(0, 5)
        if kind == 0:
            insns.append(load(rng.choice([MemId.ACC, MemId.ACC_8BIT, MemId.UOP])))
        elif kind <= 2:
            insns.append(loop(GemmInsn, reset=bool(rng.random() < 0.2)))
        else:
            op = AluOp(int(rng.integers(0, 5)))
            imm = int(rng.integers(-40, 40) if op == AluOp.SHR
                      else rng.integers(-(1 << 15), 1 << 15))
            insns.append(loop(AluInsn, alu_op=op, use_imm=bool(rng.random() < 0.5), imm=imm))
    for _ in range(rng.integers(1, 4)):
        ys, xs = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        stride = int(rng.integers(max(0, xs - 1), xs + 3))
        base = int(rng.integers(0, hw.acc_depth - ys * xs + 1))
        elems = _DRAM // hw.out_elem_bytes - (ys - 1) * stride - xs
        insns.append(MemInsn(Opcode.STORE, MemId.OUT, base, int(rng.integers(0, elems)),
                             ys, xs, stride))
    insns.append(FinishInsn())
    tensors, _ = layout_tensors([("data", (_DRAM,), "int8", "input")], 64)
    return Program(tuple(insns), uops, tensors, _DRAM)


@pytest.mark.parametrize("hw", [TINY, DEFAULT], ids=["2x8x4", "pynq"])
def test_decoded_engine_equals_fsim_semantics_on_random_programs(hw):
    rng = np.random.default_rng(7)
    kinds = Counter()
    for _ in range(60):
        program = _random_program(rng, hw)
        data = rng.integers(-128, 128, _DRAM).astype(np.int8)
        decoded = decode(program, hw)
        kinds.update(step.__name__ for step, _ in decoded.steps)
        result = decoded.run({"data": data})
        want = _reference(program, hw, {"data": data})
        m = result.machine
        for name, got, expected in zip(("DRAM", "INP", "WGT", "ACC", "UOP"),
                                       (m.dram, m.inp, m.wgt, m.acc, m.uop), want, strict=True):
            assert np.array_equal(got, expected), (name, program.instructions)
        assert result.counters == count(program, hw)
        assert decoded.outputs({"data": data}) == {}  # no output tensor
    # every kind of step ran: a GEMM as matrix products and iteration by iteration, the
    # ALU in int32, in int64 and in order
    assert set(kinds) >= {"_load", "_load_wgt", "_store", "_reset", "_gemm_product",
                          "_gemm_scatter", "_alu_int32", "_alu", "_alu_in_order"}, kinds


def _gemm_program(hw, uops, gemm, inp_rows, wgt_rows):
    """LOAD INP and WGT rows from DRAM, the micro-ops, one GEMM."""
    tensors, dram = layout_tensors([("inp", (inp_rows, hw.inp_elem_bytes), "int8", "input"),
                                    ("wgt", (wgt_rows, hw.wgt_elem_bytes), "int8", "input")], 64)
    wgt_base = tensors[1].address // hw.wgt_elem_bytes
    insns = (MemInsn(Opcode.LOAD, MemId.INP, 0, 0, 1, inp_rows, inp_rows),
             MemInsn(Opcode.LOAD, MemId.WGT, 0, wgt_base, 1, wgt_rows, wgt_rows),
             MemInsn(Opcode.LOAD, MemId.UOP, 0, 0, 1, len(uops), len(uops)),
             gemm, FinishInsn())
    return Program(insns, np.array(uops, np.int64), tensors, dram)


@pytest.mark.parametrize("hw", [TINY, DEFAULT], ids=["2x8x4", "pynq"])
@pytest.mark.parametrize("layout", ["rows", "columns", "grid"])
def test_gemm_runs_as_one_matrix_product_in_each_acc_layout(hw, layout):
    """A convolution-like GEMM (ACC rows = P pixels x Q output blocks, each the sum of K
    terms) is one matrix product whatever order its ACC rows are in."""
    p, q, k = 5, 3, 4
    dst = {"rows": lambda i, u: i * q + u, "columns": lambda i, u: u * p + i,
           "grid": lambda i, u: (i * q + u) * 2}[layout]
    # micro-op (u, t): output block u, term t; iter_out: pixel i (its dst from the layout)
    uops = [(dst(0, u), t, u * k + t) for u in range(q) for t in range(k)]
    factor = {"rows": q, "columns": 1, "grid": 2 * q}[layout]
    gemm = GemmInsn(uop_bgn=0, uop_end=len(uops), iter_out=p, dst_factor_out=factor,
                    src_factor_out=k)
    program = _gemm_program(hw, uops, gemm, p * k, q * k)
    rng = np.random.default_rng(0)
    inputs = {"inp": rng.integers(-128, 128, (p * k, hw.inp_elem_bytes), dtype=np.int8),
              "wgt": rng.integers(-128, 128, (q * k, hw.wgt_elem_bytes), dtype=np.int8)}
    decoded = decode(program, hw)
    [(step, args)] = [s for s in decoded.steps if s[0].__name__.startswith("_gemm")]
    assert step.__name__ == "_gemm_product"
    rows = args[2]
    assert {"rows": (0, False), "columns": (0, True)}.get(layout, "grid") == \
        (rows if isinstance(rows, tuple) else "grid")
    want = _reference(program, hw, inputs)[3]
    assert np.array_equal(decoded.run(inputs).machine.acc, want)
    assert np.any(want != 0)


def test_gemm_sums_beyond_float32s_exact_range_exactly():
    """1280 products of int8 values near 127 in one accumulator: an odd sum past 2**24,
    which float32 cannot hold (its spacing there is 2)."""
    hw = DEFAULT
    uops = [(0, u, u) for u in range(8)]
    gemm = GemmInsn(uop_bgn=0, uop_end=8, iter_in=10, src_factor_in=8, wgt_factor_in=8)
    program = _gemm_program(hw, uops, gemm, 80, 80)
    inp = np.full((80, hw.inp_elem_bytes), 127, np.int8)
    inp[0, 0] = 2
    inputs = {"inp": inp, "wgt": np.full((80, hw.wgt_elem_bytes), 127, np.int8)}
    want = (80 * hw.block_in - 1) * 127 * 127 + 2 * 127
    assert want > 1 << 24 and want % 2 == 1
    acc = run(program, hw, inputs).machine.acc
    assert (acc[0] == want).all()
