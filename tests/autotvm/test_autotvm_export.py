"""``export``: per workload, the fastest record TVM applies as it is, compared with what was
tuned (issue #24: exports lost speed silently). dense128 is the case in point: vtatune's
full space runs it in ~27k cycles, AutoTVM's dense_packed in no fewer than ~371k."""

import json
from pathlib import Path

import pytest

from simulator.hardware import DEFAULT, PRESETS
from tests._logs import record, write_log
from vtatune.autotvm import ExportWarning, export_autotvm, import_autotvm
from vtatune.cli import main
from vtatune.schedule import Schedule, from_autotvm
from vtatune.scoring import score
from vtatune.workloads import GemmWorkload, get_workload

pytestmark = pytest.mark.usefixtures("compiled_engines")  # exact CLI output: no first-run notice

DENSE128 = get_workload("gemm", "dense128")
# vtatune's full space: weight reuse across batch rows, 8 channel blocks per tile
NATIVE = Schedule(tile_b=32, tile_ci=8, tile_co=8, reuse=True)
# AutoTVM points dense_packed builds (tile_co inner 1, one thread), in log order
POINTS = [from_autotvm({"tile_b": [64, 2], "tile_ci": [1, 8], "tile_co": [8, 1],
                        "oc_nthread": 1}, DENSE128),
          from_autotvm({"tile_b": [8, 16], "tile_ci": [1, 8], "tile_co": [8, 1],
                        "oc_nthread": 1}, DENSE128),
          from_autotvm({"tile_b": [4, 32], "tile_ci": [2, 4], "tile_co": [8, 1],
                        "oc_nthread": 1}, DENSE128)]
# what export projects NATIVE onto when the log has no AutoTVM point: each knob's largest
# choice of the pruned template not above NATIVE's (tile_co 8 -> 1)
NEAREST = from_autotvm({"tile_b": [4, 32], "tile_ci": [1, 8], "tile_co": [8, 1],
                        "oc_nthread": 1}, DENSE128)


def cycles(schedule, wl=DENSE128, hw=DEFAULT):
    ev = score(wl, schedule, hw)
    assert ev.status == "ok", ev.error
    return ev.cycles


def export(capsys, log, out, *flags):
    code = main(["export", str(log), "-o", str(out), *flags])
    o, e = capsys.readouterr()
    return code, o, e


def test_full_space_only_exports_the_projection_and_warns_with_the_command(tmp_path, capsys):
    log = write_log(tmp_path / "g.jsonl", [record(DENSE128, NATIVE, DEFAULT, 0)])
    out = tmp_path / "g.autotvm.log"
    tuned, projected = cycles(NATIVE), cycles(NEAREST)
    assert projected > 10 * tuned  # the loss the export has to report
    code, o, e = export(capsys, log, out)
    assert code == 0
    assert o.splitlines() == [
        f"dense128 on {DEFAULT.target_model}: tuned {tuned:,} cycles (line 1, full space), "
        f"TVM will run {projected:,} ({projected / 1e5:.3f} ms): config index "
        f"{json.loads(out.read_text())['config']['index']}, the tiles of line 1 with TVM's "
        "loop orders",
        f"wrote 1 AutoTVM v0.2 record(s) to {out}"]
    assert e.splitlines() == [
        f"vtatune: warning: dense128 on {DEFAULT.target_model}: tuned at {tuned:,} cycles, "
        f"TVM will run {projected:,} ({projected / tuned:.1f}x slower: AutoTVM's template "
        "cannot express the tuned schedule); tune in TVM's space: python -m vtatune gemm "
        f"--workload dense128 --space autotvm --trials 200 --log {log}"]
    (back,) = import_autotvm(out)
    assert back.schedule == NEAREST and back.score.cycles == projected


