"""A per-channel shift in the epilogue (``EpilogueOp("shr", tensor="shift")``): the
requantization of per-channel weight scales that are powers of two, on VTA. The shift is a
second per-channel int32 tensor loaded into the accumulator buffer as the bias is, and the
ALU's SHR reads it as the bias add reads the bias."""

import re
from dataclasses import replace

import numpy as np
import pytest

from search_spaces import get_template
from simulator.functional import count
from simulator.hardware import DEFAULT, PRESETS, HardwareConfig
from simulator.isa import AluInsn, AluOp, MemId, MemInsn
from simulator.timing import time_program
from tests._configs import verified_random_schedules
from vtatune.builds import build
from vtatune.errors import BuildError, IllegalSchedule, WorkloadError
from vtatune.lowering import lower, pack_bias, packed_inputs
from vtatune.schedule import Schedule
from vtatune.workloads import (
    Conv2dTransposeWorkload,
    Conv2dWorkload,
    Epilogue,
    EpilogueOp,
    GemmWorkload,
    GroupConv2dWorkload,
    random_operands,
    reference_output,
)

SHIFT = Epilogue((EpilogueOp("shr", tensor="shift"), EpilogueOp("clip", -127, hi=127)))
BIAS_SHIFT = Epilogue((EpilogueOp("add", tensor="bias"), EpilogueOp("shr", tensor="shift"),
                       EpilogueOp("clip", -127, hi=127)))
# the same chain with one shift for every channel: what the per-channel one replaces
BIAS_SHR8 = Epilogue((EpilogueOp("add", tensor="bias"), EpilogueOp("shr", 8),
                      EpilogueOp("clip", -127, hi=127)))

# BLOCK_IN = 2 x BLOCK_OUT (the output stored packed by BLOCK_IN), the reverse, BATCH 4
IN32 = HardwareConfig(target="ultra96", log_block_in=5, log_block_out=4,
                      log_inp_buff_size=16, log_wgt_buff_size=19)
OUT32 = HardwareConfig(target="ultra96", log_block_in=4, log_block_out=5)
B4 = PRESETS["4x8"]

CASES = [
    (Conv2dWorkload(1, 8, 8, 32, 32, 3, 1, 1), DEFAULT),
    (GroupConv2dWorkload(1, 8, 8, 64, 64, 3, 1, 1, 2), DEFAULT),
    (GemmWorkload(16, 64, 32), DEFAULT),
    (Conv2dTransposeWorkload(1, 4, 4, 32, 32, 4, 1, 2, 0), DEFAULT),
    (Conv2dWorkload(1, 8, 8, 64, 64, 3, 1, 1), IN32),
    (GroupConv2dWorkload(1, 6, 6, 64, 128, 3, 1, 1, 2), IN32),
    (GemmWorkload(1, 256, 128), IN32),
    (Conv2dTransposeWorkload(1, 4, 4, 64, 32, 4, 1, 2, 0), IN32),
    (Conv2dWorkload(1, 8, 8, 64, 64, 3, 1, 1), OUT32),
    (GroupConv2dWorkload(1, 6, 6, 128, 128, 3, 1, 1, 2), OUT32),
    (GemmWorkload(4, 128, 256), OUT32),
    (Conv2dTransposeWorkload(1, 4, 4, 64, 32, 4, 1, 2, 0), OUT32),
    (Conv2dWorkload(4, 8, 8, 16, 16, 3, 1, 1), B4),
    (GroupConv2dWorkload(4, 6, 6, 32, 32, 3, 1, 1, 2), B4),
    (GemmWorkload(8, 32, 32), B4),
    (Conv2dTransposeWorkload(4, 4, 4, 16, 16, 4, 1, 2, 0), B4),
]


