"""Optuna's multivariate TPE model on a finite space, as probability tables.

Every knob vtatune hands Optuna is finite: a categorical, or an integer range with a step
(tile indices). Optuna's Parzen estimator treats an integer as a truncated normal that is
sampled and rounded, and scores a point by the normal's mass over ``[x - step/2, x + step/2]``
over its mass on the whole range. Over a finite range that is a probability table per kernel:
this module builds those tables instead of drawing and integrating normals point by point
(Optuna 5 evaluates ``log Φ`` one Python call per element: ~10 ms an ask at 200 trials).

The model is Optuna's own (``TPESampler`` with ``multivariate=True``): the same split of the
trials by ``gamma``, the same ``weights``, the prior kernel with ``prior_weight``, the same
bandwidths (neighbour gaps, magic clip, endpoints) and categorical kernels. Kernel tables are
exact up to ``math.erfc``; a kernel's table depends only on its centre and bandwidth, which
take few values (centres are indices, gaps are multiples of half a step), so tables come from
a cache indexed by (bandwidth code, centre) and an ask does no ``erf`` at all.

:class:`Observations` collects the finished trials incrementally (each trial is read once,
plus the unfinished ones again until they finish), instead of every trial on every ask.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.trial import FrozenTrial, TrialState

_SQRT2 = math.sqrt(2.0)


@dataclass(frozen=True)
class Dim:
    """One knob as a finite domain ``0 .. size - 1`` (choice index, or integer step index)."""

    name: str
    size: int
    categorical: bool
    low: int = 0
    step: int = 1


@dataclass(frozen=True)
class FiniteSpace:
    """A relative search space whose every distribution is finite, in a fixed order."""

    dims: tuple[Dim, ...]
    distributions: tuple[BaseDistribution, ...]

    @staticmethod
    def of(search_space: dict[str, BaseDistribution]) -> FiniteSpace | None:
        """The space, or None when a distribution is continuous or log-scaled."""
        dims = []
        for name, d in search_space.items():
            if isinstance(d, CategoricalDistribution):
                dims.append(Dim(name, len(d.choices), True))
            elif isinstance(d, IntDistribution) and not d.log:
                dims.append(Dim(name, (d.high - d.low) // d.step + 1, False, d.low, d.step))
            else:
                return None
        return FiniteSpace(tuple(dims), tuple(search_space.values()))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.dims)

    def encode(self, params: dict[str, Any]) -> tuple[int, ...] | None:
        """The row of ``params`` (None if a knob is missing or outside the space)."""
        row = []
        for dim, dist in zip(self.dims, self.distributions, strict=True):
            if dim.name not in params:
                return None
            try:
                i = int(dist.to_internal_repr(params[dim.name]))
            except (ValueError, TypeError):
                return None
            if not dim.categorical:
                i, off = divmod(i - dim.low, dim.step)
                if off:
                    return None
            if not 0 <= i < dim.size:
                return None
            row.append(i)
        return tuple(row)

    @functools.cached_property
    def _values(self) -> tuple[tuple[str, tuple[Any, ...]], ...]:
        """Each knob's name and external value at every index (decoding is a lookup)."""
        return tuple((dim.name, tuple(
            dist.to_external_repr(i if dim.categorical else dim.low + i * dim.step)
            for i in range(dim.size))) for dim, dist in zip(self.dims, self.distributions,
                                                          strict=True))

    def decode(self, row: Sequence[int]) -> dict[str, Any]:
        return {name: values[i] for (name, values), i in zip(self._values, row, strict=True)}


