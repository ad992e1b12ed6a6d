"""Optuna's multivariate TPE model on a finite space, as probability tables.

Every knob vtatune hands Optuna is finite: a categorical, or an integer range with a step
(tile indices). Optuna's Parzen estimator treats an integer as a truncated normal that is
sampled and rounded, and scores a point by the normal's mass over ``[x - step/2, x + step/2]``
over its mass on the whole range. Over a finite range that is a probability table per kernel:
this module builds those tables instead of drawing and integrating normals point by point
(Optuna 5 evaluates ``log Φ`` one Python call per element: ~10 ms an ask at 200 trials).

The model is Optuna's own (``TPESampler`` with ``multivariate=True``): the same split of the
trials by ``gamma``, the same ``weights``, the prior kernel with ``prior_weight``, the same
bandwidths (neighbour gaps, magic clip, endpoints, Optuna's sort for equal centres) and
categorical kernels, and the same draws from the same random state. A kernel's table depends
only on its centre and bandwidth, which take few values (centres are indices, gaps are
multiples of half a step), so the tables are computed once per space, bar the magic-clip
minimum's and the categorical ones, which depend on the number of kernels (see the kernels'
comment). A model's keys, its draws and its densities are compiled loops (numba).

:class:`Observations` collects the finished trials incrementally (each trial is read once,
plus the unfinished ones again until they finish) and keeps the best ones ranked, instead of
collecting and sorting every trial on every ask.
"""

from __future__ import annotations

import bisect
import functools
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution
from optuna.trial import FrozenTrial, TrialState

from simulator.jit import njit

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

    @functools.cached_property
    def names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.dims)

    @functools.cached_property
    def sizes(self) -> np.ndarray:
        return np.array([d.size for d in self.dims], dtype=np.intp)

    @functools.cached_property
    def categorical(self) -> np.ndarray:
        return np.array([d.categorical for d in self.dims], dtype=bool)

    @functools.cached_property
    def categorical_dims(self) -> list[int]:
        return [j for j, d in enumerate(self.dims) if d.categorical]

    @functools.cached_property
    def numeric_dims(self) -> list[int]:
        return [j for j, d in enumerate(self.dims) if not d.categorical]

    @functools.cached_property
    def draw_order(self) -> np.ndarray:
        """The knobs in the order Optuna draws their quantiles: categoricals, then integers."""
        return np.array(self.categorical_dims + self.numeric_dims, dtype=np.intp)

    @functools.cached_property
    def cols(self) -> np.ndarray:
        """Columns of each knob's kernel table: (2 x size + 1) x size + 1 for an integer
        knob (codes 0 .. 2 x size at every centre, the prior), size + 1 for a categorical."""
        return np.array([d.size + 1 if d.categorical else (2 * d.size + 1) * d.size + 1
                         for d in self.dims], dtype=np.intp)

    @functools.cached_property
    def at(self) -> np.ndarray:
        """Where each knob's (size, cols) table starts in a model's flat table; the last
        entry is the table's length."""
        return np.concatenate([[0], np.cumsum(self.sizes * self.cols)]).astype(np.intp)

    @functools.cached_property
    def table(self) -> np.ndarray:
        """The kernel columns every model of this space shares (see :func:`_space_table`)."""
        out = _space_table(self.sizes, self.categorical, self.at, self.cols)
        out.setflags(write=False)
        return out

    @functools.cached_property
    def radix(self) -> np.ndarray:
        """Weights that number rows uniquely: ``rows @ radix`` (mixed radix)."""
        sizes = [d.size for d in self.dims]
        return np.array([int(np.prod(sizes[j + 1:])) for j in range(len(sizes))],
                        dtype=np.int64)

    def code(self, row: Sequence[int]) -> int:
        """The row's number (``row @ radix``)."""
        return sum(int(i) * int(r) for i, r in zip(row, self.radix, strict=True))

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


#: How many of the best trials :class:`Observations` keeps ranked: Optuna's default gamma
#: never puts more in TPE's good set.
BEST_KEPT = 25


