"""The tuner's per-trial work outside the simulator does not grow with the study: storage
calls counted per trial (not timed), at most one fsync of the journal and of the log per
finished trial (group commit), one journal record per ask."""

from __future__ import annotations

import collections
import json
import os
import time

import pytest

from vtatune import scoring
from vtatune.records import GroupSync, RecordWriter
from vtatune.tuning import Search, tune
from vtatune.tuning.storages import Resilient

WINDOWS = ((30, 60), (170, 200))  # simulated trials: (after, up to)


@pytest.fixture
def counted(monkeypatch):
    """Storage calls by method name and fsyncs, snapshotted at every simulation; the
    time-driven work (the 0.5 s sync, the stale-trial check, the group commit) made to
    happen every time or never, so counts depend only on the trials."""
    calls: collections.Counter[str] = collections.Counter()
    snapshots: list[collections.Counter[str]] = []
    call = Resilient._call

    def counting_call(self, name, *args, **kwargs):
        calls[name] += 1
        return call(self, name, *args, **kwargs)

    fsync = os.fsync

    def counting_fsync(fd):
        calls["fsync"] += 1
        return fsync(fd)

    simulate = scoring.score

    def snapshot(*args, **kwargs):
        out = simulate(*args, **kwargs)
        snapshots.append(collections.Counter(calls))
        return out

    monkeypatch.setattr(Resilient, "_call", counting_call)
    monkeypatch.setattr(os, "fsync", counting_fsync)
    monkeypatch.setattr(scoring, "score", snapshot)
    monkeypatch.setattr(Search, "sync_seconds", 0.0)
    monkeypatch.setattr(GroupSync, "interval", 0.0)
    monkeypatch.setattr(Search, "_fail_stale", lambda self: None)
    return snapshots


def _window(snapshots, after, upto):
    return snapshots[upto - 1] - snapshots[after - 1]


def test_storage_calls_per_trial_do_not_grow_with_the_study(tmp_path, counted):
    r = tune("conv2d", trials=WINDOWS[-1][1], seed=0, log=tmp_path / "t.jsonl")
    assert r.trials == r.asks == WINDOWS[-1][1]  # every ask a new legal config
    early, late = (_window(counted, a, b) for a, b in WINDOWS)
    assert early == late  # the same calls, method by method, for 30 trials at 30 and at 170
    n = WINDOWS[0][1] - WINDOWS[0][0]
    assert early["get_all_trials"] == 0  # nothing reads the whole study per trial
    # asks are not synced; each tell and each log line is (every time, at GroupSync.interval 0)
    assert early["create_new_trial"] == n and early["fsync"] == 2 * n
    assert "set_trial_param" not in early  # params come with the trial


def test_one_journal_record_per_ask_with_its_config(tmp_path):
    log = tmp_path / "t.jsonl"
    tune("conv2d", trials=20, seed=0, log=log)
    records = [json.loads(line) for line in log.with_suffix(".journal").read_text().splitlines()]
    created = [r for r in records if r["op_code"] == 4]  # CREATE_TRIAL
    assert len(created) == 20
    assert not [r for r in records if r["op_code"] == 5]  # no SET_TRIAL_PARAM
    for r in created:
        assert r["state"] == 0 and set(r["params"]) == set(r["distributions"])  # RUNNING
        assert set(r["user_attrs"]["config"]) == set(r["params"])


def test_resilient_storage_passes_every_call_through():
    """BaseStorage implements some calls through get_all_trials (a trial id by its number
    reads every trial): the wrapper hands each to the storage it wraps instead."""
    from optuna.storages import BaseStorage

    names = [n for n, v in vars(BaseStorage).items() if callable(v) and not n.startswith("_")]
    inherited = [n for n in names if getattr(Resilient, n) is getattr(BaseStorage, n)]
    assert inherited == []


def test_group_commit_syncs_at_most_every_interval_and_on_close(tmp_path, monkeypatch):
    """A log written faster than GroupSync.interval is fsynced on its first record, then not until
    the interval has passed, and once more when closed: nothing written is left unsynced."""
    synced = []
    monkeypatch.setattr(os, "fsync", synced.append)
    clock = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(GroupSync, "interval", 1.0)
    writer = RecordWriter(tmp_path / "g.jsonl")
    for _ in range(6):
        writer.write({"a": 1})
        clock[0] += 0.3  # records at 0, 0.3, ... 1.5 s: synced at 0 and at 1.2 s
    assert len(synced) == 2
    writer.close()
    assert len(synced) == 3  # the records after the last sync, on close
    writer = RecordWriter(tmp_path / "empty.jsonl")
    writer.close()
    assert len(synced) == 3  # nothing written: nothing to sync


def test_the_heap_is_frozen_only_while_the_study_runs(tmp_path, monkeypatch):
    """Full garbage collections scan only what the loop allocates (the objects from before
    it are frozen), and everything is unfrozen when it ends."""
    import gc

    frozen = []
    simulate = scoring.score

    def noting(*args, **kwargs):
        frozen.append(gc.get_freeze_count())
        return simulate(*args, **kwargs)

    monkeypatch.setattr(scoring, "score", noting)
    before = gc.get_freeze_count()
    tune("conv2d", trials=3, seed=0, log=tmp_path / "t.jsonl")
    assert len(frozen) == 3 and min(frozen) > before
    assert gc.get_freeze_count() == before
