"""group_conv2d and conv2d_transpose: bit-exact against numpy over random legal schedules,
the rules that reject what VTA or TVM cannot run, and the shape of the lowered streams."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from search_spaces import get_template
from simulator.hardware import DEFAULT, PRESETS
from simulator.isa import MemId
from vtatune.errors import IllegalSchedule
from vtatune.lowering import check, dilate, lower, transpose_kernel
from vtatune.schedule import Schedule, from_autotvm
from vtatune.scoring import verify
from vtatune.workloads import (
    WORKLOADS,
    Conv2dTransposeWorkload,
    Conv2dWorkload,
    GroupConv2dWorkload,
    conv2d_reference,
    conv2d_transpose_reference,
    group_conv2d_reference,
    random_operands,
)

HW48 = PRESETS["4x8"]  # BATCH 4, BLOCK 8

G = GroupConv2dWorkload
T = Conv2dTransposeWorkload


def _sweep(wl, hw, space, n, seed, bias=None):
    """``n`` random legal configs of ``wl``'s template, each verified bit-exact; returns
    how many ran."""
    rng = random.Random(seed)
    for b in ((False, True) if bias is None else (bias,)):
        tpl = get_template(wl, hw, bias=b, space=space)
        legal = list(tpl.legal_configs())
        assert legal, (wl.describe(), space)
        for config in rng.sample(legal, min(n, len(legal))):
            s = tpl.to_schedule(config)
            v = verify(lower(wl, s, hw, bias=b), seed=rng.randrange(1 << 16))
            assert v.ok, (wl.describe(), hw.bitstream, s.short(), v.mismatches)
    return True


# --- references agree with independent formulations ----------------------------------------


def test_group_reference_is_a_block_diagonal_conv():
    wl = G(1, 6, 5, 32, 48, 3, 1, 2, 4)
    ops = random_operands(wl, bias=True, seed=3)
    dense = np.zeros((48, 32, 3, 3), np.int8)  # the grouped kernel as a block-diagonal one
    for g in range(4):
        dense[g * 12:(g + 1) * 12, g * 8:(g + 1) * 8] = ops.weight[g * 12:(g + 1) * 12]
    conv = Conv2dWorkload(1, 6, 5, 32, 48, 3, 1, 2)
    np.testing.assert_array_equal(group_conv2d_reference(ops.data, ops.weight, wl, ops.bias),
                                  conv2d_reference(ops.data, dense, conv, ops.bias))


@pytest.mark.parametrize("h,k,p,s,op", [(4, 4, 1, 2, 0), (3, 3, 0, 2, 1), (5, 3, 2, 3, 2),
                                        (4, 1, 0, 1, 0)])
def test_transpose_reference_is_tvm_compute(h, k, p, s, op):
    """The definition (scatter) equals TVM's compute: a stride-1 correlation of the flipped
    kernel over the dilated input padded by k-1-p before and k-1-p+op after."""
    wl = T(1, h, h + 1, 16, 32, k, p, s, op)
    ops = random_operands(wl, bias=True, seed=h)
    x = dilate(ops.data, s)
    pb, pa = k - 1 - p, k - 1 - p + op
    x = np.pad(x, ((0, 0), (0, 0), (pb, pa), (pb, pa)))
    win = np.lib.stride_tricks.sliding_window_view(x.astype(np.int64), (k, k), axis=(2, 3))
    acc = np.einsum("nchwij,ocij->nohw", win, transpose_kernel(ops.weight).astype(np.int64))
    assert acc.shape[2:] == (wl.out_height, wl.out_width)
    from vtatune.workloads import BENCHMARK_BIAS
    want = BENCHMARK_BIAS.apply(acc, {"bias": ops.bias.reshape(1, -1, 1, 1)})
    np.testing.assert_array_equal(conv2d_transpose_reference(ops.data, ops.weight, wl, ops.bias),
                                  want)


# --- bit-exact over random legal schedules (fast subset) ------------------------------------

FAST = [
    (G(1, 8, 8, 64, 64, 3, 1, 1, 4), DEFAULT),      # one block per group: tiles span groups
    (G(1, 9, 9, 64, 128, 3, 1, 2, 2), DEFAULT),     # 4 oc blocks per group: the group loop
    (G(1, 6, 6, 64, 64, 1, 0, 1, 2), DEFAULT),      # 1x1, unpadded: one DMA over the span
    (T(1, 4, 4, 32, 32, 4, 1, 2, 0), DEFAULT),      # DCGAN-like
    (T(1, 3, 5, 32, 16, 3, 0, 2, 1), DEFAULT),      # output padding, no pad
    (T(4, 3, 3, 16, 16, 3, 1, 3, 2), HW48),         # batch 4 x block 8, stride 3
    (G(4, 6, 6, 32, 32, 3, 1, 1, 2), HW48),
]


@pytest.mark.parametrize("wl,hw", FAST, ids=lambda x: getattr(x, "describe", lambda: "")()[:40]
                         or x.bitstream)
def test_random_legal_schedules_are_bit_exact(wl, hw):
    _sweep(wl, hw, "full", 3, seed=1)
    _sweep(wl, hw, "autotvm", 2, seed=2, bias=True) if _has_legal(wl, hw) else None


def _has_legal(wl, hw):
    return next(get_template(wl, hw, space="autotvm").legal_configs(), None) is not None


def test_four_threads_and_store_modes_are_bit_exact():
    wl = G(1, 8, 8, 64, 128, 3, 1, 1, 2)  # 4 oc blocks per group
    for s in (Schedule(tile_h=4, tile_w=8, tile_co=1, oc_nthread=2, h_nthread=2),
              Schedule(tile_h=4, tile_w=4, tile_co=4, tile_ci=2, oc_nthread=2, h_nthread=2,
                       store="element", reuse=True, outer_order="cwhb")):
        assert verify(lower(wl, s, DEFAULT, bias=True)).ok, s.short()
    t = T(1, 4, 4, 32, 64, 4, 1, 2, 1)
    s = Schedule(tile_h=3, tile_w=9, tile_co=2, oc_nthread=2,
                 gemm_order="co,h,ci,kh,kw,w", reuse=True)
    assert verify(lower(t, s, DEFAULT, bias=True)).ok


# --- lowering facts -------------------------------------------------------------------------


def test_group_tiles_read_their_groups_channels():
    wl = G(1, 8, 8, 64, 128, 3, 1, 1, 2)  # 2 in / 4 out blocks per group
    within = lower(wl, Schedule(tile_h=8, tile_w=8, tile_co=2, oc_nthread=2), DEFAULT).plan
    assert (within.group_loop, within.groups_per_tile, within.inp_channels) == (1, 1, 1)
    span = lower(wl, Schedule(tile_h=8, tile_w=8, tile_co=8, tile_ci=1), DEFAULT).plan
    # two groups per tile: group 1's block k is cib=2 blocks after group 0's
    assert (span.group_loop, span.groups_per_tile, span.inp_channels) == (0, 2, 3)
    # the co loop splits into (group, block in group): the second reads 2 blocks further
    co = [a for a in span.gemm_axes if a[0] == "co"]
    assert [(e, c[1]) for _, e, c in co] == [(2, 2 * 10 * 10), (4, 0)]


def test_group_rules_name_the_numbers():
    wl = G(1, 8, 8, 96, 96, 3, 1, 1, 2)  # 3 oc blocks per group
    with pytest.raises(IllegalSchedule) as exc:
        check(wl, Schedule(tile_h=8, tile_w=8, tile_co=2), DEFAULT)
    assert exc.value.rule == "group_tile"
    assert str(exc.value).startswith("tile_co=2 neither divides nor is a multiple of the 3 "
                                     "output-channel blocks per group")
    with pytest.raises(IllegalSchedule) as exc:
        check(wl, Schedule(tile_h=8, tile_w=8, tile_co=1, oc_nthread=2), DEFAULT)
    assert exc.value.rule == "group_thread_split"
    assert "oc_nthread=2 needs an even number of oc tiles per group, got 3" in str(exc.value)
    # a whole-group tile with threads is fine: each thread its own group
    assert verify(lower(wl, Schedule(tile_h=8, tile_w=8, tile_co=3, oc_nthread=2),
                        DEFAULT)).ok


def test_transpose_strict_follows_tvm_template():
    wl = WORKLOADS["conv2d_transpose"]["dcgan.CT2"]  # 16x16 output
    tvm = from_autotvm({"tile_b": [1, 1], "tile_h": [2, 8], "tile_w": [1, 16],
                        "tile_ci": [32, 1], "tile_co": [4, 4], "oc_nthread": 1,
                        "h_nthread": 1}, wl)
    p = lower(wl, tvm, DEFAULT).plan
    # ci (1) and co (4) loops; w split 8 x 2, h split 2 x 4; kw, kh and the inner parts
    # unrolled: folds stop at the first unrolled axis
    assert [(a, e) for a, e, _ in p.gemm_axes] == [("w", 8), ("co", 4), ("h", 2), ("w", 2),
                                                   ("kw", 4), ("kh", 4), ("h", 4)]
    assert (p.gemm_folds, p.reset_folds) == (2, 2)
    assert len(p.gemm_kernel(0, 0)) == 2 * 2 * 4 * 4 * 4
    assert verify(lower(wl, tvm, DEFAULT, bias=True)).ok
    # rows 6 = 4 + a guarded tail of 2
    t6 = T(1, 3, 3, 16, 16, 4, 1, 2, 0)
    with pytest.raises(IllegalSchedule) as exc:
        check(t6, from_autotvm({"tile_b": [1, 1], "tile_h": [1, 6], "tile_w": [1, 6],
                                "tile_ci": [1, 1], "tile_co": [1, 1], "oc_nthread": 1,
                                "h_nthread": 1}, t6), DEFAULT)
    assert exc.value.rule == "tvm_split_tail"
    assert str(exc.value).startswith("tile_h=6 is not a multiple of 4")


def test_output_padding_is_rejected_for_tvm_only():
    wl = T(1, 4, 4, 16, 16, 4, 1, 2, 1)  # 9x9
    s = Schedule(tile_h=9, tile_w=9, tile_co=1)
    assert verify(lower(wl, s, DEFAULT)).ok
    with pytest.raises(IllegalSchedule) as exc:
        check(wl, Schedule(tile_h=9, tile_w=9, tile_co=1, tvm_strict=True), DEFAULT)
    assert exc.value.rule == "tvm_output_padding"
    assert "VTA does not support output padding for now" in str(exc.value)
    assert get_template(wl, DEFAULT, space="autotvm").count_legal() == 0


def test_transpose_loads_the_dilated_input_with_asymmetric_pads():
    wl = T(1, 4, 4, 16, 16, 3, 0, 2, 1)  # dilated 7x7, pads 2 before, 3 after -> 10x10
    lowered = lower(wl, Schedule(tile_h=10, tile_w=10, tile_co=1), DEFAULT)
    data = next(t for t in lowered.program.tensors if t.name == "data")
    assert tuple(data.shape[2:4]) == (7, 7)
    loads = [i for i in lowered.program.instructions
             if i.opcode.name == "LOAD" and getattr(i, "mem", None) == MemId.INP]
    assert [(i.y_pad_0, i.y_pad_1, i.x_pad_0, i.x_pad_1, i.y_size, i.x_size)
            for i in loads if i.x_size] == [(2, 3, 2, 3, 7, 7)]


# --- exhaustive-ish sweep (slow) ------------------------------------------------------------

SLOW = [
    *[(wl, DEFAULT) for wl in WORKLOADS["group_conv2d"].values()
      if wl.height <= 28],
    *[(wl, DEFAULT) for wl in WORKLOADS["conv2d_transpose"].values()],
    (G(1, 10, 10, 96, 96, 3, 1, 1, 2), DEFAULT),
    (G(1, 7, 7, 128, 64, 3, 0, 2, 4), DEFAULT),
    (G(4, 8, 8, 64, 64, 3, 1, 2, 4), HW48),
    (T(1, 5, 5, 32, 32, 3, 1, 2, 1), DEFAULT),
    (T(1, 4, 6, 64, 32, 5, 2, 3, 2), DEFAULT),
    (T(4, 4, 4, 32, 16, 4, 1, 2, 0), HW48),
    (T(1, 6, 6, 16, 32, 3, 1, 1, 0), DEFAULT),
]


@pytest.mark.slow
@pytest.mark.parametrize("wl,hw", SLOW, ids=lambda x: getattr(x, "describe", lambda: "")()[:40]
                         or x.bitstream)
def test_sweep_random_legal_schedules_bit_exact(wl, hw):
    _sweep(wl, hw, "full", 12, seed=7)
    if _has_legal(wl, hw):
        _sweep(wl, hw, "autotvm", 6, seed=8)


# --- command line ---------------------------------------------------------------------------


def _cli(capsys, *argv):
    from vtatune.cli import main

    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_simulate_verifies_both_operators(capsys):
    code, out, _ = _cli(capsys, "simulate", "group_conv2d", "--height", "6", "--width", "6",
                        "--in-channels", "64", "--out-channels", "64", "--groups", "4",
                        "--stride", "2", "--bias", "--verify", "--json")
    report = json.loads(out)
    assert code == 0 and report["verified"] is True
    assert report["workload"]["groups"] == 4 and report["workload"]["operator"] == "group_conv2d"
    code, out, _ = _cli(capsys, "simulate", "conv2d_transpose", "--height", "3", "--width", "3",
                        "--in-channels", "32", "--out-channels", "16", "--kernel", "3",
                        "--pad", "1", "--stride", "2", "--output-padding", "1", "--verify",
                        "--json")
    report = json.loads(out)
    assert code == 0 and report["verified"] is True
    assert report["workload"]["output_padding"] == 1


@pytest.mark.parametrize("argv,message", [
    (("simulate", "group_conv2d", "--groups", "3"),
     "vtatune: error: in_channels 512 is not divisible by groups 3\n"),
    (("simulate", "conv2d", "--groups", "2"),
     "vtatune: error: --groups does not apply to conv2d\n"),
    (("simulate", "group_conv2d", "--output-padding", "1"),
     "vtatune: error: --output-padding does not apply to group_conv2d\n"),
    (("simulate", "conv2d_transpose", "--schedule", "tutorial"),
     "vtatune: error: the seed tutorials schedule conv2d and gemm only, not conv2d_transpose: "
     "use default or a JSON schedule\n"),
    (("simulate", "conv2d_transpose", "--output-padding", "1", "--schedule",
      '{"tile_h": 17, "tile_w": 17, "tvm_strict": true}'),
     "vtatune: error: output_padding 1: TVM's conv2d_transpose_packed asserts 'VTA does not "
     "support output padding for now'; vtatune's own schedules support it\n"),
])
def test_cli_rejects_with_one_line(capsys, argv, message):
    code, out, err = _cli(capsys, *argv)
    assert (code, out, err) == (2, "", message)


def test_cli_tune_and_build(capsys, tmp_path):
    log = tmp_path / "t.jsonl"
    code, out, _ = _cli(capsys, "conv2d_transpose", "--height", "4", "--width", "4",
                        "--in-channels", "32", "--out-channels", "32", "--trials", "4",
                        "--seed", "0", "--log", str(log), "--quiet")
    assert code == 0 and "conv2d_transpose" in out
    assert len(log.read_text().splitlines()) == 4
    code, out, _ = _cli(capsys, "build", "conv2d_transpose", "--height", "4", "--width", "4",
                        "--in-channels", "32", "--out-channels", "32", "--log", str(log),
                        "--out", str(tmp_path / "b"), "--verify")
    assert code == 0 and "verified   yes" in out


def test_autotvm_export_import_round_trip(tmp_path):
    """Records of both operators export under TVM's task names with TVM's args, and
    import back to the same workload, schedule and cycles."""
    from vtatune.autotvm import export_autotvm, import_autotvm, task_args
    from vtatune.tuning import tune

    cases = [(G(1, 8, 8, 64, 64, 3, 1, 1, 4), "group_conv2d_packed.vta"),
             (T(1, 4, 4, 32, 32, 4, 1, 2, 0), "conv2d_transpose_packed.vta")]
    for wl, task in cases:
        log = tmp_path / f"{wl.operator}.jsonl"
        tune(wl, DEFAULT, trials=3, seed=0, space="autotvm", log=str(log), progress=False)
        out = tmp_path / f"{wl.operator}.autotvm.log"
        (exported,) = export_autotvm(str(log), str(out))
        record = json.loads(out.read_text())
        assert record["input"][1] == task
        assert record["input"][2] == task_args(wl, DEFAULT)
        (imported,) = import_autotvm(str(out))
        assert imported.task == task and imported.workload.key() == wl.key()
        assert imported.score.cycles == exported.cycles
    args = task_args(cases[0][0], DEFAULT)
    assert args[1] == ["TENSOR", [4, 1, 3, 3, 16, 16], "int8"] and args[5] == 4
    assert task_args(cases[1][0], DEFAULT)[4:] == ["int32", [0, 0]]
