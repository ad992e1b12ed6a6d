"""Lowering: TVM's fsim counters, published tutorial figures, legality rules."""

import pytest

from simulator.functional import count
from simulator.hardware import DEFAULT, PRESETS, HardwareConfig
from vtatune.errors import IllegalSchedule, WorkloadError
from vtatune.lowering import lower
from vtatune.schedule import (
    Schedule,
    from_autotvm,
    gemm_tutorial_schedule,
    parse_schedule,
    to_autotvm,
    tutorial_schedule,
)
from vtatune.workloads import WORKLOADS, Conv2dWorkload, GemmWorkload

RULE_OF_TVM_ERROR = {
    "seq_[i].dst_idx != dst_index": "dst_dependency",
    "cannot detect 2d pattern": "dma_pattern",
    "Allocation exceed bound of memory tag local.acc_buffer": "acc_capacity",
    "AssertionError": "tvm_vthread_inplace",
}


def _reference_point(d):
    bias = "add int32 bias" in d.get("epilogue", "")
    if d["operator"] == "conv2d":
        wl = Conv2dWorkload(**d["workload"])
        return wl, from_autotvm(d["schedule"]["knobs"], wl), bias
    wl = GemmWorkload(**d["workload"])
    sch = d["schedule"]
    return wl, gemm_tutorial_schedule(sch["tile_in_channels"], sch["tile_out_channels"]), bias


def test_fsim_reference_counters_and_rejections(fsim_reference):
    for d in fsim_reference:
        wl, schedule, bias = _reference_point(d)
        if "counters" in d:
            lowered = lower(wl, schedule, DEFAULT, bias=bias)
            assert count(lowered.program, DEFAULT).as_dict() == d["counters"], d["name"]
        else:
            rule = next(r for k, r in RULE_OF_TVM_ERROR.items() if k in d["tvm_error"])
            with pytest.raises(IllegalSchedule) as exc:
                lower(wl, schedule, DEFAULT, bias=bias)
            assert exc.value.rule == rule, (d["name"], str(exc.value))


def test_gemm_tutorial_published_figures():
    wl = WORKLOADS["gemm"]["tutorial"]
    program = lower(wl, tutorial_schedule(wl), DEFAULT).program
    assert count(program, DEFAULT).as_dict() == {
        "inp_load_nbytes": 4096, "wgt_load_nbytes": 1048576, "acc_load_nbytes": 0,
        "uop_load_nbytes": 20, "out_store_nbytes": 1024, "gemm_counter": 4096,
        "alu_counter": 192}
    mix = program.instruction_mix()
    assert mix["total"] == 142
    assert (mix["LOAD UOP"], mix["LOAD INP"], mix["LOAD WGT"], mix["GEMM"] + mix["GEMM reset"],
            mix["GEMM reset"], mix["STORE OUT"], mix["FINISH"]) == (5, 16, 16, 20, 4, 64, 1)
    assert mix["ALU SHR"] + mix["ALU MAX"] + mix["ALU MIN"] == 12


def test_conv_tutorial_counters_follow_the_schedule():
    """Derived from the schedule's structure, not typed in: every tile reloads its input
    window (padding not counted) and weights per input-channel block."""
    hw, wl = DEFAULT, WORKLOADS["conv2d"]["tutorial"]
    s = tutorial_schedule(wl)
    c = count(lower(wl, s, hw).program, hw)
    cib, cob = wl.in_channels // 16, wl.out_channels // 16
    oc_tiles, h_tiles = cob // s.tile_co, wl.out_height // s.tile_h
    rows = [min(t * s.tile_h + s.tile_h + 1, wl.height) - max(t * s.tile_h - 1, 0)
            for t in range(h_tiles)]
    assert c.inp_load_nbytes == oc_tiles * cib * sum(rows) * wl.width * 16
    assert c.wgt_load_nbytes == oc_tiles * h_tiles * cib * s.tile_co * 9 * 256
    assert c.gemm_counter == wl.out_height * wl.out_width * cob * cib * 9
    assert c.alu_counter == 3 * wl.out_height * wl.out_width * cob
    assert c.out_store_nbytes == wl.out_height * wl.out_width * wl.out_channels
    # per thread: 126 GEMM uops (dy*dx*x), 14 reset uops, 3 ALU uops; 2 threads
    assert c.uop_load_nbytes == 4 * 2 * (9 * s.tile_w + s.tile_w + 3)


