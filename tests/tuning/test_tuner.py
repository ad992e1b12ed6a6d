"""The tuner: trial accounting, resume, reproducibility, --jobs, CLI."""

import json

import optuna
import pytest

import vtatune.scoring as scoring_module
from search_spaces import get_template
from simulator.hardware import DEFAULT
from vtatune.cli import main
from vtatune.records import read_records
from vtatune.tuning import tune
from vtatune.workloads import Conv2dWorkload, GemmWorkload

pytestmark = pytest.mark.usefixtures("compiled_engines")  # exact CLI output: no first-run notice

CONV = Conv2dWorkload(1, 8, 8, 32, 32, 3, 1, 1)  # mostly illegal space, fast to simulate
TINY = GemmWorkload(1, 64, 64)  # a legal space of a few dozen configs


@pytest.fixture
def calls(monkeypatch):
    """Every schedule the tuner simulates (the tutorial baseline is not a trial)."""
    seen = []
    real = scoring_module.score

    def counting(workload, schedule, hw, **kw):
        seen.append(schedule)
        return real(workload, schedule, hw, **kw)

    monkeypatch.setattr(scoring_module, "score", counting)
    return seen


def ok_configs(log):
    return [r["config"] for _, r in read_records(log) if r["status"] == "ok"]


def test_trials_are_distinct_legal_simulations(tmp_path, calls):
    r = tune(CONV, trials=12, seed=0, log=tmp_path / "c.jsonl")
    tpl = get_template(CONV, DEFAULT)
    assert r.trials == r.new_trials == len(calls) == 12
    assert len(set(calls)) == 12
    assert all(tpl.legal(tpl.from_schedule(s)) for s in calls)
    assert r.asks == 12 + r.illegal_asks + r.duplicate_asks
    # The study was seeded with the default schedule.
    assert calls[0] == tpl.to_schedule(tpl.default_config())
    assert r.best_cycles == min(json.loads(line)["cycles"] for line in
                                (tmp_path / "c.jsonl").read_text().splitlines()
                                if json.loads(line)["status"] == "ok")


def test_resume_does_not_resimulate(tmp_path, calls):
    log = tmp_path / "r.jsonl"
    tune(CONV, trials=5, seed=1, log=log)
    assert len(calls) == 5
    r = tune(CONV, trials=8, seed=1, log=log, resume=True)
    assert len(calls) == 8 and r.resumed and r.trials == 8 and r.new_trials == 3
    r = tune(CONV, trials=8, log=log, resume=True)
    assert len(calls) == 8 and r.new_trials == 0 and r.best_cycles is not None
    assert len({json.dumps(c, sort_keys=True) for c in ok_configs(log)}) == 8


def test_seed_reproducible(tmp_path):
    a = tune(CONV, trials=10, seed=7, log=tmp_path / "a.jsonl")
    b = tune(CONV, trials=10, seed=7, log=tmp_path / "b.jsonl")
    assert ok_configs(tmp_path / "a.jsonl") == ok_configs(tmp_path / "b.jsonl")
    assert a.best_cycles == b.best_cycles


def test_small_space_is_exhausted(tmp_path):
    r = tune(TINY, trials=500, seed=0, log=tmp_path / "t.jsonl")
    n = get_template(TINY, DEFAULT).count_legal()
    assert r.exhausted and r.trials == n == len(ok_configs(tmp_path / "t.jsonl"))


def test_a_converged_sampler_does_not_spin(tmp_path):
    """CMA-ES settles on one point and keeps proposing it: once it has been stuck, each
    few wasted asks buy a fresh legal config (not STUCK asks per trial)."""
    from vtatune.tuning import STUCK

    n = get_template(TINY, DEFAULT).count_legal()
    r = tune(TINY, trials=n, sampler="cmaes", seed=0, log=tmp_path / "c.jsonl")
    assert r.trials == n
    assert r.illegal_asks + r.duplicate_asks <= STUCK + 8 * n  # was ~STUCK per trial


def test_bruteforce_serial_equals_jobs(tmp_path):
    def content(log):
        return sorted(json.dumps([r["config"], r["cycles"], r["counters"]], sort_keys=True)
                      for _, r in read_records(log) if r["status"] == "ok")

    serial = tune(TINY, trials=20, sampler="bruteforce", log=tmp_path / "s.jsonl")
    par = tune(TINY, trials=20, sampler="bruteforce", jobs=2, log=tmp_path / "p.jsonl")
    assert serial.trials == par.trials == 20 and serial.illegal_asks == 0
    assert content(tmp_path / "s.jsonl") == content(tmp_path / "p.jsonl")


