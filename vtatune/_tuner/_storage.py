"""Where studies live, and how several workers share one safely.

- A study is named after its problem (workload x hardware x template x space x bias), so
  every worker of one problem on one storage opens the same study, whether they start
  together or one after another (:func:`open_study`; the first creates it, the rest load
  it; no ``#2`` copies).
- The default storage is an Optuna journal file beside the log, through
  :class:`JournalFile`: writes under an ``flock`` (the kernel drops it when a process dies,
  so a killed worker never leaves a stale lock), each batch of operations in one checked
  write (a short write is rolled back), a torn last record repaired on open. Several
  processes on one machine may share it.
- ``--storage URL`` takes PostgreSQL, MySQL or SQLite URLs (Optuna's RDBStorage) with
  heartbeats; ``journal:FILE`` a journal file elsewhere.
- Every storage is wrapped by :class:`Resilient`: a lost connection is retried with
  backoff for :data:`OUTAGE_SECONDS`, then :class:`StorageError` (one line).
- Heartbeats (Optuna's, and the same protocol for journals: a ``heartbeat`` system attr)
  let any worker fail the RUNNING trials of a worker that died, so their configs become
  available again.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import importlib.util
import json
import os
import random
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.storages import BaseStorage
from optuna.storages._heartbeat import BaseHeartbeat
from optuna.storages.journal import BaseJournalBackend, JournalStorage
from optuna.trial import TrialState

from ..errors import VtatuneError
from ..records import GroupSync, env_seconds


class StorageError(VtatuneError):
    """A storage that cannot be opened, read or written, or a study of another problem."""


class StorageWarning(UserWarning):
    """Something the storage repaired or waited for (one line)."""


# How long a lost database connection is retried (waits 0.25 s doubling to 8 s) before the
# worker gives up with one line. VTATUNE_OUTAGE_SECONDS overrides it.
OUTAGE_SECONDS = env_seconds("VTATUNE_OUTAGE_SECONDS", 60.0, 0.1)
# Heartbeat of running trials; a trial silent for GRACE_FACTOR intervals belongs to a dead
# worker and is failed. VTATUNE_HEARTBEAT_SECONDS overrides the interval (integer seconds
# for RDB storages, as Optuna requires).
HEARTBEAT_SECONDS = env_seconds("VTATUNE_HEARTBEAT_SECONDS", 10.0, 0.1)
GRACE_FACTOR = 3
HEARTBEAT_ATTR = "vtatune:heartbeat"


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
      :data:`~vtatune.records.FSYNC_SECONDS` old, and on close) unless every open batch
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
                start = os.fstat(self._fd).st_size
                try:
                    written = os.write(self._fd, data)
                    if written != len(data):
                        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                except OSError as exc:
                    with contextlib.suppress(OSError):
                        os.ftruncate(self._fd, start)  # whole records only
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


def _by_identity(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``fn`` memoized per argument object (distributions compare slowly by value; a
    study hands the same objects with every trial)."""
    memo: dict[int, tuple[Any, Any]] = {}

    def cached(arg: Any) -> Any:
        hit = memo.get(id(arg))
        if hit is not None and hit[0] is arg:
            return hit[1]
        if len(memo) >= 4096:
            memo.clear()
        out = fn(arg)
        memo[id(arg)] = (arg, out)  # holding arg keeps its id from being reused
        return out

    cached.__wrapped__ = fn  # type: ignore[attr-defined]
    return cached


def _memoize_distribution_json() -> None:
    """Optuna's journal turns every trial's distributions into JSON when it writes the
    trial and back when it replays it (~60 µs a trial here, where every trial of a study
    carries the same few distributions): memoize both conversions, pure functions of
    immutable values, in the journal module that calls them."""
    from optuna.storages.journal import _storage as journal

    if not hasattr(journal.distribution_to_json, "__wrapped__"):
        journal.distribution_to_json = _by_identity(journal.distribution_to_json)
    if not hasattr(journal.json_to_distribution, "__wrapped__"):
        journal.json_to_distribution = functools.lru_cache(maxsize=4096)(
            journal.json_to_distribution)


