"""The first run after install: the helper process compiling the guided sampler's engines
(vtatune.tuning._warmup) starts only from the command line and only on a cold cache, and
nothing it does or fails to do changes the command's run."""

from __future__ import annotations

import json
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest

from simulator import jit
from simulator.hardware import DEFAULT
from vtatune.cli import main
from vtatune.tuning import _search, _study, _warmup, tune
from vtatune.workloads import resolve

pytestmark = pytest.mark.usefixtures("compiled_engines")

ROOT = Path(__file__).resolve().parents[2]
CONV2D = resolve("conv2d")[0]  # the main command's workload (the tutorial's)
REAL_POPEN = subprocess.Popen
CORE_FREE = _warmup._core_free
SAMPLER_ENGINES = [f"{_warmup.SAMPLER_ENGINES}.{name}"
                   for name in ("_space_table", "_model", "_log_pdf", "_draw", "_log_ratio")]


class Spawned:
    """Stands in for ``subprocess.Popen`` and records the commands it was asked to start."""

    def __init__(self) -> None:
        self.commands: list[list[str]] = []

    def __call__(self, command, **_):
        self.commands.append(command)
        return REAL_POPEN([sys.executable, "-c", "pass"], stdin=subprocess.PIPE)


@pytest.fixture
def spawned(monkeypatch):
    """A fresh process's state (no helper started yet) with Popen recorded."""
    recorder = Spawned()
    monkeypatch.setattr(_warmup, "_started", [])
    monkeypatch.setattr(_warmup, "_core_free", lambda: True)  # whatever the machine's load
    monkeypatch.setattr(_warmup.subprocess, "Popen", recorder)
    return recorder


def cold(monkeypatch, missing: bool) -> None:
    monkeypatch.setattr(jit, "uncached", lambda module: [f"{module}._model"] if missing else [])


def records(log: Path) -> list[dict]:
    """A log's records without what differs between two runs (time stamps, study ids)."""
    out = []
    for line in log.read_text().splitlines():
        r = json.loads(line)
        out.append({k: v for k, v in r.items() if k not in ("study", "study_id", "time")
                    and "time" not in k and "seconds" not in k})
    return out


def table(out: str, name: str) -> list[str]:
    """The command's table without what differs between two runs (the log's and journal's
    names, the study id, the wall time)."""
    return [re.sub(r"\(id [0-9a-f]+\)", "(id)", ln.replace(name, "LOG"))
            for ln in out.splitlines() if "time" not in ln.lower() and " s wall" not in ln]


def run_conv2d(log: Path, *extra: str) -> int:
    return main(["conv2d", "--trials", "16", "--seed", "1", "--quiet", "--log", str(log),
                 *extra])


def test_started_once_on_a_cold_cache(spawned, monkeypatch):
    cold(monkeypatch, True)
    wl = CONV2D
    assert _warmup.start_sampler_warmup(wl, DEFAULT, space="full", bias=False) is not None
    assert _warmup.start_sampler_warmup(wl, DEFAULT, space="full", bias=False) is None
    assert spawned.commands == [[sys.executable, "-m", "vtatune.tuning._warmup"]]


def test_not_started_on_a_warm_cache(spawned, monkeypatch):
    cold(monkeypatch, False)
    assert _warmup.start_sampler_warmup(CONV2D, DEFAULT, space="full",
                                        bias=False) is None
    assert spawned.commands == []


def cpu_times(monkeypatch, idle: dict[int, float] | None) -> None:
    """``/proc/stat`` as it reads when each CPU was idle ``idle[cpu]`` of the window (100
    ticks each), or unreadable (None); the window is not waited for."""
    ticks = iter([{cpu: (1000, 5000) for cpu in idle or ()},
                  {cpu: (1000 + round(100 * f), 5100) for cpu, f in (idle or {}).items()}])
    monkeypatch.setattr(_warmup, "_cpu_times", lambda: next(ticks) if idle else None)
    monkeypatch.setattr(_warmup.time, "sleep", lambda _: None)


