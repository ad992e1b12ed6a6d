"""Optuna samplers by name, each seeded; optional dependencies fail in one line."""

from __future__ import annotations

import importlib.util
import random
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import optuna
from optuna.trial import TrialState

from ..errors import VtatuneError

SAMPLERS = ("guided", "tpe", "random", "cmaes", "gp", "nsga2", "bruteforce")
DEFAULT_SAMPLER = "guided"


class SamplerError(VtatuneError):
    """An unknown sampler, or one whose optional dependency is missing."""


def encoding_for(name: str) -> str:
    """CMA-ES moves in a continuous space and the guided TPE generalizes along tile sizes:
    give them tile indices (ordinal, log-like), not categories."""
    return "index" if name in ("cmaes", "guided") else "value"


def check_sampler(name: str) -> None:
    """Raise SamplerError (one line) when ``name`` cannot run here."""
    if name not in SAMPLERS:
        raise SamplerError(f"unknown sampler {name!r} (known: {', '.join(SAMPLERS)})")
    if name == "cmaes" and importlib.util.find_spec("cmaes") is None:
        raise SamplerError("sampler cmaes needs the cmaes package: pip install cmaes")
    if name == "gp":
        missing = [m for m in ("torch", "scipy") if importlib.util.find_spec(m) is None]
        if missing:
            raise SamplerError(f"sampler gp needs {' and '.join(missing)}: pip install "
                               "'vtatune[gp]' (or pip install torch scipy)")


def make_sampler(name: str, seed: int, *, parallel: bool = False) -> optuna.samplers.BaseSampler:
    """The sampler called ``name``, seeded so a serial run is reproducible.

    ``bruteforce`` is Optuna's BruteForceSampler in name only: the tuner feeds it the
    template's legal configs in order, so no ask lands on an illegal point.
    """
    check_sampler(name)
    s = optuna.samplers
    if name == "guided":
        return GuidedSampler(seed=seed, parallel=parallel)
    if name == "tpe":
        # multivariate: tile sizes interact through SRAM capacity, so model them jointly;
        # constant_liar keeps a batch of asks (--jobs) from piling onto one point.
        return s.TPESampler(seed=seed, multivariate=True, constant_liar=parallel,
                            n_startup_trials=10)
    if name == "random":
        return s.RandomSampler(seed=seed)
    if name == "cmaes":
        return s.CmaEsSampler(seed=seed, warn_independent_sampling=False,
                              independent_sampler=s.RandomSampler(seed=seed))
    if name == "gp":
        return s.GPSampler(seed=seed, deterministic_objective=True,
                           warn_independent_sampling=False)
    if name == "nsga2":
        return s.NSGAIISampler(seed=seed)
    with warnings.catch_warnings():  # experimental in Optuna: we only use its name
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return s.BruteForceSampler(seed=seed)