class HeartbeatJournalStorage(JournalStorage, BaseHeartbeat):
    """Optuna's JournalStorage with heartbeats, so ``fail_stale_trials`` works on journals.

    A heartbeat is a ``vtatune:heartbeat`` system attr (epoch seconds) on the running trial;
    a RUNNING trial whose last heartbeat (or start, if it never had one: a worker of an
    older version) is older than the grace period is stale.
    """

    def __init__(self, backend: JournalFile, interval: float, grace: float) -> None:
        _memoize_distribution_json()
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
                stale.append(t._trial_id)
        return stale

    def get_heartbeat_interval(self) -> int | None:
        return max(1, round(self._interval))

    def get_heartbeat_stale_trial_callback(self) -> None:
        return None


# --- outages ----------------------------------------------------------------------------
def _transient(exc: BaseException) -> bool:
    """A lost or refused connection (worth retrying), not bad data or a bug."""
    if isinstance(exc, optuna.exceptions.StorageInternalError):
        return True
    try:
        from sqlalchemy import exc as sa
    except ImportError:  # pragma: no cover - sqlalchemy comes with optuna
        return False
    return isinstance(exc, sa.OperationalError | sa.InterfaceError) or (
        isinstance(exc, sa.DBAPIError) and bool(exc.connection_invalidated))


