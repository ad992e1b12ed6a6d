"""Outages: every storage call survives a bounded loss of the connection (retried with
backoff, then one line naming the storage and the cause)."""
from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable
from typing import Any

import optuna
from optuna.storages import BaseStorage

from vtatune.tuning.optuna_compat import BaseHeartbeat
from vtatune.tuning.storages._common import StorageError, outage_seconds


# --- outages ----------------------------------------------------------------------------
def _transient(exc: BaseException) -> bool:
    """A lost or refused connection (worth retrying), not bad data or a bug."""
    if isinstance(exc, optuna.exceptions.StorageInternalError):
        return True
    # A database's errors come from SQLAlchemy, which a database storage has imported; a
    # journal's process never imports it (0.3-0.5 s: a new study's first read raises).
    sa = sys.modules.get("sqlalchemy.exc")
    if sa is None:
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
    most 8 s apart) until ``outage`` seconds (:func:`outage_seconds`) have passed since the
    first failure; then
    StorageError names the storage and the cause in one line. Finishing a trial whose first
    attempt did reach the database (the reply was lost) counts as done.
    """

    def __init__(self, inner: BaseStorage, desc: str, outage: float | None = None) -> None:
        self._inner, self._desc = inner, desc
        self._outage = outage_seconds() if outage is None else outage

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
