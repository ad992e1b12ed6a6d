"""AutoTVM v0.2 export and import (TopHub's ResNet-18 rows from the doc, section 9)."""

import json
from collections import Counter

import pytest

from simulator.hardware import DEFAULT, PRESETS, HardwareConfig
from tests._logs import record, write_log
from vtatune.autotvm import (
    TASKS,
    config_entity,
    import_autotvm,
    task_args,
    write_records,
)
from vtatune.builds import build
from vtatune.cli import main
from vtatune.records import RecordWarning
from vtatune.schedule import Schedule, from_autotvm
from vtatune.workloads import WORKLOADS, GemmWorkload

pytestmark = pytest.mark.usefixtures("compiled_engines")  # exact CLI output: no first-run notice

TARGET = "ext_dev -device=vta -keys=cpu -model=pynq_1x16_i8w8a32_15_15_18_17"
TOPHUB = {  # section 9: TopHub's best pynq 1x16 configs, [outer, inner]
    "resnet18.C8": {"tile_h": [1, 14], "tile_w": [1, 14], "tile_ci": [16, 1],
                    "tile_co": [4, 4], "oc_nthread": 2, "h_nthread": 1},
    "resnet18.C5": {"tile_h": [2, 14], "tile_w": [1, 28], "tile_ci": [8, 1],
                    "tile_co": [4, 2], "oc_nthread": 1, "h_nthread": 2},
    "resnet18.C2": {"tile_h": [7, 8], "tile_w": [1, 56], "tile_ci": [4, 1],
                    "tile_co": [2, 2], "oc_nthread": 2, "h_nthread": 1},
}


def tophub_line(name, knobs, cost=1e-3):
    wl = WORKLOADS["conv2d"][name]
    knobs = {"tile_b": [1, 1], **knobs}
    index, entity = config_entity(knobs, wl, DEFAULT)
    return json.dumps({"input": [TARGET, "conv2d_packed.vta", task_args(wl, DEFAULT), {}],
                       "config": {"index": index, "code_hash": None, "entity": entity},
                       "result": [[cost], 0, 1.0, 1.6e9], "version": 0.2,
                       "tvm_version": "0.8.0"})


def test_task_args_and_model_as_section_9():
    c8 = WORKLOADS["conv2d"]["resnet18.C8"]
    assert task_args(c8, DEFAULT) == [
        ["TENSOR", [1, 16, 14, 14, 1, 16], "int8"], ["TENSOR", [16, 16, 3, 3, 16, 16], "int8"],
        [1, 1], [1, 1, 1, 1], [1, 1], "NCHW1n16c", "int32"]
    assert HardwareConfig.from_target_model("pynq_1x16_i8w8a32_15_15_18_17") == DEFAULT
    assert HardwareConfig.from_target_model(PRESETS["4x8"].target_model) == PRESETS["4x8"]
    # C8's space has 1600 points; the last one has the largest index
    last = {"tile_b": [1, 1], "tile_h": [1, 14], "tile_w": [1, 14], "tile_ci": [1, 16],
            "tile_co": [1, 16], "oc_nthread": 2, "h_nthread": 2}
    assert config_entity(last, c8, DEFAULT)[0] == 1599


def test_import_tophub_rows_simulate(tmp_path, capsys):
    f = tmp_path / "tophub_vta.log"
    f.write_text("".join(tophub_line(n, k) + "\n" for n, k in TOPHUB.items()))
    imported = import_autotvm(f)
    assert [i.workload.name for i in imported] == list(TOPHUB)
    for imp in imported:
        assert imp.score.status == "ok", imp.score.error
        assert imp.schedule.tvm_strict and imp.autotvm_seconds == 1e-3
    assert imported[0].schedule.tile_co == 4 and imported[1].schedule.h_nthread == 2
    log = tmp_path / "tophub.jsonl"
    assert main(["import", str(f), "-o", str(log)]) == 0
    assert "resnet18.C5" in capsys.readouterr().out
    b = build(WORKLOADS["conv2d"]["resnet18.C8"], log=log)  # the imported config builds
    assert b.provenance.line == 1 and b.schedule == imported[0].schedule