def _first_line(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__ or exc
    if isinstance(exc, optuna.exceptions.StorageInternalError) and exc.__cause__ is not None:
        cause = exc.__cause__
    orig = getattr(cause, "orig", None) or cause
    text = str(orig).strip().splitlines()
    return text[0] if text else type(orig).__name__


class Resilient(BaseStorage, BaseHeartbeat):
    """A storage whose every call survives a bounded outage.

    A call that fails with a lost connection is retried after 0.25 s, 0.5 s, 1 s ... (at
    most 8 s apart) until :data:`OUTAGE_SECONDS` have passed since the first failure; then
    StorageError names the storage and the cause in one line. Finishing a trial whose first
    attempt did reach the database (the reply was lost) counts as done.
    """

    def __init__(self, inner: BaseStorage, desc: str, outage: float = OUTAGE_SECONDS) -> None:
        self._inner, self._desc, self._outage = inner, desc, outage

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        method = getattr(self._inner, name)
        first: float | None = None
        wait = 0.25
        while True:
            try:
                return method(*args, **kwargs)
            except optuna.exceptions.UpdateFinishedTrialError:
                if first is not None and name == "set_trial_state_values":
                    return True  # the attempt that "failed" had finished it
                raise
            except Exception as exc:
                if not _transient(exc):
                    raise
                now = time.monotonic()
                first = now if first is None else first
                if now - first >= self._outage:
                    raise StorageError(f"storage {self._desc} unreachable for "
                                       f"{self._outage:g} s ({_first_line(exc)}); finished "
                                       "trials are in the log and the study") from None
                time.sleep(min(wait, max(0.0, first + self._outage - now)))
                wait = min(wait * 2, 8.0)

    # BaseHeartbeat
    def record_heartbeat(self, trial_id: int) -> None:
        if isinstance(self._inner, BaseHeartbeat):
            self._call("record_heartbeat", trial_id)

    def _get_stale_trial_ids(self, study_id: int) -> list[int]:
        if isinstance(self._inner, BaseHeartbeat):
            return self._call("_get_stale_trial_ids", study_id)
        return []

    def get_heartbeat_interval(self) -> int | None:
        if isinstance(self._inner, BaseHeartbeat):
            return self._inner.get_heartbeat_interval()
        return None

    def get_heartbeat_stale_trial_callback(self) -> None:
        return None

    def remove_session(self) -> None:
        with contextlib.suppress(AttributeError):
            self._inner.remove_session()


def _delegate(name: str) -> Callable[..., Any]:
    def method(self: Resilient, *args: Any, **kwargs: Any) -> Any:
        return self._call(name, *args, **kwargs)

    method.__name__ = name
    return method


# Every storage call goes to the inner storage, also those BaseStorage implements through
# get_all_trials (the inner one may answer them without reading every trial: a journal's
# trial id by number is a lookup).
for _name in sorted(BaseStorage.__abstractmethods__ | {"get_trial_number_from_id",
                                                       "get_trial_id_from_study_id_trial_number",
                                                       "get_trial_param",
                                                       "get_best_trial", "get_n_trials",
                                                       "get_trial_params",
                                                       "get_trial_user_attrs",
                                                       "get_trial_system_attrs",
                                                       "check_trial_is_updatable"}):
    setattr(Resilient, _name, _delegate(_name))
Resilient.__abstractmethods__ = frozenset()


# --- reading a study ---------------------------------------------------------------------
class TrialFeed:
    """One study's trials in number order (``trials[i].number == i``), kept up to date.

    Optuna's ``get_all_trials`` builds the list of every trial on every call, and a worker
    reads its study several times per trial (the sampler, the claim before simulating):
    work that grew with the study. On a journal, :meth:`read` asks only for the trials
    created since the last read and for those unfinished then (the only ones that can
    change), by trial number; other storages are read whole (a database query either way).
    The list returned is the feed's own: read it, do not change it.
    """

    def __init__(self, storage: BaseStorage, study_id: int, *, incremental: bool) -> None:
        self._storage, self._study_id, self._incremental = storage, study_id, incremental
        self._trials: list[optuna.trial.FrozenTrial] = []
        self._open: list[int] = []  # numbers of the trials unfinished when last read
        self.reads = 0  # storage calls made (tests count them)

    def read(self) -> list[optuna.trial.FrozenTrial]:
        storage, trials = self._storage, self._trials
        if not self._incremental:
            self.reads += 1
            self._trials = storage.get_all_trials(self._study_id, deepcopy=False)
            return self._trials
        changed = self._open
        for number in changed:
            self.reads += 1
            trials[number] = storage.get_trial(trials[number]._trial_id)
        first_new = len(trials)
        while True:
            self.reads += 1
            try:
                trial_id = storage.get_trial_id_from_study_id_trial_number(self._study_id,
                                                                           len(trials))
            except KeyError:
                break
            self.reads += 1
            trials.append(storage.get_trial(trial_id))
        self._open = [n for n in (*changed, *range(first_new, len(trials)))
                      if not trials[n].state.is_finished()]
        return trials


# --- opening a storage --------------------------------------------------------------------
@dataclass
class Store:
    """An opened storage: ``storage`` for Optuna, ``desc`` for people, ``batch()`` to group
    the writes of one ask or one tell (one locked write on a journal)."""

    storage: Resilient
    desc: str
    journal: JournalFile | None = None

    def batch(self, durable: bool = True) -> contextlib.AbstractContextManager[None]:
        return self.journal.batch(durable) if self.journal else contextlib.nullcontext()

    def others_mark(self) -> int | None:
        """A number that changes whenever another worker writes to the storage, or None
        when the storage cannot tell (a database: read it)."""
        return self.journal.others_mark() if self.journal else None

    def feed(self, study_id: int) -> TrialFeed:
        """The trials of one study, read incrementally (see :class:`TrialFeed`)."""
        return TrialFeed(self.storage, study_id, incremental=self.journal is not None)

    def close(self) -> None:
        if self.journal is not None:
            self.journal.close()
        else:
            self.storage.remove_session()


def default_storage_path(log: Path) -> Path:
    return log.with_suffix(".journal")


# The DB-API module each URL scheme needs, and the package that provides it.
_DRIVERS = {
    "postgresql": [("psycopg", "psycopg", "vtatune[postgres]"),
                   ("psycopg2", "psycopg2", "psycopg2-binary")],
    "mysql": [("pymysql", "pymysql", "vtatune[mysql]"), ("mysqldb", "MySQLdb", "mysqlclient")],
}


def resolve_url(url: str) -> str:
    """``postgresql://`` / ``mysql://`` with the driver that is installed.

    SQLAlchemy 2.1 maps a bare ``postgresql://`` to psycopg (3) and ``mysql://`` to
    mysqlclient. vtatune's extras install psycopg 3 and PyMySQL; a bare scheme gets the
    first installed driver of each list, and a missing driver is one line naming the
    package to install.
    """
    scheme, sep, rest = url.partition("://")
    dialect, _, driver = scheme.partition("+")
    dialect = {"postgres": "postgresql", "mariadb": "mysql"}.get(dialect, dialect)
    if dialect not in _DRIVERS:
        return url
    choices = _DRIVERS[dialect]
    if driver:
        for name, module, package in choices:
            if name == driver and importlib.util.find_spec(module) is None:
                raise StorageError(f"storage {dialect}+{driver}:// needs the {module} module: "
                                   f"pip install '{package}'")
        return url
    for name, module, _ in choices:
        if importlib.util.find_spec(module) is not None:
            return f"{dialect}+{name}{sep}{rest}"
    raise StorageError(f"storage {dialect}:// needs a database driver: pip install "
                       f"'{choices[0][2]}' (or {choices[1][2]})")


def _rdb(url: str, heartbeat: float) -> BaseStorage:
    """Optuna's RDBStorage with heartbeats; concurrent first starts on an empty database race
    to create the schema (one wins, the others see "already exists"): retry those."""
    from optuna.storages import RDBStorage
    from sqlalchemy import exc as sa

    engine: dict[str, Any] = {"pool_pre_ping": True}  # a connection lost in an outage
    if url.startswith("sqlite"):
        # SQLite locks the whole file per write: wait for it instead of failing at once.
        engine["connect_args"] = {"timeout": 60}
    interval = max(1, round(heartbeat))
    rng = random.Random()
    for attempt in range(8):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return RDBStorage(url, engine_kwargs=engine, heartbeat_interval=interval,
                                  grace_period=GRACE_FACTOR * interval)
        except (sa.IntegrityError, sa.ProgrammingError, sa.OperationalError,
                optuna.exceptions.StorageInternalError) as exc:
            text = str(getattr(exc, "orig", None) or exc.__cause__ or exc).lower()
            racing = any(w in text for w in ("already exists", "duplicate", "unique",
                                             "locked", "alembic_version"))
            if not racing or attempt == 7:
                raise
            time.sleep(0.05 + rng.random() * 0.2 * (attempt + 1))
    raise AssertionError("unreachable")  # pragma: no cover


def open_storage(url: str | None, log: Path, *, heartbeat: float | None = None,
                 outage: float | None = None) -> Store:
    """The journal file next to ``log`` (``url`` None), ``journal:FILE`` or an RDB URL;
    ``heartbeat`` and ``outage`` default to :data:`HEARTBEAT_SECONDS`, :data:`OUTAGE_SECONDS`.
    """
    heartbeat = HEARTBEAT_SECONDS if heartbeat is None else heartbeat
    outage = OUTAGE_SECONDS if outage is None else outage
    if url is None or url.startswith("journal:"):
        path = default_storage_path(log) if url is None else Path(url[len("journal:"):])
        if path.is_dir():
            raise StorageError(f"cannot open journal {path}: it is a directory")
        backend = JournalFile(path)
        store = HeartbeatJournalStorage(backend, heartbeat, GRACE_FACTOR * heartbeat)
        return Store(Resilient(store, str(path), outage), str(path), backend)
    if "://" not in url:
        raise StorageError(f"bad storage URL {url!r}: give an Optuna storage URL such as "
                           "postgresql://host/db, sqlite:///tune.db or journal:FILE")
    full = resolve_url(url)
    try:
        inner = _rdb(full, heartbeat)
    except Exception as exc:  # noqa: BLE001 - any driver error is one line for the user
        raise StorageError(f"cannot open storage {url}: {_first_line(exc)}") from None
    return Store(Resilient(optuna.storages.get_storage(inner), url, outage), url)


# --- studies ------------------------------------------------------------------------------
def problem_of(attrs: dict[str, Any]) -> dict[str, Any] | None:
    return attrs.get("vtatune")


PROBLEM_KEYS = ("workload_key", "hw_model", "template", "space", "bias")


def same_problem(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return all(a.get(k) == b.get(k) for k in PROBLEM_KEYS)


def describe(problem: dict[str, Any]) -> str:
    return (f"{problem.get('workload_key')} on {problem.get('hw_model')} "
            f"({problem.get('template')}{', bias' if problem.get('bias') else ''})")


@dataclass(frozen=True)
class OpenedStudy:
    study: optuna.Study
    name: str
    id: str  # unique per study, recorded in every log record
    created: bool  # this worker created it
    attrs: dict[str, Any]  # the study's vtatune attrs


ATTRS_WAIT_SECONDS = 10.0


def open_study(storage: Any, base: str, problem: dict[str, Any], where: str, *,
               allow_others: bool, resume: bool, extra: dict[str, Any],
               sampler: optuna.samplers.BaseSampler | None = None) -> OpenedStudy:
    """Create or join the study of ``problem`` in ``storage``.

    The study is called ``base``. The worker that creates it stores the problem (with
    ``extra``: encoding, sampler, seed) and a fresh id in its user attrs; the others load it
    and read them. A storage whose studies all belong to other problems is refused on
    ``resume`` (unless ``allow_others``: a network's layers share one). Studies of older
    versions (``base#2`` ...) are joined, newest first, when ``base`` is absent.
    """
    summaries = optuna.study.get_all_study_summaries(storage, include_best_trial=False)
    mine = [s.study_name for s in summaries
            if problem_of(s.user_attrs) and same_problem(problem_of(s.user_attrs), problem)]
    if resume and not mine and not allow_others:
        others = [problem_of(s.user_attrs) for s in summaries if problem_of(s.user_attrs)]
        if others:
            raise StorageError(f"cannot resume: {where} belongs to {describe(others[0])}, "
                               f"not {describe(problem)}")
    name = base if base in mine or not mine else mine[-1]
    created = False
    try:
        study = optuna.create_study(study_name=name, storage=storage, direction="minimize",
                                    sampler=sampler)
        created = True
    except optuna.exceptions.DuplicatedStudyError:
        study = optuna.load_study(study_name=name, storage=storage, sampler=sampler)
    if created:
        attrs = {**problem, **extra, "id": uuid.uuid4().hex}
        study.set_user_attr("vtatune", attrs)
        return OpenedStudy(study, name, attrs["id"], True, attrs)
    deadline = time.monotonic() + ATTRS_WAIT_SECONDS
    attrs = problem_of(study.user_attrs)
    while attrs is None and time.monotonic() < deadline:
        time.sleep(0.05)  # its creator is about to write them
        attrs = problem_of(study.user_attrs)
    if attrs is None:  # its creator died before describing it
        attrs = {**problem, **extra}
    elif not same_problem(attrs, problem):
        raise StorageError(f"study {name} in {where} belongs to {describe(attrs)}, "
                           f"not {describe(problem)}")
    if "id" not in attrs:
        # A study of an older version (or an orphan): an id every worker derives alike.
        attrs = {**attrs, "id": uuid.uuid5(uuid.NAMESPACE_URL, f"{where}#{name}").hex}
        study.set_user_attr("vtatune", attrs)
    return OpenedStudy(study, name, attrs["id"], False, attrs)