class GuidedSampler(optuna.samplers.TPESampler):
    """vtatune's default: multivariate TPE that only proposes legal configs it has not tried.

    - Every proposal is legal and new: TPE draws ``n_candidates`` points from its model of
      the good region and proposes the best one (by its acquisition value) that passes the
      template's legality check (~15 µs) and is not in the study yet. No ask is wasted on
      an illegal point or a repeat, and no penalty value distorts the model.
    - Tile sizes are ordinal indices into their sorted divisors (the ``index`` encoding), so
      the model generalizes along them ("bigger co tiles were better") instead of treating
      each size as an unrelated category.
    - A cheap analytic cost model (``_prior.estimate``) is added to the acquisition with a
      small weight: among candidates TPE likes about equally, the one the model expects to
      be faster wins. The startup draws are random legal configs, each the best by the model
      of a few random legal draws, so the first trials are not wasted on tiny tiles.
    - The driver warm-starts the study with the default schedule and the best few tile
      shapes by the cost model (``_prior.warm_starts``).

    Without :meth:`bind` (e.g. a study loaded by hand) it is a plain multivariate TPE.

    It overrides two private hooks of Optuna's TPESampler (``_sample`` to filter the
    proposal, ``_compute_acquisition_func`` to mask and bias candidates), which is why
    pyproject pins Optuna to the 5.x series it is tested with.
    """

    def __init__(self, seed: int | None = None, *, parallel: bool = False,
                 n_startup_trials: int = 12, n_candidates: int = 64,
                 prior_weight: float = 4.0, startup_pool: int = 8) -> None:
        super().__init__(seed=seed, multivariate=True, constant_liar=parallel,
                         n_startup_trials=n_startup_trials, n_ei_candidates=n_candidates)
        self._accept: Callable[[dict[str, Any]], bool] | None = None
        self._draw: Callable[[random.Random], dict[str, Any]] | None = None
        self._prior: Callable[[dict[str, Any]], float] | None = None
        self._prior_weight = prior_weight
        self._startup_pool = startup_pool
        self._py_rng = random.Random(seed)
        self._space: dict[str, Any] = {}

    def bind(self, accept: Callable[[dict[str, Any]], bool],
             draw: Callable[[random.Random], dict[str, Any]],
             prior: Callable[[dict[str, Any]], float] | None = None) -> None:
        """``accept(params)``: legal and not tried; ``draw(rng)``: uniform params;
        ``prior(params)``: estimated cycles (lower is better)."""
        self._accept, self._draw, self._prior = accept, draw, prior

    def _random_accepted(self, tries: int = 2000) -> dict[str, Any]:
        assert self._accept is not None and self._draw is not None
        pool = []
        for _ in range(tries):
            p = self._draw(self._py_rng)
            if self._accept(p):
                pool.append(p)
                if len(pool) >= self._startup_pool or self._prior is None:
                    break
        if not pool:
            return {}  # nearly exhausted: the driver's unstick logic takes over
        if self._prior is None:
            return pool[0]
        return min(pool, key=self._prior)

    def sample_relative(self, study: Any, trial: Any,
                        search_space: dict[str, Any]) -> dict[str, Any]:
        if self._accept is None or not search_space:
            return super().sample_relative(study, trial, search_space)
        states = (TrialState.COMPLETE, TrialState.PRUNED)
        n = len(study._get_trials(deepcopy=False, states=states, use_cache=True))
        if n < self._n_startup_trials:
            return self._random_accepted()
        self._space = search_space
        try:
            params = self._sample(study, trial, search_space)
        finally:
            self._space = {}
        if self._accept(params):
            return params
        # TPE's candidates all sit on tried points (its model has collapsed onto the best
        # region): step to the untried legal neighbours of the best configs instead.
        return self._neighbour(study, search_space) or self._random_accepted()

    def _neighbour(self, study: Any, search_space: dict[str, Any]) -> dict[str, Any] | None:
        """An untried legal config one knob away from one of the best three (the best by the
        cost model among a few), or None."""
        done = [t for t in study._get_trials(deepcopy=False, states=(TrialState.COMPLETE,),
                                             use_cache=True)
                if t.value is not None and search_space.keys() <= t.params.keys()]
        done.sort(key=lambda t: t.value)
        for t in done[:3]:
            pool = []
            for name, dist in search_space.items():
                if isinstance(dist, optuna.distributions.CategoricalDistribution):
                    values = list(dist.choices)
                else:
                    v = t.params[name]
                    values = [x for x in (v - 1, v + 1, v - 2, v + 2)
                              if dist.low <= x <= dist.high]
                for v in values:
                    p = dict(t.params, **{name: v})
                    if p != t.params and self._accept(p):
                        pool.append(p)
            if pool:
                self._py_rng.shuffle(pool)
                pool = pool[: self._startup_pool]
                return min(pool, key=self._prior) if self._prior else pool[0]
        return None

    def _external(self, samples: dict[str, np.ndarray], i: int) -> dict[str, Any]:
        return {n: d.to_external_repr(samples[n][i]) for n, d in self._space.items()}

    def _compute_acquisition_func(self, samples: dict[str, np.ndarray], mpe_below: Any,
                                  mpe_above: Any) -> np.ndarray:
        acq = super()._compute_acquisition_func(samples, mpe_below, mpe_above)
        if self._accept is None or not self._space or samples.keys() != self._space.keys():
            return acq
        acq = np.array(acq, dtype=float)
        for i in range(acq.size):
            params = self._external(samples, i)
            if not self._accept(params):
                acq[i] = -np.inf
            elif self._prior is not None and self._prior_weight:
                acq[i] -= self._prior_weight * np.log(self._prior(params))
        return acq
