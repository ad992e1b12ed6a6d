"""What every storage shares: its errors and the fault-tolerance settings (outage retries,
heartbeats), each overridable by an environment variable."""

from __future__ import annotations

from vtatune.errors import VtatuneError
from vtatune.records import env_seconds


class StorageError(VtatuneError):
    """A storage that cannot be opened, read or written, or a study of another problem."""


class StorageWarning(UserWarning):
    """Something the storage repaired or waited for (one line)."""


def outage_seconds() -> float:
    """How long a lost database connection is retried (waits 0.25 s doubling to 8 s) before
    the worker gives up with one line: 60 s, or ``VTATUNE_OUTAGE_SECONDS``."""
    return env_seconds("VTATUNE_OUTAGE_SECONDS", 60.0, 0.1)


def heartbeat_seconds() -> float:
    """The heartbeat interval of running trials: 10 s, or ``VTATUNE_HEARTBEAT_SECONDS``
    (whole seconds for database storages, as Optuna requires). A trial silent for
    :data:`GRACE_FACTOR` intervals belongs to a dead worker and is failed."""
    return env_seconds("VTATUNE_HEARTBEAT_SECONDS", 10.0, 0.1)


GRACE_FACTOR = 3


HEARTBEAT_ATTR = "vtatune:heartbeat"
