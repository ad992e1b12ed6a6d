"""The guided sampler: multivariate TPE that proposes only legal configs it has not tried,
steered by the cost model (see :class:`GuidedSampler`)."""


from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import optuna
from optuna.trial import TrialState

from vtatune.tuning import optuna_compat
from vtatune.tuning.samplers._parzen import FiniteSpace, Mixture, Observations, split
from vtatune.tuning.samplers._parzen import Params as MixtureParams


class GuidedSampler(optuna.samplers.TPESampler):
    """vtatune's default: multivariate TPE that only proposes legal configs it has not tried.

    - Every proposal is legal and new: TPE draws ``n_candidates`` points from its model of
      the good region and proposes the best one (by its acquisition value) that passes the
      template's legality check and is held by no trial of the study (any worker's, running
      or finished; a failed trial's config is free again). No ask is wasted on an illegal
      point or a repeat, and no penalty value distorts the model.
    - Tile sizes are ordinal indices into their sorted divisors (the ``index`` encoding), so
      the model generalizes along them ("bigger co tiles were better") instead of treating
      each size as an unrelated category.
    - A cheap analytic cost model (:func:`vtatune.tuning.cost_model.estimate`) is added to
      the acquisition with a small weight: among candidates TPE likes about equally, the one
      the model expects to be faster wins. The startup draws are random legal configs, each
      the best by the model of a few random legal draws, so the first trials are not wasted
      on tiny tiles.
    - The driver warm-starts the study with the default schedule and the best few tile
      shapes by the cost model (:func:`vtatune.tuning.cost_model.warm_starts`).

    Speed (the sampler runs once per trial, beside a simulation of under a millisecond):
    the model is Optuna's multivariate TPE evaluated as probability tables over the finite
    space (``_parzen``, sampled and scored by compiled loops), the trials are read
    incrementally, the cost model is a table of every tile shape looked up per candidate,
    and legality is asked in acquisition order, so only the candidates ranked above the
    proposal are checked (the argmax over the legal candidates either way). The model of
    the non-good trials holds the latest ``above_window`` of them (Optuna's weights over
    those), so an ask costs the same at trial 300 and at trial 3000; studies shorter than
    that are Optuna's TPE exactly.

    Without :meth:`bind` (e.g. a study loaded by hand) it is a plain multivariate TPE.

    It overrides Optuna's ``TPESampler.sample_relative`` and reads its private settings
    (through :mod:`vtatune.tuning.optuna_compat`, which pins what it reads to Optuna 5.x).
    """

    def __init__(self, seed: int | None = None, *, parallel: bool = False,
                 n_startup_trials: int = 12, n_candidates: int = 64,
                 prior_weight: float = 4.0, startup_pool: int = 8,
                 above_window: int = 300) -> None:
        super().__init__(seed=seed, multivariate=True, constant_liar=parallel,
                         n_startup_trials=n_startup_trials, n_ei_candidates=n_candidates)
        self._tpe = optuna_compat.tpe_settings(self)  # Optuna keeps them private
        self._accept: Callable[[dict[str, Any]], bool] | None = None
        self._draw: Callable[[random.Random], dict[str, Any]] | None = None
        self._log_cost: Callable[[np.ndarray, Sequence[str]], np.ndarray] | None = None
        self._prior_weight = prior_weight
        self._startup_pool = startup_pool
        self._above_window = above_window
        self._py_rng = random.Random(seed)
        self._obs: Observations | None = None
        self._space: tuple[Any, FiniteSpace | None] = (None, None)  # (search space, as finite)
        # (obs.freed when filled, best rows whose every neighbour is held or cannot run)
        self._surrounded: tuple[int, set[int]] = (-1, set())
        self._good: tuple[Any, Mixture] | None = None  # (its inputs, the good trials' model)

    def bind(self, accept: Callable[[dict[str, Any]], bool],
             draw: Callable[[random.Random], dict[str, Any]],
             log_cost: Callable[[np.ndarray, Sequence[str]], np.ndarray] | None = None
             ) -> None:
        """``accept(params)``: legal and not tried (the caller's word, asked of candidates in
        acquisition order until one passes); ``draw(rng)``: uniform params;
        ``log_cost(rows, names)``: the log of each row's estimated cycles (lower is better;
        inf: a config that cannot run, never asked of ``accept``), rows holding choice
        indices of the knobs ``names``."""
        self._accept, self._draw, self._log_cost = accept, draw, log_cost

    def _random_accepted(self, space: FiniteSpace | None = None,
                         tries: int = 2000) -> dict[str, Any]:
        assert self._accept is not None and self._draw is not None
        pool = []
        scored = self._log_cost is not None and space is not None
        for _ in range(tries):
            p = self._draw(self._py_rng)
            if self._accept(p):
                pool.append(p)
                if len(pool) >= self._startup_pool or not scored:
                    break
        if not pool:
            return {}  # nearly exhausted: the driver's unstick logic takes over
        if not scored:
            return pool[0]
        assert self._log_cost is not None and space is not None
        rows = np.array([space.encode(p) for p in pool], dtype=np.intp)
        return pool[int(np.argmin(self._log_cost(rows, space.names)))]

    def _cheapest_random(self, space: FiniteSpace, obs: Observations) -> dict[str, Any] | None:
        """TPE's candidates and the best configs' neighbours are all tried (late in a long
        study): of ``n_candidates`` uniform draws not yet held, the cheapest by the cost
        model that passes ``accept``, asked in cost order (a few legality checks, where the
        best of ``startup_pool`` legal draws needs that many); None if none passes."""
        if self._log_cost is None:
            return None
        # uniform rows: each knob's index uniform, as the driver's draw picks choices
        rows = (optuna_compat.tpe_rng(self).random_sample((self._tpe.n_candidates, len(space.dims)))
                * space.sizes).astype(np.intp)
        _, first = np.unique(rows @ space.radix, return_index=True)
        rows = rows[np.sort(first)]
        rows = rows[[code not in obs.taken for code in (rows @ space.radix).tolist()]]
        return self._first_accepted(rows, -self._scores(rows, space), space) \
            if len(rows) else None

    def _observations(self, study: Any, space: FiniteSpace) -> Observations:
        """The study's trials as rows, read incrementally (rebuilt if the space changes)."""
        if self._obs is None or (self._obs.space is not space and self._obs.space != space):
            self._obs = Observations(space)
        self._obs.update(optuna_compat.study_trials(study),
                         lambda t: optuna_compat.tpe_params(self, t, study))
        return self._obs

    def sample_relative(self, study: Any, trial: Any,
                        search_space: dict[str, Any]) -> dict[str, Any]:
        if self._accept is None or not search_space:
            return super().sample_relative(study, trial, search_space)
        if search_space is not self._space[0]:  # the driver hands the same dict every ask
            self._space = (search_space, FiniteSpace.of(search_space))
        space = self._space[1]
        if space is None:  # not a vtatune codec's space: Optuna's TPE, then the filter
            return self._plain(study, trial, search_space)
        obs = self._observations(study, space)
        space = obs.space  # equal, and kept across asks with its decoding tables
        if obs.n < self._tpe.n_startup_trials:
            return self._random_accepted(space)
        if obs.exotic:  # pruned or constrained trials: Optuna knows how to rank them
            return self._plain(study, trial, search_space)
        return (self._propose(trial, space, obs) or self._neighbour(space, obs)
                or self._cheapest_random(space, obs) or self._random_accepted(space))

    def _plain(self, study: Any, trial: Any, search_space: dict[str, Any]) -> dict[str, Any]:
        states = (TrialState.COMPLETE, TrialState.PRUNED)
        if len(optuna_compat.study_trials(study, states)) < self._tpe.n_startup_trials:
            return self._random_accepted()
        assert self._accept is not None
        params = optuna_compat.tpe_sample(self, study, trial, search_space)
        return params if self._accept(params) else self._random_accepted()

    def _scores(self, rows: np.ndarray, space: FiniteSpace) -> np.ndarray:
        """The cost-model part of the acquisition: ``prior_weight`` x log estimated cycles."""
        if self._log_cost is None or not self._prior_weight:
            return np.zeros(len(rows))
        return self._prior_weight * self._log_cost(rows, space.names)

    def _first_accepted(self, rows: np.ndarray, acq: np.ndarray,
                        space: FiniteSpace) -> dict[str, Any] | None:
        """The candidate of highest ``acq`` that ``accept`` takes (ties: the first row),
        asking in that order: the candidates below it are never checked, nor those at -inf
        (a tile shape the cost model knows cannot run)."""
        assert self._accept is not None
        for i in np.argsort(-acq, kind="stable").tolist():
            if acq[i] == -np.inf:
                break
            chosen = space.decode(rows[i])
            if self._accept(chosen):
                return chosen
        return None

    def _propose(self, trial: Any, space: FiniteSpace,
                 obs: Observations) -> dict[str, Any] | None:
        """Optuna's multivariate TPE step over the legal, untried candidates, or None."""
        gamma = self._tpe.gamma
        p = self._tpe.parzen
        params = MixtureParams(p.prior_weight, p.consider_magic_clip, p.consider_endpoints,
                               p.weights)
        running = [(n, r) for n, r in obs.running.items() if n != trial.number] \
            if self._tpe.constant_liar else []
        below, above = split(obs, gamma(obs.n), running, self._above_window)
        good = self._good_mixture(below, space, params)
        drawn, codes = good.draw(optuna_compat.tpe_rng(self), self._tpe.n_candidates)
        # Distinct candidates in the order drawn, without the configs the study holds.
        keep = [i for i, code in enumerate(codes.tolist()) if code not in obs.taken]
        if not keep:
            return None
        cand = drawn[keep]
        acq = good.log_ratio(cand, above) - self._scores(cand, space)
        return self._first_accepted(cand, acq, space)

    def _good_mixture(self, below: np.ndarray, space: FiniteSpace,
                      params: MixtureParams) -> Mixture:
        """The model of the good trials: a function of their rows (in order) alone, which
        change only when a trial enters the best ``gamma(n)``; built again only then."""
        key = (space, params, below.shape, below.tobytes())
        if self._good is None or self._good[0] != key:
            self._good = (key, Mixture(below, space, params))
        return self._good[1]

    def _neighbour(self, space: FiniteSpace, obs: Observations) -> dict[str, Any] | None:
        """An untried legal config one knob away from one of the best three (the best by the
        cost model among a few), or None: TPE's candidates all sit on tried points (its model
        has collapsed onto the best region)."""
        assert self._accept is not None
        if self._surrounded[0] != obs.freed:  # a config became free again: look again
            self._surrounded = (obs.freed, set())
        surrounded = self._surrounded[1]
        for best in obs.ranked(3):
            row = obs.rows[best].astype(np.int64)
            if int(row @ space.radix) in surrounded:
                continue
            near = []  # one knob changed: every other choice, or +-1, +-2 along an index
            for j, dim in enumerate(space.dims):
                values = [v for v in range(dim.size) if v != row[j]] if dim.categorical \
                    else [row[j] + d for d in (-1, 1, -2, 2) if 0 <= row[j] + d < dim.size]
                block = np.repeat(row[None, :], len(values), axis=0)
                block[:, j] = values
                near.append(block)
            rows = np.concatenate(near)
            pool = [tuple(r) for r, code in zip(rows.tolist(), (rows @ space.radix).tolist(),
                                                strict=True) if code not in obs.taken]
            self._py_rng.shuffle(pool)
            if pool:  # a shape the cost model knows cannot run fails accept: skip it unasked
                pool = [c for c, cost in zip(pool, self._scores(np.array(pool), space),
                                             strict=True) if cost != np.inf]
            accepted = []
            for candidate in pool:
                if self._accept(space.decode(candidate)):
                    accepted.append(candidate)
                    if len(accepted) == self._startup_pool:
                        break
            if accepted:
                cand = np.array(accepted, dtype=np.intp)
                return space.decode(accepted[int(np.argmin(self._scores(cand, space)))])
            # Every neighbour is held or cannot run: it stays so until a config is freed (a
            # neighbour another worker runs now ends held, or failed, which frees it).
            surrounded.add(int(row @ space.radix))
        return None
