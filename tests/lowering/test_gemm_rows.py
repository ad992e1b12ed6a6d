"""A GEMM's rows as a 1x1 conv's pixels (``Schedule.rows="spatial"``, issue 38): bit-exact
against numpy over random legal schedules on several hardware shapes (BATCH > 1 and
BLOCK_IN != BLOCK_OUT included), a bias per row as the batch-rows lowering reads it, the
rules that keep the two row modes apart, and the records of before it."""

from __future__ import annotations

import random

import numpy as np
import pytest

from search_spaces import default_schedule, get_template, stock_candidates
from simulator.functional import run
from simulator.hardware import PRESETS, HardwareConfig
from vtatune.errors import IllegalSchedule
from vtatune.lowering import check, context, lower, pack_matrix, packed_inputs, unpack_output
from vtatune.schedule import Schedule
from vtatune.scoring import score, verify
from vtatune.workloads import WORKLOADS, GemmWorkload, random_operands

#: pynq and TVM's sim target (BATCH 1, BLOCK 16), BLOCK_IN != BLOCK_OUT both ways, BATCH 4
HARDWARE = {
    "pynq": PRESETS["pynq"],
    "sim": PRESETS["sim"],
    "1x16x32": HardwareConfig.from_target_model("ultra96_1x16x32_i8w8a32_15_16_19_17"),
    "1x32x16": HardwareConfig.from_target_model("ultra96_1x32x16_i8w8a32_10_17_18_17"),
    "4x8": PRESETS["4x8"],
}


def _gemm(hw: HardwareConfig, rows: int = 24, blocks_in: int = 4, blocks_out: int = 6):
    """A small GEMM of ``rows`` BATCH blocks and whole channel blocks on ``hw``."""
    return GemmWorkload(rows * hw.batch, blocks_in * hw.block_in, blocks_out * hw.block_out)


def _spatial_configs(tpl, n: int, seed: int):
    """``n`` random legal configs of ``tpl`` with ``rows="spatial"``."""
    rng = random.Random(seed)
    found = []
    for _ in range(4000):
        config = {k.name: rng.choice(k.choices) for k in tpl.knobs}
        config["rows"], config["tile_b"] = "spatial", 1
        if tpl.legal(config):
            found.append(config)
            if len(found) == n:
                break
    return found


@pytest.mark.parametrize("name", sorted(HARDWARE))
def test_spatial_rows_are_bit_exact(name):
    hw = HARDWARE[name]
    wl = _gemm(hw)
    for bias in (False, True):
        tpl = get_template(wl, hw, bias=bias, tune_store=True)
        configs = _spatial_configs(tpl, 6, seed=2 * sorted(HARDWARE).index(name) + bias)
        assert len(configs) == 6
        for config in configs:
            s = tpl.to_schedule(config)
            assert verify(lower(wl, s, hw, bias, verify_encoding=True)).ok, (name, s.short())
        # the tiles rows and threads on them that make the mode: some configs have them
        shapes = {(c["tile_h"] > 1, c["h_nthread"]) for c in configs}
        assert (True, 2) in shapes or (True, 1) in shapes


def test_a_bias_per_row_is_read_per_row():
    # batch_matmul's zero points make a bias per row (deploy packs it with pack_matrix):
    # the spatial rows read each row's, as the batch rows do.
    hw = PRESETS["pynq"]
    wl = _gemm(hw, rows=12)
    spatial = Schedule(tile_h=4, tile_ci=2, tile_co=3, oc_nthread=2, h_nthread=1,
                       gemm_order="h,ci,co,w,kh,kw", reuse=True, rows="spatial")
    batch = Schedule(tile_b=2, tile_ci=2, tile_co=3, oc_nthread=2, reuse=True)
    ops = random_operands(wl, True, seed=3)
    rng = np.random.default_rng(3)
    per_row = rng.integers(-(1 << 12), 1 << 12, (wl.batch, wl.out_channels), dtype=np.int32)
    inputs = dict(packed_inputs(wl, ops, hw), bias=pack_matrix(per_row, hw.batch, hw.block_out))
    outs = []
    for s in (spatial, batch):
        program = lower(wl, s, hw, True).program
        result = run(program, hw, inputs)
        outs.append(unpack_output(wl, result.machine.read_tensor(program, "output")))
    assert np.array_equal(outs[0], outs[1])
    same = dict(inputs, bias=pack_matrix(np.broadcast_to(per_row[:1], per_row.shape).copy(),
                                         hw.batch, hw.block_out))
    program = lower(wl, spatial, hw, True).program
    first_row_only = unpack_output(wl, run(program, hw, same).machine.read_tensor(
        program, "output"))
    assert not np.array_equal(first_row_only, outs[0])  # the rows' biases do matter


