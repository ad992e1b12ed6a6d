"""read_log and its helpers, and the analyze command."""

from dataclasses import replace

import pandas as pd
import pytest

from simulator.hardware import DEFAULT, PRESETS
from tests._logs import record, write_log
from vtatune.cli import main
from vtatune.records import RecordWarning
from vtatune.records.analysis import best_per_workload, best_so_far, knob_stats, read_log, summary
from vtatune.schedule import Schedule
from vtatune.workloads import WORKLOADS, GemmWorkload

pytestmark = pytest.mark.usefixtures("compiled_engines")  # exact CLI output: no first-run notice

WL = GemmWorkload(16, 64, 64)
C11 = WORKLOADS["conv2d"]["resnet18.C11"]
GEMM = [Schedule(tile_b=1, tile_co=4, tile_ci=1), Schedule(tile_b=4, tile_ci=4, tile_co=4),
        Schedule(tile_b=2, tile_co=2, tile_ci=2, oc_nthread=2),
        Schedule(tile_b=16, tile_co=4, tile_ci=4, tile_h=3)]  # tile_h 3: illegal


@pytest.fixture
def logs(tmp_path):
    a = write_log(tmp_path / "a.jsonl", [record(WL, s, DEFAULT, i, study="g")
                                         for i, s in enumerate(GEMM)])
    b = write_log(tmp_path / "b.jsonl", [
        record(C11, Schedule(tile_h=7, tile_w=7, tile_co=8, oc_nthread=2), DEFAULT, 0,
               study="c"),
        record(WL, GEMM[0], PRESETS["ultra96"], 0, study="u")])
    with open(b, "a") as f:
        f.write('{"schema": 1, "workload": {"oper\n')  # a truncated last line
    return a, b


def test_read_log_one_row_per_trial_with_every_column(logs):
    a, b = logs
    with pytest.warns(RecordWarning, match=r"b\.jsonl:3") as caught:
        df = read_log([a, b])
    assert len(caught) == 1
    assert len(df) == 6
    for col in ("log", "line", "operator", "workload", "workload_key", "batch", "height",
                "in_channels", "target", "bitstream", "hw_model", "status", "cycles",
                "gemm_counter", "inp_load_nbytes", "seconds", "gops", "utilization", "trial",
                "timestamp", "sampler", "seed", "study", "tile_co", "oc_nthread"):
        assert col in df.columns, col
    assert set(df.attrs["knobs"]) >= {"tile_b", "tile_co", "oc_nthread"}
    assert df["cycles"].dtype == "Int64" and df["tile_co"].dtype == "Int64"
    assert str(df["timestamp"].dtype).startswith("datetime64")
    assert list(df["status"]) == ["ok", "ok", "ok", "illegal", "ok", "ok"]
    assert df.loc[df.workload == "resnet18.C11", "height"].item() == 7
    assert pd.isna(df.loc[0, "height"])  # gemm rows have no image


def test_helpers(logs):
    with pytest.warns(RecordWarning):
        df = read_log(logs)
    best = best_per_workload(df)
    assert len(best) == 3
    g = best[(best.workload_key == WL.key()) & (best.hw_model == DEFAULT.target_model)]
    assert g["line"].item() == 2 and g["cycles"].item() == df.loc[1, "cycles"]
    curve = best_so_far(df)
    gc = curve[curve.study == "g"]
    assert list(gc.trial) == [0, 1, 2, 3]
    assert gc.best_cycles.is_monotonic_decreasing
    assert gc.best_cycles.iloc[-1] == g["cycles"].item()
    ks = knob_stats(df[df.study == "g"], top=0.3)
    row = ks[(ks.knob == "tile_b") & (ks.value == "4")]
    assert row["good"].item() == 1 and row["lift"].item() == pytest.approx(3.0)
    s = summary(df)
    gs = s[(s.workload_key == WL.key()) & (s.hw_model == DEFAULT.target_model)].iloc[0]
    assert (gs.trials, gs.ok, gs.failed) == (4, 3, 1)
    assert gs.speedup_default > 0 and "tile_b=4" in gs.best_knobs


def test_analyze_command(logs, tmp_path, capsys):
    out = tmp_path / "summary.csv"
    assert main(["analyze", *map(str, logs), "--csv", str(out)]) == 0
    text = capsys.readouterr()
    assert "resnet18.C11" in text.out and "b.jsonl:3" in text.err
    csv = pd.read_csv(out)
    assert len(csv) == 3 and {"best_cycles", "speedup_default", "best_knobs"} <= set(csv)
    assert main(["analyze", str(tmp_path / "missing.jsonl")]) == 2
    assert capsys.readouterr().err.startswith("vtatune: error:")


def test_the_epilogue_each_record_was_tuned_with_has_a_column(tmp_path, capsys):
    """Issue 35, item 14: the network's deployed epilogues and AutoTVM's benchmark one are
    different problems; the frame, the summary and analyze's table say which."""
    from vtatune.workloads import named_epilogues

    epilogues = named_epilogues()
    deployed = replace(C11, epilogue=epilogues["deployed"])
    relu = replace(C11, epilogue=epilogues["deployed-relu"])
    schedule = Schedule(tile_h=7, tile_w=7, tile_co=8, oc_nthread=2)
    log = write_log(tmp_path / "e.jsonl", [record(C11, schedule, DEFAULT, 0, study="b"),
                                          record(deployed, schedule, DEFAULT, 0, study="d"),
                                          record(relu, schedule, DEFAULT, 0, study="r"),
                                          record(WL, GEMM[0], DEFAULT, 0, study="g", bias=True)])
    df = read_log(log)
    assert list(df["epilogue"]) == ["benchmark", "deployed", "deployed-relu", "benchmark"]
    assert list(df.columns).index("epilogue") == list(df.columns).index("workload_key") + 1
    s = summary(df, default=False)
    assert sorted(zip(s.workload_key, s.epilogue, strict=True)) == sorted(
        [(C11.key(), "benchmark"), (deployed.key(), "deployed"), (relu.key(), "deployed-relu"),
         (WL.key(), "benchmark")])
    # the default schedule it is compared with runs the same epilogue
    from search_spaces import default_schedule
    from vtatune.scoring import score

    s = summary(df)
    for wl in (C11, deployed, relu):
        got = s.loc[s.workload_key == wl.key(), "default_cycles"].item()
        assert got == score(wl, default_schedule(wl, DEFAULT, False), DEFAULT).cycles
    assert len({*s.default_cycles}) == 4  # the epilogues cost differently
    assert main(["analyze", str(log), "--no-default"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0].split()[:3] == ["workload", "epilogue", "hardware"]
    assert sorted(r.split()[1] for r in rows[1:] if r.startswith("resnet18.C11")) == \
        ["benchmark", "deployed", "deployed-relu"]
