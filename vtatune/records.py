"""Tuning logs: one JSON object per line, appended as each trial finishes.

A record is complete on its own: the workload's shape, the hardware's ``vta_config.json``
and the full :class:`~vtatune.schedule.Schedule` are in it, so it replays without the
template that produced it (``python -m vtatune replay LOG``).

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "demo.jsonl"
    >>> with RecordWriter(path) as log:
    ...     log.write({"schema": 1, "status": "ok", "cycles": 10})
    >>> [r["cycles"] for _, r in read_records(path)]
    [10]

Schema (``schema`` = 1): ``schema``, ``workload`` {operator, name, key, shape},
``hw`` {target, bitstream, model, config}, ``bias``, ``template``, ``space``, ``config``
(the knobs), ``schedule`` (every Schedule field), ``status`` (``ok`` / ``illegal`` /
``error``), ``rule``, ``error``, ``cycles``, ``seconds``, ``gops``, ``utilization``,
``counters`` (fsim's seven), ``instructions``, ``trial``, ``timestamp`` (ISO 8601, UTC),
``study``, ``study_id`` (unique per study; absent in logs of older versions), ``sampler``,
``seed``, ``version`` (of vtatune), ``timing`` (the fingerprint of the timing profile that
scored it, :meth:`simulator.timing.TimingProfile.fingerprint`; absent in logs made before the
model was calibrated against the RTL).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import time
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from simulator.hardware import HardwareConfig

from .errors import VtatuneError
from .schedule import Schedule
from .workloads import WORKLOAD_CLASSES, Workload

SCHEMA = 1


class RecordWarning(UserWarning):
    """A log line that is not a complete record (skipped)."""


class LogError(VtatuneError):
    """A log that cannot be read or does not fit the request."""


def workload_fields(workload: Workload) -> dict[str, Any]:
    return {"operator": workload.operator, "name": workload.name, "key": workload.key(),
            "shape": workload.shape_args()}


def hw_fields(hw: HardwareConfig) -> dict[str, Any]:
    return {"target": hw.target, "bitstream": hw.bitstream, "model": hw.target_model,
            "config": hw.to_dict()}


def workload_from(record: dict[str, Any]) -> Workload:
    """The workload a record was tuned for."""
    w = record["workload"]
    return WORKLOAD_CLASSES[w["operator"]](**w["shape"], name=w.get("name", ""))


def hw_from(record: dict[str, Any]) -> HardwareConfig:
    return HardwareConfig.from_dict(record["hw"]["config"])


def schedule_from(record: dict[str, Any]) -> Schedule:
    return Schedule.from_dict(record["schedule"])


def target_key(record: dict[str, Any]) -> tuple[str, str, bool]:
    """What "the same tuning problem" means: workload shape x hardware model x bias."""
    return record["workload"]["key"], record["hw"]["model"], bool(record.get("bias", False))


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


_PROBE_BYTES = 1 << 16  # a record is ~1-2 KB: the head of a log holds whole ones


def _is_log(path: Path) -> bool:
    """Whether ``path`` holds vtatune records: a JSON record among its first lines."""
    with open(path, "rb") as f:
        head = f.read(_PROBE_BYTES)
    if b"\0" in head:
        return False
    for line in head.decode("utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and "schema" in record:
            return True
    return False


def check_log_target(path: str | Path) -> None:
    """Refuse, before anything is written, a path no record may go to: a directory, a path
    below a file, or a non-empty file that is not a vtatune log (appending would damage
    it). Raises LogError; creates nothing."""
    p = Path(path)
    if p.is_dir():
        raise LogError(f"cannot write log {p}: it is a directory")
    parent = next((d for d in p.parents if d.exists()), None)
    if parent is not None and not parent.is_dir():
        raise LogError(f"cannot write log {p}: {parent} is a file, not a directory")
    try:
        if p.is_file() and p.stat().st_size and not _is_log(p):
            raise LogError(f"{p} is not a vtatune log (no JSON record in its first "
                           f"{_PROBE_BYTES // 1024} KiB): refusing to append to it")
    except OSError as exc:
        raise LogError(f"cannot read log {p}: {exc.strerror}") from None


def env_seconds(name: str, default: float, minimum: float = 0.0) -> float:
    """Seconds from the environment variable ``name`` (at least ``minimum``), else
    ``default``."""
    try:
        return max(minimum, float(os.environ.get(name, default)))
    except ValueError:
        return default


#: How stale the on-disk copy of a log or a journal may get: each is fsynced when a record
#: is written at least this long after its last sync, and when it is closed. A killed
#: process loses nothing (every record goes out whole, in one system call, into the page
#: cache the next process reads); a power loss or an OS crash loses at most the records of
#: the last interval, which a resumed study simply simulates again. ``VTATUNE_FSYNC_SECONDS``
#: changes it (0: every record).
FSYNC_SECONDS = env_seconds("VTATUNE_FSYNC_SECONDS", 1.0)


class GroupSync:
    """Group commit for one file descriptor: :meth:`wrote` after each durable write fsyncs
    it when the last sync is :data:`FSYNC_SECONDS` old, :meth:`flush` on close (an
    ``OSError`` of ``os.fsync`` is the caller's to report)."""

    def __init__(self) -> None:
        self._synced_at = -float("inf")
        self._dirty = False

    def wrote(self, fd: int) -> None:
        if time.monotonic() - self._synced_at >= FSYNC_SECONDS:
            self._sync(fd)
        else:
            self._dirty = True

    def flush(self, fd: int) -> None:
        if self._dirty:
            self._sync(fd)

    def _sync(self, fd: int) -> None:
        self._dirty = False
        os.fsync(fd)
        self._synced_at = time.monotonic()


def encode_record(record: dict[str, Any]) -> bytes:
    """One log line: compact JSON (no NaN) and a newline."""
    return (json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n").encode()


class RecordPrefix:
    """The leading fields every record of a study shares (workload, hardware, study ...),
    encoded once: :meth:`line` gives what :func:`encode_record` gives for the prefix's
    fields followed by ``rest``'s."""

    def __init__(self, fields: dict[str, Any]) -> None:
        self._head = encode_record(fields)[:-2]  # without "}\n"

    def line(self, rest: dict[str, Any]) -> bytes:
        tail = encode_record(rest)
        if self._head == b"{":
            return tail
        return self._head + (b"," + tail[1:] if tail != b"{}\n" else b"}\n")


class RecordWriter:
    """Append-only JSON-lines writer: one ``os.write`` of one complete line per record.

    The file is opened with ``O_APPEND`` and each line goes out in a single system call
    with no user-space buffer, so a killed process leaves whole lines only, and several
    processes may append to one log. A file whose last line lacks its newline (written by
    something else) gets one first, so a new record never glues onto a broken one. A path
    that cannot hold a log (a directory, a file that is not a vtatune log) is refused with
    :func:`check_log_target` before anything is written.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._fd = -1
        self._sync = GroupSync()
        check_log_target(self.path)
        if self.path.parent and not self.path.parent.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            raise LogError(f"cannot write log {self.path}: {exc.strerror}") from None
        size = os.fstat(self._fd).st_size
        if size:
            with open(self.path, "rb") as f:
                f.seek(size - 1)
                if f.read(1) != b"\n":
                    try:
                        os.write(self._fd, b"\n")
                    except OSError as exc:
                        raise LogError(f"cannot write log {self.path}: {exc.strerror}") from None

    def write(self, record: dict[str, Any] | bytes) -> None:
        """Append one record (a dict, or a line :class:`RecordPrefix` encoded); a failed or
        short write (a full disk) is cut back off the file and raises LogError, so the log
        never holds a partial record."""
        data = record if isinstance(record, bytes) else encode_record(record)
        start = os.fstat(self._fd).st_size
        try:
            written = os.write(self._fd, data)
            if written != len(data):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        except OSError as exc:
            with contextlib.suppress(OSError):
                if os.fstat(self._fd).st_size > start:
                    os.ftruncate(self._fd, start)
            raise LogError(f"cannot write log {self.path}: {exc.strerror or exc}") from None
        try:
            self._sync.wrote(self._fd)
        except OSError as exc:  # the line is whole: only its sync failed
            raise LogError(f"cannot write log {self.path}: {exc.strerror or exc}") from None

    def close(self) -> None:
        if self._fd >= 0:
            try:
                self._sync.flush(self._fd)
            except OSError as exc:
                raise LogError(f"cannot write log {self.path}: {exc.strerror or exc}") \
                    from None
            finally:
                os.close(self._fd)
                self._fd = -1

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


MAX_WARNINGS = 10  # per log: a file of garbage gets a count, not thousands of lines


def read_records(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, record)`` for every complete record of a log, 1-based.

    A line that is not a JSON object (a truncated last line, a corrupt one) is skipped with
    one :class:`RecordWarning` naming it (the first :data:`MAX_WARNINGS` of a log; then one
    warning counting the rest). A missing or unreadable file raises LogError.
    """
    try:
        f = open(path, encoding="utf-8", errors="replace")
    except OSError as exc:
        raise LogError(f"cannot read log {path}: {exc.strerror}") from None
    skipped = found = 0
    with f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                why = f"a corrupt or truncated record ({exc.msg})"
            else:
                if isinstance(record, dict) and "schema" in record:
                    found += 1
                    yield lineno, record
                    continue
                why = "a line that is not a vtatune record"
            skipped += 1
            if skipped <= MAX_WARNINGS:
                warnings.warn(f"{path}:{lineno}: skipped {why}", RecordWarning, stacklevel=2)
    if skipped > MAX_WARNINGS:
        warnings.warn(f"{path}: {skipped - MAX_WARNINGS} more lines skipped"
                      + ("" if found else " (it holds no vtatune record)"), RecordWarning,
                      stacklevel=2)


@dataclass(frozen=True)
class BestRecord:
    """The fastest ``ok`` record of one workload x hardware (x bias) in a log."""

    line: int
    record: dict[str, Any]

    @property
    def cycles(self) -> int:
        return self.record["cycles"]


def best_records(records: Iterable[tuple[int, dict[str, Any]]]) -> list[BestRecord]:
    """The best ``ok`` record per workload x hardware, in order of first appearance.

    Ties keep the earliest record, so the answer does not depend on how workers interleave.
    """
    best: dict[tuple[str, str, bool], BestRecord] = {}
    for lineno, r in records:
        if r.get("status") != "ok" or not isinstance(r.get("cycles"), int):
            continue
        k = target_key(r)
        if k not in best or r["cycles"] < best[k].cycles:
            best[k] = BestRecord(lineno, r)
    return list(best.values())


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
    from .evaluate import evaluate

    try:
        ev = evaluate(workload_from(record), schedule_from(record), hw_from(record),
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
