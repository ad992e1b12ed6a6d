"""The samplers a study can use, by name, each seeded; optional dependencies fail in one line.

``guided`` (:class:`GuidedSampler`, the default) is Optuna's multivariate TPE that proposes
only legal configs it has not tried, steered by the cost model
(:mod:`vtatune.tuning.cost_model`); its model is Optuna's TPE evaluated as probability
tables over the finite space (:class:`Mixture`, :class:`Observations`: compiled). The others
are Optuna's own samplers.

Example:
    >>> make_sampler("guided", seed=0).__class__.__name__
    'GuidedSampler'
    >>> check_sampler("annealing")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    vtatune.tuning.samplers._registry.SamplerError: unknown sampler 'annealing' (known: ...)
"""

from vtatune.tuning.samplers._guided import GuidedSampler
from vtatune.tuning.samplers._parzen import FiniteSpace, Mixture, Observations, split
from vtatune.tuning.samplers._parzen import Params as MixtureParams
from vtatune.tuning.samplers._registry import (
    DEFAULT_SAMPLER,
    SAMPLERS,
    LegalOrderSampler,
    SamplerError,
    check_sampler,
    encoding_for,
    make_sampler,
)

__all__ = ["DEFAULT_SAMPLER", "SAMPLERS", "FiniteSpace", "GuidedSampler", "LegalOrderSampler",
           "Mixture", "MixtureParams", "Observations", "SamplerError", "check_sampler",
           "encoding_for", "make_sampler", "split"]
