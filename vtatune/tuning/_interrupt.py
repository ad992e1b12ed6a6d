"""Ctrl-C during a study: the first finishes the trial in flight, the second stops at once."""

from __future__ import annotations

import signal
import threading
from typing import Any


class Interrupt:
    """First Ctrl-C: finish the trial in flight, log it, stop. Second: stop at once."""

    def __init__(self) -> None:
        self.flag = False
        self._old: Any = None

    def _handler(self, signum: int, frame: Any) -> None:
        if self.flag:
            raise KeyboardInterrupt
        self.flag = True

    def __enter__(self) -> Interrupt:
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)