def test_the_fastest_autotvm_record_is_exported_and_json_says_both(tmp_path, capsys):
    recs = [record(DENSE128, NATIVE, DEFAULT, 0)] + [
        record(DENSE128, p, DEFAULT, i + 1, space="autotvm") for i, p in enumerate(POINTS)]
    log = write_log(tmp_path / "g.jsonl", recs)
    out = tmp_path / "g.autotvm.log"
    points = [cycles(p) for p in POINTS]
    fastest = points.index(min(points))
    assert 0 < fastest < len(POINTS) - 1  # neither the first nor the last AutoTVM record
    code, o, e = export(capsys, log, out, "--json")
    assert code == 0
    (d,) = [json.loads(line) for line in o.splitlines()]  # nothing else on stdout
    tuned = cycles(NATIVE)
    assert {k: d[k] for k in ("workload", "operator", "hw", "bias", "tuned_cycles",
                              "tuned_space", "tuned_line", "exported_cycles", "exported_line",
                              "projected", "slower", "retimed")} == {
        "workload": "dense128", "operator": "gemm", "hw": DEFAULT.target_model, "bias": False,
        "tuned_cycles": tuned, "tuned_space": "full", "tuned_line": 1,
        "exported_cycles": points[fastest], "exported_line": fastest + 2, "projected": False,
        "slower": True, "retimed": False}
    assert d["slowdown"] == pytest.approx(points[fastest] / tuned)
    assert d["tune_command"] == ("python -m vtatune gemm --workload dense128 --space autotvm "
                                 f"--trials 200 --log {log}")
    assert e.splitlines() == [
        f"vtatune: warning: dense128 on {DEFAULT.target_model}: tuned at {tuned:,} cycles, "
        f"TVM will run {points[fastest]:,} ({points[fastest] / tuned:.1f}x slower: the "
        "fastest AutoTVM-space record of the log; AutoTVM's template cannot express the "
        f"tuned schedule); tune in TVM's space: {d['tune_command']}"]
    (back,) = import_autotvm(out)
    assert back.schedule == POINTS[fastest] and back.score.cycles == points[fastest]
    assert json.loads(out.read_text())["result"][0] == [back.score.seconds]


def test_a_log_tuned_in_autotvm_space_exports_what_it_tuned_silently(tmp_path, capsys):
    log = write_log(tmp_path / "a.jsonl", [record(DENSE128, p, DEFAULT, i, space="autotvm")
                                           for i, p in enumerate(POINTS)])
    out = tmp_path / "a.autotvm.log"
    code, o, e = export(capsys, log, out, "--json")
    assert code == 0 and e == ""
    (d,) = [json.loads(line) for line in o.splitlines()]
    best = min(cycles(p) for p in POINTS)
    assert d["exported_cycles"] == d["tuned_cycles"] == best
    assert d["tuned_space"] == "autotvm" and not d["slower"] and d["slowdown"] == 1.0
    code, o, e = export(capsys, log, out)
    assert code == 0 and e == "" and "as it is" in o.splitlines()[0]


def test_records_of_another_timing_model_are_re_simulated(tmp_path, capsys):
    """A logged figure from another timing model (here a fake 1 cycle) is neither what was
    tuned nor what TVM runs: both are simulated again."""
    real = record(DENSE128, POINTS[1], DEFAULT, 0, space="autotvm")
    stale = dict(real, cycles=1, seconds=1e-8, timing="rtl-0:000000000000")
    log = write_log(tmp_path / "s.jsonl", [stale])
    code, o, e = export(capsys, log, tmp_path / "s.autotvm.log", "--json")
    assert code == 0 and e == ""
    d = json.loads(o)
    assert d["tuned_cycles"] == d["exported_cycles"] == real["cycles"] and d["retimed"]
    code, o, _ = export(capsys, log, tmp_path / "s.autotvm.log")
    assert "note: 1 tuned record(s) were timed by another timing model" in o


