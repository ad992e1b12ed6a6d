"""Asking a study for its next trial: the fixed configs first (the default schedule, warm
starts, the unstick handout, bruteforce's order), else the sampler's proposal.

A fixed config is asked through Optuna's PartialFixedSampler, never through the study's
shared WAITING queue, so no two workers can pop the same queued trial. The guided sampler
is asked before its trial exists, with no lock held, and the trial is created with its
params and config in one record (:meth:`Asking._sample`, :meth:`Asking._create`). A sampler
that only wastes asks is handed an unevaluated legal config (:meth:`Asking._unstick`).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import optuna
from optuna.trial import TrialState

from vtatune.tuning import optuna_compat
from vtatune.tuning._codec import Config, Key


@dataclass(frozen=True)
class Asked:
    """A trial this worker asked and has not told yet: its number, its storage id and, when
    Optuna's ``study.ask`` made it, Optuna's Trial (the guided sampler's trials are created
    and told through the storage directly)."""

    number: int
    trial_id: int
    trial: optuna.trial.Trial | None = None


def quietly(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` without Optuna's ExperimentalWarning."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return fn(*args)


class Asking:
    """The asking half of :class:`vtatune.tuning._search.Search` (a mixin: the study, its
    codec, sampler, store, cache and the worker's sets of configs are the search's)."""

    def _untried(self, k: Key) -> bool:
        """Neither evaluated in the study, nor asked by this worker, nor running elsewhere:
        the "untried" of the guided sampler's "legal and untried" rule."""
        return k not in self.cache and k not in self._inflight and k not in self._elsewhere

    def _next_fixed(self) -> Config | None:
        while self._queue or self._unguided is not None:
            if not self._queue:  # the default schedule was asked: bind the guided sampler
                sampler, self._unguided = self._unguided, None
                self._guide(sampler)
                continue
            c = self._queue.pop(0)
            if self._untried(self.codec.key(c)):
                return c
        if self._brute is not None:
            for c in self._brute:
                if self._untried(self.codec.key(c)):
                    return c
            self.exhausted = True
        return None

    def _ask(self) -> tuple[Asked, Config] | None:
        fixed = self._next_fixed()
        if fixed is None and self._brute is not None:
            return None
        if self._direct:
            params = self.codec.to_params(fixed) if fixed is not None else self._sample()
            return self._create(params)
        with self.store.batch():
            if fixed is not None:
                # This worker's own handout, not the study's shared WAITING queue.
                self.study.sampler = quietly(optuna.samplers.PartialFixedSampler,
                                             self.codec.to_params(fixed), self.sampler)
            try:
                with warnings.catch_warnings():  # we drive heartbeats ourselves
                    warnings.filterwarnings("ignore", "Heartbeat of storage")
                    trial = self.study.ask(self.distributions)
            finally:
                self.study.sampler = self.sampler
            self._mine.add(trial.number)
            config = self.codec.from_params(trial.params)
            for name, value in {"config": config, **self.codec.knob_attrs(config)}.items():
                trial.set_user_attr(name, value)
            self.store.storage.record_heartbeat(optuna_compat.trial_id(trial))
        self._beats.add(optuna_compat.trial_id(trial))
        self.stats.asks += 1
        return Asked(trial.number, optuna_compat.trial_id(trial), trial), config

    def _sample(self) -> dict[str, Any]:
        """The sampler's params for the next trial, as ``study.ask`` would get them (relative
        params, single-choice knobs, independent draws for the rest), but before the trial
        exists: no lock is held while sampling, and the study is read through the feed
        (Optuna's per-trial cache of the trials, which the samplers and the search-space
        inference read) instead of copied whole."""
        study, sampler = self.study, self.sampler
        trials = self._feed.read()
        pending = self._pending  # the samplers read its number (constant liar) only
        pending.number = len(trials)
        with optuna_compat.trials_cached(study, trials):
            # Optuna's relative search space is the distributions every complete trial shares:
            # all trials of a study carry its codec's (the study is named after its template
            # version and keeps its encoding), so that is the codec's knobs with more than
            # one choice, by name, once a trial is complete (inferring it copied them all).
            space = self._relative_space if self.cache else {}
            relative = sampler.sample_relative(study, pending, space) if space else {}
            params = {}
            for name, dist in self.distributions.items():
                if name in self._single:
                    params[name] = self._single[name]
                elif name in relative and name in space:
                    params[name] = relative[name]
                else:
                    params[name] = sampler.sample_independent(study, pending, name, dist)
        return params

    def _create(self, params: dict[str, Any]) -> tuple[Asked, Config]:
        """A RUNNING trial holding ``params`` and its ``config`` attr, in one storage record
        (one locked write on a journal, not synced: its tell is)."""
        config = self.codec.from_params(params)
        template = optuna.trial.FrozenTrial(
            number=0, state=TrialState.RUNNING, value=None, datetime_start=datetime.now(),
            datetime_complete=None, params=params, distributions=self.distributions,
            user_attrs={"config": config, **self.codec.knob_attrs(config)}, system_attrs={},
            intermediate_values={}, trial_id=0)
        storage = self.store.storage
        with self.store.batch(durable=False):
            trial_id = storage.create_new_trial(optuna_compat.study_id(self.study),
                                                template_trial=template)
            if self.store.journal is None:  # a journal's trial beats from its start time
                storage.record_heartbeat(trial_id)
        asked = Asked(storage.get_trial_number_from_id(trial_id), trial_id)
        self._mine.add(asked.number)
        self._beats.add(trial_id)
        self.stats.asks += 1
        return asked, config

    def _unstick(self) -> None:
        """The sampler only wastes asks: queue an unevaluated legal config, or stop.

        A few seeded random draws usually find one in microseconds each; only when they
        fail (the space is nearly used up) are the legal configs enumerated, which also
        tells whether the whole legal space is smaller than what is left to do.
        """
        rng = self._rng
        for _ in range(256):
            c = {k.name: rng.choice(k.choices) for k in self.template.knobs}
            if self._untried(self.codec.key(c)) and self.template.legal(c):
                self._queue.append(c)
                return
        pending = [c for c in self.template.legal_configs()
                   if self.codec.key(c) not in self.cache]
        self.legal_space = sum(1 for e in self.cache.values() if e.status != "illegal") \
            + len(pending)
        pending = [c for c in pending if self.codec.key(c) not in self._elsewhere]
        if not pending:
            self.exhausted = not self._elsewhere
            if self._elsewhere:
                time.sleep(0.05)  # the rest is running elsewhere: wait for it to finish
        elif len(pending) <= self.target - self.done:
            self._queue.extend(pending)
        else:
            self._queue.append(pending[rng.randrange(len(pending))])
