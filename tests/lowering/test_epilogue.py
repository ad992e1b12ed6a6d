"""Epilogues carried by the workload: the deployed conv chains of TVM v0.14 and any ALU
chain, lowered bit-exactly against numpy, counted as TVM's fsim counts the deployed
ResNet-18, and refused where an immediate does not fit its field."""

import json
import random
import re
from dataclasses import replace

import numpy as np
import pytest

from search_spaces import get_template
from simulator.functional import count
from simulator.hardware import DEFAULT, PRESETS
from simulator.isa import AluInsn, AluOp, MemId, MemInsn
from simulator.timing import time_program
from tests._data import DEPLOYED
from vtatune.errors import IllegalSchedule, WorkloadError
from vtatune.lowering import COMPUTE, FRESH, STORE, Carry, lower
from vtatune.records import workload_fields, workload_from
from vtatune.schedule import Schedule, from_autotvm
from vtatune.scoring import score, verify
from vtatune.workloads import (
    BENCHMARK,
    BENCHMARK_BIAS,
    WORKLOADS,
    Conv2dWorkload,
    Epilogue,
    EpilogueOp,
    GemmWorkload,
    GroupConv2dWorkload,
    deployed,
)

CUSTOM = Epilogue((EpilogueOp("mul", 3), EpilogueOp("add", tensor="bias"),
                   EpilogueOp("shr", 4), EpilogueOp("clip", -100, hi=90)))


def test_epilogue_values():
    relu = deployed(shift=5, relu=True)
    assert [s[0] for s in relu.alu_steps()] == ["add", "max", "add", "shr", "min", "max"]
    assert [s[0] for s in relu.alu_steps("max_min")][-2:] == ["max", "min"]
    assert deployed(5, relu=False).describe() == "add(bias) shr(5) clip(-127,127)"
    assert BENCHMARK.with_bias(True) is BENCHMARK_BIAS and BENCHMARK_BIAS.with_bias(False) \
        is BENCHMARK_BIAS and relu.with_bias(True) is relu
    with pytest.raises(WorkloadError, match="reads none"):
        Epilogue((EpilogueOp("shr", 2),)).with_bias(True)
    assert Epilogue.from_list(CUSTOM.to_list()) == CUSTOM
    with pytest.raises(WorkloadError, match="tensor 'weight'"):
        EpilogueOp("add", tensor="weight")
    with pytest.raises(WorkloadError, match=r"shr by 40: a shift is -31..31 \(negative: left\)"):
        EpilogueOp("shr", 40)
    acc = np.array([-2**31, 2**31 - 1, 1000], np.int64)
    # 32-bit wrapping add, arithmetic shift, clip, int8
    out = Epilogue((EpilogueOp("add", 1), EpilogueOp("shr", 24))).apply(acc)
    assert out.tolist() == [-128 + 0, -128, 0]


def test_a_shr_by_a_negative_immediate_shifts_left():
    """VTA's ALU shifts left by -imm when an SHR's immediate is negative (fsim; the RTL's
    SHL): -31..31, a left shift wrapping at 32 bits as the ALU does."""
    assert [EpilogueOp("shr", k).imm for k in (-31, -1, 0, 31)] == [-31, -1, 0, 31]
    for bad in (-32, 32):
        with pytest.raises(WorkloadError, match=rf"shr by {bad}: a shift is -31..31 "
                           r"\(negative: left\)"):
            EpilogueOp("shr", bad)
    left = Epilogue((EpilogueOp("shr", -4), EpilogueOp("shr", 24)))
    assert left.describe() == "shr(-4) shr(24)" and left.key() == "epi_shrm4_shr24"
    assert Epilogue.from_list(left.to_list()) == left
    acc = np.array([3 << 24, 1 << 27, -(1 << 27) - 1, (1 << 28) + (5 << 24), -1], np.int64)
    # x * 16 wrapped to int32, then >> 24 (2^31 wraps to -2^31); the int8 store
    want = (((acc * 16 + (1 << 31)) % (1 << 32) - (1 << 31)) >> 24).astype(np.int8)
    assert left.apply(acc).tolist() == want.tolist() == [48, -128, 127, 80, -1]
    sign = Epilogue((EpilogueOp("shr", -31), EpilogueOp("shr", 31)))  # bit 0 to the sign
    assert sign.apply(np.array([1, 2, 3, -1], np.int64)).tolist() == [-1, 0, -1, -1]


def test_the_key_and_the_record_carry_the_epilogue():
    c8 = WORKLOADS["conv2d"]["resnet18.C8"]
    assert replace(c8, epilogue=BENCHMARK_BIAS).key() == c8.key()  # the bias flag tells
    relu = replace(c8, epilogue=deployed(6, True))
    assert relu.key().startswith(c8.key() + ".epi_addbias_max0_add32_shr6")
    assert workload_from({"workload": workload_fields(relu)}) == relu
    assert "epilogue" not in workload_fields(c8)
    assert workload_from({"workload": workload_fields(c8)}) == c8


@pytest.mark.parametrize("epilogue", [deployed(6, True), deployed(9, False), CUSTOM],
                         ids=lambda e: e.describe())
