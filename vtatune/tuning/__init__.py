"""Tuning: one Optuna study per problem (workload x hardware x template x space x bias),
driven by ask-and-tell, every legal new config scored, logged and replayable.

- :func:`tune` tunes one workload (:class:`TuneResult`); :class:`OpenStudy` keeps one
  study open between runs (the network tuner holds one per task).
- The loop (``_search``, its asks in ``_asking``): legality and duplicates first, then
  scoring in batches (``_batches``, ``--jobs``), the trial cache (``_cache``), the log as
  the source of truth on resume (``_resume``).
- Pluggable parts, one subpackage or module each: :mod:`.samplers`, :mod:`.storages`,
  :mod:`.cost_model`; every use of Optuna internals is in :mod:`.optuna_compat`.

Example (AutoTVM's ``tuner.tune(n_trial=..., callbacks=[log_to_file(...)])`` in one call):

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as d:
    ...     result = tune("gemm:dense128", trials=8, seed=0, log=f"{d}/dense128.jsonl")
    >>> result.trials, result.best_cycles <= result.default_cycles
    (8, True)
"""

from vtatune.tuning._batches import cpu_count, parallel_pool, timed_score
from vtatune.tuning._cache import Entry, EntryCache
from vtatune.tuning._codec import KNOB_ATTR
from vtatune.tuning._progress import Progress
from vtatune.tuning._search import STUCK, STUCK_AGAIN, Search
from vtatune.tuning._study import OpenStudy
from vtatune.tuning._tune import (
    RUNS_DIR,
    SEED_MAX,
    TunerError,
    TuneResult,
    check_log_belongs,
    check_seed,
    default_log_path,
    tune,
)
from vtatune.tuning._warmup import start_sampler_warmup
from vtatune.tuning.samplers import DEFAULT_SAMPLER, SAMPLERS, check_sampler

__all__ = [
    "DEFAULT_SAMPLER", "KNOB_ATTR", "RUNS_DIR", "SAMPLERS", "SEED_MAX", "STUCK", "STUCK_AGAIN",
    "Entry", "EntryCache", "OpenStudy",
    "Progress", "Search",
    "TuneResult", "TunerError", "check_log_belongs", "check_sampler", "check_seed",
    "cpu_count", "default_log_path", "parallel_pool", "start_sampler_warmup", "timed_score",
    "tune",
]