def test_interrupt_keeps_finished_trials(tmp_path, monkeypatch):
    real = scoring_module.score
    n = []

    def interrupted(*a, **kw):
        n.append(1)
        if len(n) == 4:
            raise KeyboardInterrupt
        return real(*a, **kw)

    monkeypatch.setattr(scoring_module, "score", interrupted)
    log = tmp_path / "i.jsonl"
    r = tune(CONV, trials=10, seed=0, log=log)
    assert r.interrupted and r.trials == 3 and len(ok_configs(log)) == 3
    storage = optuna.storages.journal.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(log.with_suffix(".journal"))))
    study = optuna.load_study(study_name=r.study, storage=storage)
    assert not study.get_trials(states=(optuna.trial.TrialState.RUNNING,))


def test_main_command_ends_with_table(tmp_path, capsys):
    log = tmp_path / "main.jsonl"
    assert main(["conv2d", "--trials", "2", "--log", str(log), "--quiet"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:4] == ["workload", "trials", "best", "cycles"]
    assert out[1].startswith("tutorial") and out[1].split()[1] == "2"
    assert "vs tutorial" in out[0] and out[1].endswith("x")
    assert out[-4] == f"log       {log}"
    assert out[-3] == f"replay    python -m vtatune replay {log} --best"
    assert [line.split()[0] for line in out[-2:]] == ["build", "export"]


@pytest.mark.parametrize("argv, message", [
    (["conv2d", "--sampler", "annealing"], "unknown sampler 'annealing'"),
    (["conv2d", "--workload", "C99"], "unknown conv2d workload 'C99'"),
    (["gemm", "--trials", "0"], "--trials must be at least 1"),
    (["conv2d", "--hw", "missing.json"], "cannot read hardware config missing.json"),
    (["gemm", "--storage", "nosuchscheme"], "bad storage URL"),
    (["gemm", "--storage", "nosuchdb://x"], "cannot open storage nosuchdb://x"),
    (["conv2d", "--network", "resnet18", "--workload", "C2"], "--network tunes"),
])
def test_bad_input_one_line_exit_2(tmp_path, capsys, argv, message):
    code = main([*argv, "--log", str(tmp_path / "x.jsonl")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_resume_refuses_another_workloads_log(tmp_path, capsys):
    log = tmp_path / "other.jsonl"
    tune(TINY, trials=2, seed=0, log=log)
    code = main(["gemm", "--in-channels", "128", "--out-channels", "128", "--resume",
                 "--log", str(log), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "cannot resume" in err and len(err.strip().splitlines()) == 1


def test_gp_without_torch_is_one_line(tmp_path, capsys):
    pytest.importorskip("optuna")
    try:
        import torch  # noqa: F401
    except ImportError:
        assert main(["gemm", "--sampler", "gp", "--log", str(tmp_path / "g.jsonl")]) == 2
        assert "pip install 'vtatune[gp]'" in capsys.readouterr().err
    else:  # pragma: no cover - torch present
        pytest.skip("torch is installed")


@pytest.mark.parametrize("sampler", ["random", "cmaes", "nsga2"])
def test_other_samplers_run(tmp_path, sampler):
    r = tune(CONV, trials=4, seed=0, sampler=sampler, log=tmp_path / f"{sampler}.jsonl")
    assert r.trials == 4 and r.best_cycles


@pytest.mark.parametrize("sampler", ["guided", "cmaes", "tpe"])
def test_trials_show_tile_sizes_where_params_are_indices(sampler, tmp_path):
    """optuna-dashboard and trials_dataframe() show the params, which are indices into the
    tile choices for guided and cmaes: each trial also holds the size as ``knob:<name>``."""
    from vtatune.tuning import KNOB_ATTR

    log = tmp_path / "k.jsonl"
    r = tune(CONV, trials=6, sampler=sampler, seed=0, log=log)
    tpl = get_template(CONV, DEFAULT)
    storage = optuna.storages.journal.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(log.with_suffix(".journal"))))
    study = optuna.load_study(study_name=r.study, storage=storage)
    tiles = [k.name for k in tpl.knobs if k.name.startswith("tile_") and len(k.choices) > 1]
    checked = 0
    for t in study.get_trials(states=(optuna.trial.TrialState.COMPLETE,)):
        for name in tiles:
            if sampler == "tpe":  # the value encoding: the params are the sizes
                assert KNOB_ATTR + name not in t.user_attrs
                assert t.params[name] == t.user_attrs["config"][name]
                continue
            size = t.user_attrs[KNOB_ATTR + name]
            assert size == tpl.knob(name).choices[t.params[name]]
            assert size == t.user_attrs["config"][name]
            checked += 1
    assert checked >= 6 * len(tiles) or sampler == "tpe"
    frame = study.trials_dataframe()
    if sampler != "tpe":
        assert f"user_attrs_{KNOB_ATTR}tile_h" in frame.columns
