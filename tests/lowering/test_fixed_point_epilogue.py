"""A fixed-point multiply in the epilogue: ``save`` copies the accumulator tile into its own
area of the accumulator buffer (min 0, max 0, add: three ALU instructions) and
``add(saved)`` adds the copy back after a shift (Horner's rule from shifts and adds, VTA's
ALU having no multiplier). The lowered programs equal ``Epilogue.apply`` on the simulator."""

import re
from dataclasses import replace

import numpy as np
import pytest

from search_spaces import get_template
from simulator.functional import count
from simulator.hardware import DEFAULT, PRESETS, HardwareConfig
from simulator.isa import AluInsn, AluOp
from tests._configs import verified_random_schedules
from vtatune.errors import IllegalSchedule, WorkloadError
from vtatune.lowering import lower
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

# x * (2^-9 + 2^-11 + 2^-14) with the bias: what a requantization by 0.00251 runs
HORNER = Epilogue((EpilogueOp("add", tensor="bias"), EpilogueOp("save"), EpilogueOp("shr", 3),
                   EpilogueOp("add", tensor="saved"), EpilogueOp("shr", 2),
                   EpilogueOp("add", tensor="saved"), EpilogueOp("shr", 9),
                   EpilogueOp("clip", -128, hi=127)))
# the same without the copy: what a power-of-two multiplier runs
SHR9 = Epilogue((EpilogueOp("add", tensor="bias"), EpilogueOp("shr", 9),
                 EpilogueOp("clip", -128, hi=127)))
SMALL = Epilogue((EpilogueOp("save"), EpilogueOp("shr", 1), EpilogueOp("add", tensor="saved"),
                  EpilogueOp("shr", 10), EpilogueOp("clip", 0, hi=127)))

# BLOCK_IN 32 / BLOCK_OUT 16 (1x32x16) and the reverse (1x16x32)
IN32 = HardwareConfig(target="ultra96", log_block_in=5, log_block_out=4,
                      log_inp_buff_size=16, log_wgt_buff_size=19)
OUT32 = HardwareConfig(target="ultra96", log_block_in=4, log_block_out=5)

CASES = [
    (Conv2dWorkload(1, 8, 8, 32, 32, 3, 1, 1), DEFAULT),
    (GroupConv2dWorkload(1, 8, 8, 64, 64, 3, 1, 1, 2), DEFAULT),
    (GemmWorkload(16, 64, 32), PRESETS["sim"]),
    (Conv2dTransposeWorkload(1, 4, 4, 32, 32, 4, 1, 2, 0), PRESETS["sim"]),
    (Conv2dWorkload(1, 8, 8, 64, 64, 3, 1, 1), IN32),
    (GemmWorkload(1, 256, 128), IN32),
    (Conv2dWorkload(1, 8, 8, 64, 64, 3, 1, 1), OUT32),
    (GemmWorkload(4, 128, 256), OUT32),
    (Conv2dWorkload(4, 8, 8, 16, 16, 3, 1, 1), PRESETS["4x8"]),
]


