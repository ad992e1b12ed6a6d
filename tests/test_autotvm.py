"""AutoTVM v0.2 export and import (TopHub's ResNet-18 rows from the doc, section 9)."""

import json

import pytest

from simulator.hardware import DEFAULT, PRESETS
from tests._logs import record, write_log
from vtatune.autotvm import (
    config_entity,
    hw_from_model,
    import_autotvm,
    task_args,
    write_records,
)
from vtatune.builds import build
from vtatune.cli import main
from vtatune.records import RecordWarning
from vtatune.schedule import Schedule, from_autotvm
from vtatune.workloads import WORKLOADS, GemmWorkload

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
    assert hw_from_model("pynq_1x16_i8w8a32_15_15_18_17") == DEFAULT
    assert hw_from_model(PRESETS["4x8"].target_model) == PRESETS["4x8"]
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
        assert imp.evaluation.status == "ok", imp.evaluation.error
        assert imp.schedule.tvm_strict and imp.autotvm_seconds == 1e-3
    assert imported[0].schedule.tile_co == 4 and imported[1].schedule.h_nthread == 2
    log = tmp_path / "tophub.jsonl"
    assert main(["import", str(f), "-o", str(log)]) == 0
    assert "resnet18.C5" in capsys.readouterr().out
    b = build(WORKLOADS["conv2d"]["resnet18.C8"], log=log)  # the imported config builds
    assert b.provenance.line == 1 and b.schedule == imported[0].schedule


def test_a_full_space_log_exports_its_best_tiles_with_tvms_orders(tmp_path, capsys):
    """Full-space records (vtatune's loop orders and reuse) are not AutoTVM points: the
    export takes the fastest of their tile choices lowered as TVM's template would, and
    that record imports back to exactly the exported cycles."""
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
    from vtatune.evaluate import evaluate
    from vtatune.schedule import from_autotvm_defaults

    projected = [evaluate(wl, from_autotvm_defaults(s), DEFAULT) for s in natives]
    best = min(p.cycles for p in projected if p.status == "ok")
    assert back[0].evaluation.cycles == best
    assert json.loads(line)["result"][0] == [back[0].evaluation.seconds]


def test_export_best_expressible_config_and_import_it_back(tmp_path, capsys):
    wl = GemmWorkload(16, 64, 64)
    strict = [from_autotvm({"tile_b": [4, 4], "tile_ci": [1, 4], "tile_co": [1, 4],
                            "oc_nthread": 1}, wl),
              from_autotvm({"tile_b": [16, 1], "tile_ci": [4, 1], "tile_co": [2, 2],
                            "oc_nthread": 2}, wl)]
    native = Schedule(tile_b=4, tile_ci=4, tile_co=4, reuse=True)  # not expressible
    recs = [record(wl, native, DEFAULT, 0), record(wl, strict[1], DEFAULT, 1),
            record(wl, strict[0], DEFAULT, 2)]
    log = write_log(tmp_path / "g.jsonl", recs)
    out = tmp_path / "autotvm.log"
    assert main(["export", str(log), "--format", "autotvm", "-o", str(out)]) == 0
    lines = out.read_text().splitlines()
    assert len(lines) == 1
    d = json.loads(lines[0])
    assert d["input"] == [DEFAULT.autotvm_target, "dense_packed.vta",
                          [["TENSOR", [16, 4, 1, 16], "int8"], ["TENSOR", [4, 4, 16, 16], "int8"],
                           None, "int32"], {}]
    assert d["version"] == 0.2 and d["result"][1] == 0
    assert d["result"][0] == [recs[2]["seconds"]]
    assert [e[0] for e in d["config"]["entity"]] == ["tile_b", "tile_ci", "tile_co",
                                                     "oc_nthread"]
    back = import_autotvm(out)
    assert back[0].schedule == strict[0]
    assert back[0].evaluation.cycles == recs[2]["cycles"]
    write_records(back, tmp_path / "back.jsonl", str(out))
    capsys.readouterr()


def test_bad_files_one_line_exit_2(tmp_path, capsys):
    f = tmp_path / "x.log"
    f.write_text("not json\n" + tophub_line("resnet18.C8", TOPHUB["resnet18.C8"])
                 + "\n" + json.dumps({"input": ["llvm", "dense_nopack.x86", [], {}],
                                      "config": {"entity": []}, "result": [[1], 0]}) + "\n")
    with pytest.warns(RecordWarning) as caught:
        assert len(import_autotvm(f)) == 1
    assert [str(w.message).split(": ")[0] for w in caught] == [f"{f}:1", f"{f}:3"]
    empty = tmp_path / "empty.log"
    empty.write_text("garbage\n")
    assert main(["import", str(empty)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("vtatune: error:")
    assert main(["import", str(tmp_path / "missing.log")]) == 2
    assert main(["export", str(tmp_path / "missing.jsonl"), "-o", str(f)]) == 2