@pytest.mark.parametrize("schedule, message", [
    (Schedule(tile_b=2, tile_h=2, rows="spatial"), "tile_b=2 with rows='spatial'"),
    (Schedule(tile_h=2), "tile_h=2, h_nthread=1 tile a GEMM's rows as pixels"),
    (Schedule(h_nthread=2), "tile_h=1, h_nthread=2 tile a GEMM's rows as pixels"),
    (Schedule(rows="spatial", tvm_strict=True), "TVM's dense_packed tiles a GEMM's rows"),
])
def test_row_mode_rule(schedule, message):
    with pytest.raises(IllegalSchedule) as exc:
        check(WORKLOADS["gemm"]["dense128"], schedule, PRESETS["pynq"])
    assert exc.value.rule == "row_mode" and message in str(exc.value)


def test_a_conv_has_no_row_mode():
    with pytest.raises(IllegalSchedule) as exc:
        check(WORKLOADS["conv2d"]["resnet18.C8"], Schedule(rows="spatial"), PRESETS["pynq"])
    assert exc.value.rule == "row_mode"
    assert "applies to a GEMM's rows" in str(exc.value)


def test_spatial_rows_are_the_conv_program():
    # The same maths as a 1x1 conv over the rows: the spatial GEMM's program does the
    # conv's GEMM and ALU work and moves the same bytes (only the DRAM layout differs).
    from vtatune.workloads import Conv2dWorkload

    hw = PRESETS["pynq"]
    gemm, conv = GemmWorkload(96, 64, 96), Conv2dWorkload(1, 96, 1, 64, 96, 1, 0, 1)
    common = dict(tile_h=24, tile_ci=2, tile_co=3, oc_nthread=2, h_nthread=2, reuse=True,
                  gemm_order="h,ci,co,w,kh,kw")
    g = score(gemm, Schedule(**common, rows="spatial"), hw)
    c = score(conv, Schedule(**common), hw)
    assert g.status == c.status == "ok"
    assert g.counters == c.counters


def test_records_of_before_load_and_replay():
    hw = PRESETS["pynq"]
    wl = WORKLOADS["gemm"]["dense128"]
    old = {"tile_b": 4, "tile_h": 1, "tile_w": 1, "tile_co": 4, "tile_ci": 8, "oc_nthread": 2,
           "h_nthread": 1, "outer_order": "bhcw", "gemm_order": "ci,w,kw,kh,co,h",
           "store": "tile", "reuse": True, "clip_order": "min_max", "tvm_strict": False}
    s = Schedule.from_dict(old)
    assert s.rows == "batch" and s.to_dict() == old  # written as it was
    tpl = get_template(wl, hw)
    assert tpl.name == "gemm.full.v2"
    config = tpl.from_schedule(s)
    assert config is not None and config["rows"] == "batch"
    assert score(wl, tpl.to_schedule(config), hw).cycles == score(wl, s, hw).cycles
    assert Schedule(rows="spatial").to_dict()["rows"] == "spatial"


def test_only_the_gemms_full_space_is_v2():
    from vtatune.workloads import AddWorkload

    hw = PRESETS["pynq"]
    assert get_template(AddWorkload(1, 64, 8, 8), hw).name == "add.full.v1"  # ALU-only
    assert get_template(WORKLOADS["conv2d"]["resnet18.C8"], hw).name == "conv2d.full.v1"


def test_autotvm_space_keeps_dense_packed():
    hw = PRESETS["pynq"]
    atvm = get_template(WORKLOADS["gemm"]["dense128"], hw, space="autotvm", prune=False)
    assert atvm.knob_names == ("tile_b", "tile_ci", "tile_co", "oc_nthread")
    assert atvm.name == "gemm.autotvm.v1"
    assert (atvm.size(), atvm.count_legal()) == (256, 28)


def test_the_gemm_default_folds_its_rows():
    # The default takes the rows as pixels, and beats the stock default (one row per tile,
    # one input block per load step) by far.
    hw = PRESETS["pynq"]
    wl = GemmWorkload(128, 256, 256)
    s = default_schedule(wl, hw)
    assert s.rows == "spatial" and s.tile_h > 1 and s.tile_ci == wl.in_channels // 16
    ctx = context(wl, hw)
    stock = next(c for c in stock_candidates(ctx) if _legal(wl, c, hw))
    assert 10 * score(wl, s, hw).cycles < score(wl, stock, hw).cycles


def _legal(wl, s, hw):
    try:
        check(wl, s, hw)
        return True
    except IllegalSchedule:
        return False
