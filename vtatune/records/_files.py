"""Log files: appending records durably (one write a record, group commit to the disk),
reading them back (a corrupt line is one warning, not an error), telling a log from any
other file, and the best record per workload.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "demo.jsonl"
    >>> with RecordWriter(path) as log:
    ...     log.write({"schema": 1, "status": "ok", "cycles": 10})
    >>> [r["cycles"] for _, r in read_records(path)]
    [10]
"""


from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import time
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vtatune.records._format import LogError, RecordWarning, encode_record, target_key

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
    it when the last sync is :attr:`interval` seconds old, :meth:`flush` on close (an
    ``OSError`` of ``os.fsync`` is the caller's to report)."""

    #: Seconds between fsyncs (:data:`FSYNC_SECONDS`, from ``VTATUNE_FSYNC_SECONDS``).
    interval: float = FSYNC_SECONDS

    def __init__(self) -> None:
        self._synced_at = -float("inf")
        self._dirty = False

    def wrote(self, fd: int) -> None:
        if time.monotonic() - self._synced_at >= self.interval:
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


def append_whole(fd: int, data: bytes) -> int:
    """Append ``data`` to the file open at ``fd`` in one system call and return the offset
    it starts at. A failed or short write (a full disk) is cut back off the file and raises
    OSError: the file never ends in a partial record."""
    start = os.fstat(fd).st_size
    try:
        if os.write(fd, data) != len(data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    except OSError:
        with contextlib.suppress(OSError):
            if os.fstat(fd).st_size > start:
                os.ftruncate(fd, start)
        raise
    return start


def append_json_line(path: str | Path, value: Any) -> None:
    """Append ``value`` as one JSON line to the file at ``path`` (created if missing), whole
    or not at all (:func:`append_whole`): what measurement scripts keep a line each of."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        append_whole(fd, (json.dumps(value) + "\n").encode())
    finally:
        os.close(fd)


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
        try:
            append_whole(self._fd, data)
        except OSError as exc:
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


def read_records(path: str | Path, *, empty_ok: bool = True
                 ) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, record)`` for every complete record of a log, 1-based.

    A line that is not a JSON object (a truncated last line, a corrupt one) is skipped with
    one :class:`RecordWarning` naming it (the first :data:`MAX_WARNINGS` of a log; then one
    warning counting the rest). A file with lines but no record at all is not a log: it
    raises LogError (one line, no warning: the lines say nothing a user can fix one by
    one), as does an empty file unless ``empty_ok`` (a log no trial has finished in yet:
    the tuner appends to it; a build that wants records refuses it), and a missing or
    unreadable file.
    """
    try:
        f = open(path, encoding="utf-8", errors="replace")
    except OSError as exc:
        raise LogError(f"cannot read log {path}: {exc.strerror}") from None
    skipped = found = 0
    held: list[str] = []  # the warnings before the first record: a file without any is refused
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
                    if not found:
                        for message in held:
                            warnings.warn(message, RecordWarning, stacklevel=2)
                    found += 1
                    yield lineno, record
                    continue
                why = "a line that is not a vtatune record"
            skipped += 1
            if skipped <= MAX_WARNINGS:
                message = f"{path}:{lineno}: skipped {why}"
                if found:
                    warnings.warn(message, RecordWarning, stacklevel=2)
                else:
                    held.append(message)
    if not found and (skipped or not empty_ok):
        lines = "it is empty" if not skipped else "its only line is not a record" \
            if skipped == 1 else f"none of its {skipped} lines is a record"
        raise LogError(f"{path} is not a vtatune log ({lines})")
    if skipped > MAX_WARNINGS:
        warnings.warn(f"{path}: {skipped - MAX_WARNINGS} more lines skipped", RecordWarning,
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


def _new_file_beside(path: Path) -> tuple[int, str]:
    """A new, empty file beside ``path`` (open for writing) and its name. It is created with
    mode 0666, which the kernel narrows by the process's umask as for any file a program
    creates (``tempfile.mkstemp`` would make it 0600, and reading the umask means setting
    it, for every thread of the process)."""
    for _ in range(100):
        name = str(path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), name
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(path))


def write_whole(files: dict[Path, bytes], *, make_dirs: bool = True) -> None:
    """Write every file of ``files`` whole or leave it as it was: each goes to a temporary
    file beside it first, and only when all are written are they renamed into place (a
    rename neither needs space nor leaves half a file). On a read-only or full file system
    nothing new is left behind and the OSError raised names the file that failed
    (``filename``). ``make_dirs``: create missing parent directories."""
    temps: list[tuple[str, Path]] = []
    current: Path | None = None
    try:
        for current, data in files.items():
            if make_dirs:
                current.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = _new_file_beside(current)
            temps.append((tmp, current))
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        for tmp, current in temps:
            os.replace(tmp, current)
    except OSError as exc:
        for tmp, _ in temps:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        exc.filename = str(current)
        raise
