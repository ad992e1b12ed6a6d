"""Issue 38, item 1: ``deploy`` tunes the workloads no log holds by default, into a
per-hardware cache log shared safely by concurrent deploys; ``--tune 0`` tunes nothing;
``--log`` wins; a layer with no record takes the cost model's pick; ``--seed`` reproduces."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tvm")
pytest.importorskip("onnxruntime")

import onnx  # noqa: E402

from search_spaces import default_schedule, get_template  # noqa: E402
from simulator.hardware import PRESETS  # noqa: E402
from vtatune.builds import FallbackWarning  # noqa: E402
from vtatune.cli import main  # noqa: E402
from vtatune.deploy import (  # noqa: E402
    CACHE_ENV,
    LayerBuilder,
    cache_dir,
    cache_log,
    cost_model_pick,
    models,
    quantize,
)
from vtatune.records import workload_from  # noqa: E402
from vtatune.schedule import Schedule  # noqa: E402
from vtatune.scoring import score  # noqa: E402
from vtatune.tuning import tune  # noqa: E402
from vtatune.tuning.cost_model import warm_starts  # noqa: E402
from vtatune.workloads import GemmWorkload  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
HW = PRESETS["pynq"]


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    path = tmp_path_factory.mktemp("default_tuning") / "mlp_int8.onnx"
    rng = np.random.default_rng(0)
    onnx.save(quantize(models.mlp(), rng.standard_normal((4, 1, 64)).astype(np.float32)), path)
    return path


def _deploy(capsys, tmp_path, model, *flags):
    status = main(["deploy", str(model), "--json", "--output", str(tmp_path / "y.npy"),
                   *map(str, flags)])
    out, err = capsys.readouterr()
    assert status == 0, err
    assert "trial/s" not in err and "s/trial" not in err  # no progress bar off a terminal
    return json.loads(out)


def test_the_cache_log_is_per_hardware_under_the_environment_override(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c"
    assert cache_log(HW) == tmp_path / "c" / f"deploy-{HW.target_model}.jsonl"
    monkeypatch.delenv(CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "vtatune"


def test_default_flags_tune_into_the_cache_log_reproducibly(mlp, capsys, tmp_path, monkeypatch):
    runs = []
    for i in range(2):  # two empty caches, one seed: the same schedules and cycles
        monkeypatch.setenv(CACHE_ENV, str(tmp_path / f"cache{i}"))
        runs.append(_deploy(capsys, tmp_path, mlp, "--seed", 3))
    a, b = runs
    log = tmp_path / "cache0" / f"deploy-{HW.target_model}.jsonl"
    assert a["tuning"]["log"] == str(log) and log.is_file()
    assert a["tuning"]["workloads"] == 2 and a["tuning"]["known"] == 0
    assert 2 <= a["tuning"]["trials"] <= a["tuning"]["requested"] == 40
    assert a["tuning"]["trials"] == len(log.read_text().splitlines())
    assert [c["source"] for c in a["offloaded"]] == ["tuned", "tuned"]
    assert [(c["schedule"], c["cycles"]) for c in a["offloaded"]] == \
        [(c["schedule"], c["cycles"]) for c in b["offloaded"]]
    assert a["vta_cycles"] == b["vta_cycles"]
    # each layer's cycles with the default schedule, and the total
    assert all(c["default_cycles"] > 0 for c in a["offloaded"])
    assert a["default_cycles"] == sum(c["default_cycles"] for c in a["offloaded"])
    # the default schedule is each study's first trial: tuning never ends above it
    records = [json.loads(line) for line in log.read_text().splitlines()]
    for study in {r["study"] for r in records}:
        mine = [r for r in records if r["study"] == study]
        assert min(r["cycles"] for r in mine) <= mine[0]["cycles"]
    # again on the same cache: nothing to tune, the cache's records
    again = _deploy(capsys, tmp_path, mlp, "--seed", 3)
    assert again["tuning"]["workloads"] == 0 and again["tuning"]["known"] == 2
    assert again["tuning"]["trials"] == 0
    assert [c["source"] for c in again["offloaded"]] == ["log", "log"]
    assert again["vta_cycles"] == b["vta_cycles"]


def test_the_report_says_what_was_tuned_and_the_default_schedules_cycles(mlp, capsys,
                                                                         tmp_path):
    status = main(["deploy", str(mlp), "--output", str(tmp_path / "y.npy")])
    out, _ = capsys.readouterr()
    assert status == 0
    assert "default schedule" in out.splitlines()[3]  # the table's header
    assert "with the default schedules: " in out
    line = next(t for t in out.splitlines() if t.startswith("tuning: "))
    assert "over 2 new workload(s)" in line and str(cache_log(HW)) in line


def test_tune_0_tunes_nothing_and_takes_the_cost_models_pick(mlp, capsys, tmp_path):
    d = _deploy(capsys, tmp_path, mlp, "--tune", 0)
    # no log, no journal: what the cache holds is TVM's build of the CPU's part alone
    assert d["tuning"] is None and [p.name for p in cache_dir().iterdir()] == ["cpu"]
    assert [c["source"] for c in d["offloaded"]] == ["fallback", "fallback"]
    assert all("the cost model's pick" in c["provenance"] for c in d["offloaded"])


def test_the_fallback_is_the_cost_models_best_legal_schedule_not_the_first():
    wl = GemmWorkload(1, 64, 32)
    builder = LayerBuilder(HW)  # no log, no tuning
    with builder:
        programs = builder.programs(wl, (wl.epilogue,), False)
    template = get_template(wl, HW)
    best = template.to_schedule(warm_starts(template)[0])
    assert programs.passes[0].schedule == best == cost_model_pick(wl, HW, False).schedule
    assert best != default_schedule(wl, HW)
    assert programs.source == "fallback" and "the cost model's pick" in programs.describe()
    # legal, and faster here than the template's default
    assert score(wl, best, HW).cycles < score(wl, default_schedule(wl, HW), HW).cycles \
        == programs.default_cycles


def test_the_given_log_wins_over_the_cache(mlp, capsys, tmp_path):
    first = _deploy(capsys, tmp_path, mlp)  # fills the cache log with tuned records
    workloads = [c["workload"] for c in first["offloaded"]]
    # a log holding one of its workloads with one trial: the default schedule only
    record = json.loads(cache_log(HW).read_text().splitlines()[0])
    log = tmp_path / "given.jsonl"
    tune(workload_from(record), HW, trials=1, seed=0, log=log, bias=record["bias"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FallbackWarning)
        d = _deploy(capsys, tmp_path, mlp, "--log", log)
    given = [c for c in d["offloaded"] if c["source"] == "log" and
             c["provenance"] == f"{log}:1"]
    assert len(given) == 1 and given[0]["workload"] in workloads
    assert Schedule.from_dict(json.loads(log.read_text())["schedule"]).short() == \
        given[0]["schedule"]
    assert d["tuning"]["workloads"] == 0  # the other is in the cache already


def test_two_deploys_sharing_the_cache_log_lose_and_duplicate_nothing(tmp_path):
    """Two processes tune the same workloads into one log at once (the studies in the
    journal beside it): every trial either ran is one record, and no config of a study is
    recorded twice."""
    log = tmp_path / "shared.jsonl"
    script = (
        "import json, sys\n"
        "from simulator.hardware import PRESETS\n"
        "from vtatune.deploy import tune_workloads\n"
        "from vtatune.networks import DEFAULT_PATIENCE\n"
        "from vtatune.workloads import GemmWorkload\n"
        "problems = [(GemmWorkload(16, 64, 64), False, 1), (GemmWorkload(16, 128, 64), True, 2),"
        " (GemmWorkload(32, 64, 32), False, 1)]\n"
        "t = tune_workloads(problems, PRESETS['pynq'], trials=8, log=sys.argv[1],"
        " seed=int(sys.argv[2]), patience=DEFAULT_PATIENCE)\n"
        "print(json.dumps(t.as_dict()))\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", script, str(log), str(seed)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for seed in (1, 2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    ran = [json.loads(o)["trials"] for o, _ in outs]
    records = [json.loads(line) for line in log.read_text().splitlines()]
    keys = [(r["study"], json.dumps(r["schedule"], sort_keys=True)) for r in records]
    assert len(set(keys)) == len(keys)  # nothing twice
    assert sum(ran) == len(records)  # nothing lost
    assert len({r["study"] for r in records}) == 3