class Observations:
    """The study's trials as rows of a :class:`FiniteSpace`, read incrementally.

    ``update(trials)`` takes the study's trial list (by number, as ``Study._get_trials``
    returns it) and reads only the trials it has not seen finished: new ones, and those that
    were running or waiting. It keeps:

    - ``rows`` / ``values`` / ``numbers``: the COMPLETE trials holding the whole space;
    - ``taken``: how many trials hold each row, in any state but FAIL (a failed trial's config
      is free again), from every worker sharing the storage;
    - ``running``: the unfinished trials' rows by number (the constant liar's points);
    - ``exotic``: a PRUNED trial or one with constraints was seen (the caller falls back to
      Optuna's own collection, which knows how to rank those).
    """

    def __init__(self, space: FiniteSpace) -> None:
        self.space = space
        self._rows = np.empty((64, len(space.dims)), dtype=np.int16)
        self._values = np.empty(64)
        self._numbers = np.empty(64, dtype=np.int64)
        self.n = 0
        self.taken: Counter[tuple[int, ...]] = Counter()
        self.running: dict[int, tuple[int, ...]] = {}
        self.exotic = False
        self._seen = 0  # trials[:_seen] have been read once
        self._open: dict[int, tuple[int, ...] | None] = {}  # unfinished: number -> row
        self._in_order = True  # rows were appended in trial-number order

    @property
    def rows(self) -> np.ndarray:
        return self._rows[: self.n]

    @property
    def values(self) -> np.ndarray:
        return self._values[: self.n]

    @property
    def numbers(self) -> np.ndarray:
        return self._numbers[: self.n]

    @property
    def in_order(self) -> bool:
        return self._in_order

    def update(self, trials: Sequence[FrozenTrial],
               params_of: Callable[[FrozenTrial], dict[str, Any]] | None = None) -> None:
        """Read what changed. ``params_of(trial)``: the params of an unfinished trial (the
        TPE sampler's relative params shared under the constant liar), default its params."""
        if len(trials) < self._seen or any(
                trials[i].number != i for i in (0, len(trials) - 1) if len(trials) > i):
            raise ValueError("trials must be the study's trials in number order")
        for number in list(self._open):
            self._read(trials[number], params_of)
        for trial in trials[self._seen:]:
            self._read(trial, params_of)
        self._seen = len(trials)

    def _read(self, trial: FrozenTrial,
              params_of: Callable[[FrozenTrial], dict[str, Any]] | None) -> None:
        number, state = trial.number, trial.state
        old = self._open.pop(number, False)  # False: not seen before
        if old:
            self.taken[old] -= 1
            if not self.taken[old]:
                del self.taken[old]
        self.running.pop(number, None)
        if state == TrialState.FAIL:
            return
        if state == TrialState.PRUNED or (state == TrialState.COMPLETE and trial.constraints):
            self.exotic = True
        unfinished = not state.is_finished()
        params = params_of(trial) if unfinished and params_of is not None else trial.params
        row = self.space.encode(params)
        if row is not None:
            self.taken[row] += 1
        if unfinished:
            self._open[number] = row
            if row is not None and state == TrialState.RUNNING:
                self.running[number] = row
            return
        if state == TrialState.COMPLETE and row is not None and trial.value is not None:
            self._append(row, float(trial.value), number)

    def _append(self, row: tuple[int, ...], value: float, number: int) -> None:
        if self.n == len(self._values):
            grow = 2 * self.n
            self._rows = np.resize(self._rows, (grow, self._rows.shape[1]))
            self._values = np.resize(self._values, grow)
            self._numbers = np.resize(self._numbers, grow)
        if self.n and number < self._numbers[self.n - 1]:
            self._in_order = False
        self._rows[self.n] = row
        self._values[self.n] = value
        self._numbers[self.n] = number
        self.n += 1


# --- kernel tables ------------------------------------------------------------------------
def _mass(a: float, b: float) -> float:
    """Standard normal mass on [a, b], accurate in both tails."""
    if b <= 0:
        return 0.5 * (math.erfc(-b / _SQRT2) - math.erfc(-a / _SQRT2))
    if a >= 0:
        return 0.5 * (math.erfc(a / _SQRT2) - math.erfc(b / _SQRT2))
    return 1.0 - 0.5 * (math.erfc(-a / _SQRT2) + math.erfc(b / _SQRT2))


def _kernel(size: int, mu: float, sigma: float) -> np.ndarray:
    """P(index) of a normal (mu, sigma) truncated to [-0.5, size - 0.5], rounded."""
    edges = [(e - 0.5 - mu) / sigma for e in range(size + 1)]
    cells = [_mass(a, b) for a, b in zip(edges, edges[1:], strict=False)]
    total = sum(cells)
    return np.array(cells) / total


@functools.lru_cache(maxsize=64)
def _fixed_columns(size: int) -> np.ndarray:
    """Kernels at every centre ``mu`` with bandwidth ``code / 2`` (code 1 .. 2 * size: gaps
    between indices or the range's half-step ends), column ``(code - 1) * size + mu``."""
    return np.array([_kernel(size, mu, code / 2) for code in range(1, 2 * size + 1)
                     for mu in range(size)]).T


