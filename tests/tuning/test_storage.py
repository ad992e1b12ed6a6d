"""Shared studies: several workers on one study (journal, PostgreSQL, SQLite), and faults
(killed workers, a stopped database, a full disk, a stale lock, a torn journal)."""

from __future__ import annotations

import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from tests.tuning import _postgres
from vtatune.cli import main
from vtatune.records import LogError, RecordWriter, read_records
from vtatune.tuning import storages as _storage
from vtatune.tuning import tune
from vtatune.tuning.storages import JournalFile, StorageError, open_storage, resolve_url
from vtatune.workloads import Conv2dWorkload

pytestmark = pytest.mark.usefixtures("compiled_engines")  # exact CLI output: no first-run notice

ROOT = Path(__file__).resolve().parents[2]
CONV = Conv2dWorkload(1, 8, 8, 32, 32, 3, 1, 1)  # ~20k legal configs, ~10 ms a simulation
pytestmark = pytest.mark.filterwarnings("ignore:Heartbeat of storage")  # tests ask by hand
SHAPE = ["--height", "8", "--width", "8", "--in-channels", "32", "--out-channels", "32"]


@pytest.fixture(scope="module")
def pg():
    try:
        server = _postgres.start_server()
    except RuntimeError as exc:
        pytest.skip(f"no PostgreSQL server for the storage tests: {exc} "
                    "(apt-get install -y postgresql)")
    yield server
    server.remove()


_dbs = iter(range(1000))


def fresh_db(server) -> str:
    return server.createdb(f"t{next(_dbs)}")


def env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