def test_a_re_timed_best_never_hides_a_faster_record_of_the_log(tmp_path, capsys):
    """The record best by its logged (stale) cycles is slower by the current model than
    another record of the log: what was tuned is that other record."""
    slow, fast = sorted(POINTS[:2], key=cycles, reverse=True)
    stale = dict(record(DENSE128, slow, DEFAULT, 0, space="autotvm"), cycles=1,
                 timing="rtl-0:000000000000")
    log = write_log(tmp_path / "s.jsonl", [stale, record(DENSE128, fast, DEFAULT, 1,
                                                         space="autotvm")])
    code, o, e = export(capsys, log, tmp_path / "s.autotvm.log", "--json")
    assert code == 0 and e == ""
    d = json.loads(o)
    assert d["tuned_cycles"] == d["exported_cycles"] == cycles(fast)
    assert d["tuned_line"] == d["exported_line"] == 2 and not d["retimed"]


def test_the_command_names_the_hardware_and_shape(tmp_path, capsys):
    wl, hw = GemmWorkload(16, 64, 64), PRESETS["ultra96"]
    log = write_log(tmp_path / "u.jsonl", [record(wl, Schedule(tile_b=4, tile_ci=4, tile_co=4,
                                                               reuse=True), hw, 0, bias=True)])
    code, o, _ = export(capsys, log, tmp_path / "u.autotvm.log", "--json")
    assert code == 0
    assert json.loads(o)["tune_command"] == (
        "python -m vtatune gemm --batch 16 --in-channels 64 --out-channels 64 --hw ultra96 "
        f"--bias --space autotvm --trials 200 --log {log}")


def test_python_callers_get_an_export_warning(tmp_path):
    log = write_log(tmp_path / "g.jsonl", [record(DENSE128, NATIVE, DEFAULT, 0)])
    with pytest.warns(ExportWarning, match=r"^dense128 on .*: tuned at [\d,]+ cycles, "
                                           r"exported at [\d,]+ \(1\d\.\dx\)"):
        (e,) = export_autotvm(log, tmp_path / "out.log")
    assert e.slower and e.projected and e.tuned_cycles == cycles(NATIVE)


