"""The default schedule is legal on every design the co-design search can return, whenever
any schedule is; the tutorial schedules exist where they can, and are refused in one line
where they cannot."""

import itertools
from dataclasses import replace

import pytest

from search_spaces import default_schedule, get_template, resolve_schedule, stock_candidates
from simulator.hardware import DEFAULT, HardwareConfig
from simulator.resources import DEVICES
from vtatune.design import (
    KNOB_RANGES,
    SHAPE_KNOBS,
    layout_reason,
    maximal_configs,
    smallest,
    stock,
    with_shape,
)
from vtatune.errors import IllegalSchedule, ScheduleError, WorkloadError
from vtatune.lowering import context, legality, lower
from vtatune.schedule import AUTOTVM_GEMM_ORDER, Schedule, tutorial_schedule
from vtatune.scoring import verify
from vtatune.workloads import WORKLOADS, Conv2dWorkload, resnet18_layers

#: ResNet-18's VTA layers and the GEMM workloads.
WORKLOADS_CHECKED = [*resnet18_layers(), *WORKLOADS["gemm"].values()]

#: The designs of the published co-design results and the RTL runs (docs/codesign.md).
#: (pynq_1x4x64_i8w8a32_10_15_17_18, once pynq's ResNet-50 pick, runs no padded layer: a
#: pixel of its input is 16 elements, and so is a 1-pixel pad, past the 4-bit pad field.)
DESIGNS = ["ultra96_1x16x32_i8w8a32_15_16_19_17", "ultra96_1x16x32_i8w8a32_10_16_18_18",
           "ultra96_1x32x16_i8w8a32_10_17_18_17", "pynq_1x8x32_i8w8a32_15_15_18_17",
           "pynq_1x8x32_i8w8a32_10_15_17_18", "ultra96_1x16x32_i8w8a32_15_15_18_18"]


def _divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def _legal(wl, s, hw, bias=False):
    try:
        legality(wl, s, hw, bias)
        return True
    except IllegalSchedule:
        return False


def _design_shapes():
    """Every (LOG_BATCH, LOG_BLOCK_IN, LOG_BLOCK_OUT) of the design space whose layers can
    hand their tensors on (the shapes :func:`vtatune.design.shapes` picks from)."""
    for shape in itertools.product(*(range(KNOB_RANGES[k][0], KNOB_RANGES[k][1] + 1)
                                     for k in SHAPE_KNOBS)):
        if layout_reason(with_shape(stock("pynq"), shape)) is None:
            yield shape


def _assert_default_legal_or_none_is(hw: HardwareConfig, workloads, biases=(False, True)):
    """The default schedule is legal; when it raises, the template has no legal config."""
    checked = 0
    for wl, bias in itertools.product(workloads, biases):
        try:
            wl.check(hw)
        except WorkloadError:  # not whole blocks of this shape: not a design for it
            continue
        try:
            s = default_schedule(wl, hw, bias)
        except IllegalSchedule as exc:
            assert exc.rule == "no_default"
            tpl = get_template(wl, hw, bias)
            assert tpl.no_legal_config() is not None or tpl.count_legal() == 0, \
                (hw.bitstream, wl.name, bias)
            continue
        legality(wl, s, hw, bias)  # raises if illegal
        checked += 1
    return checked


def test_default_is_legal_on_the_smallest_design_of_every_shape():
    # The smallest buffers a design may have starve tiles most: the default must still find
    # a legal schedule whenever the template has one (legality reads no board fact, so one
    # board stands for all).
    checked = 0
    for shape in _design_shapes():
        checked += _assert_default_legal_or_none_is(smallest("pynq", shape), WORKLOADS_CHECKED,
                                                    (False,))
    assert checked > 300


@pytest.mark.parametrize("model", DESIGNS)
def test_default_is_legal_on_published_designs(model):
    hw = HardwareConfig.from_target_model(model)
    assert _assert_default_legal_or_none_is(hw, WORKLOADS_CHECKED) == 2 * len(WORKLOADS_CHECKED)


@pytest.mark.slow
@pytest.mark.parametrize("board", sorted(DEVICES))
def test_default_is_legal_on_every_design_the_space_can_return(board):
    seen = set()
    for shape in _design_shapes():
        for hw in [*maximal_configs(board, DEVICES[board], shape), smallest(board, shape)]:
            if hw.bitstream not in seen:
                seen.add(hw.bitstream)
                _assert_default_legal_or_none_is(hw, WORKLOADS_CHECKED)
    assert len(seen) > 100


