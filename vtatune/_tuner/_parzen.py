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

    def decode(self, row: Sequence[int]) -> dict[str, Any]:
        out = {}
        for dim, dist, i in zip(self.dims, self.distributions, row, strict=True):
            internal = int(i) if dim.categorical else dim.low + int(i) * dim.step
            out[dim.name] = dist.to_external_repr(internal)
        return out


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
def _fixed_tables(size: int) -> np.ndarray:
    """Tables of bandwidth ``code / 2`` (code 1 .. 2 * size) at every centre: the bandwidths
    of a kernel between its neighbours, which sit on indices or the range's half-step ends.
    Shape ``(2 * size + 1, size, size)``; code 0 is left empty (the magic-clip minimum)."""
    out = np.zeros((2 * size + 1, size, size))
    for code in range(1, 2 * size + 1):
        for mu in range(size):
            out[code, mu] = _kernel(size, mu, code / 2)
    out.setflags(write=False)
    return out


@functools.lru_cache(maxsize=256)
def _min_tables(size: int, sigma: float) -> np.ndarray:
    """The tables of bandwidth ``sigma`` (the clip minimum) at every centre."""
    out = np.array([_kernel(size, mu, sigma) for mu in range(size)])
    out.setflags(write=False)
    return out


@functools.lru_cache(maxsize=64)
def _prior_table(size: int) -> np.ndarray:
    """Optuna's prior kernel: centred on the range, as wide as the range."""
    return _kernel(size, (size - 1) / 2, float(size))


@dataclass(frozen=True)
class Params:
    """What shapes the estimator (Optuna's ``_ParzenEstimatorParameters``, finite case)."""

    prior_weight: float
    consider_magic_clip: bool
    consider_endpoints: bool
    weights: Callable[[int], np.ndarray]


class Mixture:
    """Optuna's ``_ParzenEstimator`` over ``rows`` (trial-number order), as tables.

    ``tables[j]`` has shape ``(size_j, n_kernels)``: column k is kernel k's distribution of
    knob j (the last kernel is the prior); ``weights`` sum to one.
    """

    def __init__(self, rows: np.ndarray, space: FiniteSpace, params: Params) -> None:
        n = len(rows)
        if n == 0:
            weights = np.array([1.0])
        else:
            w = np.asarray(params.weights(n), dtype=float)[:n]
            weights = np.append(w, params.prior_weight)
        self.weights = weights / weights.sum()
        self.tables = [self._tables(rows[:, j], dim, params) if n else self._prior_only(dim)
                       for j, dim in enumerate(space.dims)]

    @staticmethod
    def _prior_only(dim: Dim) -> np.ndarray:
        if dim.categorical:
            return np.full((dim.size, 1), 1.0 / dim.size)
        return _prior_table(dim.size)[:, None]

    @staticmethod
    def _tables(mus: np.ndarray, dim: Dim, params: Params) -> np.ndarray:
        size, n = dim.size, len(mus)
        n_kernels = n + 1
        if dim.categorical:
            a = params.prior_weight / n_kernels
            table = np.full((size, n_kernels), a)
            table[mus, np.arange(n)] += 1.0
            return table / table.sum(axis=0)
        low, high = -0.5, size - 0.5  # index space: the step is 1
        order = np.argsort(mus, kind="stable")
        ends = np.empty(n + 2)
        ends[0], ends[-1] = low, high
        ends[1:-1] = mus[order]
        sigmas_sorted = np.maximum(ends[1:-1] - ends[:-2], ends[2:] - ends[1:-1])
        if not params.consider_endpoints and n >= 2:
            sigmas_sorted[0] = ends[2] - ends[1]
            sigmas_sorted[-1] = ends[-2] - ends[-3]
        sigmas = np.empty(n)
        sigmas[order] = sigmas_sorted
        maxsigma = high - low
        minsigma = maxsigma / min(100.0, 1.0 + n_kernels) if params.consider_magic_clip \
            else 1e-12
        sigmas = np.clip(sigmas, minsigma, maxsigma)
        # Bandwidths are gaps between indices or half-step ends (multiples of 1/2) unless
        # clipped to the minimum: a code per kernel, its table from the caches.
        at_min = sigmas <= minsigma
        codes = np.where(at_min, 0, np.rint(2 * sigmas)).astype(np.intp)
        fixed = _fixed_tables(size)
        table = np.empty((size, n_kernels))
        mus = mus.astype(np.intp)
        table[:, :n] = fixed[codes, mus].T
        if at_min.any():
            if minsigma < 1e-6:
                table[:, :n][:, at_min] = np.eye(size)[:, mus[at_min]]
            else:
                table[:, :n][:, at_min] = _min_tables(size, float(minsigma))[mus[at_min]].T
        table[:, n] = _prior_table(size)
        return table

    def sample(self, rng: np.random.RandomState, size: int) -> np.ndarray:
        """``size`` rows drawn from the mixture."""
        active = rng.choice(len(self.weights), p=self.weights, size=size)
        out = np.empty((size, len(self.tables)), dtype=np.int16)
        for j, table in enumerate(self.tables):
            cum = np.cumsum(table[:, active], axis=0)
            u = rng.rand(size) * cum[-1]
            out[:, j] = np.minimum((cum < u).sum(axis=0), len(table) - 1)
        return out

    def log_pdf(self, rows: np.ndarray) -> np.ndarray:
        """The mixture's log probability of each row."""
        p = self.tables[0][rows[:, 0]]
        for j in range(1, len(self.tables)):
            p = p * self.tables[j][rows[:, j]]
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