def test_exit_codes(tmp_path, capsys):
    log = write_log(tmp_path / "g.jsonl", [record(DENSE128, NATIVE, DEFAULT, 0)])
    illegal = write_log(tmp_path / "i.jsonl", [record(DENSE128, Schedule(tile_b=128, tile_ci=8,
                                                                         tile_co=8), DEFAULT, 0)])
    assert json.loads(illegal.read_text())["status"] == "illegal"
    cases = [
        ([str(tmp_path / "missing.jsonl")], "vtatune: error: "),
        ([str(illegal)], f"vtatune: error: {illegal}: no ok record AutoTVM's templates can "
                         "express, nor an AutoTVM point among its tile choices that runs"),
        ([str(log), "--format", "tophub"], "vtatune: error: argument --format: invalid "
                                           "choice: 'tophub'"),
    ]
    for argv, message in cases:
        assert main(["export", *argv, "-o", str(tmp_path / "o.log")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(message)
    assert main(["export", str(log), "-o", str(tmp_path / "no" / "such" / "dir.log")]) == 2
    assert capsys.readouterr().err.startswith(f"vtatune: error: cannot write {tmp_path}")
    assert main(["export", str(log), "-o", str(tmp_path / "o.log")]) == 0  # warned, written


def test_help_says_what_export_compares(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["export", "--help"])
    assert exc.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "when TVM will run more than 1% slower, one warning line on stderr" in text
    assert "--json one JSON object per record written" in text


def test_the_command_tunes_the_epilogue_a_network_tuned(tmp_path, capsys):
    """A network's layer is tuned with its deployed epilogue: the suggested command tunes the
    same workload in AutoTVM's space (same key), so the next export compares like with like."""
    from vtatune.records import best_records, read_records

    shipped = Path(__file__).resolve().parents[2] / "logs" / "resnet18-pynq.jsonl"
    (c4,) = [b.record for b in best_records(read_records(shipped))
             if b.record["workload"]["name"] == "resnet18.C4"]
    log = write_log(tmp_path / "n.jsonl", [c4])
    code, o, _ = export(capsys, log, tmp_path / "n.autotvm.log", "--json")
    assert code == 0
    command = json.loads(o)["tune_command"]
    assert command == ("python -m vtatune conv2d --workload resnet18.C4 --epilogue deployed "
                       f"--space autotvm --trials 200 --log {log}")
    argv = command.split()[3:]
    argv[argv.index("200")] = "3"
    assert main(argv + ["--seed", "0", "--quiet"]) == 0
    capsys.readouterr()
    keys = {r["workload"]["key"] for _, r in read_records(log)}
    assert keys == {c4["workload"]["key"]}


def test_nothing_to_export_leaves_no_file(tmp_path, capsys):
    """A log with no record to export is one error line, exit 2, and no output file (an
    empty AutoTVM log would apply nothing, silently); an earlier export stays whole."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"schema": 1}\n')
    out = tmp_path / "x.autotvm.log"
    code, o, e = export(capsys, bad, out)
    assert code == 2 and o == "" and len(e.splitlines()) == 1
    assert e.startswith(f"vtatune: error: {bad}: no ok record") and not out.exists()
    log = write_log(tmp_path / "g.jsonl", [record(DENSE128, NATIVE, DEFAULT, 0)])
    assert export(capsys, log, out)[0] == 0
    written = out.read_text()
    assert export(capsys, bad, out)[0] == 2 and out.read_text() == written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl", "g.jsonl",
                                                          "x.autotvm.log"]  # no temp file


def test_hardware_tvm_014_cannot_build_is_said_in_one_line_and_in_json(tmp_path, capsys):
    # issue #35: a design with BLOCK_IN != BLOCK_OUT exported silently, though TVM v0.14's
    # pkg_config.py cannot build it
    from search_spaces import default_schedule
    from simulator.hardware import HardwareConfig
    from vtatune.autotvm import HardwareWarning

    apart = HardwareConfig.from_target_model("ultra96_1x8x64_i8w8a32_10_16_18_18")
    c2 = get_workload("conv2d", "resnet18.C2")
    log = write_log(tmp_path / "d.jsonl", [
        record(c2, default_schedule(c2, apart), apart, 0),
        record(DENSE128, POINTS[0], DEFAULT, 1, space="autotvm")])
    code, o, e = export(capsys, log, tmp_path / "d.autotvm.log")
    assert code == 0 and len(o.splitlines()) == 3
    assert e == ("vtatune: warning: TVM v0.14 cannot build ultra96_1x8x64_i8w8a32_10_16_18_18 "
                 "(BLOCK_IN 8 != BLOCK_OUT 64: its pkg_config.py sets both from one LOG_BLOCK)"
                 ": the records for it apply only to a TVM whose VTA toolchain takes them "
                 "apart (docs/codesign.md, 'The design search in detail')\n")
    code, o, e = export(capsys, log, tmp_path / "j.autotvm.log", "--json")
    rows = {r["hw"]: r["tvm014_builds_hardware"] for r in map(json.loads, o.splitlines())}
    assert rows == {apart.target_model: False, DEFAULT.target_model: True}
    assert e.count("\n") == 1 and "TVM v0.14 cannot build" in e
    with pytest.warns(HardwareWarning, match="cannot build ultra96_1x8x64"):
        done = export_autotvm(log, tmp_path / "p.autotvm.log")
    assert [r.tvm014_builds for r in done] == [False, True]
    # hardware TVM v0.14 builds: no such line
    stock_only = write_log(tmp_path / "s.jsonl", [record(DENSE128, POINTS[0], DEFAULT, 0,
                                                         space="autotvm")])
    code, o, e = export(capsys, stock_only, tmp_path / "s.autotvm.log")
    assert code == 0 and e == ""