@functools.lru_cache(maxsize=256)
def _lookup(size: int, minsigma: float) -> np.ndarray:
    """Every kernel table an integer knob of ``size`` values can have, as columns: column
    ``code * size + mu`` is the kernel at centre ``mu`` with bandwidth ``code / 2``, code 0
    the magic-clip minimum ``minsigma``; the last column is Optuna's prior kernel (centred,
    as wide as the range). Shape ``(size, (2 * size + 1) * size + 1)``."""
    at_min = np.array([_kernel(size, mu, minsigma) if minsigma >= 1e-6 else np.eye(size)[mu]
                       for mu in range(size)]).T
    prior = _kernel(size, (size - 1) / 2, float(size))[:, None]
    out = np.ascontiguousarray(np.concatenate([at_min, _fixed_columns(size), prior], axis=1))
    out.setflags(write=False)
    return out


@functools.lru_cache(maxsize=1024)
def _categorical_lookup(size: int, n_kernels: int, prior_weight: float) -> np.ndarray:
    """Optuna's categorical kernels: column c the observed choice c (weight 1 on it plus the
    prior's share spread over every choice), column ``size`` the prior (uniform)."""
    a = prior_weight / n_kernels
    lookup = np.full((size, size + 1), a) + np.eye(size, size + 1)
    lookup /= lookup.sum(axis=0)
    lookup.setflags(write=False)
    return lookup


@dataclass(frozen=True)
class Params:
    """What shapes the estimator (Optuna's ``_ParzenEstimatorParameters``, finite case)."""

    prior_weight: float
    consider_magic_clip: bool
    consider_endpoints: bool
    weights: Callable[[int], np.ndarray]