def test_a_full_space_log_exports_the_nearest_buildable_point(tmp_path, capsys):
    """Full-space records (vtatune's loop orders and reuse) are not AutoTVM points: the
    export takes the fastest buildable AutoTVM point nearest their tile choices (dense_packed
    builds only tile_co 1 and oc_nthread 1), lowered as TVM's template would, and that
    record imports back to exactly the exported cycles."""
    wl = GemmWorkload(16, 64, 64)
    natives = [Schedule(tile_b=4, tile_ci=4, tile_co=4, reuse=True),
               Schedule(tile_b=16, tile_ci=2, tile_co=2, oc_nthread=2, reuse=True)]
    log = write_log(tmp_path / "n.jsonl", [record(wl, s, DEFAULT, i)
                                            for i, s in enumerate(natives)])
    out = tmp_path / "autotvm.log"
    assert main(["export", str(log), "--format", "autotvm", "-o", str(out)]) == 0
    assert "with TVM's loop orders" in capsys.readouterr().out
    (line,) = out.read_text().splitlines()
    back = import_autotvm(out)
    from vtatune.scoring import score

    nearest = [from_autotvm({"tile_b": [4, 4], "tile_ci": [1, 4], "tile_co": [4, 1],
                             "oc_nthread": 1}, wl),
               from_autotvm({"tile_b": [1, 16], "tile_ci": [2, 2], "tile_co": [4, 1],
                             "oc_nthread": 1}, wl)]
    cycles = [score(wl, p, DEFAULT).cycles for p in nearest]
    assert back[0].schedule == nearest[cycles.index(min(cycles))]
    assert back[0].score.cycles == min(cycles)
    assert json.loads(line)["result"][0] == [back[0].score.seconds]
    assert [e[2] for e in json.loads(line)["config"]["entity"]][2:] == [[4, 1], 1]


