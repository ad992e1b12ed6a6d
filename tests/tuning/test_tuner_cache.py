"""The driver's entry cache keeps its counts equal to a recount after every change."""

from __future__ import annotations

import random

from vtatune.tuning import Entry, EntryCache


def test_entry_cache_counts_equal_a_recount():
    rng = random.Random(0)
    cache = EntryCache()
    for i in range(400):
        k = (rng.randrange(60),)  # overwrites on purpose (resume and log sync replace)
        e = Entry(rng.choice(["ok", "ok", "error", "illegal"]), float(rng.randrange(5)), i)
        if i % 3:
            cache[k] = e
        else:
            cache.setdefault(k, e)
        ok = [(k, e) for k, e in cache.items() if e.status == "ok"]
        assert cache.legal == sum(1 for e in cache.values() if e.status != "illegal")
        assert cache.best() == min(ok, key=lambda ke: (ke[1].value, ke[1].trial),
                                   default=None)
        assert cache.worst_ok() == max((e.value for _, e in ok), default=None)
    assert EntryCache().best() is None and EntryCache().worst_ok() is None