def test_default_follows_the_layout_rules():
    # BLOCK_OUT = 2 x BLOCK_IN: a load step takes whole BLOCK_OUT blocks (tile_ci 2);
    # BLOCK_IN = 2 x BLOCK_OUT: an output tile whole BLOCK_IN blocks (tile_co even).
    c2 = WORKLOADS["conv2d"]["resnet18.C2"]
    wide_out = HardwareConfig.from_target_model("ultra96_1x16x32_i8w8a32_15_16_19_17")
    s = default_schedule(c2, wide_out)
    assert s.tile_ci == 2 and s.tile_w == 56 and s.gemm_order == AUTOTVM_GEMM_ORDER
    wide_in = HardwareConfig.from_target_model("ultra96_1x32x16_i8w8a32_10_17_18_17")
    for wl in resnet18_layers():
        assert default_schedule(wl, wide_in).tile_co % 2 == 0
    # on the stock shape the default is the one it always was: the first legal of
    # full-width rows, up to 8 output-channel blocks, most rows, 2 threads before 1
    for wl in resnet18_layers():
        ctx = context(wl, DEFAULT)
        old = (Schedule(tile_h=h, tile_w=ctx.ow, tile_co=co, oc_nthread=n)
               for co in sorted((d for d in _divisors(ctx.cob) if d <= 8), reverse=True)
               for h in sorted(_divisors(ctx.oh), reverse=True) for n in (2, 1))
        assert default_schedule(wl, DEFAULT) == next(s for s in old if _legal(wl, s, DEFAULT))


def test_default_is_deterministic_and_runs_bit_exactly():
    hw = HardwareConfig.from_target_model("ultra96_1x16x32_i8w8a32_15_16_19_17")
    wl = WORKLOADS["conv2d"]["resnet18.C11"]
    s = default_schedule(wl, hw, True)
    assert s == default_schedule(wl, hw, True)
    assert verify(lower(wl, s, hw, bias=True), 0).ok


def test_default_narrows_rows_then_changes_order_when_buffers_are_tiny():
    c2 = WORKLOADS["conv2d"]["resnet18.C2"]
    # 1x64 with a 16 KiB input buffer: no full-width window fits; narrower rows do
    hw = HardwareConfig.from_target_model("pynq_1x64_i8w8a32_10_14_20_16")
    s = default_schedule(c2, hw)
    assert s.tile_w < 56 and s.gemm_order == AUTOTVM_GEMM_ORDER
    legality(c2, s, hw)
    assert not any(_legal(c2, replace(s, tile_w=56, tile_h=h, oc_nthread=n), hw)
                   for h in _divisors(56) for n in (1, 2))
    # 1x4x64 with the smallest buffers: only the order that folds the ACC-free axes (ci,
    # kh, kw) and unrolls (co, h, w) is legal for the tile that fits (C2 with its input
    # padded beforehand: 1x4x64 pads no input, a pixel's 16 elements overflow the pad field)
    hw = HardwareConfig.from_target_model("pynq_1x4x64_i8w8a32_10_10_16_16")
    c2_padded = Conv2dWorkload(1, 58, 58, 64, 64, 3, 0, 1)
    s = default_schedule(c2_padded, hw)
    assert s.gemm_order == "ci,kh,kw,co,h,w"
    legality(c2_padded, s, hw)
    with pytest.raises(IllegalSchedule) as exc:
        legality(c2_padded, replace(s, gemm_order=AUTOTVM_GEMM_ORDER), hw)
    assert exc.value.rule == "dst_dependency"


def test_no_default_names_why():
    hw = HardwareConfig.from_target_model("pynq_1x4x64_i8w8a32_10_10_16_16")
    wl = Conv2dWorkload(1, 57, 57, 64, 128, 3, 0, 2)  # C3 with its input padded beforehand
    with pytest.raises(IllegalSchedule) as exc:
        default_schedule(wl, hw)
    assert exc.value.rule == "no_default"
    assert str(exc.value).startswith(
        "no schedule fits conv2d 1x64x57x57 -> 128, k3 p0 s2 on "
        "1x4x64_i8w8a32_10_10_16_16: none of the ")
    assert get_template(wl, hw).count_legal() == 0
    # a rule that fails whatever the schedule is named as it is
    with pytest.raises(IllegalSchedule) as exc:
        default_schedule(WORKLOADS["conv2d"]["resnet18.C3"], hw)
    assert str(exc.value) == (
        "no schedule fits resnet18.C3 conv2d 1x64x56x56 -> 128, k3 p1 s2 on "
        "1x4x64_i8w8a32_10_10_16_16: LOAD INP: field x_pad_0=16 does not fit 4 bits (max 15); "
        "the input's pad of 1 column, 16 elements a pixel (the input is packed by BLOCK_OUT "
        "64 = 16 x BLOCK_IN 4)")


# --- the tutorials ------------------------------------------------------------------------

CONV_TUTORIAL = WORKLOADS["conv2d"]["tutorial"]
GEMM_TUTORIAL = WORKLOADS["gemm"]["tutorial"]


@pytest.mark.parametrize("model, tile_ci, tile_co", [
    ("pynq_1x16_i8w8a32_15_15_18_17", 1, 8),
    ("ultra96_1x16x32_i8w8a32_15_16_19_17", 2, 4),  # 32 input channels: one DRAM block
    ("pynq_1x8x32_i8w8a32_15_15_18_17", 4, 4),
    ("ultra96_1x32x16_i8w8a32_10_17_18_17", 1, 8),
    ("pynq_1x4x8_i8w8a32_15_14_16_17", 4, 16)])
