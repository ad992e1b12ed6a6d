"""Resuming from the log, the source of truth: the trials of a problem that a log holds and
its study lacks (a worker killed between logging and telling, a storage outage, a journal
lost or never shipped), turned into trials to add back; and a config's logged score.

Example:
    >>> problem = {"workload_key": "gemm.batch1.in_channels16.out_channels16",
    ...            "hw_model": "pynq_1x16_i8w8a32_15_15_18_17", "bias": False,
    ...            "template": "gemm.full.v1", "space": "full"}
    >>> record = {"workload": {"key": problem["workload_key"]},
    ...           "hw": {"model": problem["hw_model"]}, "template": "gemm.full.v1",
    ...           "config": {"tile_b": 1}}
    >>> belongs(record, problem), belongs({**record, "bias": True}, problem)
    (True, False)
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna

from vtatune.records import read_records
from vtatune.scoring import Score
from vtatune.tuning._codec import Codec, Key


def belongs(record: dict[str, Any], problem: dict[str, Any]) -> bool:
    """A log record of ``problem`` (any study of it)."""
    try:
        return (record["workload"]["key"] == problem["workload_key"]
                and record["hw"]["model"] == problem["hw_model"]
                and bool(record.get("bias", False)) == problem["bias"]
                and record.get("template") == problem["template"]
                and record.get("space", "full") == problem["space"]
                and isinstance(record.get("config"), dict))
    except (KeyError, TypeError):
        return False


@dataclass(frozen=True)
class LogTrials:
    """What a log holds of a problem beyond what the study holds."""

    found: dict[Key, dict[str, Any]] = field(default_factory=dict)  # a record per config
    foreign: frozenset[Key] = frozenset()  # configs of other studies (not taken: no resume)


def log_trials(log: Path, problem: dict[str, Any], codec: Codec, *, study_id: str,
               study_name: str, created: bool, resume: bool, held: Collection[Key]
               ) -> LogTrials:
    """The records of ``log`` the study should add back: this study's (by its id; records of
    older versions by its name, when the study is not new) and, on ``resume``, every study's
    of the problem; not those of a config the study ``held`` already. An ``ok`` record wins
    over an illegal or failed one of the same config."""
    if not log.exists():
        return LogTrials()
    found: dict[Key, dict[str, Any]] = {}
    foreign: set[Key] = set()
    for _, r in read_records(log):
        if not belongs(r, problem):
            continue
        sid = r.get("study_id")
        ours = sid == study_id or (sid is None and not created and r.get("study") == study_name)
        try:
            k = codec.key(r["config"])
        except (KeyError, TypeError):
            continue
        if not ours and not resume:
            foreign.add(k)
            continue
        if k in held:
            continue
        if k not in found or (r.get("status") == "ok" and found[k].get("status") != "ok"):
            found[k] = r
    return LogTrials(found, frozenset(foreign))


def as_trials(found: dict[Key, dict[str, Any]], codec: Codec,
              distributions: dict[str, Any], penalty: float, log: Path
              ) -> list[tuple[Key, str, float, optuna.trial.FrozenTrial]]:
    """The records as finished Optuna trials, ``ok`` ones first: (key, status, value,
    trial); an illegal or failed config is valued ``penalty``. A config this template
    version no longer has is left out."""
    rows = sorted(found.items(), key=lambda kr: kr[1].get("status") != "ok")
    trials = []
    for k, r in rows:
        status = r.get("status") if r.get("status") in ("ok", "error") else "illegal"
        value = float(r["cycles"]) if status == "ok" else penalty
        attrs = {"config": r["config"], "status": status, "from_log": str(log)}
        if status == "ok":
            attrs["cycles"] = int(r["cycles"])
        try:
            attrs |= codec.knob_attrs(r["config"])
            trials.append((k, status, value, optuna.trial.create_trial(
                params=codec.to_params(r["config"]), distributions=distributions,
                value=value, user_attrs=attrs)))
        except (KeyError, ValueError, TypeError):
            continue
    return trials


def logged_score(log: Path, problem: dict[str, Any], codec: Codec, key: Key) -> Score | None:
    """The score an ``ok`` record of ``problem`` in ``log`` gives the config ``key`` (any
    study's: the simulator is deterministic), or None."""
    if not log.exists():
        return None
    for _, r in read_records(log):
        if r.get("status") == "ok" and belongs(r, problem) and codec.key(r["config"]) == key:
            return Score.from_dict(r)
    return None