def test_the_shift_step_reads_a_per_channel_tensor():
    op = EpilogueOp("shr", tensor="shift")
    assert op.describe() == "shr(shift)" and BIAS_SHIFT.tensors == ("bias", "shift")
    assert SHIFT.channel_tensors == ("shift",) and not SHIFT.bias
    assert BIAS_SHIFT.key() == "epi_addbias_shrshift_clipm127to127"
    assert Epilogue.from_list(BIAS_SHIFT.to_list()) == BIAS_SHIFT
    with pytest.raises(WorkloadError, match="epilogue op add cannot read tensor 'shift'"):
        EpilogueOp("add", tensor="shift")
    with pytest.raises(WorkloadError, match="epilogue op shr cannot read tensor 'bias'"):
        EpilogueOp("shr", tensor="bias")
    acc = np.array([[-1000, 1000, 1 << 30], [7, -7, -(1 << 31)]], np.int64)
    shift = np.array([[0, 3, 31]], np.int32)  # one per channel (column)
    # arithmetic: -7 >> 3 is -1; 2^30 >> 31 is 0; -2^31 >> 31 is -1; then the int8 store
    assert SHIFT.apply(acc, {"shift": shift}).tolist() == [[-127, 125, 0], [7, -1, -1]]
    with pytest.raises(WorkloadError, match=r"a shift is 0..31, got 0..32"):
        SHIFT.apply(acc, {"shift": np.array([[0, 3, 32]])})
    with pytest.raises(WorkloadError, match=r"a shift is 0..31, got -1..3"):
        SHIFT.apply(acc, {"shift": np.array([[0, 3, -1]])})


def test_operands_and_dram_tensors_carry_the_shift():
    wl = replace(GemmWorkload(16, 64, 32), epilogue=SHIFT)
    plain = random_operands(replace(wl, epilogue=BIAS_SHR8), False, seed=5)
    ops = random_operands(wl, False, seed=5)
    assert ops.bias is None and ops.shift.dtype == np.int32 and ops.shift.shape == (32,)
    assert 0 <= ops.shift.min() and ops.shift.max() < 32 and len(set(ops.shift)) > 8
    np.testing.assert_array_equal(ops.data, plain.data)  # drawn last: the rest unchanged
    packed = packed_inputs(wl, ops, DEFAULT)
    np.testing.assert_array_equal(packed["shift"], pack_bias(ops.shift, 16, DEFAULT))
    low = lower(wl, Schedule(tile_co=2, tile_ci=4), DEFAULT)
    assert [t.name for t in low.program.tensors] == ["data", "weight", "shift", "output"]
    both = lower(replace(wl, epilogue=BIAS_SHIFT), Schedule(tile_co=2, tile_ci=4), DEFAULT)
    assert [(t.name, t.shape, t.dtype) for t in both.program.tensors][2:4] == [
        ("bias", (16, 2, 1, 16), "int32"), ("shift", (16, 2, 1, 16), "int32")]


@pytest.mark.parametrize("epilogue", [SHIFT, BIAS_SHIFT], ids=lambda e: e.describe())
@pytest.mark.parametrize("workload,hw", CASES,
                         ids=lambda x: x.bitstream if isinstance(x, HardwareConfig)
                         else x.describe()[:32])
def test_random_schedules_are_bit_exact(workload, hw, epilogue):
    """The functional simulator's output equals Epilogue.apply on the numpy accumulators,
    every channel shifted by its own amount; the shift changes the output (a shift read
    from the wrong place would not pass)."""
    wl = replace(workload, epilogue=epilogue)
    _, seed = verified_random_schedules(wl, hw)
    ops = random_operands(wl, False, seed)
    one_shift = replace(ops, shift=np.full_like(ops.shift, int(np.median(ops.shift))))
    assert (reference_output(wl, ops) != reference_output(wl, one_shift)).any()