def test_autotvm_roundtrip():
    wl = WORKLOADS["conv2d"]["resnet18.C8"]
    knobs = {"tile_b": [1, 1], "tile_h": [1, 14], "tile_w": [1, 14], "tile_ci": [16, 1],
             "tile_co": [4, 4], "oc_nthread": 2, "h_nthread": 1}
    s = from_autotvm(knobs, wl)
    assert to_autotvm(s, wl) == knobs
    assert to_autotvm(Schedule(tile_h=7, tile_w=14), wl) is None  # not the template's orders


@pytest.mark.parametrize("schedule, rule, text", [
    (Schedule(tile_h=14, tile_w=14, tile_co=16, tile_ci=16), "inp_capacity",
     "input tile needs 65536 B per thread x 1 thread(s) = 65536 B, INP buffer has 32768 B"),
    (Schedule(tile_h=7, tile_w=14, tile_co=16, tile_ci=8, oc_nthread=1), "wgt_capacity",
     "WGT buffer has 262144 B"),
    (Schedule(tile_h=14, tile_w=14, tile_co=8, oc_nthread=2), "acc_capacity",
     "ACC buffer has 131072 B"),
    (Schedule(tile_h=7, tile_w=14, tile_co=3), "tile_divides", "tile_co=3 does not divide"),
    (Schedule(tile_h=7, tile_w=14, tile_co=16, oc_nthread=2), "thread_split",
     "needs an even number of oc tiles"),
])
def test_illegal_schedules_name_rule_and_numbers(schedule, rule, text):
    with pytest.raises(IllegalSchedule) as exc:
        lower(WORKLOADS["conv2d"]["resnet18.C8"], schedule, DEFAULT)
    assert exc.value.rule == rule
    assert text in str(exc.value)


def test_native_schedule_lifts_tvm_dma_limit():
    """TVM rejects a padded load of several channel blocks; vtatune issues one per block."""
    wl = WORKLOADS["conv2d"]["resnet18.C8"]
    strict = from_autotvm({"tile_b": [-1, 1], "tile_h": [-1, 7], "tile_w": [-1, 14],
                           "tile_ci": [-1, 2], "tile_co": [-1, 4], "oc_nthread": 1,
                           "h_nthread": 1}, wl)
    with pytest.raises(IllegalSchedule, match="pad on the innermost block"):
        lower(wl, strict, DEFAULT)
    from dataclasses import replace

    native = lower(wl, replace(strict, tvm_strict=False), DEFAULT)
    one_step = lower(wl, replace(strict, tvm_strict=False, tile_ci=1), DEFAULT)
    c2, c1 = count(native.program, DEFAULT), count(one_step.program, DEFAULT)
    assert c2.inp_load_nbytes == c1.inp_load_nbytes
    assert native.program.instruction_mix()["LOAD INP"] == \
        one_step.program.instruction_mix()["LOAD INP"]


def test_reuse_keeps_weights_resident():
    wl = WORKLOADS["conv2d"]["resnet18.C8"]
    base = Schedule(tile_h=7, tile_w=7, tile_co=1, tile_ci=16, outer_order="bchw")
    plain = count(lower(wl, base, DEFAULT).program, DEFAULT)
    from dataclasses import replace

    reused = count(lower(wl, replace(base, reuse=True), DEFAULT).program, DEFAULT)
    assert plain.wgt_load_nbytes == 4 * reused.wgt_load_nbytes  # 2x2 spatial tiles share
    assert reused.wgt_load_nbytes == 256 * 256 * 9


