"""A one-line progress bar on stderr (a redrawn line on a terminal, sparse lines otherwise)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """``label [#####.....] 57/200  best 123456 cycles  12.3s``.

    On a terminal the line is redrawn at most 10 times a second; elsewhere (CI, a pipe) a
    plain line is printed at every tenth of the way and at the end, so logs stay short.
    """

    def __init__(self, label: str, total: int, done: int = 0, *, enabled: bool = True,
                 stream: TextIO | None = None) -> None:
        self.label, self.total, self.done = label, max(total, 1), done
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = enabled and hasattr(self.stream, "isatty") and self.stream.isatty()
        self.best: int | None = None
        self.start = time.perf_counter()
        self._last_draw = 0.0
        self._last_decile = done * 10 // self.total

    def update(self, done: int, best: int | None) -> None:
        self.done, self.best = done, best
        if not self.enabled:
            return
        if self.tty:
            now = time.perf_counter()
            if now - self._last_draw >= 0.1 or done >= self.total:
                self._last_draw = now
                self.stream.write("\r" + self._line() + "\x1b[K")
                self.stream.flush()
            return
        decile = done * 10 // self.total
        if decile > self._last_decile:
            self._last_decile = decile
            print(self._line(), file=self.stream, flush=True)

    def close(self, note: str = "") -> None:
        if not self.enabled:
            return
        if self.tty:
            self.stream.write("\r" + self._line() + "\x1b[K\n")
        if note:
            self.stream.write(f"{self.label}: {note}\n")
        self.stream.flush()

    def _line(self) -> str:
        width = 24
        filled = min(width, self.done * width // self.total)
        best = f"{self.best:,}" if self.best is not None else "-"
        return (f"{self.label} [{'#' * filled}{'.' * (width - filled)}] "
                f"{self.done}/{self.total}  best {best} cycles  "
                f"{time.perf_counter() - self.start:.1f}s")