class Observations:
    """The study's trials as rows of a :class:`FiniteSpace`, read incrementally.

    ``update(trials)`` takes the study's trial list (by number, as ``Study._get_trials``
    returns it) and reads only the trials it has not seen finished: new ones, and those that
    were running or waiting. It keeps:

    - ``rows`` / ``values`` / ``numbers``: the COMPLETE trials holding the whole space;
    - ``taken``: how many trials hold each row (by its :meth:`FiniteSpace.code`), in any
      state but FAIL (a failed trial's config
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
        self.taken: Counter[int] = Counter()
        self.freed = 0  # how many times a config became free again (its trial failed)
        self.running: dict[int, tuple[int, ...]] = {}
        self.exotic = False
        self._seen = 0  # trials[:_seen] have been read once
        self._open: dict[int, tuple[int, ...] | None] = {}  # unfinished: number -> row
        self._in_order = True  # rows were appended in trial-number order
        # The BEST_KEPT best complete trials as sorted (value, number, position): TPE's good
        # set without sorting every value on every ask.
        self._best: list[tuple[float, int, int]] = []
        self._best_positions: np.ndarray | None = None  # best(k) until the best change

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

    def ranked(self, k: int) -> np.ndarray:
        """Positions of the ``k`` best complete trials, best first (ties by trial number)."""
        if k <= BEST_KEPT and self._in_order:
            return np.array([position for _, _, position in self._best[:k]], dtype=np.intp)
        order = np.argsort(self.numbers, kind="stable")
        return order[np.argsort(self.values[order], kind="stable")[:k]]

    def best(self, k: int) -> np.ndarray | None:
        """Positions of the ``k`` best complete trials (ties by trial number), in position
        order; None when more than :data:`BEST_KEPT` are asked for."""
        if k > BEST_KEPT:
            return None
        if self._best_positions is None or len(self._best_positions) != k:
            self._best_positions = np.sort(np.array(
                [position for _, _, position in self._best[:k]], dtype=np.intp))
        return self._best_positions

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
            code = self.space.code(old)
            self.taken[code] -= 1
            if not self.taken[code]:
                del self.taken[code]
                self.freed += state == TrialState.FAIL  # free again (else taken back below)
        self.running.pop(number, None)
        if state == TrialState.FAIL:
            return
        if state == TrialState.PRUNED or (state == TrialState.COMPLETE and trial.constraints):
            self.exotic = True
        unfinished = not state.is_finished()
        params = params_of(trial) if unfinished and params_of is not None else trial.params
        row = self.space.encode(params)
        if row is not None:
            self.taken[self.space.code(row)] += 1
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
        if len(self._best) < BEST_KEPT or (value, number) < self._best[-1][:2]:
            bisect.insort(self._best, (value, number, self.n))
            del self._best[BEST_KEPT:]
            self._best_positions = None
        self._rows[self.n] = row
        self._values[self.n] = value
        self._numbers[self.n] = number
        self.n += 1


# --- kernels --------------------------------------------------------------------------------
# A kernel's distribution over one knob is a column of a table of that knob (rows: its
# indices); each kernel has a key per knob, its column. Integer knobs: a truncated normal
# rounded to an index, whose bandwidth is a gap between indices or the range's half-step
# ends (a multiple of 1/2: code = 2 x sigma), the magic-clip minimum (code 0), or the
# prior's (centred, as wide as the range): column code x size + centre, the prior last. Its
# table depends on the centre and the code alone, so every column but those of code 0 is
# computed once per space (``FiniteSpace.table``). Categorical knobs: Optuna's kernel of an
# observed choice c puts ``a + [v == c]`` on each choice v, normalized, with
# ``a = prior_weight / n_kernels`` (column c); the prior (column size) is uniform. A model
# copies the space's table and fills in the columns that depend on its number of kernels.

@njit(inner=True)
def _mass(a: float, b: float) -> float:  # pragma: no cover - compiled
    """Standard normal mass on [a, b], accurate in both tails."""
    if b <= 0:
        return 0.5 * (math.erfc(-b / _SQRT2) - math.erfc(-a / _SQRT2))
    if a >= 0:
        return 0.5 * (math.erfc(a / _SQRT2) - math.erfc(b / _SQRT2))
    return 1.0 - 0.5 * (math.erfc(-a / _SQRT2) + math.erfc(b / _SQRT2))


@njit(inner=True)
def _normal(out: np.ndarray, at: int, cols: int, column: int, size: int, mu: float,
            sigma: float) -> None:  # pragma: no cover - compiled
    """Column ``column`` of the (size, cols) table at ``out[at:]``: P(index) of a normal
    (mu, sigma) truncated to [-0.5, size - 0.5] and rounded to an index (its mass on each
    index's cell over its mass on the range)."""
    total = 0.0
    for v in range(size):
        cell = _mass((v - 0.5 - mu) / sigma, (v + 0.5 - mu) / sigma)
        out[at + v * cols + column] = cell
        total += cell
    for v in range(size):
        out[at + v * cols + column] /= total


@njit(cache=True)
def _space_table(sizes: np.ndarray, categorical: np.ndarray, at: np.ndarray,
                 cols: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """Every knob's table with the columns that do not depend on the number of kernels:
    integer knobs' codes 1 .. 2 x size and prior (code 0 columns and categorical tables
    are left for :func:`_model`)."""
    out = np.zeros(at[-1])
    for j in range(len(sizes)):
        if categorical[j]:
            continue
        size = sizes[j]
        for code in range(1, 2 * size + 1):
            for mu in range(size):
                _normal(out, at[j], cols[j], code * size + mu, size, float(mu), code / 2.0)
        _normal(out, at[j], cols[j], cols[j] - 1, size, (size - 1) / 2.0, float(size))
    return out


@njit(cache=True)
def _model(rows: np.ndarray, order: np.ndarray, space_table: np.ndarray, sizes: np.ndarray,
           categorical: np.ndarray, at: np.ndarray, cols: np.ndarray, prior_weight: float,
           magic_clip: bool, endpoints: bool
           ) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """(keys, table) of the kernels of ``rows`` plus the prior.

    Integer knob j: kernel i (centre ``rows[i, j]``, rank ``order[j]`` among the centres)
    takes the larger gap to its sorted neighbours (the range's half-step ends at the
    extremes; without endpoints the extremes take their inner gap), clipped to [minsigma,
    range] (Optuna's ``_calculate_numerical_distributions`` in index space)."""
    n, d = rows.shape
    n_kernels = n + 1
    keys = np.empty((d, n_kernels), dtype=np.intp)
    table = space_table.copy()
    a = prior_weight / n_kernels
    numeric = 0
    for j in range(d):
        size = sizes[j]
        if categorical[j]:
            for v in range(size):
                for c in range(size):
                    table[at[j] + v * cols[j] + c] = (a + (1.0 if v == c else 0.0)) \
                        / (1.0 + a * size)
                table[at[j] + v * cols[j] + size] = 1.0 / size
            for i in range(n):
                keys[j, i] = rows[i, j]
            keys[j, n] = size
            continue
        low, high = -0.5, size - 0.5
        minsigma = (high - low) / min(100.0, 1.0 + n_kernels) if magic_clip else 1e-12
        for mu in range(size):
            if minsigma >= 1e-6:
                _normal(table, at[j], cols[j], mu, size, float(mu), minsigma)
            else:
                for v in range(size):
                    table[at[j] + v * cols[j] + mu] = 1.0 if v == mu else 0.0
        for r in range(n):
            i = order[numeric, r]
            centre = float(rows[i, j])
            below = low if r == 0 else float(rows[order[numeric, r - 1], j])
            above = high if r == n - 1 else float(rows[order[numeric, r + 1], j])
            sigma = max(centre - below, above - centre)
            if not endpoints and n >= 2:
                if r == 0:
                    sigma = above - centre
                elif r == n - 1:
                    sigma = centre - below
            sigma = min(max(sigma, minsigma), high - low)
            code = 0 if sigma <= minsigma else int(np.rint(2.0 * sigma))
            keys[j, i] = code * size + rows[i, j]
        keys[j, n] = cols[j] - 1
        numeric += 1
    return keys, table


@njit(cache=True)
def _log_pdf(points: np.ndarray, table: np.ndarray, at: np.ndarray, cols: np.ndarray,
             sizes: np.ndarray, keys: np.ndarray, weights: np.ndarray
             ) -> np.ndarray:  # pragma: no cover - compiled
    """log sum_k weights[k] prod_j table[at[j] + points[c, j] * cols[j] + keys[j, k]].

    Each knob's probabilities are first gathered into a row per index over the kernels,
    so a point's product runs along contiguous rows."""
    n_points, d = points.shape
    n_kernels = keys.shape[1]
    first = np.empty(d, dtype=np.intp)  # knob j's rows start at first[j]
    n_rows = 0
    for j in range(d):
        first[j] = n_rows
        n_rows += sizes[j]
    by_index = np.empty((n_rows, n_kernels))
    for j in range(d):
        keys_j = keys[j]
        for v in range(sizes[j]):
            base = at[j] + v * cols[j]
            row = by_index[first[j] + v]
            for k in range(n_kernels):
                row[k] = table[base + keys_j[k]]
    out = np.empty(n_points)
    p = np.empty(n_kernels)
    for c in range(n_points):
        for k in range(n_kernels):
            p[k] = weights[k]
        for j in range(d):
            row = by_index[first[j] + points[c, j]]
            for k in range(n_kernels):
                p[k] *= row[k]
        total = 0.0
        for k in range(n_kernels):
            total += p[k]
        out[c] = math.log(total) if total > 0.0 else -math.inf
    return out


@njit(cache=True)
def _draw(uniforms: np.ndarray, weights: np.ndarray, table: np.ndarray, at: np.ndarray,
          cols: np.ndarray, sizes: np.ndarray, keys: np.ndarray, order: np.ndarray,
          radix: np.ndarray, distinct: bool) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
    """The rows drawn (only the first of equal rows if ``distinct``) and their codes.

    ``uniforms[0]`` picks each draw's kernel by ``weights`` (``RandomState.choice``: the
    normalized cumulative weights searched to the right); ``uniforms[1 + j]`` is the
    quantile of knob ``order[j]`` (the order Optuna draws them in): its index is the first
    whose cumulative mass in the kernel's column reaches that share of the column's total
    (the inverse CDF, as ``Mixture.sample`` says)."""
    d, n = len(sizes), uniforms.shape[1]
    # np.cumsum and np.searchsorted(side="right") written out: the same sums in the same
    # order and the same index, without compiling numba's generic versions (0.5 s of the
    # first run)
    n_kernels = weights.shape[0]
    cdf = np.empty(n_kernels)
    running = 0.0
    for k in range(n_kernels):
        running += weights[k]
        cdf[k] = running
    for k in range(n_kernels):
        cdf[k] /= running
    rows = np.empty((n, d), dtype=np.int16)
    codes = np.empty(n, dtype=np.int64)
    kept = 0
    for c in range(n):
        u = uniforms[0, c]
        kernel, hi = 0, n_kernels  # the first kernel whose cumulative share exceeds u
        while kernel < hi:
            mid = (kernel + hi) // 2
            if cdf[mid] <= u:
                kernel = mid + 1
            else:
                hi = mid
        code = 0
        for q in range(d):
            j = order[q]
            base = at[j] + keys[j, kernel]
            total = 0.0
            for v in range(sizes[j]):
                total += table[base + v * cols[j]]
            threshold = uniforms[1 + q, c] * total
            cum, index = 0.0, 0
            for v in range(sizes[j]):
                cum += table[base + v * cols[j]]
                if cum >= threshold:
                    break
                index += 1
            index = min(index, sizes[j] - 1)
            rows[kept, j] = index
            code += index * radix[j]
        seen = False
        for i in range(kept if distinct else 0):
            if codes[i] == code:
                seen = True
                break
        if not seen:
            codes[kept] = code
            kept += 1
    return rows[:kept], codes[:kept]


@njit(cache=True)
def _log_ratio(points: np.ndarray, good_table: np.ndarray, good_keys: np.ndarray,
               good_weights: np.ndarray, rows: np.ndarray, order: np.ndarray,
               weights: np.ndarray, space_table: np.ndarray, sizes: np.ndarray,
               categorical: np.ndarray, at: np.ndarray, cols: np.ndarray, prior_weight: float,
               magic_clip: bool, endpoints: bool) -> np.ndarray:  # pragma: no cover
    """log l(x) - log g(x) of each point: l a built model, g the model of ``rows`` (built
    here, in the same compiled call)."""
    keys, table = _model(rows, order, space_table, sizes, categorical, at, cols, prior_weight,
                         magic_clip, endpoints)
    return _log_pdf(points, good_table, at, cols, sizes, good_keys, good_weights) \
        - _log_pdf(points, table, at, cols, sizes, keys, weights)


@functools.lru_cache(maxsize=1024)
def _weights(weights: Callable[[int], np.ndarray], prior_weight: float, n: int) -> np.ndarray:
    """The kernels' weights, normalized: ``weights(n)`` for the trials, ``prior_weight``
    for the prior (a function of n alone: every model of n trials shares it; read-only)."""
    w = np.append(np.asarray(weights(n), dtype=float)[:n], prior_weight) if n else np.ones(1)
    w = w / w.sum()
    w.setflags(write=False)
    return w


@dataclass(frozen=True)
class Params:
    """What shapes the estimator (Optuna's ``_ParzenEstimatorParameters``, finite case)."""

    prior_weight: float
    consider_magic_clip: bool
    consider_endpoints: bool
    weights: Callable[[int], np.ndarray]


class Mixture:
    """Optuna's ``_ParzenEstimator`` over ``rows`` (trial-number order), as table columns.

    Kernel k's distribution of knob j is column ``keys[j, k]`` of knob j's table (see the
    kernels' comment; the last kernel is the prior); ``weights`` sum to one. Building a
    model sorts each integer knob's centres (Optuna's sort, so equal centres get their
    bandwidths as Optuna gives them) and computes its keys and table; sampling and densities
    run compiled over these arrays.
    """

    def __init__(self, rows: np.ndarray, space: FiniteSpace, params: Params) -> None:
        self.weights = _weights(params.weights, params.prior_weight, len(rows))
        self.space, self.params = space, params
        self.keys, self.table = _model(rows, _order(rows, space), space.table, space.sizes,
                                       space.categorical, space.at, space.cols,
                                       params.prior_weight, params.consider_magic_clip,
                                       params.consider_endpoints)

    def sample(self, rng: np.random.RandomState, size: int) -> np.ndarray:
        """``size`` rows drawn from the mixture (repeats included)."""
        return self.draw(rng, size, distinct=False)[0]

    def draw(self, rng: np.random.RandomState, size: int, *, distinct: bool = True
             ) -> tuple[np.ndarray, np.ndarray]:
        """(rows, codes) of ``size`` draws, only the first of equal rows if ``distinct``.

        The random stream is used as Optuna's estimator uses it (``choice`` of the kernels,
        ``rand`` per categorical knob, then one ``uniform`` block for the integer knobs:
        all uniforms in [0, 1) drawn in that order, here in one call), and a truncated
        normal's quantile rounded to an index is the index whose cell holds that quantile,
        so a seed draws the same rows."""
        space = self.space
        uniforms = rng.random_sample((1 + len(space.dims), size))
        return _draw(uniforms, self.weights, self.table, space.at, space.cols, space.sizes,
                     self.keys, space.draw_order, space.radix, distinct)

    def log_pdf(self, rows: np.ndarray) -> np.ndarray:
        """The mixture's log probability of each row."""
        points = np.ascontiguousarray(rows, dtype=np.intp)
        space = self.space
        return _log_pdf(points, self.table, space.at, space.cols, space.sizes, self.keys,
                        self.weights)

    def log_ratio(self, points: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """``log_pdf(points) - Mixture(rows, space, params).log_pdf(points)`` (TPE's
        acquisition), the other model built and evaluated in one compiled call."""
        space, params = self.space, self.params
        return _log_ratio(np.ascontiguousarray(points, dtype=np.intp), self.table, self.keys,
                          self.weights, rows, _order(rows, space),
                          _weights(params.weights, params.prior_weight, len(rows)),
                          space.table, space.sizes, space.categorical, space.at, space.cols,
                          params.prior_weight, params.consider_magic_clip,
                          params.consider_endpoints)


def _order(rows: np.ndarray, space: FiniteSpace) -> np.ndarray:
    """Each integer knob's centres in sorted order: Optuna's sort (same kind, same dtype,
    one contiguous row per knob), so equal centres get their bandwidths as Optuna gives
    them."""
    return np.argsort(np.ascontiguousarray(rows[:, space.numeric_dims].T, dtype=float), axis=1)


def split(obs: Observations, n_below: int,
          extra_above: Sequence[tuple[int, tuple[int, ...]]] = (),
          above_limit: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Optuna's split of the complete trials: the ``n_below`` best (ties by trial number)
    and the rest, each in trial-number order; ``extra_above``: (number, row) of running
    trials the constant liar adds to the rest; ``above_limit``: only the latest that many
    of the rest. With trials in number order and Optuna's default gamma, the work does not
    grow with the study: the best are kept ranked as they arrive, and only the latest rows
    are looked at."""
    rows, values, numbers = obs.rows, obs.values, obs.numbers
    n = len(values)
    k = min(n_below, n)
    best = obs.best(k) if obs.in_order else None
    if best is None:
        if not obs.in_order:
            order = np.argsort(numbers, kind="stable")
            rows, values, numbers = rows[order], values[order], numbers[order]
        best = np.sort(np.argsort(values, kind="stable")[:k])
    below = rows[best]
    # The rest, in order: of the latest (limit + k) positions, those not among the best.
    start = 0 if above_limit is None else max(0, n - above_limit - len(extra_above) - k)
    keep = np.ones(n - start, dtype=bool)
    keep[best[best >= start] - start] = False
    rest = np.arange(start, n)[keep]
    above, above_numbers = rows[rest], numbers[rest]
    if extra_above:
        above_numbers = np.concatenate([above_numbers, [n for n, _ in extra_above]])
        above = np.concatenate([above, np.array([r for _, r in extra_above], dtype=np.int16)])
        above = above[np.argsort(above_numbers, kind="stable")]
    if above_limit is not None and len(above) > above_limit:
        above = above[len(above) - above_limit:]
    return below, above
