"""Where studies live, and how several workers share one safely.

- A study is named after its problem (workload x hardware x template x space x bias), so
  every worker of one problem on one storage opens the same study, whether they start
  together or one after another (:func:`open_study`; the first creates it, the rest load
  it; no ``#2`` copies).
- The default storage is an Optuna journal file beside the log, through
  :class:`JournalFile` (``_journal``): writes under an ``flock``, each batch of operations
  in one checked write, a torn last record repaired on open. Several processes on one
  machine may share it.
- ``--storage URL`` takes PostgreSQL, MySQL or SQLite URLs (Optuna's RDBStorage with
  heartbeats, ``_database``); ``journal:FILE`` a journal file elsewhere.
- Every storage is wrapped by :class:`Resilient` (``_resilient``): a lost connection is
  retried with backoff for :func:`outage_seconds`, then :class:`StorageError` (one line).
- Heartbeats (Optuna's, and the same protocol for journals: a ``heartbeat`` system attr)
  let any worker fail the RUNNING trials of a worker that died (:class:`Heartbeats`), so
  their configs become available again.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> with tempfile.TemporaryDirectory() as d:
    ...     store = open_storage(None, Path(d) / "c8.jsonl")
    ...     print(Path(store.desc).name)
    ...     store.close()
    c8.journal
"""

from vtatune.tuning.storages._common import (
    GRACE_FACTOR,
    HEARTBEAT_ATTR,
    StorageError,
    StorageWarning,
    heartbeat_seconds,
    outage_seconds,
)
from vtatune.tuning.storages._database import resolve_url
from vtatune.tuning.storages._heartbeats import Heartbeats
from vtatune.tuning.storages._journal import HeartbeatJournalStorage, JournalFile
from vtatune.tuning.storages._resilient import Resilient
from vtatune.tuning.storages._studies import (
    PROBLEM_KEYS,
    OpenedStudy,
    Store,
    TrialFeed,
    default_storage_path,
    describe,
    open_storage,
    open_study,
    problem_of,
    same_problem,
)

__all__ = [
    "GRACE_FACTOR",
    "HEARTBEAT_ATTR",
    "PROBLEM_KEYS",
    "HeartbeatJournalStorage",
    "Heartbeats",
    "JournalFile",
    "OpenedStudy",
    "Resilient",
    "StorageError",
    "StorageWarning",
    "Store",
    "TrialFeed",
    "default_storage_path",
    "describe",
    "heartbeat_seconds",
    "open_storage",
    "open_study",
    "outage_seconds",
    "problem_of",
    "resolve_url",
    "same_problem",
]