class Mixture:
    """Optuna's ``_ParzenEstimator`` over ``rows`` (trial-number order), as tables.

    Knob j's kernels are columns ``keys[j]`` of ``lookups[j]`` (shape ``(size_j, ...)``):
    kernel k's distribution of knob j is ``lookups[j][:, keys[j][k]]`` (the last kernel is the
    prior). Only the keys are built per ask (O(trials) integers per knob); ``weights`` sum
    to one.
    """

    def __init__(self, rows: np.ndarray, space: FiniteSpace, params: Params) -> None:
        n = len(rows)
        if n == 0:
            weights = np.array([1.0])
        else:
            w = np.asarray(params.weights(n), dtype=float)[:n]
            weights = np.append(w, params.prior_weight)
        self.weights = weights / weights.sum()
        self.dims = space.dims
        self.lookups: list[np.ndarray] = []
        self.keys: list[np.ndarray] = []
        numeric = [j for j, dim in enumerate(space.dims) if not dim.categorical]
        numeric_kernels = iter(self._numeric(rows[:, numeric], [space.dims[j] for j in numeric],
                                             params) if numeric else ())
        for j, dim in enumerate(space.dims):
            if dim.categorical:  # column c: observed choice c; column size: the prior (uniform)
                lookup = _categorical_lookup(dim.size, n + 1, params.prior_weight)
                keys = np.append(rows[:, j].astype(np.intp), dim.size)
            else:
                lookup, keys = next(numeric_kernels)
            self.lookups.append(lookup)
            self.keys.append(keys)

    @staticmethod
    def _numeric(mus: np.ndarray, dims: list[Dim], params: Params
                 ) -> list[tuple[np.ndarray, np.ndarray]]:
        """(lookup, keys) of each integer knob, the knobs' bandwidths computed together (one
        row per knob: the same sort, the same arithmetic as one knob at a time)."""
        n, n_kernels = len(mus), len(mus) + 1
        sizes = np.array([dim.size for dim in dims])
        low, high = -0.5, sizes - 0.5  # index space: the step is 1
        maxsigma = high - low
        if params.consider_magic_clip:
            minsigma = maxsigma / min(100.0, 1.0 + n_kernels)
        else:
            minsigma = np.full(len(dims), 1e-12)
        lookups = [_lookup(dim.size, float(ms)) for dim, ms in zip(dims, minsigma, strict=True)]
        if n == 0:
            return [(lookup, np.array([lookup.shape[1] - 1])) for lookup in lookups]
        # Optuna's sort (same kind, same dtype, one contiguous row per knob): equal centres
        # get their bandwidths in the same order, so a seed gives Optuna's estimator exactly.
        centres = np.ascontiguousarray(mus.T, dtype=float)
        order = np.argsort(centres, axis=1)
        ends = np.empty((len(dims), n + 2))
        ends[:, 0], ends[:, -1] = low, high
        ends[:, 1:-1] = np.take_along_axis(centres, order, axis=1)
        sigmas_sorted = np.maximum(ends[:, 1:-1] - ends[:, :-2], ends[:, 2:] - ends[:, 1:-1])
        if not params.consider_endpoints and n >= 2:
            sigmas_sorted[:, 0] = ends[:, 2] - ends[:, 1]
            sigmas_sorted[:, -1] = ends[:, -2] - ends[:, -3]
        sigmas = np.empty_like(sigmas_sorted)
        np.put_along_axis(sigmas, order, np.clip(sigmas_sorted, minsigma[:, None],
                                                 maxsigma[:, None]), axis=1)
        # Bandwidths are gaps between indices or half-step ends (multiples of 1/2) unless
        # clipped to the minimum (code 0).
        codes = np.where(sigmas <= minsigma[:, None], 0, np.rint(2 * sigmas)).astype(np.intp)
        keys = np.empty((len(dims), n_kernels), dtype=np.intp)
        keys[:, :n] = codes * sizes[:, None] + mus.T
        keys[:, n] = [lookup.shape[1] - 1 for lookup in lookups]
        return list(zip(lookups, keys, strict=True))

    def sample(self, rng: np.random.RandomState, size: int) -> np.ndarray:
        """``size`` rows drawn from the mixture, using ``rng`` as Optuna's estimator does
        (the component, a uniform per categorical knob, then one block of uniforms for the
        integer knobs: a truncated normal's quantile rounded to an index is the index whose
        table cell holds that quantile), so a seed draws the same rows."""
        active = rng.choice(len(self.weights), p=self.weights, size=size)
        numeric = [j for j, dim in enumerate(self.dims) if not dim.categorical]
        quantiles = dict.fromkeys(numeric)
        for j, dim in enumerate(self.dims):
            if dim.categorical:
                quantiles[j] = rng.rand(size)
        if numeric:
            block = rng.uniform(low=0, high=1, size=(len(numeric), size))
            quantiles.update(zip(numeric, block, strict=True))
        out = np.empty((size, len(self.dims)), dtype=np.int16)
        for j, (lookup, keys) in enumerate(zip(self.lookups, self.keys, strict=True)):
            cum = np.cumsum(lookup[:, keys[active]], axis=0)
            out[:, j] = np.minimum((cum < quantiles[j] * cum[-1]).sum(axis=0), len(cum) - 1)
        return out

    def log_pdf(self, rows: np.ndarray) -> np.ndarray:
        """The mixture's log probability of each row."""
        p = None
        for j, (lookup, keys) in enumerate(zip(self.lookups, self.keys, strict=True)):
            pj = np.take(lookup[rows[:, j]], keys, axis=1)  # (rows, kernels)
            if p is None:
                p = pj
            else:
                p *= pj
        assert p is not None
        with np.errstate(divide="ignore"):
            return np.log(p @ self.weights)


def split(obs: Observations, n_below: int,
          extra_above: Sequence[tuple[int, tuple[int, ...]]] = ()
          ) -> tuple[np.ndarray, np.ndarray]:
    """Optuna's split of the complete trials: the ``n_below`` best (ties by trial number)
    and the rest, each in trial-number order; ``extra_above``: (number, row) of running
    trials the constant liar adds to the rest."""
    rows, values, numbers = obs.rows, obs.values, obs.numbers
    if not obs.in_order:
        order = np.argsort(numbers, kind="stable")
        rows, values, numbers = rows[order], values[order], numbers[order]
    n_below = min(n_below, len(values))
    best = np.argsort(values, kind="stable")[:n_below]
    is_below = np.zeros(len(values), dtype=bool)
    is_below[best] = True
    below, above = rows[is_below], rows[~is_below]
    if extra_above:
        above_numbers = np.concatenate([numbers[~is_below], [n for n, _ in extra_above]])
        above = np.concatenate([above, np.array([r for _, r in extra_above], dtype=np.int16)])
        above = above[np.argsort(above_numbers, kind="stable")]
    return below, above
