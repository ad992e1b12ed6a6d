"""Tuning a deployed model's workloads: what ``deploy`` does by default before it builds.

Every offloaded workload no log holds is tuned, ``trials`` trials a workload on average,
shared out by the network command's task scheduler (:func:`vtatune.networks.share_trials`:
each workload a warm-up round, then Ansor's gradient scheduler gives each next round to the
workload expected to lower the model's VTA time most, weighted by how often the model runs
it), each study starting from the default schedule and the cost model's warm starts (the
``guided`` sampler). Trials are counted, not timed: the same seed gives the same schedules.

The records go into one log per hardware kept across runs and models, as AutoTVM keeps
TopHub's in ``~/.tvm``: :func:`cache_log`, ``deploy-<hw model>.jsonl`` in
``$VTATUNE_CACHE_DIR``, else ``$XDG_CACHE_HOME/vtatune``, else ``~/.cache/vtatune``. Its
studies live in the journal beside it (:mod:`vtatune.tuning.storages`), one per workload,
so two deploys at once share them as any two tuning workers do: each skips the configs the
other is running, both append whole lines to the log, and the trials either ran count
towards both budgets.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulator.hardware import HardwareConfig
from vtatune.logging import optuna_verbosity
from vtatune.workloads import Workload

__all__ = ["CACHE_ENV", "DEFAULT_TUNE_TRIALS", "Tuning", "cache_dir", "cache_log",
           "tune_workloads"]

#: The environment variable naming the directory of the per-hardware logs.
CACHE_ENV = "VTATUNE_CACHE_DIR"

#: Trials a new workload gets on average (the network command's default): enough for the
#: guided sampler to reach a layer's optimum, or near it, on the catalogue's layers.
DEFAULT_TUNE_TRIALS = 20


def cache_dir() -> Path:
    """``$VTATUNE_CACHE_DIR``, else ``$XDG_CACHE_HOME/vtatune``, else ``~/.cache/vtatune``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "vtatune"


def cache_log(hw: HardwareConfig) -> Path:
    """The log ``deploy`` tunes into on ``hw``: ``deploy-<hw model>.jsonl`` in
    :func:`cache_dir`."""
    return cache_dir() / f"deploy-{hw.target_model}.jsonl"


@dataclass(frozen=True)
class Tuning:
    """What a deploy tuned: ``workloads`` tuned (``known``: the ones a log held already),
    ``trials`` simulated by this deploy (``held``: the trials their studies hold, another
    deploy's on the same log included), the budget ``requested``, why it stopped, the log
    and the wall time."""

    workloads: int
    known: int
    trials: int
    held: int
    requested: int
    stopped: str
    log: str
    seconds: float

    @property
    def summary(self) -> str:
        """One line for the report."""
        if not self.workloads:
            return (f"tuning: no trial run, {self.known} workload(s) in the logs already "
                    f"({self.log})")
        return (f"tuning: {self.trials} trial(s) over {self.workloads} new workload(s) "
                f"({self.known} in the logs already; {self.stopped}) in {self.seconds:.1f} s, "
                f"recorded in {self.log}")

    def as_dict(self) -> dict[str, Any]:
        return {"workloads": self.workloads, "known": self.known, "trials": self.trials,
                "held": self.held, "requested": self.requested, "stopped": self.stopped,
                "log": self.log, "seconds": self.seconds, "summary": self.summary}


@optuna_verbosity()
def tune_workloads(problems: Sequence[tuple[Workload, bool, int]], hw: HardwareConfig, *,
                   trials: int, log: str | Path, seed: int = 0, progress: bool = False,
                   patience: int | None, known: int = 0) -> Tuning:
    """Tune each ``(workload, bias, weight)`` of ``problems`` (``weight``: how many of the
    model's VTA programs run it) on ``hw`` into ``log``, ``trials`` × workloads in all,
    shared by the gradient task scheduler; ``seed``: the studies' and the scheduler's;
    ``progress``: a tqdm bar on stderr. A workload no schedule can run is left out (it
    falls back). ``known``: how many workloads the logs held (for the report);
    ``patience``: rounds without a better schedule after which a workload takes no more
    trials (None: never, every workload gets its share of the budget; ``deploy``'s:
    the network command's, :data:`vtatune.networks.DEFAULT_PATIENCE`)."""
    from search_spaces import get_template
    from vtatune.networks import share_trials
    from vtatune.networks.schedulers import get_scheduler
    from vtatune.records import RecordWriter, check_log_target
    from vtatune.tuning import DEFAULT_SAMPLER, OpenStudy, Progress, parallel_pool
    from vtatune.tuning.storages import open_storage

    t0 = time.perf_counter()
    log = Path(log)
    check_log_target(log)  # a directory, a file that is not a log: refused before tuning
    tunable = [(w, b, n) for w, b, n in problems
               if get_template(w, hw, bias=b).no_legal_config() is None]
    total = trials * len(tunable)
    if not tunable:
        return Tuning(0, known, 0, 0, 0, "nothing to tune", str(log), 0.0)
    store = open_storage(None, log)
    try:
        studies = [OpenStudy(w, hw, store, log=log, sampler=DEFAULT_SAMPLER, seed=seed,
                             jobs=1, resume=False, space="full", bias=b, allow_others=True,
                             progress=False) for w, b, _ in tunable]
        bar = Progress("tuning", total, sum(s.trials for s in studies), enabled=progress)
        with RecordWriter(log) as writer, parallel_pool(1) as pool:
            shared = share_trials(studies, [n for _, _, n in tunable],
                                  get_scheduler("gradient", seed), total, writer, pool,
                                  patience=patience, bar=bar)
        bar.close()
        ran = sum(s.search.stats.simulated for s in studies)
        held = sum(s.trials for s in studies)
    finally:
        store.close()
    return Tuning(len(tunable), known, ran, held, total, shared.stopped, str(log),
                  time.perf_counter() - t0)
