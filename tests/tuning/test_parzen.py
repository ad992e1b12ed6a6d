"""The guided sampler's finite TPE model and trial cache against Optuna's own.

``_parzen`` re-expresses Optuna's multivariate Parzen estimator as probability tables and
collects trials incrementally: both must give what Optuna's ``TPESampler`` computes.
"""

from __future__ import annotations

import numpy as np
import optuna
import pytest
from optuna.distributions import CategoricalDistribution, IntDistribution
from optuna.trial import TrialState

from vtatune.tuning.optuna_compat import (
    ParzenEstimator,
    ParzenEstimatorParameters,
    default_weights,
    split_trials,
)
from vtatune.tuning.samplers import FiniteSpace, Mixture, Observations, split
from vtatune.tuning.samplers import MixtureParams as Params

SPACE = {
    "a": IntDistribution(0, 7),
    "b": CategoricalDistribution(("x", "y", "z")),
    "c": IntDistribution(2, 20, step=3),  # 7 values, step 3
    "d": IntDistribution(0, 0),  # one value (a single() knob)
    "e": CategoricalDistribution((1, 2, 4, 8, 16)),
}


def _optuna(rows: np.ndarray, space: FiniteSpace, weights) -> ParzenEstimator:
    obs = {d.name: (rows[:, j] if d.categorical else d.low + rows[:, j] * d.step)
           .astype(float) for j, d in enumerate(space.dims)}
    params = ParzenEstimatorParameters(prior_weight=1.0, consider_magic_clip=True,
                                        consider_endpoints=False, weights=weights,
                                        multivariate=True)
    return ParzenEstimator(obs, dict(zip(space.names, space.distributions, strict=True)),
                            params)


def _all_rows(space: FiniteSpace) -> np.ndarray:
    grids = np.meshgrid(*[np.arange(d.size) for d in space.dims], indexing="ij")
    return np.stack([g.ravel() for g in grids], axis=1)


WIDE = {
    "a": IntDistribution(0, 47),
    "b": CategoricalDistribution(("x", "y", "z")),
    "c": IntDistribution(2, 2 + 3 * 44, step=3),  # 45 values, step 3
    "d": IntDistribution(0, 0),  # one value (a single() knob)
    "e": CategoricalDistribution((1, 2, 4, 8, 16)),
}


def _distinct_centres(n: int):
    """(space, n rows, the rng that drew them) of WIDE with distinct centres per integer
    knob: with equal centres, which kernel gets which bandwidth follows the sort's order of
    ties (``_parzen`` sorts as Optuna does, but the comparison would rest on that)."""
    space = FiniteSpace.of(WIDE)
    rng = np.random.default_rng(n)
    rows = np.stack([rng.integers(0, d.size, n) if d.categorical or d.size == 1
                     else rng.permutation(d.size)[:n] for d in space.dims],
                    axis=1).astype(np.int16)
    return space, rows, rng