@pytest.mark.parametrize(("cores", "idle", "started"), [
    ({0, 1}, {0: 1.0, 1: 0.95}, True), ({0, 1}, {0: 1.0, 1: 0.4}, False),
    ({0, 1}, {0: 0.0, 1: 0.0}, False), ({0}, {0: 1.0}, False),
    ({1, 2}, {0: 0.0, 1: 0.8, 2: 0.8}, True), ({0, 1}, {0: 0.8, 1: 0.8, 2: 1.0}, True),
    ({0, 1}, {0: 0.7, 1: 0.7, 2: 1.0}, False)])
def test_started_only_with_a_core_free(spawned, monkeypatch, cores, idle, started):
    """On a busy machine the helper would take the command's core (issue 41 item 14): it
    starts when one and a half of the cores the command may use were idle while it looked,
    whatever the last minute's load average (which remembers the runs that just ended)."""
    cold(monkeypatch, True)
    monkeypatch.setattr(_warmup, "_core_free", CORE_FREE)  # the check itself, this time
    monkeypatch.setattr(_warmup.os, "sched_getaffinity", lambda _: cores, raising=False)
    monkeypatch.setattr(_warmup.os, "getloadavg", lambda: (9.0, 9.0, 9.0))
    cpu_times(monkeypatch, idle)
    helper = _warmup.start_sampler_warmup(CONV2D, DEFAULT, space="full", bias=False)
    assert (helper is not None, len(spawned.commands)) == (started, int(started))


@pytest.mark.parametrize(("cores", "load", "started"), [
    ({0, 1}, 0.8, True), ({0, 1}, 1.0, False), ({0, 1}, 3.5, False), ({0}, 0.0, False),
    ({0, 1, 2}, 1.9, True), (set(range(8)), 6.5, True)])
def test_without_proc_stat_the_load_average_decides(spawned, monkeypatch, cores, load,
                                                      started):
    cold(monkeypatch, True)
    monkeypatch.setattr(_warmup, "_core_free", CORE_FREE)
    monkeypatch.setattr(_warmup.os, "sched_getaffinity", lambda _: cores, raising=False)
    monkeypatch.setattr(_warmup.os, "getloadavg", lambda: (load, load, load))
    cpu_times(monkeypatch, None)
    helper = _warmup.start_sampler_warmup(CONV2D, DEFAULT, space="full", bias=False)
    assert (helper is not None, len(spawned.commands)) == (started, int(started))


def test_cpu_times_read_this_machines_cpus():
    times = _warmup._cpu_times()
    if times is None:
        pytest.skip("no /proc/stat here")
    assert set(os.sched_getaffinity(0)) <= times.keys()
    assert all(0 <= idle <= total for idle, total in times.values())


def test_the_tuning_command_starts_it_library_use_other_samplers_and_jobs_do_not(
        spawned, monkeypatch, tmp_path, capsys):
    cold(monkeypatch, True)
    tune("conv2d", trials=4, seed=1, log=tmp_path / "api.jsonl")
    assert spawned.commands == []
    assert run_conv2d(tmp_path / "tpe.jsonl", "--sampler", "tpe") == 0
    assert spawned.commands == []
    assert run_conv2d(tmp_path / "jobs.jsonl", "--jobs", "2") == 0
    assert spawned.commands == []
    assert run_conv2d(tmp_path / "cli.jsonl") == 0
    assert spawned.commands == [[sys.executable, "-m", "vtatune.tuning._warmup"]]
    capsys.readouterr()


