"""Optuna samplers by name, each seeded; optional dependencies fail in one line."""


from __future__ import annotations

import importlib.util
import warnings
from collections.abc import Sequence

import optuna

from vtatune.errors import VtatuneError
from vtatune.tuning.samplers._guided import GuidedSampler

SAMPLERS = ("guided", "tpe", "random", "cmaes", "gp", "nsga2", "bruteforce")


DEFAULT_SAMPLER = "guided"


class SamplerError(VtatuneError):
    """An unknown sampler, or one whose optional dependency is missing."""


class LegalOrderSampler(optuna.samplers.BruteForceSampler):
    """The ``bruteforce`` sampler: Optuna's BruteForceSampler, to which the tuner hands every
    legal config of the template in order (asked through ``PartialFixedSampler``), so it
    never draws a point itself.

    The tuner, not the sampler, decides when the space is used up: it knows the legal
    configs, while Optuna's sampler counts the whole grid of the distributions and, when
    that is complete (AutoTVM's small spaces, where every point is legal), calls
    ``study.stop()``, which raises outside ``study.optimize`` (the tuner asks and tells).
    """

    def after_trial(self, study: optuna.Study, trial: optuna.trial.FrozenTrial,
                    state: optuna.trial.TrialState, values: Sequence[float] | None) -> None:
        """Nothing to do: the tuner stops when its legal configs are all tried."""


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

    ``bruteforce`` is Optuna's BruteForceSampler in name only (:class:`LegalOrderSampler`):
    the tuner feeds it the template's legal configs in order, so no ask lands on an illegal
    point.
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
        return LegalOrderSampler(seed=seed)