@pytest.mark.parametrize("workload", [
    Conv2dWorkload(1, 8, 8, 32, 32, 3, 1, 1), GemmWorkload(16, 64, 32),
    GroupConv2dWorkload(1, 8, 8, 64, 64, 3, 1, 1, 2)], ids=lambda w: w.operator)
def test_random_schedules_are_bit_exact(workload, epilogue):
    wl = replace(workload, epilogue=epilogue)
    tpl = get_template(wl, DEFAULT)
    legal = list(tpl.legal_configs())
    for config in random.Random(wl.key()).sample(legal, min(6, len(legal))):
        v = verify(lower(wl, tpl.to_schedule(config), DEFAULT))
        assert v.ok, (config, v.mismatches)


def test_one_alu_instruction_per_step_and_the_bias_loaded_before_its_first_use():
    wl = replace(WORKLOADS["conv2d"]["resnet18.C8"], epilogue=deployed(6, True))
    sch = Schedule(tile_h=7, tile_w=14, tile_co=4, oc_nthread=2)
    base = count(lower(WORKLOADS["conv2d"]["resnet18.C8"], sch, DEFAULT).program, DEFAULT)
    c = count(lower(wl, sch, DEFAULT).program, DEFAULT)
    e = 256 // 16 * 14 * 14  # output vectors
    assert c.alu_counter == 6 * e and base.alu_counter == 3 * e
    assert c.acc_load_nbytes == (14 // 7) * (256 // 16) * 64  # one bias load per tile
    insns = lower(wl, sch, DEFAULT).program.instructions
    first_alu = next(j for j, i in enumerate(insns) if isinstance(i, AluInsn))
    before = [i for i in insns[:first_alu] if not (isinstance(i, MemInsn) and i.mem == MemId.UOP)]
    assert isinstance(before[-1], MemInsn) and before[-1].mem == MemId.ACC  # the bias load
    assert insns[first_alu].alu_op == AluOp.ADD and not insns[first_alu].use_imm


def test_an_immediate_wider_than_its_field_is_refused():
    wl = replace(WORKLOADS["gemm"]["dense128"],
                 epilogue=Epilogue((EpilogueOp("add", 1 << 20), EpilogueOp("shr", 8))))
    with pytest.raises(IllegalSchedule, match="ALU: field imm=1048576 does not fit"):
        lower(wl, Schedule(tile_co=8, tile_ci=8), DEFAULT)
    assert score(wl, Schedule(tile_co=8, tile_ci=8), DEFAULT).rule == "field_width"


def _deployed_conv_nodes():
    nodes = json.loads(DEPLOYED.read_text())["nodes"]
    return [n for n in nodes if n["device"] == "VTA" and n["relay_ops"].startswith("nn.conv2d")]


def test_deployed_resnet18_convs_count_as_tvm_fsim():
    """Every conv function TVM v0.14 ran on VTA for ResNet-18 (its fused epilogue: bias, ReLU
    or not, rounding, shift, clip to [-127, 127]) has fsim's seven counters exactly."""
    nodes = _deployed_conv_nodes()
    assert len(nodes) == 19
    for n in nodes:
        shape = map(int, re.match(r"N(\d+) H(\d+) W(\d+) CI(\d+) CO(\d+) K(\d+) P(\d+) S(\d+)",
                                  n["conv_task"]).groups())
        wl = Conv2dWorkload(*shape, epilogue=deployed(7, "nn.relu" in n["relay_ops"]))
        hw = PRESETS["sim"]
        program = lower(wl, from_autotvm(n["autotvm_knobs"], wl, hw), hw).program
        assert count(program, hw).as_dict() == n["counters"], n["nid"]


def test_deployed_resnet18_conv_streams_time_as_tvms():
    """TVM's own instruction stream of each deployed conv, timed (the reference in tests/data):
    the streams vtatune builds with TVM's runtime rules take the same cycles; those that
    follow a residual add inherit its token and its pending pop (the reference primed the
    token with a store NOP, a few cycles later than a token already there)."""
    after_add = {18, 25, 35, 42, 52, 59, 69, 10}  # node 10: the next inference's first
    hw = PRESETS["sim"]
    for n in _deployed_conv_nodes():
        shape = map(int, re.match(r"N(\d+) H(\d+) W(\d+) CI(\d+) CO(\d+) K(\d+) P(\d+) S(\d+)",
                                  n["conv_task"]).groups())
        relu = "nn.relu" in n["relay_ops"]
        wl = Conv2dWorkload(*shape, epilogue=deployed(7, relu))
        carry = Carry((0, 0, 0, 1), ((STORE, COMPUTE),)) if n["nid"] in after_add else FRESH
        low = lower(wl, from_autotvm(n["autotvm_knobs"], wl, hw), hw, carry=carry)
        cycles = time_program(low.program, hw).cycles
        if relu:
            assert abs(cycles - n["tvm_stream_cycles"]) <= 5, n["nid"]
        else:
            assert cycles == n["tvm_stream_cycles"], n["nid"]
        assert low.pending_out == ()  # every deployed conv has a virtual thread: balanced