@pytest.mark.parametrize("helper", [
    [sys.executable, "-c", "import sys; sys.stdin.close(); sys.exit(3)"],  # fails at once
    [sys.executable, "-c", "import time; time.sleep(30)"],  # never reads its problem
    ["/nonexistent/python"],  # cannot start
])
def test_a_failing_helper_leaves_the_command_intact(helper, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(_warmup, "_started", [])
    cold(monkeypatch, False)
    assert run_conv2d(tmp_path / "alone.jsonl") == 0
    alone = capsys.readouterr().out
    cold(monkeypatch, True)
    monkeypatch.setattr(_warmup, "_core_free", lambda: True)  # started however busy it is
    monkeypatch.setattr(_warmup, "_helper_command", lambda: helper)
    assert run_conv2d(tmp_path / "helped.jsonl") == 0
    helped = capsys.readouterr().out
    for p in _warmup._started:
        if p is not None:
            p.kill()
            p.wait()
    assert records(tmp_path / "helped.jsonl") == records(tmp_path / "alone.jsonl")
    assert table(helped, "helped") == table(alone, "alone")


def test_the_cost_models_table_waits_for_the_first_trial(tmp_path, monkeypatch):
    """The guided sampler's cost model (its table, the warm starts) is computed once the
    default schedule is asked, after that trial's engines ran: on the first run after
    install the helper compiles the cost model meanwhile (issue 41 item 14). The trials
    are the same: the default schedule first, then the warm starts."""
    events: list[str] = []
    score, shape_costs = _search.timed_score, _search.ShapeCosts

    def scored(*args):
        events.append("score")
        return score(*args)

    def costs(template):
        events.append("cost model")
        return shape_costs(template)

    monkeypatch.setattr(_search, "timed_score", scored)
    monkeypatch.setattr(_search, "ShapeCosts", costs)
    tune(CONV2D, trials=3, seed=1, log=tmp_path / "t.jsonl")
    assert events == ["score", "cost model", "score", "score"]
    # a study that holds its default schedule already binds the sampler at once
    events.clear()
    tune(CONV2D, trials=4, seed=1, log=tmp_path / "t.jsonl", resume=True)
    assert events == ["cost model", "score"]


def test_the_stand_in_study_leaves_the_tuners_scoring_as_it_was(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scoring = _search.timed_score, _study._tutorial
    _warmup.compile_sampler(CONV2D, DEFAULT, space="full", bias=False)
    assert (_search.timed_score, _study._tutorial) == scoring
    assert list(tmp_path.iterdir()) == []  # its study and log were temporary


def uncached_in_fresh_process(cache: Path, module: str = _warmup.SAMPLER_ENGINES
                              ) -> list[str]:
    code = (f"import json, {module}\n"
            "from simulator.jit import uncached\n"
            f"print(json.dumps(uncached({module!r})))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, text=True,
                         capture_output=True, env={**os.environ, "NUMBA_CACHE_DIR": str(cache)})
    return json.loads(out.stdout)


def test_interpreted_functions_run_as_python(monkeypatch):
    module = type(sys)("plain_engine")
    monkeypatch.setitem(sys.modules, "plain_engine", module)
    monkeypatch.setattr(jit, "_PENDING", {})

    def twice(x):
        return 2 * x

    twice.__module__ = "plain_engine"
    module.twice = jit.njit(cache=True)(twice)
    jit.interpret("plain_engine")
    assert module.twice is twice and module.twice(21) == 42
    assert jit._PENDING == {}  # and numba never sees it


def test_uncached_reads_numbas_own_cache_location(tmp_path):
    assert uncached_in_fresh_process(tmp_path / "empty") == SAMPLER_ENGINES


@pytest.mark.slow
def test_the_helper_fills_numbas_cache_with_the_sampler(tmp_path):
    cache = tmp_path / "cache"
    problem = pickle.dumps((CONV2D, DEFAULT, "full", False))
    subprocess.run(_warmup._helper_command(), input=problem, cwd=tmp_path, check=True,
                   env={**os.environ, "NUMBA_CACHE_DIR": str(cache),
                        "PYTHONPATH": str(ROOT)})
    assert uncached_in_fresh_process(cache) == []
    assert uncached_in_fresh_process(cache, "vtatune.lowering._runtime") == []  # the executor
    assert uncached_in_fresh_process(cache, "vtatune.tuning.cost_model") == []
    assert uncached_in_fresh_process(cache, "simulator.counters") == []  # fsim's counters
    assert uncached_in_fresh_process(cache, _warmup.QUEUE_PROGRAM) == [  # run, not compiled
        f"{_warmup.QUEUE_PROGRAM}._queue_tables"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]  # nothing else written
