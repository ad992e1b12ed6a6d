"""The tuning progress bar on stderr: tqdm (it fits the terminal's width, shows rates and
times, and writes sparse plain lines when stderr is not a terminal)."""

from __future__ import annotations

import sys
from typing import TextIO

from tqdm import tqdm

#: Off a terminal (CI, a pipe, a file): at most one line per this many seconds.
PLAIN_INTERVAL = 10.0


class Progress:
    """``label: 57%|#####     | 114/200 [00:03<00:02, 35.1 trials/s, best=123,456]``."""

    def __init__(self, label: str, total: int, done: int = 0, *, enabled: bool = True,
                 stream: TextIO | None = None) -> None:
        self.label, self.total, self.done = label, max(total, 1), done
        self.best: int | None = None
        stream = stream or sys.stderr
        tty = hasattr(stream, "isatty") and stream.isatty()
        self._bar = tqdm(total=self.total, initial=min(done, self.total), desc=label,
                         unit="trial", file=stream, disable=not enabled, dynamic_ncols=tty,
                         mininterval=0.1 if tty else PLAIN_INTERVAL, leave=True,
                         ascii=None if tty else True)

    def update(self, done: int, best: int | None) -> None:
        if best is not None and best != self.best:
            self._bar.set_postfix_str(f"best={best:,}", refresh=False)
        self.best = best
        step = min(done, self.total) - self._bar.n
        if step > 0:
            self._bar.update(step)
        self.done = done

    def close(self, note: str = "") -> None:
        self._bar.close()
        if note and not self._bar.disable:
            self._bar.write(f"{self.label}: {note}", file=self._bar.fp)
