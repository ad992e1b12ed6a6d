"""The trial cache: what a study knows about each config it holds, with the count of legal
configs and the best and slowest legal entries kept up to date as entries arrive.

Example:
    >>> cache = EntryCache()
    >>> cache[(1, 2)] = Entry("ok", 500.0, 0)
    >>> cache[(1, 4)] = Entry("illegal", 1000.0, 1)
    >>> cache[(2, 2)] = Entry("ok", 400.0, 2)
    >>> cache.legal, cache.best()[0], cache.worst_ok()
    (2, (2, 2), 500.0)
"""
from __future__ import annotations

from dataclasses import dataclass

from vtatune.tuning._codec import Key


@dataclass
class Entry:
    """What the study knows about one config."""

    status: str  # ok | error | illegal
    value: float
    trial: int


class EntryCache(dict[Key, Entry]):
    """The study's configs (``key -> Entry``) with their count of legal configs, best and
    slowest ok entries kept up to date as entries are set: the loop asks for them after
    every trial, and recounting every entry made a long study slower with each trial."""

    def __init__(self) -> None:
        super().__init__()
        self.legal = 0
        self._best: tuple[Key, Entry] | None = None
        self._worst: float | None = None
        self._stale = False  # an ok entry was replaced: recompute best and worst once

    def __setitem__(self, k: Key, e: Entry) -> None:
        old = self.get(k)
        if old is not None:
            self.legal -= old.status != "illegal"
            self._stale |= old.status == "ok"
        super().__setitem__(k, e)
        self.legal += e.status != "illegal"
        if e.status == "ok" and not self._stale:
            if self._best is None or (e.value, e.trial) < (self._best[1].value,
                                                           self._best[1].trial):
                self._best = (k, e)
            self._worst = e.value if self._worst is None else max(self._worst, e.value)

    def setdefault(self, k: Key, e: Entry) -> Entry:  # dict's own bypasses __setitem__
        if k not in self:
            self[k] = e
        return self[k]

    def _refresh(self) -> None:
        if self._stale:
            ok = [(k, e) for k, e in self.items() if e.status == "ok"]
            self._best = min(ok, key=lambda ke: (ke[1].value, ke[1].trial)) if ok else None
            self._worst = max(e.value for _, e in ok) if ok else None
            self._stale = False

    def best(self) -> tuple[Key, Entry] | None:
        self._refresh()
        return self._best

    def worst_ok(self) -> float | None:
        self._refresh()
        return self._worst
