"""Every Optuna internal vtatune relies on, in one place.

vtatune drives Optuna harder than its public API allows in a few spots: the guided sampler
is Optuna's multivariate TPE with its private settings read, the tuner tells trials without
the deep copy ``Study.tell`` makes, the journal storage gets heartbeats through Optuna's
heartbeat base class, and the journal's distribution (de)serialisation is memoized. Each of
those reads one private name of Optuna, and each is wrapped here by a small function of its
own, so that a release of Optuna that moves one breaks ``tests/tuning/test_optuna_compat.py``
by name instead of a study halfway through. pyproject pins Optuna to the 5.x series these
are tested with.

Example:
    >>> import optuna
    >>> optuna.logging.set_verbosity(optuna.logging.WARNING)
    >>> study = optuna.create_study()
    >>> study_id(study) >= 0
    True
    >>> single_value(optuna.distributions.IntDistribution(3, 3))
    3
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution
from optuna.distributions import _get_single_value as _single_value
from optuna.samplers._tpe.parzen_estimator import _ParzenEstimator, _ParzenEstimatorParameters
from optuna.samplers._tpe.sampler import _split_trials, default_gamma, default_weights
from optuna.storages._heartbeat import BaseHeartbeat
from optuna.study._tell import _tell_with_warning
from optuna.trial import FrozenTrial, TrialState

__all__ = [
    "BaseHeartbeat",
    "ParzenEstimator",
    "ParzenEstimatorParameters",
    "TpeSettings",
    "default_gamma",
    "default_weights",
    "memoize_journal_distribution_json",
    "single_value",
    "split_trials",
    "study_id",
    "study_trials",
    "tell",
    "tpe_params",
    "tpe_rng",
    "tpe_sample",
    "tpe_settings",
    "trial_id",
    "trials_cached",
]

#: Optuna's multivariate Parzen estimator and its parameters (the guided sampler's model is
#: checked against it, draw for draw).
ParzenEstimator = _ParzenEstimator
ParzenEstimatorParameters = _ParzenEstimatorParameters
#: Optuna's split of the trials into the good and the rest (the same check).
split_trials = _split_trials


def study_id(study: optuna.Study) -> int:
    """The storage's id of ``study`` (the storage API takes ids; a Study hides its own)."""
    return study._study_id


def trial_id(trial: FrozenTrial | optuna.Trial) -> int:
    """The storage's id of a trial (Trial and FrozenTrial keep it private)."""
    return trial._trial_id


def single_value(distribution: BaseDistribution) -> Any:
    """The one value of a single-choice distribution."""
    return _single_value(distribution)


def tell(study: optuna.Study, trial: optuna.Trial, value: float | None = None,
         state: TrialState | None = None) -> None:
    """``study.tell`` without the deep copy of the trial it returns (a copy per trial that
    the tuner never reads)."""
    _tell_with_warning(study, trial, value, state)


def study_trials(study: optuna.Study, states: Sequence[TrialState] | None = None
                 ) -> list[FrozenTrial]:
    """The study's trials from Optuna's per-ask cache, not copied (samplers read them)."""
    return study._get_trials(deepcopy=False, states=states, use_cache=True)


@contextlib.contextmanager
def trials_cached(study: optuna.Study, trials: list[FrozenTrial]) -> Iterator[None]:
    """Let ``study``'s samplers read ``trials`` as the study's own (Optuna's per-ask cache)
    while the block runs: the tuner reads the study incrementally and hands the samplers
    that list instead of a fresh copy of every trial."""
    study._thread_local.cached_all_trials = trials
    try:
        yield
    finally:
        study._thread_local.cached_all_trials = None


@dataclass(frozen=True)
class TpeSettings:
    """What a TPESampler was built with (Optuna keeps all of it private)."""

    n_startup_trials: int
    n_candidates: int
    gamma: Callable[[int], int]
    constant_liar: bool
    parzen: ParzenEstimatorParameters


def tpe_settings(sampler: optuna.samplers.TPESampler) -> TpeSettings:
    """The settings ``sampler`` was built with."""
    return TpeSettings(sampler._n_startup_trials, sampler._n_ei_candidates,
                       sampler._gamma or default_gamma, sampler._constant_liar,
                       sampler._parzen_estimator_parameters)


def tpe_rng(sampler: optuna.samplers.TPESampler) -> np.random.RandomState:
    """The sampler's own random state (drawing from it advances the sampler's stream; read
    it at each use: Optuna creates it lazily)."""
    return sampler._rng.rng


def tpe_params(sampler: optuna.samplers.TPESampler, trial: FrozenTrial,
               study: optuna.Study) -> dict[str, Any]:
    """The params TPE models for ``trial`` (with the constant liar, a running trial's)."""
    return sampler._get_params(trial, study)


def tpe_sample(sampler: optuna.samplers.TPESampler, study: optuna.Study, trial: FrozenTrial,
               search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
    """One draw of Optuna's own TPE step over ``search_space`` (past its startup trials)."""
    return sampler._sample(study, trial, search_space)


def _by_identity(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``fn`` memoized per argument object (distributions compare slowly by value; a
    study hands the same objects with every trial)."""
    memo: dict[int, tuple[Any, Any]] = {}

    def cached(arg: Any) -> Any:
        hit = memo.get(id(arg))
        if hit is not None and hit[0] is arg:
            return hit[1]
        if len(memo) >= 4096:
            memo.clear()
        out = fn(arg)
        memo[id(arg)] = (arg, out)  # holding arg keeps its id from being reused
        return out

    cached.__wrapped__ = fn  # type: ignore[attr-defined]
    return cached


def memoize_journal_distribution_json() -> None:
    """Optuna's journal turns every trial's distributions into JSON when it writes the
    trial and back when it replays it (~60 µs a trial here, where every trial of a study
    carries the same few distributions): memoize both conversions, pure functions of
    immutable values, in the journal module that calls them (process-wide, idempotent)."""
    from optuna.storages.journal import _storage as journal

    if not hasattr(journal.distribution_to_json, "__wrapped__"):
        journal.distribution_to_json = _by_identity(journal.distribution_to_json)
    if not hasattr(journal.json_to_distribution, "__wrapped__"):
        journal.json_to_distribution = functools.lru_cache(maxsize=4096)(
            journal.json_to_distribution)