def test_export_best_buildable_config_and_import_it_back(tmp_path, capsys):
    """An autotvm-space record TVM cannot build (tile_co inner 4, written before vtatune
    knew) is passed over for the fastest one it builds."""
    wl = GemmWorkload(16, 64, 64)
    ok = [from_autotvm({"tile_b": [4, 4], "tile_ci": [1, 4], "tile_co": [4, 1],
                        "oc_nthread": 1}, wl),
          from_autotvm({"tile_b": [16, 1], "tile_ci": [4, 1], "tile_co": [4, 1],
                        "oc_nthread": 1}, wl)]
    native = Schedule(tile_b=4, tile_ci=4, tile_co=4, reuse=True)  # not expressible
    recs = [record(wl, native, DEFAULT, 0), record(wl, ok[1], DEFAULT, 1),
            record(wl, ok[0], DEFAULT, 2)]
    # an old record of an unbuildable point, faster than everything else
    stale = dict(recs[2], schedule={**recs[2]["schedule"], "tile_co": 4}, cycles=1,
                 trial=3)
    log = write_log(tmp_path / "g.jsonl", [*recs, stale])
    out = tmp_path / "autotvm.log"
    assert main(["export", str(log), "--format", "autotvm", "-o", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert len(lines) == 1
    d = json.loads(lines[0])
    assert d["input"] == [DEFAULT.autotvm_target, "dense_packed.vta",
                          [["TENSOR", [16, 4, 1, 16], "int8"], ["TENSOR", [4, 4, 16, 16], "int8"],
                           None, "int32"], {}]
    assert d["version"] == 0.2 and d["result"][1] == 0
    fastest = min(recs[1:], key=lambda r: r["cycles"])
    assert d["result"][0] == [fastest["seconds"]]
    assert [e[0] for e in d["config"]["entity"]] == ["tile_b", "tile_ci", "tile_co",
                                                     "oc_nthread"]
    back = import_autotvm(out)
    assert back[0].schedule == Schedule.from_dict(fastest["schedule"])
    assert back[0].score.cycles == fastest["cycles"]
    write_records(back, tmp_path / "back.jsonl", str(out))
    capsys.readouterr()


def test_bad_files_one_line_exit_2(tmp_path, capsys):
    f = tmp_path / "x.log"
    f.write_text("not json\n" + tophub_line("resnet18.C8", TOPHUB["resnet18.C8"])
                 + "\n" + json.dumps({"input": ["llvm", "dense_nopack.x86", [], {}],
                                      "config": {"entity": []}, "result": [[1], 0]}) + "\n")
    with pytest.warns(RecordWarning) as caught:
        assert len(import_autotvm(f)) == 1
    assert [str(w.message) for w in caught] == [
        f"{f}:1: skipped a corrupt or truncated line (Expecting value)",
        f"{f}: skipped 1 record vtatune cannot simulate (first at line 3): 1 target llvm"]
    empty = tmp_path / "empty.log"
    empty.write_text("garbage\n")
    assert main(["import", str(empty)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("vtatune: error:")
    only_cpu = tmp_path / "cpu.log"  # nothing vtatune simulates: one error line, no warning
    only_cpu.write_text(f.read_text().splitlines()[2] + "\n")
    assert main(["import", str(only_cpu)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"vtatune: error: {only_cpu}: no usable AutoTVM VTA record (one of "
                   "conv2d_packed.vta, dense_packed.vta, group_conv2d_packed.vta, "
                   "conv2d_transpose_packed.vta, add.vta, multiply.vta on a VTA target, "
                   "with error_no 0); "
                   "skipped 1 record vtatune cannot simulate (first at line 1): 1 target llvm"]
    assert main(["import", str(tmp_path / "missing.log")]) == 2
    assert main(["export", str(tmp_path / "missing.jsonl"), "-o", str(f)]) == 2


# --- TVM's facts ----------------------------------------------------------------------------
def _tensor(shape):
    return ["TENSOR", shape, "int8"]


# TopHub vta_v0.10.log records (pynq 1x16): (data, kernel, stride, pad, entity, index).
TOPHUB_ROWS = [
    ([1, 16, 14, 14], [16, 16, 3, 3], 1, 1, ([1, 14], [1, 14], [16, 1], [4, 4], 2, 1), 575),
    ([1, 8, 28, 28], [16, 8, 3, 3], 2, 1, ([1, 14], [1, 14], [8, 1], [4, 4], 2, 1), 463),
    ([1, 4, 56, 56], [8, 4, 3, 3], 2, 1, ([4, 7], [1, 28], [4, 1], [2, 4], 2, 1), 681),
    ([1, 8, 28, 28], [8, 8, 3, 3], 1, 1, ([2, 14], [1, 28], [8, 1], [4, 2], 1, 2), 1330),
    ([1, 4, 56, 56], [4, 4, 3, 3], 1, 1, ([7, 8], [1, 56], [4, 1], [2, 2], 2, 1), 828),
    ([1, 4, 56, 56], [8, 4, 1, 1], 2, 0, ([4, 7], [1, 28], [4, 1], [2, 4], 1, 2), 1113),
    ([1, 8, 28, 28], [16, 8, 1, 1], 2, 0, ([2, 7], [1, 14], [8, 1], [2, 8], 2, 1), 526),
    ([1, 16, 14, 14], [32, 16, 1, 1], 2, 0, ([1, 7], [1, 7], [16, 1], [2, 16], 2, 1), 203),
    ([1, 32, 7, 7], [32, 32, 3, 3], 1, 1, ([1, 7], [1, 7], [32, 1], [2, 16], 2, 1), 243),
    ([1, 4, 56, 56], [4, 4, 1, 1], 1, 0, ([7, 8], [1, 56], [2, 2], [2, 2], 2, 1), 892),
    ([1, 16, 56, 56], [4, 16, 1, 1], 1, 0, ([14, 4], [1, 56], [8, 2], [1, 4], 1, 2), 2682),
]
CONV_KNOBS = ("tile_h", "tile_w", "tile_ci", "tile_co", "oc_nthread", "h_nthread")


def _tophub_conv(data, kernel, stride, pad, entity, index, target=TARGET):
    b, bi = (4, 8) if "4x8" in target else (1, 16)
    knobs = [["tile_b", "sp", [1, 1]]] + [
        [k, "ot" if k.endswith("nthread") else "sp", v] for k, v in zip(CONV_KNOBS, entity,
                                                                       strict=True)]
    args = [_tensor([*data, b, bi]), _tensor([*kernel, bi, bi]), [stride, stride], [pad] * 4,
            [1, 1], f"NCHW{b}n{bi}c", "int32"]
    return {"input": [target, "conv2d_packed.vta", args, {}],
            "config": {"index": index, "code_hash": None, "entity": knobs},
            "result": [[0.005], 0, 8.4, 1565330810.5], "version": 0.2,
            "tvm_version": "0.7.dev0"}


@pytest.mark.parametrize("row", TOPHUB_ROWS, ids=lambda r: str(r[-1]))
def test_config_index_is_tvms_mixed_radix_on_tophub_records(row):
    """Knobs in TVM's order (tile_b, tile_h, tile_w, tile_ci, tile_co, oc_nthread,
    h_nthread), the first varying fastest: the index TopHub recorded, and the entity in
    that order."""
    d = _tophub_conv(*row)
    (imp,) = _import_lines([d])
    index, entity = config_entity(imp.knobs, imp.workload, DEFAULT)
    assert index == row[-1] == imp.index
    assert entity == d["config"]["entity"]


def test_dense_index_is_tvms_on_tophubs_lstm_record(tmp_path):
    """TopHub's LSTM-cell dense_packed record: tile_b [1, 1], tile_ci [1, 16], tile_co [8, 1],
    oc_nthread 1 has index 4 (tile_b, tile_ci, tile_co, oc_nthread, the first fastest)."""
    wl = GemmWorkload(1, 256, 128)
    knobs = {"tile_b": [1, 1], "tile_ci": [1, 16], "tile_co": [8, 1], "oc_nthread": 1}
    assert config_entity(knobs, wl, DEFAULT) == (
        4, [["tile_b", "sp", [1, 1]], ["tile_ci", "sp", [1, 16]], ["tile_co", "sp", [8, 1]],
            ["oc_nthread", "ot", 1]])


def _import_lines(records, tmp_path=None):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "x.log"
        f.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n"
                             for r in records))
        return import_autotvm(f)


def test_dense_packed_legality_is_what_tvm_builds():
    """TVM's schedule_dense_packed reorders (b_o, c_o, b_i, c_i, k_o, k_i) by
    reorder(x_bo, k_o, x_co) into b_o, k_o, b_i, c_i, c_o, k_i: c_o sits inside
    tensorize(b_i), so any tile_co inner factor > 1 or oc_nthread 2 fails to compile
    ('Tensorize GEMM: Input dimension mismatch'); a 128-row batch tile fails in the runtime
    (micro-op kernel keys 1..128 at one call site, CHECK_LT(key, 100)). Of the 256 points of
    128x128x128, TVM runs exactly the 28 with tile_co inner 1, oc_nthread 1, tile_b < 128."""
    from search_spaces import get_template
    from vtatune.errors import IllegalSchedule

    dense = WORKLOADS["gemm"]["dense128"]
    tpl = get_template(dense, DEFAULT, space="autotvm", prune=False)
    assert tpl.size() == 256
    rules, legal = Counter(), []
    for i in range(tpl.size()):
        c = tpl.config_at(i)
        try:
            tpl.check(c)
            legal.append(c)
        except IllegalSchedule as exc:
            rules[exc.rule] += 1
            if exc.rule == "tvm_dense_tensorize":
                assert "Tensorize GEMM: Input dimension mismatch" in str(exc)
                assert f"tile_co={c['tile_co']} x oc_nthread={c['oc_nthread']}" in str(exc)
            if exc.rule == "uop_kernel_keys":
                assert c["tile_b"] == 128 and "below 100" in str(exc)
    assert len(legal) == 28
    assert {(c["tile_co"], c["oc_nthread"]) for c in legal} == {(1, 1)}
    assert sorted({c["tile_b"] for c in legal}) == [1, 2, 4, 8, 16, 32, 64]
    # 8 tile_co blocks and 2 threads: an odd thread split comes first
    assert rules == {"tvm_dense_tensorize": 192, "thread_split": 32, "uop_kernel_keys": 4}
    pruned = get_template(dense, DEFAULT, space="autotvm")
    assert (pruned.size(), pruned.count_legal()) == (28, 28)
    gemm = get_template(WORKLOADS["gemm"]["tutorial"], DEFAULT, space="autotvm", prune=False)
    assert (gemm.size(), gemm.count_legal()) == (98, 7)


def test_kernel_key_limit_holds_for_vtatunes_own_schedules():
    """vtatune's lowering keys a tile's GEMM/reset kernels by batch row too: 99 rows lower,
    100 and more do not, in any space."""
    from vtatune.errors import IllegalSchedule
    from vtatune.lowering import check, lower

    wl = GemmWorkload(198, 16, 16)
    lower(wl, Schedule(tile_b=99, reuse=True), DEFAULT)
    with pytest.raises(IllegalSchedule, match=r"tile_b=198: .*keys 1\.\.198") as exc:
        check(wl, Schedule(tile_b=198, reuse=True), DEFAULT)
    assert exc.value.rule == "uop_kernel_keys"


def test_program_c_keys_stay_below_the_runtimes_limit(tmp_path):
    """program.c gives each micro-op kernel its own call site with no closure data (key 0),
    so a program of more than 99 kernels still goes through the runtime."""
    import re

    wl = GemmWorkload(64, 16, 16)
    b = build(wl, schedule=Schedule(tile_b=64, reuse=True))
    src = (b.export(tmp_path)["c"]).read_text()
    calls = re.findall(r"VTAPush(?:GEMM|ALU)Op\(&vtatune_uop_handle_(\d+), vtatune_kernel_\d+, "
                       r"(.*?)\)", src)
    kernels = {k for k, _ in calls}
    assert len(kernels) > 100
    assert {sig for _, sig in calls} == {"NULL, 0"}


def test_import_a_log_shaped_like_tophubs(tmp_path):
    """TopHub's vta_v0.10.log opens with Yolo-tiny rows whose splits are not the axis length
    (copied ResNet configs: 2 odd splits on line 2, 4 on line 3), and mixes arm_cpu,
    group_conv2d, conv2d_transpose, dense and 4x8 records: what vtatune simulates is
    imported, the rest skipped in one counted warning, odd splits applied with their inner
    factor (one warning)."""
    yolo1 = _tophub_conv([1, 1, 208, 208], [2, 1, 3, 3], 1, 1,
                         ([1, 16], [1, 16], [1, 1], [2, 1], 2, 1), 13)
    yolo2 = _tophub_conv([1, 2, 104, 104], [4, 2, 3, 3], 1, 1,
                         ([1, 8], [1, 8], [1, 1], [1, 1], 2, 1), 34)
    arm = {"input": ["llvm -device=arm_cpu -model=pynq -mtriple=armv7a-linux-eabi",
                     "conv2d_nchw_spatial_pack.arm_cpu",
                     [["TENSOR", [1, 3, 416, 416], "float32"],
                      ["TENSOR", [16, 3, 3, 3], "float32"], [1, 1], [1, 1, 1, 1], [1, 1],
                      "float32"], {}],
           "config": {"index": 72880, "code_hash": None,
                      "entity": [["tile_co", "sp", [8, 8]], ["reorder_0", "re", [0, 1, 2]],
                                 ["ann_spatial", "an", ["unroll", "vec"]]]},
           "result": [[0.107], 0, 1.37, 1536393445.5], "version": 0.2,
           "tvm_version": "0.7.dev0"}
    c8 = _tophub_conv(*TOPHUB_ROWS[0])
    lstm = {"input": [TARGET, "dense_packed.vta",
                      [_tensor([1, 16, 1, 16]), _tensor([8, 16, 16, 16]), None, "int32"], {}],
            "config": {"index": 4, "code_hash": None,
                       "entity": [["tile_b", "sp", [1, 1]], ["tile_ci", "sp", [1, 16]],
                                  ["tile_co", "sp", [8, 1]], ["oc_nthread", "ot", 1]]},
            "result": [[0.00014], 0, 20.2, 1565674279.9], "version": 0.2,
            "tvm_version": "0.7.dev0"}
    def entity(h, w, ci, co):  # tile splits that fit the row's shape, 2 threads on oc
        return {"index": 0, "code_hash": None,
                "entity": [["tile_b", "sp", [1, 1]], ["tile_h", "sp", h], ["tile_w", "sp", w],
                           ["tile_ci", "sp", ci], ["tile_co", "sp", co],
                           ["oc_nthread", "ot", 2], ["h_nthread", "ot", 1]]}

    dcgan = dict(c8, input=[TARGET, "conv2d_transpose_packed.vta",
                            [_tensor([1, 64, 4, 4, 1, 16]), _tensor([32, 64, 4, 4, 16, 16]),
                             [2, 2], [1, 1, 1, 1], "int32", [0, 0]], {}],
                 config=entity([1, 8], [1, 8], [64, 1], [8, 4]))
    group = [dict(c8, input=[TARGET, "group_conv2d_packed.vta",
                             [_tensor([1, c, h, h, 1, 16]), _tensor([c, 1, 3, 3, 16, 16]),
                              [s, s], [1, 1, 1, 1], [1, 1], c, "int32"], {}],
                  config=entity([1, 7], [1, 7], [1, 1], [c, 1]))
             for c, h, s in ((32, 14, 2), (64, 7, 1))]
    r4x8 = _tophub_conv([1, 8, 56, 56], [8, 8, 3, 3], 1, 1,
                        ([28, 2], [1, 56], [8, 1], [1, 8], 1, 2), 2873,
                        target=TARGET.replace("1x16_i8w8a32_15_15_18_17",
                                              "4x8_i8w8a32_15_16_16_18"))
    r4x8["input"][2].insert(5, "NCHW4n8c")  # TopHub's 4x8 rows name the layout twice
    failed = dict(c8, result=[[1e9], 4, 1.0, 1.0])  # error_no 4: AutoTVM ignores it too
    lines = ["# Yolo-tiny pynq_1x16_i8w8a32_15_15_18_17", yolo1, yolo2,
             "# YoloV3-tiny - arm_cpu fp32 batch = 1", arm, "# Resnet-18", c8, lstm, dcgan,
             *group, r4x8, failed]
    f = tmp_path / "vta_v0.10.log"
    f.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    with pytest.warns(RecordWarning) as caught:
        imported = import_autotvm(f)
    line_of = {id(x): n for n, x in enumerate(lines, 1)}
    simulated = [x for x in (yolo1, yolo2, c8, lstm, dcgan, *group, r4x8)
                 if x["input"][1] in TASKS]
    assert [i.line for i in imported] == [line_of[id(x)] for x in simulated]
    assert all(i.score.status == "ok" for i in imported), \
        [i.score.error for i in imported]
    skipped = Counter(f"task {x['input'][1]}" for x in (dcgan, *group)
                      if x["input"][1] not in TASKS)
    skipped["target llvm -device=arm_cpu"] = 1
    first = min(line_of[id(x)] for x in (arm, dcgan, *group) if x is arm
                or x["input"][1] not in TASKS)
    messages = [str(w.message) for w in caught]
    assert messages == [
        f"{f}: skipped {sum(skipped.values())} record{'s' * (sum(skipped.values()) > 1)} "
        f"vtatune cannot simulate (first at line "
        f"{first}): " + ", ".join(f"{c} {k}" for k, c in sorted(skipped.items(),
                                                         key=lambda kc: (-kc[1], kc[0]))),
        f"{f}: 6 splits with outer x inner not the axis length (first at line 2: tile_h "
        "[1, 16] on 208) applied with the inner factor, as TVM's split(factor=inner) does"]
    y1, y2 = imported[0], imported[1]
    assert (y1.schedule.tile_h, y1.schedule.tile_w, y2.schedule.tile_h) == (16, 16, 8)
    assert y1.knobs["tile_h"] == [13, 16]
    by_task = {i.task: i for i in imported}
    assert by_task["dense_packed.vta"].schedule.tile_ci == 16
    (i4x8,) = [i for i in imported if i.hw.batch == 4]
    assert i4x8.workload.batch == 4 and i4x8.schedule.h_nthread == 2
    assert config_entity(i4x8.knobs, i4x8.workload, i4x8.hw)[0] == 2873