@pytest.mark.parametrize("n", [0, 1, 2, 3, 10, 25, 40])
def test_mixture_equals_optunas_parzen_estimator(n):
    """Same log density as Optuna's estimator (default weights, prior, magic clip, step)."""
    space, rows, rng = _distinct_centres(n)
    mine = Mixture(rows, space, Params(1.0, True, False, default_weights))
    theirs = _optuna(rows, space, default_weights)
    points = np.stack([rng.integers(0, d.size, 500) for d in space.dims], axis=1)
    samples = {d.name: (points[:, j] if d.categorical else d.low + points[:, j] * d.step)
               .astype(float) for j, d in enumerate(space.dims)}
    np.testing.assert_allclose(mine.log_pdf(points), theirs.log_pdf(samples),
                               rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("n", [0, 1, 25, 40])
def test_mixture_draws_what_optunas_estimator_draws(n):
    """The same rows as Optuna's estimator from the same random state (distinct centres), and
    ``draw`` keeps the first of equal rows with their codes."""
    space, rows, _ = _distinct_centres(n)
    mine = Mixture(rows, space, Params(1.0, True, False, default_weights))
    theirs = _optuna(rows, space, default_weights).sample(np.random.RandomState(7), 300)
    expected = np.stack([theirs[d.name] if d.categorical else (theirs[d.name] - d.low) / d.step
                         for d in space.dims], axis=1)
    np.testing.assert_array_equal(mine.sample(np.random.RandomState(7), 300), expected)
    distinct, codes = mine.draw(np.random.RandomState(7), 300)
    _, first = np.unique(expected @ space.radix, return_index=True)
    np.testing.assert_array_equal(distinct, expected[np.sort(first)])
    assert codes.tolist() == [space.code(r) for r in distinct]


@pytest.mark.parametrize("n", [0, 3, 40])
def test_mixture_is_a_distribution(n):
    space = FiniteSpace.of(SPACE)
    rng = np.random.default_rng(n)
    rows = np.stack([rng.integers(0, d.size, n) for d in space.dims], axis=1).astype(np.int16)
    mix = Mixture(rows, space, Params(1.0, True, False, default_weights))
    assert np.exp(mix.log_pdf(_all_rows(space))).sum() == pytest.approx(1.0)


def test_mixture_default_weights_distinct_centres():
    """Optuna's ramp of weights over trial order (distinct centres: no tie to break)."""
    space = FiniteSpace.of({"a": IntDistribution(0, 47), "b": IntDistribution(0, 44)})
    rng = np.random.default_rng(1)
    rows = np.stack([rng.permutation(48)[:40], rng.permutation(45)[:40]],
                    axis=1).astype(np.int16)
    mine = Mixture(rows, space, Params(1.0, True, False, default_weights))
    theirs = _optuna(rows, space, default_weights)
    points = _all_rows(space)
    np.testing.assert_allclose(
        mine.log_pdf(points),
        theirs.log_pdf({"a": points[:, 0].astype(float), "b": points[:, 1].astype(float)}),
        rtol=1e-9, atol=1e-12)


def test_mixture_samples_follow_its_density():
    space = FiniteSpace.of({"a": IntDistribution(0, 3), "b": CategoricalDistribution("uvw")})
    rows = np.array([[0, 1], [3, 2], [1, 1]], dtype=np.int16)
    mix = Mixture(rows, space, Params(1.0, True, False, default_weights))
    drawn = mix.sample(np.random.RandomState(0), 40000)
    points = _all_rows(space)
    freq = [(drawn == p).all(axis=1).mean() for p in points]
    np.testing.assert_allclose(freq, np.exp(mix.log_pdf(points)), atol=0.01)


def test_space_encodes_and_decodes_params():
    space = FiniteSpace.of(SPACE)
    params = {"a": 5, "b": "z", "c": 11, "d": 0, "e": 16}
    row = space.encode(params)
    assert row == (5, 2, 3, 0, 4)
    assert space.decode(row) == params
    assert space.encode({**params, "c": 12}) is None  # off the step
    assert space.encode({k: v for k, v in params.items() if k != "a"}) is None
    assert FiniteSpace.of({"f": optuna.distributions.FloatDistribution(0, 1)}) is None


def _tell_some(study, rng, k):
    trials = [study.ask(SPACE) for _ in range(k)]
    for t in trials:
        r = rng.random()
        if r < 0.6:
            study.tell(t, float(rng.integers(0, 5)))  # ties on purpose
        elif r < 0.75:
            study.tell(t, state=TrialState.FAIL)
        # else: left running, told later (or never)
    return [t for t in trials if study._storage.get_trial(t._trial_id).state
            == TrialState.RUNNING]


def test_observations_equal_optunas_collection():
    """After every batch (trials finishing out of order, some failing, some still running),
    the incremental cache holds what Optuna's TPE collects: the same complete trials, the
    same split into below / above, and every non-failed trial's config as taken."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    space = FiniteSpace.of(SPACE)
    obs = Observations(space)
    rng = np.random.default_rng(0)
    tpe = optuna.samplers.TPESampler()
    running = []
    for step in range(12):
        running += _tell_some(study, rng, 15)
        if step % 3 == 2 and running:  # finish some older running trials
            for t in running[::2]:
                study.tell(t, float(rng.integers(0, 5)))
            running = running[1::2]
        trials = study.get_trials(deepcopy=False)
        obs.update(trials)
        complete = [t for t in trials if t.state == TrialState.COMPLETE]
        assert obs.numbers.tolist() == [t.number for t in complete] or \
            sorted(obs.numbers.tolist()) == [t.number for t in complete]
        n_below = min(len(complete), 7)
        below, above = split(obs, n_below)
        ob, oa = split_trials(study, complete, n_below)
        for mine, theirs in ((below, ob), (above, oa)):
            rep = tpe._get_internal_repr(theirs, SPACE, study)
            expected = np.stack([space.encode(t.params) for t in theirs]) if theirs else \
                np.empty((0, len(SPACE)))
            np.testing.assert_array_equal(mine, expected)
            assert len(rep["a"]) == len(mine)
        held = [space.encode(t.params) for t in trials if t.state != TrialState.FAIL]
        assert sum(obs.taken.values()) == len(held)
        assert set(obs.taken) == {space.code(r) for r in held}
        assert set(obs.running) == {t.number for t in trials if t.state == TrialState.RUNNING}
    assert not obs.exotic


@pytest.mark.parametrize("in_order", [True, False])
def test_split_keeps_the_latest_of_the_rest(in_order):
    """``above_limit`` keeps the latest of the non-best trials (running ones included), the
    same rows as the whole split's tail; the best are those of a stable sort by value."""
    space = FiniteSpace.of({"a": IntDistribution(0, 9), "b": IntDistribution(0, 9)})
    rng = np.random.default_rng(in_order)
    obs = Observations(space)
    numbers = np.arange(300) if in_order else rng.permutation(300)
    for number in numbers.tolist():
        obs._append((number % 10, number // 30), float(rng.integers(0, 20)), number)  # ties
    running = [(300, (1, 1)), (301, (2, 2))]
    for n_below in (0, 1, 25, 299, 300):
        below, above = split(obs, n_below, running)
        for limit in (0, 7, 40, 400):
            b, a = split(obs, n_below, running, limit)
            np.testing.assert_array_equal(b, below)
            np.testing.assert_array_equal(a, above[len(above) - min(limit, len(above)):])
    order = np.argsort(obs.numbers, kind="stable")
    best = np.sort(np.argsort(obs.values[order], kind="stable")[:25])
    np.testing.assert_array_equal(split(obs, 25)[0], obs.rows[order][best])


def test_observations_free_a_failed_running_trial():
    """A running trial's config is taken; once the trial fails (a dead worker's trial
    failed by its heartbeat), the config is free again."""
    study = optuna.create_study()
    obs = Observations(FiniteSpace.of(SPACE))
    t = study.ask(SPACE)
    row = obs.space.encode(t.params)
    obs.update(study.get_trials(deepcopy=False))
    assert obs.taken[obs.space.code(row)] == 1 and t.number in obs.running
    study.tell(t, state=TrialState.FAIL)
    obs.update(study.get_trials(deepcopy=False))
    assert obs.space.code(row) not in obs.taken and not obs.running and obs.n == 0


def test_observations_mark_pruned_trials_exotic():
    study = optuna.create_study()
    obs = Observations(FiniteSpace.of(SPACE))
    study.tell(study.ask(SPACE), state=TrialState.PRUNED)
    obs.update(study.get_trials(deepcopy=False))
    assert obs.exotic
