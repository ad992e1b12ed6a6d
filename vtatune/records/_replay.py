"""Replaying a log: every ``ok`` record (or the best per workload) re-lowered and
re-simulated, and compared with what the log says (cycles and fsim's counters)."""


from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vtatune import scoring
from vtatune.errors import VtatuneError
from vtatune.records._files import best_records, read_records
from vtatune.records._format import hw_from, schedule_from, workload_from


@dataclass(frozen=True)
class Mismatch:
    """A replayed record whose simulation differs from the log."""

    line: int
    what: str


@dataclass(frozen=True)
class ReplayReport:
    """What ``replay`` found: how many records were re-simulated and which differ."""

    path: str
    replayed: int
    mismatches: tuple[Mismatch, ...]
    #: records scored by another timing model (older rules or other constants): their
    #: counters were compared, their cycles could not be (that model is not this one)
    other_timing: int = 0

    @property
    def ok(self) -> bool:
        return not self.mismatches


def _replay_one(record: dict[str, Any]) -> tuple[int | None, dict[str, int] | None, str | None,
                                                 str | None]:
    try:
        ev = scoring.score(workload_from(record), schedule_from(record), hw_from(record),
                      bias=bool(record.get("bias", False)))
    except (VtatuneError, KeyError, TypeError, ValueError) as exc:
        return None, None, f"cannot rebuild the record: {exc}", None
    if ev.status != "ok":
        return None, None, f"status {ev.status}: {ev.error}", None
    return ev.cycles, ev.counters, None, ev.timing


def replay(path: str | Path, *, best: bool = False, jobs: int = 1) -> ReplayReport:
    """Re-lower and re-simulate the ``ok`` records of a log (or only the best per workload x
    hardware) and compare cycles and counters with the logged ones.

    A record scored by another timing model (its ``timing`` fingerprint differs from the
    board's profile now, or is absent: made before the RTL calibration) keeps its schedule and
    counters, which are checked; its cycles are not compared (that model is gone), only
    counted in ``other_timing``.

    Example:
        >>> replay("logs/conv2d-tutorial.jsonl", best=True).ok  # doctest: +SKIP
        True
    """
    rows = [(n, r) for n, r in read_records(path)]
    if best:
        chosen = [(b.line, b.record) for b in best_records(rows)]
    else:
        chosen = [(n, r) for n, r in rows if r.get("status") == "ok"]
    if jobs > 1 and len(chosen) > 1:
        from joblib import Parallel, delayed

        scoring.announce_worker_compile()
        results = Parallel(n_jobs=jobs, backend="loky")(
            delayed(_replay_one)(r) for _, r in chosen)
    else:
        results = [_replay_one(r) for _, r in chosen]
    bad: list[Mismatch] = []
    other = 0
    for (lineno, r), (cycles, counters, error, timing) in zip(chosen, results, strict=True):
        same_model = r.get("timing") == timing
        other += error is None and not same_model
        if error is not None:
            bad.append(Mismatch(lineno, error))
        elif same_model and cycles != r.get("cycles"):
            bad.append(Mismatch(lineno, f"cycles {cycles} != logged {r.get('cycles')}"))
        elif counters != r.get("counters"):
            keys = sorted(k for k in set(counters or {}) | set(r.get("counters") or {})
                          if (counters or {}).get(k) != (r.get("counters") or {}).get(k))
            bad.append(Mismatch(lineno, "counters differ: " + ", ".join(
                f"{k} {(counters or {}).get(k)} != logged {(r.get('counters') or {}).get(k)}"
                for k in keys)))
    return ReplayReport(str(path), len(chosen), tuple(bad), other)
