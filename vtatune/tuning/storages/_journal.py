"""The journal file: Optuna's JournalStorage on a file several processes share safely.

Writes take an ``flock`` (the kernel drops it when a process dies, so a killed worker never
leaves a stale lock), each batch of operations is one checked write (a short write is
rolled back), a torn last record is repaired on open, and the file says whether another
process wrote since this one last read (so a worker skips re-reading when nobody did).
Heartbeats are a system attr of the running trial (:class:`HeartbeatJournalStorage`), so
``fail_stale_trials`` works on journals as on databases.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
from optuna.storages.journal import BaseJournalBackend, JournalStorage
from optuna.trial import TrialState

from vtatune.records import GroupSync, append_whole
from vtatune.tuning.optuna_compat import BaseHeartbeat, memoize_journal_distribution_json, trial_id
from vtatune.tuning.storages._common import (
    HEARTBEAT_ATTR,
    StorageError,
    StorageWarning,
)


# --- the journal file ---------------------------------------------------------------------
class JournalFile(BaseJournalBackend):
    """An Optuna journal file shared safely by the processes of one machine.

    Optuna's own file backend takes a symlink lock per operation (a lock left by a killed
    process is only broken after its grace period) and cannot tell a torn last record from
    a corrupt file. Here:

    - the lock is ``flock`` on the journal itself, which the kernel releases when its owner
      dies: a killed worker never blocks the next one;
    - appends made inside :meth:`batch` are held (with the lock) and written in one checked
      ``os.write`` when the batch ends; outside a batch each append is written at once.
      The other processes see a write at once (the page cache); it reaches the disk by a
      group commit (:class:`~vtatune.records.GroupSync`: an ``fsync`` when the last one is
      :attr:`~vtatune.records.GroupSync.interval` old, and on close) unless every open batch
      said ``durable=False`` (an ask: its tell's write makes both durable). Before
      writing, what other processes appended is read first, so every process replays the
      operations in the file's order;
    - a write that fails or comes up short is truncated away and raises StorageError, so
      the file only ever holds whole records;
    - on open, a torn last record (a process killed mid-write by an older version, a full
      disk) is cut off with one warning; anything else unreadable is refused in one line.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as exc:
            raise StorageError(f"cannot open journal {self.path}: {exc.strerror}") from None
        self._logs: list[dict[str, Any]] = []
        self._offset = 0  # bytes of the file parsed into _logs
        self._read = 0  # records read from the file: written by other processes (or before)
        self._pending: list[bytes] = []
        self._depth = 0  # open batches
        self._sync_batch = False  # an open batch wants its write synced
        self._sync = GroupSync()
        self._locked = False
        self._mutex = threading.RLock()
        with self._mutex:
            self._lock()
            try:
                self._repair_tail()
                self._read_new()
            finally:
                self._unlock()

    # locking
    def _lock(self) -> None:
        if not self._locked:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            self._locked = True

    def _unlock(self) -> None:
        if self._locked:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            self._locked = False

    # reading
    def _repair_tail(self) -> None:
        size = os.fstat(self._fd).st_size
        if not size:
            return
        with open(self.path, "rb") as f:
            f.seek(max(0, size - 65536))
            tail = f.read()
        if tail.endswith(b"\n"):
            return
        cut = tail.rfind(b"\n")
        start = size - len(tail) + cut + 1 if cut >= 0 else 0
        if start == 0 and size > len(tail):
            start = size - len(tail)  # one huge line: not ours, let the reader refuse it
        torn = tail[cut + 1:] if cut >= 0 else tail
        if not torn.startswith(b'{"op_code":'):
            return  # not a torn journal record: the reader says what is wrong
        os.ftruncate(self._fd, start)
        os.fsync(self._fd)
        warnings.warn(f"journal {self.path}: removed a torn last record ({size - start} bytes, "
                      "from a write that was interrupted); the study is intact",
                      StorageWarning, stacklevel=3)

    def _read_new(self) -> None:
        size = os.fstat(self._fd).st_size
        if size <= self._offset:
            return
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            data = f.read(size - self._offset)
        end = data.rfind(b"\n") + 1  # a line still being written is read next time
        lineno = len(self._logs)
        for line in data[:end].splitlines():
            lineno += 1
            try:
                log = json.loads(line)
            except (UnicodeDecodeError, json.JSONDecodeError):
                log = None
            if not isinstance(log, dict) or "op_code" not in log:
                raise StorageError(
                    f"{self.path} is not a readable Optuna journal (record {lineno} is "
                    "damaged); the log holds every trial: move the journal away and run "
                    "again with --resume to rebuild the study from the log")
            self._logs.append(log)
            self._read += 1
        self._offset += end

    def others_mark(self) -> int:
        """How many records other processes have appended (this process's own writes are
        not read back): unchanged means no other worker did anything since."""
        with self._mutex:
            if not self._locked:
                self._read_new()
            return self._read

    # BaseJournalBackend
    def read_logs(self, log_number_from: int) -> list[dict[str, Any]]:
        with self._mutex:
            if not self._locked:
                self._read_new()
            return self._logs[log_number_from:]

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        with self._mutex:
            if not self._locked:
                self._lock()
                self._read_new()  # others' records first: replay in the file's order
            self._logs.extend(logs)
            self._pending.extend(json.dumps(log, separators=(",", ":")).encode() + b"\n"
                                 for log in logs)
            if not self._depth:
                self._write()

    @contextlib.contextmanager
    def batch(self, durable: bool = True) -> Iterator[None]:
        """Hold appends (and the lock, once one is made) until the batch ends; ``durable``
        False: this batch's write needs no ``fsync`` (an enclosing batch may still want
        one)."""
        with self._mutex:
            self._depth += 1
            self._sync_batch |= durable
            try:
                yield
            finally:
                self._depth -= 1
                if not self._depth:
                    durable, self._sync_batch = self._sync_batch, False
                    self._write(durable)

    def _write(self, durable: bool = True) -> None:
        data, self._pending = b"".join(self._pending), []
        try:
            if data:
                try:
                    start = append_whole(self._fd, data)  # whole records only
                except OSError as exc:
                    raise StorageError(f"cannot write journal {self.path}: "
                                       f"{exc.strerror or exc}") from None
                self._offset = start + len(data)
                if durable:
                    try:
                        self._sync.wrote(self._fd)
                    except OSError as exc:  # the records are whole: only their sync failed
                        raise StorageError(f"cannot write journal {self.path}: "
                                           f"{exc.strerror or exc}") from None
        finally:
            self._unlock()

    def close(self) -> None:
        with self._mutex:
            if self._fd >= 0:
                try:
                    self._sync.flush(self._fd)
                except OSError as exc:
                    raise StorageError(f"cannot write journal {self.path}: "
                                       f"{exc.strerror or exc}") from None
                finally:
                    self._unlock()
                    os.close(self._fd)
                    self._fd = -1


class HeartbeatJournalStorage(JournalStorage, BaseHeartbeat):
    """Optuna's JournalStorage with heartbeats, so ``fail_stale_trials`` works on journals.

    A heartbeat is a ``vtatune:heartbeat`` system attr (epoch seconds) on the running trial;
    a RUNNING trial whose last heartbeat (or start, if it never had one: a worker of an
    older version) is older than the grace period is stale.
    """

    def __init__(self, backend: JournalFile, interval: float, grace: float) -> None:
        memoize_journal_distribution_json()
        super().__init__(backend)
        self._interval, self._grace = interval, grace
        # One lock for the storage and its file: a batch holds the file's lock around
        # storage calls (file, then storage), any other call takes the storage's around the
        # file's (storage, then file); with two locks the heartbeat thread's write and the
        # main thread's batch could each hold one and wait for the other forever.
        self._thread_lock = backend._mutex

    def record_heartbeat(self, trial_id: int) -> None:
        with contextlib.suppress(optuna.exceptions.UpdateFinishedTrialError, KeyError):
            self.set_trial_system_attr(trial_id, HEARTBEAT_ATTR, time.time())

    def _get_stale_trial_ids(self, study_id: int) -> list[int]:
        now = time.time()
        stale = []
        for t in self.get_all_trials(study_id, deepcopy=False, states=(TrialState.RUNNING,)):
            beat = t.system_attrs.get(HEARTBEAT_ATTR)
            if beat is None and t.datetime_start is not None:
                beat = t.datetime_start.timestamp()
            if beat is not None and now - float(beat) > self._grace:
                stale.append(trial_id(t))
        return stale

    def get_heartbeat_interval(self) -> int | None:
        return max(1, round(self._interval))

    def get_heartbeat_stale_trial_callback(self) -> None:
        return None