def worker(tmp_path: Path, log: str, trials: int, storage: str | None = None,
           **extra: str) -> subprocess.Popen:
    argv = [sys.executable, "-m", "vtatune", "conv2d", *SHAPE, "--trials", str(trials),
            "--log", str(tmp_path / log), "--quiet"]
    if storage:
        argv += ["--storage", storage]
    return subprocess.Popen(argv, cwd=tmp_path, env=env(**extra), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


#: A worker that imports the command line, says it is ready and waits for the go, then
#: holds its first trial until every worker has reached its own (or 30 s passed): the
#: workers' runs then overlap however fast each one is (on an idle machine a worker's share
#: of 30 trials takes a fraction of a second, less than the spread of the processes'
#: start-up after the go: opening the study, loading the engines). The hold is in
#: ``Search._ask``, which every trial passes: the guided sampler (the default) creates its
#: trials in the storage directly, without ``optuna.Study.ask`` (holding that one left a
#: worker free to take all 30 trials before the others opened the study). Arguments: its
#: ready file, the go file, the number of workers, the command line.
_AT_THE_GO = """
import glob, os, runpy, sys, time
import vtatune.cli
from vtatune.tuning import Search
ready, go, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
_ask = Search._ask
def _ask_together(self, *args, **kwargs):
    if not os.path.exists(ready + ".asked"):  # its first trial
        open(ready + ".asked", "w").close()
        until = time.monotonic() + 30
        while (len(glob.glob(os.path.join(os.path.dirname(ready), "*.asked"))) < workers
               and time.monotonic() < until):
            time.sleep(0.005)
    return _ask(self, *args, **kwargs)
Search._ask = _ask_together
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.005)
sys.argv = ["vtatune", *sys.argv[4:]]
runpy.run_module("vtatune", run_name="__main__")
"""


def run_workers(tmp_path: Path, n: int, trials: int, storage: str | None, *,
                one_log: bool) -> list[tuple[int, str, str]]:
    go = tmp_path / "go"
    procs = []
    for i in range(n):
        argv = ["conv2d", *SHAPE, "--trials", str(trials), "--log",
                str(tmp_path / ("w.jsonl" if one_log else f"w{i}.jsonl")), "--quiet"]
        if storage:
            argv += ["--storage", storage]
        procs.append(subprocess.Popen(
            [sys.executable, "-c", _AT_THE_GO, str(tmp_path / f"ready{i}"), str(go), str(n),
             *argv],
            cwd=tmp_path, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True))
    deadline = time.monotonic() + 120
    while not all((tmp_path / f"ready{i}").exists() for i in range(n)) \
            and time.monotonic() < deadline and all(p.poll() is None for p in procs):
        time.sleep(0.01)
    go.touch()
    return [(p.wait(timeout=300), p.stdout.read(), p.stderr.read()) for p in procs]


def simulations(tmp_path: Path) -> tuple[int, int, set[str]]:
    """(simulated records, distinct configs, study ids) over every log in tmp_path."""
    configs: collections.Counter[str] = collections.Counter()
    ids = set()
    for log in tmp_path.glob("*.jsonl"):
        for _, r in read_records(log):
            ids.add(r["study_id"])
            if r["status"] != "illegal":
                configs[json.dumps(r["config"], sort_keys=True)] += 1
    return sum(configs.values()), len(configs), ids


def study_of(storage) -> optuna.Study:
    (summary,) = optuna.study.get_all_study_summaries(storage)
    return optuna.load_study(study_name=summary.study_name, storage=storage)


def check_shared_run(tmp_path, results, trials, storage):
    assert [code for code, _, _ in results] == [0] * len(results), results
    assert not any(err.strip() for _, _, err in results), results
    simulated, distinct, ids = simulations(tmp_path)
    assert len(ids) == 1  # one study, no "#2" split
    assert distinct >= trials
    assert simulated - distinct <= max(1, simulated // 100)  # the 1% duplicate goal
    study = study_of(storage)
    states = collections.Counter(t.state for t in study.trials)
    assert states[TrialState.RUNNING] == 0 and states[TrialState.WAITING] == 0
    ok = [t for t in study.trials if t.user_attrs.get("status") == "ok"]
    # the study's trials are the log's records: the same 1% goal (two workers can ask for
    # the same config in the instant before either's trial is visible to the other)
    assert len(ok) - len({json.dumps(t.user_attrs["config"], sort_keys=True)
                          for t in ok}) <= max(1, len(ok) // 100)
    # every worker's table counts the study's total, and says others contributed
    assert sum("other workers added" in out for _, out, _ in results) >= 1
    return simulated, distinct


# --- several workers ------------------------------------------------------------------------
def test_four_workers_share_the_journal_and_one_log(tmp_path):
    results = run_workers(tmp_path, 4, 30, None, one_log=True)
    store = open_storage(None, tmp_path / "w.jsonl")
    check_shared_run(tmp_path, results, 30, store.storage)


def test_four_workers_on_an_empty_postgres_database(tmp_path, pg):
    url = fresh_db(pg)  # empty: the four create the schema concurrently
    results = run_workers(tmp_path, 4, 30, url, one_log=False)
    check_shared_run(tmp_path, results, 30, open_storage(url, tmp_path / "x").storage)


def test_four_workers_on_an_empty_sqlite_file(tmp_path):
    url = f"sqlite:///{tmp_path / 'tune.db'}"
    results = run_workers(tmp_path, 4, 20, url, one_log=False)
    check_shared_run(tmp_path, results, 20, open_storage(url, tmp_path / "x").storage)


def test_workers_in_turn_join_one_study_and_trials_is_the_total(tmp_path):
    log = tmp_path / "c.jsonl"
    a = tune(CONV, trials=6, seed=0, log=log)
    b = tune(CONV, trials=6, seed=1, log=log)  # no --resume: joins, nothing left to do
    assert a.study == b.study and a.study_id == b.study_id and b.new_trials == 0
    assert any("already holds 6 trials" in n for n in b.notes)
    assert any("joined the existing study" in n for n in b.notes)
    c = tune(CONV, trials=9, log=log, resume=True)
    assert c.trials == 9 and c.new_trials == 3 and c.study_id == a.study_id
    ids = {r["study_id"] for _, r in read_records(log)}
    assert ids == {a.study_id}


def test_main_command_run_twice_says_so(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["conv2d", *SHAPE, "--trials", "3", "--quiet", "--log", "m.jsonl"]) == 0
    capsys.readouterr()
    assert main(["conv2d", *SHAPE, "--trials", "3", "--quiet", "--log", "m.jsonl"]) == 0
    out = capsys.readouterr().out
    assert "already holds 3 trials (--trials 3): nothing to simulate" in out
    assert "search    0 simulated this run" in out


# --- the log is the source of truth ---------------------------------------------------------
def test_resume_without_journal_starts_from_the_log(tmp_path, monkeypatch):
    log = tmp_path / "r.jsonl"
    first = tune(CONV, trials=6, seed=0, log=log)
    log.with_suffix(".journal").unlink()
    calls = []
    import vtatune.scoring as scoring_module

    real = scoring_module.score
    monkeypatch.setattr(scoring_module, "score",
                        lambda *a, **k: calls.append(a) or real(*a, **k))
    r = tune(CONV, trials=8, log=log, resume=True)
    assert r.trials == 8 and r.new_trials == 2 and len(calls) == 2
    assert r.study_id != first.study_id
    assert any("added 6 trials from" in n for n in r.notes)
    assert r.best_cycles <= first.best_cycles


def test_fresh_study_over_an_old_log_says_so(tmp_path):
    log = tmp_path / "r.jsonl"
    tune(CONV, trials=4, seed=0, log=log)
    log.with_suffix(".journal").unlink()
    r = tune(CONV, trials=2, seed=3, log=log)
    assert any("also holds" in n and "another study" in n for n in r.notes)
    assert len({r["study_id"] for _, r in read_records(log)}) == 2


def test_trials_carry_config_status_and_cycles(tmp_path):
    log = tmp_path / "a.jsonl"
    r = tune(CONV, trials=4, seed=0, log=log)
    study = study_of(open_storage(None, log).storage)
    df = study.trials_dataframe()
    ok = df[df["user_attrs_status"] == "ok"]
    assert len(ok) == 4 and ok["user_attrs_cycles"].min() == r.best_cycles
    logged = {json.dumps(r["config"], sort_keys=True) for _, r in read_records(log)
              if r["status"] == "ok"}
    assert {json.dumps(c, sort_keys=True) for c in ok["user_attrs_config"]} == logged
    assert study.user_attrs["vtatune"]["id"] == r.study_id


def test_old_log_records_without_study_id_still_resume(tmp_path):
    log = tmp_path / "old.jsonl"
    tune(CONV, trials=5, seed=0, log=log)
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    for rec in lines:
        del rec["study_id"]
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    log.with_suffix(".journal").unlink()
    r = tune(CONV, trials=5, log=log, resume=True)
    assert r.trials == 5 and r.new_trials == 0


# --- faults ---------------------------------------------------------------------------------
def test_a_dead_workers_trial_is_failed_and_its_config_freed(tmp_path, monkeypatch):
    monkeypatch.setenv("VTATUNE_HEARTBEAT_SECONDS", "1")
    log = tmp_path / "h.jsonl"
    tune(CONV, trials=2, seed=0, log=log)
    # A worker that asked a trial and died: RUNNING, heartbeat recorded once.
    store = open_storage(None, log)
    study = study_of(store.storage)
    trial = study.ask()
    store.storage.record_heartbeat(trial._trial_id)
    store.close()
    time.sleep(3.3)  # the grace period: three intervals
    r = tune(CONV, trials=3, log=log, resume=True)
    states = collections.Counter(t.state for t in study_of(open_storage(None, log).storage)
                                 .trials)
    assert r.new_trials == 1 and states[TrialState.RUNNING] == 0
    assert states[TrialState.FAIL] == 1


def test_a_dead_workers_slot_is_taken_once_this_worker_fails_it(tmp_path, monkeypatch):
    """A dead worker's RUNNING trial counts towards the study's total until it is failed;
    the worker that fails it (its own write: no other worker wrote) must see it freed, not
    wait for it forever."""
    monkeypatch.setenv("VTATUNE_HEARTBEAT_SECONDS", "0.2")
    log = tmp_path / "d.jsonl"
    tune(CONV, trials=2, seed=0, log=log)
    store = open_storage(None, log)
    study = study_of(store.storage)
    done = study.trials[0]
    study.add_trial(optuna.trial.create_trial(state=TrialState.RUNNING, params=done.params,
                                              distributions=done.distributions))
    store.close()

    def too_long(*_):
        raise TimeoutError("the worker waits for a trial it failed itself")

    old = signal.signal(signal.SIGALRM, too_long)
    signal.alarm(30)
    try:
        r = tune(CONV, trials=3, log=log)  # needs the dead trial's slot
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert r.trials == 3 and r.new_trials == 1


def test_stale_lock_of_a_killed_process_is_no_wait(tmp_path):
    path = tmp_path / "j.journal"
    JournalFile(path).close()
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from vtatune.tuning.storages import JournalFile\n"
         f"j = JournalFile({str(path)!r})\n"
         "with j.batch():\n"
         "    j.append_logs([{'op_code': 0, 'worker_id': 'w', 'study_name': 's',"
         " 'directions': [1]}])\n"
         "    print('locked', flush=True); time.sleep(60)\n"],
        env=env(), stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    t0 = time.monotonic()
    j = JournalFile(path)
    j.append_logs([{"op_code": 0, "worker_id": "w2", "study_name": "t", "directions": [1]}])
    assert time.monotonic() - t0 < 1.0
    assert [x["study_name"] for x in j.read_logs(0)] == ["t"]  # the dead batch was never written


def test_torn_last_journal_record_is_repaired_once(tmp_path):
    log = tmp_path / "t.jsonl"
    tune(CONV, trials=3, seed=0, log=log)
    journal = log.with_suffix(".journal")
    good = journal.read_bytes()
    journal.write_bytes(good + b'{"op_code":5,"worker_id":"x","tri')
    with pytest.warns(_storage.StorageWarning, match="removed a torn last record"):
        r = tune(CONV, trials=5, log=log, resume=True)
    assert r.trials == 5 and r.new_trials == 2
    assert journal.read_bytes().startswith(good)
    assert tune(CONV, trials=5, log=log, resume=True).new_trials == 0


@pytest.mark.parametrize("content", [bytes(range(256)) * 4, b"not a journal\n"])
def test_a_file_that_is_no_journal_is_one_line(tmp_path, capsys, content):
    bad = tmp_path / "bad.bin"
    bad.write_bytes(content)
    code = main(["conv2d", *SHAPE, "--trials", "2", "--quiet", "--log",
                 str(tmp_path / "l.jsonl"), "--storage", f"journal:{bad}"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "not a readable Optuna journal" in err
    assert bad.read_bytes() == content


def _short_write(real):
    def write(fd, data):
        return real(fd, data[: len(data) // 2])
    return write


def test_short_log_write_is_rolled_back(tmp_path, monkeypatch):
    log = tmp_path / "s.jsonl"
    with RecordWriter(log) as w:
        w.write({"schema": 1, "status": "ok", "cycles": 1})
        before = log.read_bytes()
        monkeypatch.setattr(os, "write", _short_write(os.write))
        with pytest.raises(LogError, match="No space left on device"):
            w.write({"schema": 1, "status": "ok", "cycles": 2})
    assert log.read_bytes() == before


def test_short_journal_write_is_rolled_back(tmp_path, monkeypatch):
    path = tmp_path / "s.journal"
    j = JournalFile(path)
    j.append_logs([{"op_code": 0, "worker_id": "w", "study_name": "s", "directions": [1]}])
    before = path.read_bytes()
    monkeypatch.setattr(os, "write", _short_write(os.write))
    with pytest.raises(StorageError, match="cannot write journal"):
        j.append_logs([{"op_code": 0, "worker_id": "w", "study_name": "t", "directions": [1]}])
    assert path.read_bytes() == before


@pytest.fixture
def tiny_fs(tmp_path):
    mnt = tmp_path / "full"
    mnt.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs",
                                            str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a small tmpfs here (needs root); the injected short-write "
                    "tests cover the same path")
    yield mnt
    subprocess.run(["umount", str(mnt)], check=False)


def test_full_filesystem_is_one_line_and_resumable(tmp_path, tiny_fs, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    log = tiny_fs / "f.jsonl"
    code = main(["conv2d", *SHAPE, "--trials", "400", "--quiet", "--log", str(log)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "No space left on device" in err
    assert log.read_bytes().endswith(b"\n")
    kept = [r for _, r in read_records(log)]  # no warning: every line whole
    journal = log.with_suffix(".journal")
    shutil.move(log, tmp_path / "f.jsonl")
    shutil.move(journal, tmp_path / "f.journal")
    # When the journal filled first, the trial in flight stayed RUNNING: it is failed once
    # stale (three heartbeats), and its slot taken.
    monkeypatch.setenv("VTATUNE_HEARTBEAT_SECONDS", "0.5")
    r = tune(CONV, trials=len(kept) + 2, log=tmp_path / "f.jsonl", resume=True)
    assert r.trials == len([x for x in kept if x["status"] != "illegal"]) + 2 or \
        r.trials == len(kept) + 2


# --- storage URLs ---------------------------------------------------------------------------
def test_postgres_url_gets_an_installed_driver(monkeypatch):
    import importlib.util

    assert resolve_url("sqlite:///x.db") == "sqlite:///x.db"
    if importlib.util.find_spec("psycopg") is not None:
        assert resolve_url("postgresql://h/db") == "postgresql+psycopg://h/db"
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in ("psycopg", "psycopg2", "pymysql",
                                                          "MySQLdb") else real(name, *a))
    with pytest.raises(StorageError, match=r"pip install 'vtatune\[postgres\]'"):
        resolve_url("postgresql://h/db")
    with pytest.raises(StorageError, match=r"needs the psycopg2 module: pip install"):
        resolve_url("postgresql+psycopg2://h/db")
    with pytest.raises(StorageError, match=r"pip install 'vtatune\[mysql\]'"):
        resolve_url("mysql://h/db")


def test_stopped_database_is_retried_then_one_line(tmp_path, pg, monkeypatch, capsys):
    url = fresh_db(pg)
    monkeypatch.setenv("VTATUNE_OUTAGE_SECONDS", "2")
    store = open_storage(url, tmp_path / "x")
    study = optuna.create_study(storage=store.storage, study_name="s")
    pg.stop()
    try:
        t0 = time.monotonic()
        with pytest.raises(StorageError, match=r"unreachable for 2 s \(.*\)"):
            study.ask()
        assert 2.0 <= time.monotonic() - t0 < 6
    finally:
        pg.start()
    # a short outage is ridden out: the call waits for the server to come back
    store = open_storage(url, tmp_path / "x", outage=30)
    study = optuna.load_study(study_name="s", storage=store.storage)
    pg.stop()
    restart = threading.Timer(2.0, pg.start)
    restart.start()
    t0 = time.monotonic()
    trial = study.ask()
    restart.join()
    assert time.monotonic() - t0 >= 2.0
    study.tell(trial, 1.0)
    assert [t.state for t in study.trials] == [TrialState.FAIL, TrialState.COMPLETE] or \
        study.trials[-1].state == TrialState.COMPLETE


# --- slow: the scenarios at full size -------------------------------------------------
@pytest.mark.slow
def test_four_workers_400_trials_postgres_c8(tmp_path, pg):
    url = fresh_db(pg)
    argv = [sys.executable, "-m", "vtatune", "conv2d", "--workload", "resnet18.C8",
            "--trials", "400", "--storage", url, "--quiet"]
    procs = [subprocess.Popen([*argv, "--log", str(tmp_path / f"w{i}.jsonl")], env=env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(4)]
    results = [(p.wait(timeout=1200), p.stdout.read(), p.stderr.read()) for p in procs]
    simulated, distinct = check_shared_run(tmp_path, results, 400,
                                           open_storage(url, tmp_path / "x").storage)
    assert distinct >= 400 and simulated - distinct <= 4


@pytest.mark.slow
def test_kill_9_at_random_points_then_resume(tmp_path):
    import random

    rng = random.Random(0)
    log = tmp_path / "k.jsonl"
    extra = {"VTATUNE_HEARTBEAT_SECONDS": "1"}
    for _ in range(6):
        p = worker(tmp_path, "k.jsonl", 400, **extra)
        time.sleep(rng.uniform(1.2, 3.0))
        p.send_signal(signal.SIGKILL)
        p.wait()
    time.sleep(3.5)
    p = worker(tmp_path, "k.jsonl", 60, **extra)
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0 and not err.strip(), err
    simulated, distinct, ids = simulations(tmp_path)
    assert len(ids) == 1 and distinct >= 60 and simulated - distinct <= 6
    study = study_of(open_storage(None, log).storage)
    assert not [t for t in study.trials if t.state == TrialState.RUNNING]
    ok = {json.dumps(r["config"], sort_keys=True) for _, r in read_records(log)
          if r["status"] == "ok"}
    told = {json.dumps(t.user_attrs["config"], sort_keys=True) for t in study.trials
            if t.user_attrs.get("status") == "ok"}
    assert ok == told  # nothing the log holds is missing from the study


def test_a_heartbeat_during_a_batch_waits_for_it(tmp_path):
    """The heartbeat thread writes while the main thread may be inside a batch (holding the
    journal between storage calls): it waits for the batch instead of deadlocking it."""
    store = open_storage(None, tmp_path / "t.jsonl")
    study = optuna.create_study(storage=store.storage, study_name="s")
    trial = study.ask()
    done = threading.Event()

    def batch_with_a_beat_in_the_middle() -> None:
        with store.batch():
            store.storage.set_trial_user_attr(trial._trial_id, "a", 1)
            beat = threading.Thread(target=store.storage.record_heartbeat,
                                    args=(trial._trial_id,))
            beat.start()
            time.sleep(0.2)  # the beat is under way, waiting for the journal
            store.storage.set_trial_user_attr(trial._trial_id, "b", 2)
        beat.join()
        done.set()

    threading.Thread(target=batch_with_a_beat_in_the_middle, daemon=True).start()
    assert done.wait(10)
    attrs = study.trials[0]
    assert attrs.user_attrs == {"a": 1, "b": 2} and _storage.HEARTBEAT_ATTR in attrs.system_attrs
    store.close()


def test_opening_a_study_reads_no_trials_of_the_others(monkeypatch):
    """A deploy's cache journal holds a study per workload tuned before; opening one reads
    the studies' attrs, never every trial of every study (optuna's study summaries copy
    them all: opening 50 studies over a cache of 140 took 35 s)."""
    storage = optuna.storages.InMemoryStorage()
    for i in range(3):
        other = optuna.create_study(study_name=f"other{i}", storage=storage)
        other.set_user_attr("vtatune", {"workload_key": f"w{i}", "hw_model": "pynq"})
        other.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    reads = []
    real = storage.get_all_trials
    monkeypatch.setattr(storage, "get_all_trials",
                        lambda *a, **k: reads.append(a) or real(*a, **k))
    opened = _storage.open_study(storage, "mine", {"workload_key": "w9", "hw_model": "pynq"},
                                 "memory", allow_others=True, resume=False, extra={})
    assert opened.created and opened.name == "mine" and reads == []