def test_the_shift_is_loaded_into_acc_by_the_compute_module_and_timed():
    """One more ACC load per tile, issued right before the SHR that reads it, into the
    thread's per-channel area after its bias tile; the ALU instruction count is that of a
    scalar shift, and the timing model takes the load's cycles."""
    base = Conv2dWorkload(1, 14, 14, 64, 64, 3, 1, 1)
    sch = Schedule(tile_h=7, tile_w=14, tile_co=2, oc_nthread=2)
    scalar = lower(replace(base, epilogue=BIAS_SHR8), sch, DEFAULT)
    low = lower(replace(base, epilogue=BIAS_SHIFT), sch, DEFAULT)
    c, c0 = count(low.program, DEFAULT), count(scalar.program, DEFAULT)
    assert c.alu_counter == c0.alu_counter
    tiles = (14 // 7) * (64 // 16 // 2)
    assert c0.acc_load_nbytes == tiles * 2 * 64 and c.acc_load_nbytes == 2 * c0.acc_load_nbytes
    insns = low.program.instructions
    shr = next(j for j, i in enumerate(insns) if isinstance(i, AluInsn)
               and i.alu_op == AluOp.SHR)
    assert not insns[shr].use_imm
    load = next(i for i in reversed(insns[:shr])
                if isinstance(i, MemInsn) and i.mem != MemId.UOP)
    plan = low.plan
    assert load.mem == MemId.ACC and plan.channels == ("bias", "shift")
    assert load.sram_base == plan.nthreads * plan.acc_tile + 2  # thread 0, after its bias
    shift_at = next(t.address for t in low.program.tensors if t.name == "shift")
    assert load.dram_base == shift_at // DEFAULT.acc_elem_bytes
    assert plan.sram_usage()["acc"]["elements"] == 2 * (plan.acc_tile + 2 * 2)
    assert time_program(low.program, DEFAULT).cycles > time_program(scalar.program,
                                                                    DEFAULT).cycles


def test_acc_capacity_counts_the_shift_tile():
    """A tile whose accumulators and bias fill the ACC buffer exactly has no room for the
    shift: the rule names both per-channel tiles."""
    wl = Conv2dWorkload(1, 15, 17, 16, 128, 1, 0, 1)  # 8 x 15 x 17 = 2040 of 2048 rows
    sch = Schedule(tile_h=15, tile_w=17, tile_co=8)
    lower(replace(wl, epilogue=BIAS_SHR8), sch, DEFAULT)
    lower(replace(wl, epilogue=SHIFT), sch, DEFAULT)
    with pytest.raises(IllegalSchedule, match=re.escape(
            "accumulator tile needs 131584 B per thread x 1 thread(s) = 131584 B, ACC buffer "
            "has 131072 B (with the bias and shift tiles: 2 x 512 B)")) as e:
        lower(replace(wl, epilogue=BIAS_SHIFT), sch, DEFAULT)
    assert e.value.rule == "acc_capacity"
    # the search space's legality is the same rule
    for epilogue, legal in ((BIAS_SHR8, True), (BIAS_SHIFT, False)):
        tpl = get_template(replace(wl, epilogue=epilogue), DEFAULT)
        assert tpl.legal({k.name: getattr(sch, k.name) for k in tpl.knobs}) == legal


def test_build_run_takes_the_shift():
    wl = replace(GemmWorkload(16, 64, 32), epilogue=BIAS_SHIFT)
    b = build(wl, schedule=Schedule(tile_co=2, tile_ci=4))
    ops = random_operands(wl, True, seed=2)
    np.testing.assert_array_equal(b.run(ops.data, ops.weight, ops.bias, ops.shift),
                                  reference_output(wl, ops))
    with pytest.raises(BuildError, match="pass shift"):
        b.run(ops.data, ops.weight, ops.bias)
    with pytest.raises(BuildError, match=r"shift: values outside 0..31 \(0..40\)"):
        b.run(ops.data, ops.weight, ops.bias, np.r_[ops.shift[:-1], 40] * (ops.shift >= 0))
    plain = build(replace(wl, epilogue=BIAS_SHR8), schedule=Schedule(tile_co=2, tile_ci=4))
    with pytest.raises(BuildError, match="no per-channel shift"):
        plain.run(ops.data, ops.weight, ops.bias, ops.shift)


def test_build_run_holds_only_the_shifted_planes_to_0_31():
    """A plane a min or max reads (a per-channel bound) holds any int32; the one a shr
    reads is still refused outside 0..31."""
    epilogue = Epilogue((EpilogueOp("min", tensor="shift"), EpilogueOp("shr", tensor="shift1"),
                         EpilogueOp("clip", -128, hi=127)))
    wl = replace(GemmWorkload(16, 64, 32), epilogue=epilogue)
    b = build(wl, schedule=Schedule(tile_co=2, tile_ci=4))
    ops = random_operands(wl, False, seed=3)
    assert 0 <= ops.shift[1].min() and ops.shift[1].max() < 32  # drawn as amounts
    low = np.arange(32) * (1 << 27) - (1 << 31)  # -2^31 .. 2^31 - 2^27
    bounds = replace(ops, shift=np.stack([low, ops.shift[1]]).astype(np.int32))
    np.testing.assert_array_equal(b.run(bounds.data, bounds.weight, None, bounds.shift),
                                  reference_output(wl, bounds))
    with pytest.raises(BuildError, match=r"shift: values outside 0..31 \(-3..31\)"):
        b.run(ops.data, ops.weight, None,
              np.stack([ops.shift[0], np.r_[-3, 31, ops.shift[1, 2:]]]))
