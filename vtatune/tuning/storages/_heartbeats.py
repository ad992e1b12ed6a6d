"""Heartbeats of this worker's running trials: a thread records one for each every
interval, so that any worker can fail the trials of a worker that died
(``optuna.storages.fail_stale_trials``) and their configs become available again."""

from __future__ import annotations

import contextlib
import threading
from typing import Any


class Heartbeats:
    """Records a heartbeat for this worker's running trials every interval (a thread)."""

    def __init__(self, storage: Any, interval: float) -> None:
        self._storage, self._interval = storage, interval
        self._ids: set[int] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, trial_id: int) -> None:
        with self._lock:
            self._ids.add(trial_id)
        if self._thread is None:
            self._thread = threading.Thread(target=self._beat, daemon=True,
                                            name="vtatune-heartbeat")
            self._thread.start()

    def discard(self, trial_id: int) -> None:
        with self._lock:
            self._ids.discard(trial_id)

    def _beat(self) -> None:
        while not self._stop.wait(self._interval):
            with self._lock:
                ids = sorted(self._ids)
            for trial_id in ids:
                with contextlib.suppress(Exception):  # the main thread reports outages
                    self._storage.record_heartbeat(trial_id)

    def close(self) -> None:
        """Stop the thread (a later :meth:`add` starts a new one: a study run again)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        # A study run again (a network's task, round after round) beats again.
        self._thread, self._stop = None, threading.Event()
