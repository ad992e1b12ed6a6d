"""program.json / program.bin / program.c: round trips, the simulator on a .bin, gcc."""

import json
import shutil
import subprocess
from dataclasses import replace

import pytest

import vtatune
from simulator.hardware import DEFAULT
from tests._logs import record, write_log
from vtatune.builds import (
    ExportError,
    build,
    from_bin,
    header_path,
    load_bin,
    load_json,
    replay_calls,
    runtime_calls,
    to_bin,
    write_all,
)
from vtatune.cli import main
from vtatune.schedule import Schedule, tutorial_schedule
from vtatune.workloads import WORKLOADS, Epilogue, EpilogueOp, GemmWorkload

pytestmark = pytest.mark.usefixtures("compiled_engines")  # exact CLI output: no first-run notice

WL = GemmWorkload(16, 64, 64)
C11 = WORKLOADS["conv2d"]["resnet18.C11"]
TUT = WORKLOADS["conv2d"]["tutorial"]
# a per-channel clamp (min and max reading shift planes) and a left shift (shr by -4)
CLAMP_LEFT = replace(WL, epilogue=Epilogue((
    EpilogueOp("add", tensor="bias"), EpilogueOp("min", tensor="shift"),
    EpilogueOp("max", tensor="shift1"), EpilogueOp("shr", -4), EpilogueOp("shr", 9),
    EpilogueOp("clip", -128, hi=127))))
CASES = [(WL, Schedule(tile_b=4, tile_ci=4, tile_co=4), False),
         (WL, Schedule(tile_b=2, tile_co=2, tile_ci=2, oc_nthread=2), True),
         (C11, Schedule(tile_h=7, tile_w=7, tile_co=8, oc_nthread=2), True),
         (TUT, tutorial_schedule(TUT), False),
         (CLAMP_LEFT, Schedule(tile_b=2, tile_co=2, tile_ci=2, oc_nthread=2), True)]


@pytest.mark.parametrize("wl, sch, bias", CASES)
def test_bin_and_json_round_trip_to_an_identical_program(tmp_path, wl, sch, bias):
    b = build(wl, schedule=sch, bias=bias)
    loaded = from_bin(to_bin(b))
    assert loaded.program == b.program
    assert loaded.hw == b.hw and loaded.workload == wl and loaded.bias == bias
    paths = write_all(b, tmp_path)
    assert load_bin(paths["bin"]).program == b.program
    assert load_json(paths["json"]).program == b.program
    assert vtatune.simulate(load_bin(paths["bin"])) == vtatune.simulate(b)


@pytest.mark.parametrize("wl, sch, bias", CASES)
def test_runtime_calls_rebuild_the_stream(wl, sch, bias):
    b = build(wl, schedule=sch, bias=bias)
    rc = runtime_calls(b.program, b.hw)
    assert replay_calls(rc, b.hw) == (b.program.instructions, b.program.uops)
    assert rc.calls[-1].op == "sync"


def test_program_json_is_readable(tmp_path):
    b = build(WL, schedule=CASES[0][1])
    d = json.loads(write_all(b, tmp_path)["json"].read_text())
    assert d["hw"]["model"] == DEFAULT.target_model
    assert d["schedule"] == b.schedule.to_dict()
    assert d["provenance"]["source"] == "schedule"
    assert d["expected"]["cycles"] == vtatune.simulate(b).cycles
    assert {t["name"] for t in d["tensors"]} == {"data", "weight", "output"}
    first = d["instructions"][0]
    assert {"opcode", "module", "text", "pop_prev", "push_next"} <= set(first)
    assert d["kernels"] and d["uops"]


def test_damaged_images_are_refused(tmp_path):
    data = to_bin(build(WL, schedule=CASES[0][1]))
    with pytest.raises(ExportError, match="truncated"):
        from_bin(data[:-3])
    with pytest.raises(ExportError, match="magic"):
        from_bin(b"X" + data[1:])
    bad = tmp_path / "bad.bin"
    bad.write_bytes(data[:40])
    assert main(["simulate", "--program", str(bad)]) == 2


def test_program_c_compiles_against_the_shipped_header(tmp_path):
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc not installed")
    header = header_path().read_text()
    for fn in ("VTALoadBuffer2D", "VTAStoreBuffer2D", "VTAUopLoopBegin", "VTAUopLoopEnd",
               "VTAUopPush", "VTAPushGEMMOp", "VTAPushALUOp", "VTADepPush", "VTADepPop",
               "VTASynchronize"):
        assert f"{fn}(" in header
    for k, (wl, sch, bias) in enumerate(CASES[1:3] + CASES[4:]):
        out = tmp_path / str(k)
        paths = write_all(build(wl, schedule=sch, bias=bias), out)
        src = paths["c"].read_text()
        assert "VTAPushGEMMOp" in src and "VTAPushALUOp" in src and "VTADepPop" in src
        assert (", -4);" in src) == (wl is CLAMP_LEFT)  # the left shift's immediate
        for std in ("c99", "c11"):
            r = subprocess.run([gcc, "-c", f"-std={std}", "-Wall", "-Wextra", "-Werror",
                                str(paths["c"]), "-o", str(out / "program.o")],
                               capture_output=True, text=True)
            assert r.returncode == 0, r.stderr


def test_build_command_then_simulate_program(tmp_path, capsys):
    wl = WL
    log = write_log(tmp_path / "g.jsonl", [record(wl, s, DEFAULT, i) for i, (_, s, _)
                                           in enumerate(CASES[:2])])
    out = tmp_path / "out"
    code = main(["build", "gemm", "--batch", "16", "--in-channels", "64", "--out-channels",
                 "64", "--log", str(log), "--out", str(out), "--verify"])
    text = capsys.readouterr().out
    assert code == 0 and f"{log}:1" in text and "verified   yes" in text
    assert {p.name for p in out.iterdir()} == {"program.json", "program.bin", "program.c",
                                               "vta_runtime.h"}
    code = main(["simulate", "--program", str(out / "program.bin"), "--json", "--verify"])
    report = json.loads(capsys.readouterr().out)
    rec = json.loads(log.read_text().splitlines()[0])
    assert code == 0 and report["verified"] is True
    assert report["cycles"] == rec["cycles"] and report["counters"] == rec["counters"]
    assert main(["simulate"]) == 2
    assert "or --program" in capsys.readouterr().err