def test_parse_schedule_forms(tmp_path):
    wl = WORKLOADS["conv2d"]["resnet18.C8"]
    assert parse_schedule("tutorial", wl) == tutorial_schedule(wl)
    assert parse_schedule(None, wl) == "default"
    f = tmp_path / "s.json"
    f.write_text('{"tile_h": 7, "tile_w": 14}')
    assert parse_schedule(f"@{f}", wl) == Schedule(tile_h=7, tile_w=14)
    from vtatune.errors import ScheduleError

    with pytest.raises(ScheduleError, match="unknown schedule knob 'tile_x'"):
        parse_schedule('{"tile_x": 1}', wl)
    with pytest.raises(ScheduleError, match="oc_nthread must be 1 or 2"):
        parse_schedule('{"oc_nthread": 3}', wl)


def test_4x8_config_lowers_and_counts():
    hw = PRESETS["4x8"]
    wl = GemmWorkload(16, 256, 128)
    s = Schedule(tile_b=2, tile_co=4, tile_ci=8, oc_nthread=2)
    c = count(lower(wl, s, hw).program, hw)
    assert c.gemm_counter == (16 // 4) * (256 // 8) * (128 // 8)
    assert c.out_store_nbytes == 16 * 128


# --- field widths: the analytic rule makes every legal program encodable ---------------------

import random  # noqa: E402
from dataclasses import replace  # noqa: E402

from search_spaces import get_template  # noqa: E402

# whitebox: the rules' private helpers are switched off or recorded (see tests/test_imports.py)
from vtatune.lowering import (  # noqa: E402
    _rules,  # noqa: E402
    context,
    legality,
    rules,
)
from vtatune.workloads import resnet18_layers  # noqa: E402

# Big buffers whose instruction layout still fits 128 bits (LOG_INP_BUFF_SIZE 20: 2^16 rows).
BIG_INP = replace(DEFAULT, log_uop_buff_size=10, log_inp_buff_size=20, log_wgt_buff_size=18,
                  log_acc_buff_size=17)
# 1x4 blocks with 2^18 INP rows: SRAM indices past the 16-bit sram_base field.
WIDE_INP = replace(DEFAULT, log_block=2, log_uop_buff_size=11, log_inp_buff_size=20,
                   log_wgt_buff_size=14, log_acc_buff_size=12)
# ACC deeper than INP: ALU micro-op src / src_factor (INP-wide fields) hold ACC indices.
DEEP_ACC = replace(DEFAULT, log_uop_buff_size=11, log_inp_buff_size=12, log_wgt_buff_size=16,
                   log_acc_buff_size=18)
BIG_IMAGE = Conv2dWorkload(1, 300, 300, 32, 32, 1, 0, 1)  # rows of 90000 elements
# BLOCK_IN != BLOCK_OUT (the first stores its output packed by BLOCK_IN: strided stores).
IN32_OUT16 = replace(DEFAULT, log_block_in=5, log_block_out=4, log_inp_buff_size=16,
                     log_wgt_buff_size=19)
IN16_OUT32 = replace(DEFAULT, log_block_in=4, log_block_out=5, log_acc_buff_size=18)
# BLOCK_OUT = 16 x BLOCK_IN: the input is packed by BLOCK_OUT, so a pixel of a row is 16
# elements, and so is a 1-pixel pad (the 4-bit x_pad fields hold 15).
IN4_OUT64 = HardwareConfig.from_target_model("pynq_1x4x64_i8w8a32_10_15_17_18")
# 8, 4 and 2 elements a pixel
IN4_OUT32 = HardwareConfig.from_target_model("pynq_1x4x32_i8w8a32_10_13_17_18")
IN4_OUT16 = HardwareConfig.from_target_model("pynq_1x4x16_i8w8a32_10_13_16_17")
IN8_OUT16 = HardwareConfig.from_target_model("pynq_1x8x16_i8w8a32_10_14_17_17")


def _random_schedules(wl, hw, rng, count, tries=400, max_tiles=64):
    tpl = get_template(wl, hw, tune_store=True)
    found = []
    for _ in range(tries):
        c = {k.name: rng.choice(k.choices) for k in tpl.knobs}
        if "rows" in c:  # a GEMM: each row mode with its own knobs (rule row_mode)
            if c["rows"] == "spatial":
                c["tile_b"] = 1
            else:
                c["tile_h"] = c["h_nthread"] = 1
        try:
            s = replace(tpl.to_schedule(c), reuse=rng.random() < 0.5)
        except Exception:
            continue
        conv = wl.as_conv()
        rows = (conv.batch // hw.batch // s.tile_b * conv.out_height // s.tile_h
                if s.rows == "batch" else conv.batch // hw.batch // s.tile_h)
        tiles = rows * conv.out_width // s.tile_w * conv.out_channels // hw.block_out // s.tile_co
        if tiles <= max_tiles:
            found.append(s)
        if len(found) == count:
            break
    return found


def _whole_blocks(wl, hw) -> bool:
    try:
        wl.check(hw)
        return True
    except WorkloadError:
        return False


def _verdict(wl, s, hw, bias):
    try:
        legality(wl, s, hw, bias)
        return "ok"
    except IllegalSchedule as exc:
        return exc.rule


@pytest.mark.parametrize("hw", [DEFAULT, PRESETS["4x8"], PRESETS["ultra96"], PRESETS["1x32"],
                                BIG_INP, WIDE_INP, DEEP_ACC, IN32_OUT16, IN16_OUT32,
                                IN4_OUT64, IN4_OUT32],
                         ids=lambda h: h.bitstream)
def test_field_width_rule_is_exact(hw, monkeypatch):
    """For random schedules passing every other rule: the field_width rule accepts exactly
    the programs that encode (lowered with the encoding check, the rule switched off)."""
    rng = random.Random(hw.bitstream)
    wls = [wl for wl in (*resnet18_layers()[::3], WORKLOADS["gemm"]["dense128"], BIG_IMAGE,
                         Conv2dWorkload(4, 14, 14, 64, 64, 3, 1, 1), GemmWorkload(16, 256, 128))
           if _whole_blocks(wl, hw)]
    seen = {"ok": 0, "field_width": 0}
    for wl in wls:
        for s in _random_schedules(wl, hw, rng, 3):
            bias = rng.random() < 0.5
            rule = _verdict(wl, s, hw, bias)
            if rule not in seen:
                continue
            seen[rule] += 1
            # the detailed facts agree with the hardware-wide shortcut
            ctx = context(wl, hw)
            if ctx.fits_all:
                rules(replace(ctx, fits_all=False), s, bias)
            with monkeypatch.context() as m:
                m.setattr(_rules, "field_width_rule", lambda *a, **k: None)
                try:
                    lower(wl, s, hw, bias, verify_encoding=True)
                    encodes = True
                except IllegalSchedule as exc:
                    assert exc.rule == "field_width"
                    encodes = False
            assert encodes == (rule == "ok"), (wl.describe(), s.short(), hw.bitstream, bias)
    assert seen["ok"] >= 3


@pytest.mark.parametrize("wl,hw,schedule,bias,field", [
    (BIG_IMAGE, BIG_INP, Schedule(tile_h=1, tile_w=300, tile_ci=2), False, "x_stride"),
    (BIG_IMAGE, BIG_INP, Schedule(tile_h=1, tile_w=300, tile_co=2), False, "x_stride"),
    (Conv2dWorkload(1, 16, 64, 256, 4, 3, 1, 2), WIDE_INP,
     Schedule(tile_h=8, tile_w=32, tile_ci=64), False, "sram_base"),
    (WORKLOADS["conv2d"]["resnet18.C2"], DEEP_ACC,
     Schedule(tile_h=4, tile_w=28, tile_co=4), True, "src"),
])
def test_field_width_rule_names_the_field(wl, hw, schedule, bias, field, monkeypatch):
    with pytest.raises(IllegalSchedule) as exc:
        lower(wl, schedule, hw, bias)
    assert exc.value.rule == "field_width" and f"field {field}=" in str(exc.value)
    # ... and without the rule the program indeed does not encode
    monkeypatch.setattr(_rules, "field_width_rule", lambda *a, **k: None)
    with pytest.raises(IllegalSchedule) as enc:
        lower(wl, schedule, hw, bias, verify_encoding=True)
    assert enc.value.rule == "field_width" and f"{field}=" in str(enc.value)


def test_field_width_rule_rejects_an_unencodable_layout():
    hw = replace(DEFAULT, log_inp_buff_size=20, log_wgt_buff_size=20, log_acc_buff_size=20,
                 log_uop_buff_size=17)  # 168-bit GEMM layout
    wl = WORKLOADS["gemm"]["dense128"]
    with pytest.raises(IllegalSchedule) as exc:
        lower(wl, Schedule(tile_co=8, tile_ci=8), hw)
    assert exc.value.rule == "field_width" and "168 bits" in str(exc.value)


def test_field_width_rule_is_skipped_where_nothing_can_overflow():
    """On the shipped presets no schedule of the ResNet-18 layers or the GEMMs can overflow
    a field, so the tuner's legality checks never pay for the rule; big buffers can."""
    from vtatune.workloads import resnet18_layers

    for name in ("pynq", "ultra96", "de10nano", "1x32"):
        hw = PRESETS[name]
        assert all(context(wl, hw).fits_all
                   for wl in (*resnet18_layers(), *WORKLOADS["gemm"].values())), name
    big = replace(DEFAULT, log_inp_buff_size=22)  # INP depth 2^18 > the 16-bit sram_base
    assert not context(WORKLOADS["conv2d"]["resnet18.C8"], big).fits_all


# --- the DMA pad fields: a pad is refused, with its field, before any instruction ------------

from search_spaces import default_schedule  # noqa: E402
from vtatune.scoring import verify  # noqa: E402
from vtatune.workloads import Conv2dTransposeWorkload  # noqa: E402


def _without_pad_rule(monkeypatch):
    """The rules as they were: the input's pads not checked."""
    monkeypatch.setattr(_rules, "pad_field_error", lambda ctx: "")


def _encoding_failure(wl, hw, monkeypatch) -> str | None:
    """Why the default schedule the rules pick without the pad check does not encode (None:
    it does; "no schedule" when no schedule passes the other rules)."""
    with monkeypatch.context() as m:
        _without_pad_rule(m)
        try:
            s = default_schedule(wl, hw)
        except IllegalSchedule:
            return "no schedule"
        try:
            lower(wl, s, hw, verify_encoding=True)
            return None
        except IllegalSchedule as exc:
            assert exc.rule == "field_width"
            return str(exc)


@pytest.mark.parametrize("wl,hw,field,value,why", [
    # the defect: ResNet-18's 3x3 layers on pynq's 1x4x64 lowered to x_pad_0=16
    (WORKLOADS["conv2d"]["resnet18.C2"], IN4_OUT64, "x_pad_0", 16,
     "the input's pad of 1 column, 16 elements a pixel (the input is packed by BLOCK_OUT 64 "
     "= 16 x BLOCK_IN 4)"),
    (Conv2dWorkload(1, 14, 14, 64, 64, 5, 2, 1), IN4_OUT32, "x_pad_0", 16,
     "the input's pad of 2 columns, 8 elements a pixel (the input is packed by BLOCK_OUT 32 "
     "= 8 x BLOCK_IN 4)"),
    (Conv2dWorkload(1, 4, 4, 16, 16, 3, 16, 1), DEFAULT, "y_pad_0", 16,
     "the input's pad of 16 rows"),
])
def test_pad_field_rule_names_the_field(wl, hw, field, value, why, monkeypatch):
    # without the rule the default schedule lowers to a LOAD that does not encode ...
    failure = _encoding_failure(wl, hw, monkeypatch)
    assert failure is not None and f"field {field}={value} does not fit 4 bits" in failure
    # ... with it every schedule is refused before any instruction, naming the field
    with monkeypatch.context() as m:
        _without_pad_rule(m)
        s = default_schedule(wl, hw)
    message = f"LOAD INP: field {field}={value} does not fit 4 bits (max 15); {why}"
    with pytest.raises(IllegalSchedule) as exc:
        legality(wl, s, hw)
    assert exc.value.rule == "pad_field" and str(exc.value) == message
    # and no default is proposed: the workload is refused on this hardware, with the reason
    with pytest.raises(IllegalSchedule) as exc:
        default_schedule(wl, hw)
    assert exc.value.rule == "no_default" and str(exc.value).endswith(f"{hw.bitstream}: "
                                                                       f"{message}")
    assert get_template(wl, hw).no_legal_config().rule == "pad_field"


def test_pad_field_rule_is_exact():
    """Over pads 0-3 and 1-16 elements a pixel: the rule refuses a workload exactly when the
    schedule the rules would otherwise pick does not encode (on a pad field)."""
    mp = pytest.MonkeyPatch()
    seen = {True: 0, False: 0}
    try:
        for hw in (DEFAULT, IN8_OUT16, IN4_OUT16, IN4_OUT32, IN4_OUT64):
            for wl in (*(Conv2dWorkload(1, 14, 14, 64, 64, k, k // 2, 1) for k in (1, 3, 5, 7)),
                       Conv2dWorkload(1, 14, 14, 64, 64, 3, 1, 2),
                       Conv2dTransposeWorkload(1, 7, 7, 64, 64, 4, 1, 2, 0)):
                try:
                    _rules.shape_rules(context(wl, hw))
                    refused = False
                except IllegalSchedule as exc:
                    assert exc.rule == "pad_field", str(exc)
                    refused = True
                failure = _encoding_failure(wl, hw, mp)
                if failure == "no schedule":  # (buffers too small for the 7x7 kernel)
                    continue
                assert refused == (failure is not None), (wl.describe(), hw.bitstream, failure)
                assert failure is None or "_pad_" in failure
                seen[refused] += 1
    finally:
        mp.undo()
    assert seen[True] >= 5 and seen[False] >= 15, seen


def test_transpose_with_a_pad_after_only_is_refused(monkeypatch):
    # pad 2 = kernel - 1: no pad before the dilated input, output_padding 1 after it
    wl = Conv2dTransposeWorkload(1, 4, 4, 16, 16, 3, 2, 2, 1)  # 6x6
    s = Schedule(tile_h=6, tile_w=6, tile_co=1)
    with pytest.raises(IllegalSchedule) as exc:
        legality(wl, s, DEFAULT)
    assert exc.value.rule == "pad_after_only"
    assert str(exc.value) == ("conv2d_transpose with pad = kernel - 1 = 2 and an "
                              "output_padding: the input needs a pad after but none before, "
                              "which vtatune does not lower")
    # without the rule the program runs and computes wrong outputs
    with monkeypatch.context() as m:
        m.setattr(_rules, "input_pads", lambda ctx: (0, 0, 0, 0))
        assert not verify(lower(wl, s, DEFAULT)).ok
    # with no output_padding nothing is padded, and the program is right
    wl = Conv2dTransposeWorkload(1, 4, 4, 16, 16, 3, 2, 2, 0)
    assert verify(lower(wl, Schedule(tile_h=5, tile_w=5, tile_co=1), DEFAULT)).ok