def test_conv_tutorial_takes_whole_blocks_of_the_layout(model, tile_ci, tile_co):
    hw = HardwareConfig.from_target_model(model)
    s = tutorial_schedule(CONV_TUTORIAL, hw)
    assert (s.tile_ci, s.tile_co, s.tile_h, s.tile_w) == (tile_ci, tile_co, 7, 14)
    assert s.tile_ci * hw.block_in == max(16, hw.block_in, hw.block_out)
    assert s.tile_co * hw.block_out == 128


def test_conv_tutorial_runs_on_1x16x32():
    hw = HardwareConfig.from_target_model("ultra96_1x16x32_i8w8a32_15_16_19_17")
    s = resolve_schedule("tutorial", CONV_TUTORIAL, hw)
    assert verify(lower(CONV_TUTORIAL, s, hw), 0).ok


@pytest.mark.parametrize("model, packed", [("ultra96_1x16x32_i8w8a32_15_16_19_17", "input"),
                                           ("ultra96_1x32x16_i8w8a32_10_17_18_17", "output")])
def test_gemm_tutorial_is_refused_where_it_cannot_exist(model, packed):
    hw = HardwareConfig.from_target_model(model)
    with pytest.raises(ScheduleError) as exc:
        resolve_schedule("tutorial", GEMM_TUTORIAL, hw)
    msg = str(exc.value)
    assert "\n" not in msg
    assert msg.startswith("the GEMM tutorial's schedule (matrix_multiply_opt")
    assert f"the {packed} channels are packed by 2 blocks" in msg
    # the refusal is the rules' verdict on the tutorial's loops with the layout's tiles
    stock_tut = tutorial_schedule(GEMM_TUTORIAL, DEFAULT)
    tiles = replace(stock_tut, tile_ci=256 // hw.block_in, tile_co=256 // hw.block_out)
    with pytest.raises(IllegalSchedule) as rule:
        legality(GEMM_TUTORIAL, tiles, hw)
    assert rule.value.rule == "dst_dependency"
    # unasked, the tutorial workload gets the default schedule there
    assert resolve_schedule(None, GEMM_TUTORIAL, hw) == default_schedule(GEMM_TUTORIAL, hw)
    assert resolve_schedule(None, GEMM_TUTORIAL, DEFAULT) == stock_tut


def test_simulate_cli_on_1x16x32(tmp_path, capsys):
    from vtatune.cli import main

    hw = HardwareConfig.from_target_model("ultra96_1x16x32_i8w8a32_15_16_19_17")
    path = tmp_path / "vta_config.json"
    import json

    path.write_text(json.dumps(hw.to_dict()))
    assert main(["simulate", "conv2d", "--workload", "C2", "--hw", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["schedule"]["tile_ci"] == 2
    assert main(["simulate", "gemm", "--workload", "tutorial", "--schedule", "tutorial",
                 "--hw", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot exist on BLOCK_IN 16 != BLOCK_OUT 32" in err[0]


def test_default_is_the_schedule_the_rtl_ran_as_default():
    # The codesign reference's "default" runs on the Chisel RTL (1x8x32 on 64 bits: the
    # default with whole BLOCK_OUT loads, "default-ci4"; 1x16 on 64 and 128 bits) are
    # vtatune's default schedule, output byte-for-byte checked there: a conv2d's default
    # today, a GEMM's stock default (the rule before GEMMs got their own, issue 38).
    from simulator.hardware import PRESETS
    from tests._data import DATA as data
    from vtatune.fidelity import CODESIGN, HW_DIR, load_reference
    from vtatune.lowering import rules
    from vtatune.workloads import get_workload

    def stock(wl, hw, bias):
        return next(s for s in stock_candidates(context(wl, hw)) if _legal(wl, s, hw, bias))

    runs = [r for r in load_reference(data, CODESIGN) if r["source"].startswith("default")]
    assert {r["hw"] for r in runs} >= {"1x8x32", "1x16"}
    assert {r["operator"] for r in runs} == {"conv2d", "gemm"}
    for r in runs:
        hw = PRESETS.get(r["hw"]) or HardwareConfig.from_json(data / HW_DIR / f"{r['hw']}.json")
        wl = get_workload(r["operator"], r["named_workload"])
        assert r["output_check"] == "ok"
        ran = Schedule(**r["schedule"])
        if r["operator"] == "conv2d":
            assert default_schedule(wl, hw, r["bias"]) == ran, r["workload"]
        else:
            assert stock(wl, hw, r["bias"]) == ran, r["workload"]
            assert default_schedule(wl, hw, r["bias"]) != ran, r["workload"]
            rules(context(wl, hw), default_schedule(wl, hw, r["bias"]), r["bias"])
