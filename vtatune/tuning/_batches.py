"""Scoring a batch of configs: one at a time in this process, or spread over a pool of
worker processes (``--jobs``; joblib's loky, kept alive across batches).

Example:
    >>> from simulator.hardware import DEFAULT
    >>> from vtatune.schedule import tutorial_schedule
    >>> from vtatune.workloads import WORKLOADS
    >>> wl = WORKLOADS["gemm"]["tutorial"]
    >>> score, seconds = timed_score(wl, tutorial_schedule(wl), DEFAULT, False)
    >>> score.status, seconds > 0
    ('ok', True)
"""
from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

from simulator.hardware import HardwareConfig
from vtatune import scoring
from vtatune.schedule import Schedule
from vtatune.scoring import Score
from vtatune.workloads import Workload


def timed_score(workload: Workload, schedule: Schedule, hw: HardwareConfig, bias: bool
                ) -> tuple[Score, float]:
    """One score and how long it took (runs in a worker process with ``--jobs``)."""
    t0 = time.perf_counter()
    score = scoring.score(workload, schedule, hw, bias=bias)
    return score, time.perf_counter() - t0


def parallel_pool(jobs: int) -> contextlib.AbstractContextManager[Any]:
    """A joblib (loky) pool kept alive across batches: ``pool(list of timed_score args)``."""
    if jobs <= 1:
        return contextlib.nullcontext(None)

    @contextlib.contextmanager
    def pool() -> Iterator[Callable[[list[Any]], list[Any]]]:
        from joblib import Parallel, delayed

        scoring.announce_worker_compile()
        with Parallel(n_jobs=jobs, backend="loky") as par:
            yield lambda items: par(delayed(timed_score)(*a) for a in items)

    return pool()


def cpu_count() -> int:
    return os.cpu_count() or 1