def _horner(acc: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """HORNER's arithmetic written out: ((x >> 3) + x >> 2) + x >> 9, clipped, int8."""
    x = acc.astype(np.int64) + bias
    r = ((((x >> 3) + x) >> 2) + x) >> 9
    return np.clip(r, -128, 127).astype(np.int8)


def test_save_and_add_saved_steps():
    assert HORNER.describe() == ("add(bias) save shr(3) add(saved) shr(2) add(saved) shr(9) "
                                 "clip(-128,127)")
    assert HORNER.key() == ("epi_addbias_save_shr3_addsaved_shr2_addsaved_shr9_"
                            "clipm128to127")
    assert Epilogue.from_list(HORNER.to_list()) == HORNER
    assert HORNER.tensors == ("bias",) and HORNER.saves and not SHR9.saves
    assert HORNER.channel_tensors == ("bias",)
    assert EpilogueOp("save").alu_steps() == (("min", 0, "into_saved"), ("max", 0, "into_saved"),
                                              ("add", None, "into_saved"))
    with pytest.raises(WorkloadError, match="save takes no immediate"):
        EpilogueOp("save", 3)
    with pytest.raises(WorkloadError, match="epilogue op shr cannot read tensor 'saved'"):
        EpilogueOp("shr", tensor="saved")
    rng = np.random.default_rng(0)
    acc = rng.integers(-(1 << 20), 1 << 20, (64, 32))
    bias = rng.integers(-5000, 5000, (1, 32))
    got = HORNER.apply(acc, {"bias": bias})
    np.testing.assert_array_equal(got, _horner(acc, bias))
    assert (got != SHR9.apply(acc, {"bias": bias})).any()  # the copy changes the result


@pytest.mark.parametrize("epilogue", [HORNER, SMALL], ids=lambda e: e.describe()[:20])
@pytest.mark.parametrize("workload,hw", CASES,
                         ids=lambda x: x.bitstream if isinstance(x, HardwareConfig)
                         else x.describe()[:32])
def test_random_schedules_are_bit_exact(workload, hw, epilogue):
    """The functional simulator's output equals Epilogue.apply (each thread's copy at its
    own place: a copy shared between threads, or read from the wrong place, would not
    pass); the copy changes the output."""
    wl = replace(workload, epilogue=epilogue)
    _, seed = verified_random_schedules(wl, hw)
    ops = random_operands(wl, False, seed)
    plain = Epilogue(tuple(o for o in epilogue.ops if o.op != "save" and o.tensor != "saved"))
    assert (reference_output(wl, ops) != reference_output(replace(wl, epilogue=plain),
                                                          ops)).any()


def test_the_copy_is_counted_and_timed():
    """Three ALU instructions per tile for the save, one per add of the copy (reading a
    register, not an immediate: the timing model's dearer rate); the copy's area lies after
    every thread's tiles and per-channel areas, and doubles the accumulators' footprint."""
    base = Conv2dWorkload(1, 14, 14, 64, 64, 3, 1, 1)
    sch = Schedule(tile_h=7, tile_w=14, tile_co=2, oc_nthread=2)
    low = lower(replace(base, epilogue=HORNER), sch, DEFAULT)
    short = lower(replace(base, epilogue=SHR9), sch, DEFAULT)
    tiles = (14 // 7) * (64 // 16 // 2)  # rows x channel tiles, both threads
    vectors = 14 * 14 * 64 // 16  # the output's, each op once per vector
    assert count(low.program, DEFAULT).alu_counter - count(short.program, DEFAULT).alu_counter \
        == (3 + 2 * 2) * vectors  # save 3, (shr, add) x 2
    plan = low.plan
    assert plan.sram_usage()["acc"]["elements"] == 2 * (2 * plan.acc_tile + plan.bias_tile)
    adds = [i for i in low.program.instructions if isinstance(i, AluInsn)
            and i.alu_op == AluOp.ADD and not i.use_imm]
    assert len(adds) == tiles * 4  # the bias, the save's add, two adds of the copy


def test_acc_capacity_counts_the_copy():
    wl = Conv2dWorkload(1, 15, 17, 16, 128, 1, 0, 1)  # 8 x 15 x 17 = 2040 of 2048 rows
    sch = Schedule(tile_h=15, tile_w=17, tile_co=4)  # 2 x 1020 + 4 rows: the copy fits
    lower(replace(wl, epilogue=HORNER), sch, DEFAULT)
    lower(replace(wl, epilogue=SHR9), replace(sch, tile_co=8), DEFAULT)
    with pytest.raises(IllegalSchedule, match=re.escape(
            "accumulator tile needs 261632 B per thread x 1 thread(s) = 261632 B, ACC buffer "
            "has 131072 B (with the copy of the tile")) as e:
        lower(replace(wl, epilogue=HORNER), replace(sch, tile_co=8), DEFAULT)
    assert e.value.rule == "acc_capacity" and "the copy of the tile" in str(e.value)
    for epilogue, legal in ((SHR9, True), (HORNER, False)):
        tpl = get_template(replace(wl, epilogue=epilogue), DEFAULT)
        big = replace(sch, tile_co=8)
        assert tpl.legal({k.name: getattr(big, k.name) for k in tpl.knobs}) == legal
    with pytest.raises(IllegalSchedule, match="no TVM VTA schedule does") as e:
        lower(replace(wl, epilogue=HORNER), replace(sch, tvm_strict=True), DEFAULT)
    assert e.value.rule == "tvm_saved_copy"


# a per-channel fixed point (vtatune.deploy.runtime._fixed_point.ChannelFixedPoint): each
# shift a plane of the per-channel shift input
PER_CHANNEL = Epilogue((EpilogueOp("add", tensor="bias"), EpilogueOp("save"),
                        EpilogueOp("shr", tensor="shift"), EpilogueOp("add", tensor="saved"),
                        EpilogueOp("shr", tensor="shift1"), EpilogueOp("add", tensor="saved"),
                        EpilogueOp("shr", tensor="shift2"),
                        EpilogueOp("clip", -128, hi=127)))


@pytest.mark.parametrize("workload,hw", [
    (Conv2dWorkload(1, 8, 8, 32, 32, 3, 1, 1), DEFAULT),
    (GemmWorkload(16, 64, 32), DEFAULT),
    (Conv2dWorkload(1, 8, 8, 64, 64, 3, 1, 1), OUT32),
    (GemmWorkload(1, 256, 128), IN32),
], ids=lambda x: x.bitstream if isinstance(x, HardwareConfig) else x.describe()[:32])
def test_per_channel_shift_planes_are_bit_exact(workload, hw):
    """Three per-channel shift planes besides the bias (each its own ACC tile, loaded from
    its plane of the one shift input): random legal schedules equal Epilogue.apply with
    random shifts per plane (a plane read from another's place would not pass)."""
    wl = replace(workload, epilogue=PER_CHANNEL)
    assert PER_CHANNEL.channel_tensors == ("bias", "shift", "shift1", "shift2")
    for low in verified_random_schedules(wl, hw)[0]:
        assert low.program.tensor("shift").shape[0] == 3
        assert low.plan.channels == ("bias", "shift", "shift1", "shift2")
    ops = random_operands(wl, False, 0)
    assert ops.shift.shape == (3, wl.out_channels)
    swapped = replace(ops, shift=ops.shift[[1, 0, 2]])
    assert (reference_output(wl, ops) != reference_output(wl, swapped)).any()


def test_shift_planes_are_read_in_order():
    with pytest.raises(WorkloadError, match="reads the shift planes in order shift, shift1"):
        _ = Epilogue((EpilogueOp("shr", tensor="shift1"),)).shift_planes


# the forms an exact one-pass requantization needs: a per-channel clamp whose bounds are
# planes of the shift input (beyond the ALU's 16-bit immediates), then a left shift (a shr
# by a negative immediate) before the shifts and adds
EXACT = Epilogue((EpilogueOp("add", tensor="bias"), EpilogueOp("min", tensor="shift"),
                  EpilogueOp("max", tensor="shift1"), EpilogueOp("shr", -4),
                  EpilogueOp("add", 3), EpilogueOp("save"), EpilogueOp("shr", 2),
                  EpilogueOp("add", tensor="saved"), EpilogueOp("shr", 9),
                  EpilogueOp("clip", -128, hi=127)))


def _exact(acc: np.ndarray, bias: np.ndarray, hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """EXACT's arithmetic written out: clamp to [lo, hi], times 16 (wrapping), + 3, then
    (y >> 2) + y >> 9, clipped, int8."""
    def wrap(v):
        return (v + (1 << 31)) % (1 << 32) - (1 << 31)
    x = np.clip(wrap(acc.astype(np.int64) + bias), None, hi)
    x = np.maximum(x, lo)
    y = wrap(wrap(x * 16) + 3)
    return np.clip(wrap((y >> 2) + y) >> 9, -128, 127).astype(np.int8)


def test_min_and_max_read_shift_planes_as_bounds():
    assert EXACT.describe() == ("add(bias) min(shift) max(shift1) shr(-4) add(3) save shr(2) "
                                "add(saved) shr(9) clip(-128,127)")
    assert EXACT.key() == ("epi_addbias_minshift_maxshift1_shrm4_add3_save_shr2_addsaved_"
                           "shr9_clipm128to127")
    assert Epilogue.from_list(EXACT.to_list()) == EXACT
    assert EXACT.channel_tensors == ("bias", "shift", "shift1") and EXACT.shift_planes == 2
    assert EXACT.shift_amounts == () and PER_CHANNEL.shift_amounts == ("shift", "shift1",
                                                                       "shift2")
    with pytest.raises(WorkloadError, match="epilogue op add cannot read tensor 'shift1'"):
        EpilogueOp("add", tensor="shift1")
    rng = np.random.default_rng(1)
    acc = rng.integers(-(1 << 31), 1 << 31, (64, 32))
    acc[:32] >>= 12  # half of them inside the bounds, half cut by the clamp
    bias = rng.integers(-5000, 5000, (1, 32))
    # bounds any int32: beyond 16 bits, and some whose left shift wraps
    hi = rng.integers(0, 1 << 20, (1, 32))
    lo = -rng.integers(0, 1 << 20, (1, 32))
    hi[0, :4], lo[0, 4:8] = (1 << 31) - 1, -(1 << 31)
    planes = {"bias": bias, "shift": hi, "shift1": lo}
    got = EXACT.apply(acc, planes)
    np.testing.assert_array_equal(got, _exact(acc, bias, hi, lo))
    x = acc + bias
    assert (x > hi).sum() > 200 and (x < lo).sum() > 200 and ((x >= lo) & (x <= hi)).sum() > 200
    unclamped = Epilogue(EXACT.ops[:1] + EXACT.ops[3:])
    assert (got != unclamped.apply(acc, planes)).any()
    # a plane a shr reads is still a shift amount; one a min or max reads holds any int32
    with pytest.raises(WorkloadError, match=r"a shift is 0..31, got -1..40"):
        Epilogue((EpilogueOp("max", tensor="shift"), EpilogueOp("shr", tensor="shift1"))
                 ).apply(acc, {"shift": lo, "shift1": np.array([[-1, 40]])})


@pytest.mark.parametrize("workload,hw", [
    (GemmWorkload(16, 64, 32), DEFAULT),
    (Conv2dWorkload(1, 8, 8, 32, 32, 3, 1, 1), DEFAULT),
    (GemmWorkload(1, 256, 128), IN32),
], ids=lambda x: x.bitstream if isinstance(x, HardwareConfig) else x.describe()[:32])
def test_bounds_and_a_left_shift_are_bit_exact(workload, hw):
    """Random legal schedules of EXACT run on the functional simulator equal Epilogue.apply
    (encoded and decoded: the SHR's 16-bit immediate -4, the MIN and MAX reading their
    plane's ACC tile); each channel's bounds matter (planes swapped, the output changes)."""
    wl = replace(workload, epilogue=EXACT)
    lowered, seed = verified_random_schedules(wl, hw)
    for low in lowered:
        alu = [i for i in low.program.instructions if isinstance(i, AluInsn)]
        assert {(i.alu_op, i.use_imm, i.imm) for i in alu} >= {
            (AluOp.SHR, True, -4), (AluOp.MIN, False, 0), (AluOp.MAX, False, 0)}
        assert low.plan.channels == ("bias", "shift", "shift1")
    ops = random_operands(wl, False, seed)
    assert ops.shift.shape == (2, wl.out_channels)
    hi, lo = ops.shift
    assert 0 <= hi.min() and hi.max() <= 1 << 12 and -(1 << 12) <= lo.min() and lo.max() <= 0
    assert (reference_output(wl, ops) != reference_output(wl, replace(
        ops, shift=ops.shift[:, ::-1].copy()))).any()
