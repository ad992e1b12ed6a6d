"""Every Optuna internal vtatune relies on still exists and means what vtatune reads from it.

A release of Optuna that moves or renames one fails here, by name, instead of inside a
study. Each test touches one accessor of ``vtatune.tuning.optuna_compat`` on real Optuna
objects."""

import numpy as np
import optuna
import pytest
from optuna.distributions import CategoricalDistribution, IntDistribution
from optuna.trial import TrialState

from vtatune.tuning import optuna_compat as oc

optuna.logging.set_verbosity(optuna.logging.WARNING)


@pytest.fixture
def study():
    sampler = optuna.samplers.TPESampler(seed=3, n_startup_trials=2, n_ei_candidates=7,
                                         multivariate=True, constant_liar=False)
    s = optuna.create_study(sampler=sampler)
    for x in (1, 2, 3):
        s.add_trial(optuna.trial.create_trial(
            params={"x": x}, distributions={"x": IntDistribution(1, 4)}, value=float(x)))
    return s


def test_ids(study):
    assert oc.study_id(study) == study._study_id == 0
    trial = study.ask()
    frozen = study.trials[-1]
    assert oc.trial_id(trial) == oc.trial_id(frozen) == frozen._trial_id
    assert study._storage.get_trial(oc.trial_id(trial)).number == trial.number


def test_single_value():
    assert oc.single_value(CategoricalDistribution(["only"])) == "only"
    assert oc.single_value(IntDistribution(5, 5)) == 5


def test_tell_finishes_the_trial_without_copying(study):
    trial = study.ask()
    assert oc.tell(study, trial, 7.0) is None
    assert study.trials[-1].state == TrialState.COMPLETE and study.trials[-1].value == 7.0
    trial = study.ask()
    oc.tell(study, trial, state=TrialState.FAIL)
    assert study.trials[-1].state == TrialState.FAIL


def test_study_trials_and_the_trial_cache(study):
    assert [t.number for t in oc.study_trials(study)] == [0, 1, 2]
    assert oc.study_trials(study, (TrialState.RUNNING,)) == []
    fake = study.trials[:1]
    with oc.trials_cached(study, fake):
        assert oc.study_trials(study) == fake  # what the samplers read
    assert len(oc.study_trials(study)) == 3


def test_tpe_settings_rng_params_and_sample(study):
    sampler = study.sampler
    settings = oc.tpe_settings(sampler)
    assert (settings.n_startup_trials, settings.n_candidates, settings.constant_liar) == \
        (2, 7, False)
    assert settings.gamma(10) == oc.default_gamma(10)
    assert settings.parzen.prior_weight == 1.0 and settings.parzen.weights is oc.default_weights
    rng = oc.tpe_rng(sampler)
    assert isinstance(rng, np.random.RandomState) and oc.tpe_rng(sampler) is rng
    frozen = study.trials[0]
    assert oc.tpe_params(sampler, frozen, study) == {"x": 1}
    space = {"x": IntDistribution(1, 4)}
    assert oc.tpe_sample(sampler, study, frozen, space)["x"] in (1, 2, 3, 4)


def test_parzen_estimator_and_split(study):
    trials = study.trials
    below, above = oc.split_trials(study, trials, 1)
    assert [t.number for t in below] == [0] and [t.number for t in above] == [1, 2]
    params = oc.ParzenEstimatorParameters(prior_weight=1.0, consider_magic_clip=True,
                                          consider_endpoints=False, weights=oc.default_weights,
                                          multivariate=True)
    est = oc.ParzenEstimator({"x": np.array([1.0, 2.0])}, {"x": IntDistribution(1, 4)}, params)
    assert est.sample(np.random.RandomState(0), 5)["x"].shape == (5,)


def test_heartbeat_base_and_journal_memo(tmp_path):
    from optuna.storages import RDBStorage
    from optuna.storages.journal import _storage as journal

    assert issubclass(RDBStorage, oc.BaseHeartbeat)
    oc.memoize_journal_distribution_json()
    oc.memoize_journal_distribution_json()  # idempotent
    dist = IntDistribution(1, 4)
    assert journal.distribution_to_json(dist) == optuna.distributions.distribution_to_json(dist)
    assert journal.distribution_to_json.__wrapped__ is optuna.distributions.distribution_to_json
    text = journal.distribution_to_json(dist)
    assert journal.json_to_distribution(text) == dist
