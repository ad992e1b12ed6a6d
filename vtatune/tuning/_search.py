"""The ask-and-tell loop of one study: legality and duplicates first, then simulation.

Why the loop looks like this:

- A config is checked by ``Template.check`` (microseconds) before anything is simulated.
  An illegal ask is told a penalty (twice the slowest legal time seen), so TPE learns where
  the capacity walls are instead of proposing into them forever; the study marks it
  ``status=illegal`` and the log records it once, with the rule that fails.
- A config already evaluated in the study is told its cached value and never simulated
  again; it does not count towards ``trials``.
- Several workers may share the study (same problem, same storage). Before each batch the
  worker re-reads the study: configs the others finished join the cache, configs they are
  running are off limits (the guided sampler's "legal and untried" filter sees both). Each
  asked trial carries its config from the start (params, and a ``config`` user attr in
  plain values); right before simulating, the worker re-reads the running trials and gives
  way (the trial fails as ``status=duplicate``) when another trial holds the same config.
  Of two workers racing for one config, at least one sees the other, so at most one
  simulates it.
- Fixed configs (the default schedule, warm starts, the unstick handout) are asked through
  Optuna's PartialFixedSampler, never through the study's shared WAITING queue, so no two
  workers can pop the same queued trial.
- Running trials send heartbeats; any worker fails the trials of a worker that died
  (``fail_stale_trials``), and their configs become available again.
- A sampler that only proposes wasted points for ``STUCK`` asks in a row (``STUCK_AGAIN``
  once it has been stuck before) is handed an unevaluated legal config (seeded order);
  when the legal space is smaller than what is left to do, the rest of it is queued at
  once. So a tiny space cannot spin forever.
- Each simulated trial is written to the log (one line, one system call) before it is
  told to the study: a killed run keeps it in the log, and the next start of the study
  adds it back (the log is the source of truth). On a journal, an ask and a tell are one
  write each; the journal and the log reach the disk by group commit (at most every
  ``records.GroupSync.interval``, and on close).
- The guided sampler is asked before its trial exists, with no lock held, and the trial is
  created with its params and config in one record; the study is read incrementally
  (:class:`vtatune.tuning.storages.TrialFeed`), so the work per trial does not grow with the study.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import random
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

from search_spaces import Template
from simulator.hardware import HardwareConfig
from vtatune import __version__
from vtatune.errors import IllegalSchedule, VtatuneError
from vtatune.lowering import SHAPE_RULES
from vtatune.records import (
    RecordPrefix,
    RecordWriter,
    hw_fields,
    now,
    workload_fields,
)
from vtatune.scoring import Score
from vtatune.tuning import optuna_compat
from vtatune.tuning._asking import Asked, Asking, quietly
from vtatune.tuning._batches import timed_score
from vtatune.tuning._cache import Entry, EntryCache
from vtatune.tuning._codec import Codec, Config, Key
from vtatune.tuning._heap import heap_frozen
from vtatune.tuning._interrupt import Interrupt
from vtatune.tuning._progress import Progress
from vtatune.tuning._resume import as_trials, log_trials, logged_score
from vtatune.tuning.cost_model import ShapeCosts, warm_starts
from vtatune.tuning.samplers import GuidedSampler, encoding_for, make_sampler
from vtatune.tuning.storages import Heartbeats, Store, heartbeat_seconds, open_study
from vtatune.workloads import Workload

STUCK = 64  # wasted asks in a row before the loop hands the sampler a fresh legal config


# Once a sampler has been stuck, it usually stays so (CMA-ES converged on one point keeps
# proposing it): from then on, hand it a fresh config after this many wasted asks.
STUCK_AGAIN = 4


NO_PENALTY_YET = float(2**40)


@dataclass
class Stats:
    asks: int = 0
    illegal: int = 0
    duplicate: int = 0
    gave_way: int = 0  # asks dropped because another worker was running the config
    simulated: int = 0
    sim_seconds: float = 0.0
    scores: dict[Key, Any] = field(default_factory=dict)  # this run's Scores


def _continued_seed(seed: int, trials: int) -> int:
    """The sampler seed of a run that continues a study of ``trials`` trials seeded ``seed``
    (numpy's range)."""
    digest = hashlib.sha256(f"{seed}:{trials}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


def study_name(workload: Workload, hw: HardwareConfig, space: str, bias: bool) -> str:
    """The study of one problem in a storage, named after what keys it, as records are
    keyed: the workload's key (operator, shapes, epilogue), the hardware, the space and the
    bias flag; never the workload's name, which two problems can share (a layer's name in
    every model, a catalogue layer tuned with two epilogues)."""
    return f"{workload.key()}.{hw.target_model}.{space}{'.bias' if bias else ''}"


class Search(Asking):
    """One worker's share of one study (workload x hardware x template x space x bias)."""

    #: How stale this worker's view of the other workers' trials may get between claims.
    sync_seconds = 0.5

    def __init__(self, *, template: Template, workload: Workload, hw: HardwareConfig,
                 bias: bool, trials: int, sampler: str, seed: int | None, jobs: int,
                 log: Path, store: Store, resume: bool, allow_others: bool, progress: bool,
                 label: str, new_seed: int | None = None) -> None:
        self.template, self.workload, self.hw, self.bias = template, workload, hw, bias
        self.target, self.sampler_name, self.jobs = trials, sampler, jobs
        self.log_path, self.store, self.storage_desc = log, store, store.desc
        self.label, self.show_progress = label, progress
        self.problem = {
            "workload_key": workload.key(), "workload": workload_fields(workload),
            "hw_model": hw.target_model, "hw": hw_fields(hw), "template": template.name,
            "space": template.space, "bias": bool(bias), "version": __version__,
        }
        base = study_name(workload, hw, template.space, bias)
        # The seed: the one given; else a study created now takes ``new_seed`` (a network's
        # studies share one) or a drawn one, and a serial later run keeps the study's.
        study_seed = seed if seed is not None else \
            new_seed if new_seed is not None else secrets.randbits(31)
        opened = open_study(store.storage, base, self.problem, store.desc,
                            allow_others=allow_others, resume=resume,
                            extra={"encoding": encoding_for(sampler), "sampler": sampler,
                                   "seed": study_seed})
        self.study, self.study_name, self.study_id = opened.study, opened.name, opened.id
        self._feed = store.feed(optuna_compat.study_id(self.study))
        self.created = opened.created
        self.resumed = not opened.created
        attrs = opened.attrs
        quietly(optuna.storages.fail_stale_trials, self.study)  # trials of dead workers
        existing = self.study.get_trials(deepcopy=False)
        if opened.created:
            self.seed = study_seed
        elif existing and not any(t.state == TrialState.RUNNING for t in existing):
            self.seed = seed if seed is not None else attrs.get("seed", study_seed)
        else:
            # Other workers are at it: a seed of its own, so this worker's proposals differ.
            self.seed = secrets.randbits(31)
        # A later run keeps the study's seed, but its sampler must not replay the first
        # run's draws (a random sampler proposed every one of them again): the sampler's
        # stream goes on from the study's length, so a pair of serial runs reproduces too.
        self.sampler_seed = self.seed if not existing else \
            _continued_seed(self.seed, len(existing))
        encoding = attrs.get("encoding") or encoding_for(self.sampler_name)
        self.codec = Codec(template, encoding)
        self.distributions = self.codec.distributions()
        self.sampler = make_sampler(self.sampler_name, self.sampler_seed,
                                    parallel=jobs > 1 or store.journal is None)
        self.study.sampler = self.sampler
        # The guided sampler is asked directly (see _ask); the others through study.ask.
        self._direct = isinstance(self.sampler, GuidedSampler)
        self._relative_space = {name: d for name, d in sorted(self.distributions.items())
                                if not d.single()}
        self._single = {name: optuna_compat.single_value(d)
                        for name, d in self.distributions.items() if d.single()}
        # The trial the sampler is asked for before it exists (see _sample).
        self._pending = optuna.trial.FrozenTrial(
            number=0, state=TrialState.RUNNING, value=None, datetime_start=datetime.now(),
            datetime_complete=None, params={}, distributions={}, user_attrs={},
            system_attrs={}, intermediate_values={}, trial_id=-1)
        interval = store.storage.get_heartbeat_interval() or heartbeat_seconds()
        self._beats = Heartbeats(store.storage, interval)
        self._stale_every, self._next_stale = float(interval), time.monotonic() + interval
        self._rng = random.Random(self.sampler_seed)
        self.cache = EntryCache()
        self._synced: set[int] = set()  # finished trials already in the cache
        self._sync_from = 0  # every trial before this number is finished and synced
        self._synced_at = 0.0
        self._others_seen: int | None = None  # the storage's others_mark at the last sync
        self._mine: set[int] = set()  # trial numbers this worker asked and has not told
        self._elsewhere: set[Key] = set()  # configs other workers are running
        self.stats = Stats()
        self.notes: list[str] = []
        self._runs = 0
        self.default_config: Config | None = None
        self._queue: list[Config] = []
        self._inflight: set[Key] = set()  # asked in the current batch, not yet told
        self._brute: Iterator[Config] | None = None
        self.legal_space: int | None = None
        self.exhausted = False
        self.interrupted = False
        self._sync()
        self._import_log(resume)
        self.done_at_start = self.done
        if not opened.created and not resume and self.done:
            self.notes.append(f"joined the existing study {self.study_name} in "
                              f"{store.desc} ({self.done} trials already; --log or --storage "
                              "elsewhere starts a fresh one)")
        try:
            self.default_config = template.default_config()
        except VtatuneError:  # no default schedule fits this workload: search without it
            self.default_config = None
        if self.default_config is not None and \
                self.codec.key(self.default_config) not in self.cache:
            # Seed the study with the default schedule (the speed-up baseline).
            self._queue.append(self.default_config)
        # The guided sampler is bound (its cost model's table computed, its warm starts
        # queued) once the default schedule is asked, not before: on the first run after
        # install, the first trial's engines compile first and the cost model's after them
        # (the warm-up helper compiles it meanwhile: vtatune.tuning._warmup).
        self._unguided: GuidedSampler | None = None
        if isinstance(self.sampler, GuidedSampler):
            if self._queue:
                self._unguided = self.sampler
            else:
                self._guide(self.sampler)
        if self.sampler_name == "bruteforce":
            self._brute = template.legal_configs()
        self._record_prefix = RecordPrefix({
            "schema": 1, "workload": self.problem["workload"], "hw": self.problem["hw"],
            "bias": bool(bias), "template": template.name, "space": template.space,
            "study": self.study_name, "study_id": self.study_id,
            "sampler": self.sampler_name, "seed": self.seed, "version": __version__,
        })

    def _guide(self, sampler: GuidedSampler) -> None:
        """Bind the guided sampler to this study (legal + new filter, cost-model prior) and
        queue its warm starts: the best tile shapes by the analytic cost model."""
        template, codec = self.template, self.codec
        knobs = template.knobs

        # Single-choice knobs are not in TPE's relative search space: fill them in.
        single = codec.to_params({k.name: k.choices[0] for k in knobs})
        single = {k.name: single[k.name] for k in knobs if len(k.choices) == 1}

        try:
            costs: ShapeCosts | None = ShapeCosts(template)
        except (KeyError, AttributeError, VtatuneError):  # a template the model cannot read
            costs = None

        def accept(params: dict[str, Any]) -> bool:
            try:
                config = codec.from_params({**single, **params})
                if not self._untried(codec.key(config)):
                    return False
                template.check(config)
                return True
            except IllegalSchedule as exc:
                if costs is not None and exc.rule in SHAPE_RULES:
                    costs.rule_out(config)  # the sampler skips this shape from now on
                return False
            except (KeyError, IndexError, TypeError, VtatuneError):
                return False

        def draw(rng: random.Random) -> dict[str, Any]:
            return codec.to_params({k.name: rng.choice(k.choices) for k in knobs})

        if costs is None:
            sampler.bind(accept, draw)
            return
        sampler.bind(accept, draw, costs.log_cost)
        self._queue.extend(warm_starts(template, costs=costs))

    # --- study state ----------------------------------------------------------------------
    def _key_of(self, t: Any) -> Key | None:
        try:
            return self.codec.key(self.codec.from_params(t.params))
        except (KeyError, IndexError, TypeError):
            return None  # another problem's params, or an ask still being written

    def _sync(self, *, force: bool = True) -> None:
        """Catch up with the study: finished trials (earlier runs, other workers) join the
        cache; the configs other workers are running are noted. Not when the storage says no
        other worker wrote since the last time (a journal knows); otherwise, unless
        ``force``d, at most every :attr:`sync_seconds` (each read is a few database queries; the
        claim before simulating always reads)."""
        mark = self.store.others_mark()
        if mark is not None and mark == self._others_seen:
            return
        if not force and time.monotonic() - self._synced_at < self.sync_seconds:
            return
        self._synced_at = time.monotonic()
        self._others_seen = mark  # taken before reading: a write after it is read next time
        elsewhere: set[Key] = set()
        trials = self._feed.read()
        # Trials before the first unfinished one were read already and cannot change: start
        # there (reading every trial on every ask made a long study slower with each trial).
        start = self._sync_from if len(trials) > self._sync_from and \
            trials[self._sync_from].number == self._sync_from else 0
        while start < len(trials) and trials[start].state.is_finished() and (
                trials[start].state != TrialState.COMPLETE or start in self._synced):
            start += 1
        self._sync_from = start
        for t in trials[start:]:
            if t.state not in (TrialState.COMPLETE, TrialState.RUNNING):
                continue
            if t.state == TrialState.RUNNING:
                if t.number not in self._mine:
                    k = self._key_of(t)
                    if k is not None:
                        elsewhere.add(k)
                continue
            if t.number in self._synced:
                continue
            self._synced.add(t.number)
            status = t.user_attrs.get("status", "ok")
            k = self._key_of(t)
            if status == "duplicate" or k is None or t.value is None:
                continue
            if k not in self.cache:
                self.cache[k] = Entry(status, float(t.value), t.number)
        self._elsewhere = elsewhere

    def _import_log(self, resume: bool) -> None:
        """The log is the source of truth: trials of this study it holds that the study lacks
        (a worker killed between logging and telling, a storage outage) are added back, and
        with ``resume`` also those of earlier studies of this problem (a journal that was
        lost or never shipped). Other studies' records are only counted for the table."""
        held = self.cache.keys() | self._elsewhere
        missing = log_trials(self.log_path, self.problem, self.codec, study_id=self.study_id,
                             study_name=self.study_name, created=self.created, resume=resume,
                             held=held)
        foreign = missing.foreign - set(self.cache)
        if foreign:
            self.notes.append(f"{self.log_path} also holds {len(foreign)} configs of another "
                              "study of this problem that this study does not include "
                              "(--resume starts from them)")
        trials = as_trials(missing.found, self.codec, self.distributions, self._penalty(),
                           self.log_path)
        if not trials:
            return
        with self.store.batch():
            self.study.add_trials([t for *_, t in trials])
        self._others_seen = None  # our own writes: read them (the mark counts others' only)
        self._sync()
        for k, status, value, _ in trials:
            self.cache.setdefault(k, Entry(status, value, -1))
        imported = sum(1 for _, s, _, _ in trials if s != "illegal")
        if imported and (resume or self.created):
            self.notes.append(f"added {imported} trials from {self.log_path} that the study "
                              "lacked (the log is the source of truth)")

    @property
    def done(self) -> int:
        """Distinct legal configs evaluated in the study."""
        return self.cache.legal

    def best_entry(self) -> tuple[Key, Entry] | None:
        return self.cache.best()

    def _penalty(self) -> float:
        worst = self.cache.worst_ok()
        return 2.0 * worst if worst is not None else NO_PENALTY_YET

    # --- telling and logging --------------------------------------------------------------
    def _record(self, trial: int, config: Config, ev: Any) -> bytes:
        """The log line of a trial: the study's fields, then this trial's."""
        return self._record_prefix.line({
            "config": config, "schedule": self.template.to_schedule(config).to_dict(),
            **ev.as_dict(), "trial": trial, "timestamp": now()})

    def _tell(self, asked: Asked, status: str, value: float | None, cycles: int | None = None,
              rule: str | None = None) -> None:
        """Finish a trial with its status (and cycles, rule) as user attrs; ``value`` None
        fails it (a config another worker holds). One journal write. A trial the guided
        sampler asked is told through the storage (the TPE sampler's ``after_trial`` has
        nothing to do); Optuna's own asks through Optuna's tell, for their samplers."""
        storage = self.store.storage
        with self.store.batch():
            storage.set_trial_user_attr(asked.trial_id, "status", status)
            if cycles is not None:
                storage.set_trial_user_attr(asked.trial_id, "cycles", cycles)
            if rule is not None:
                storage.set_trial_user_attr(asked.trial_id, "rule", rule)
            if asked.trial is None:
                if value is None:
                    storage.set_trial_state_values(asked.trial_id, TrialState.FAIL)
                else:
                    storage.set_trial_state_values(asked.trial_id, TrialState.COMPLETE,
                                                   [float(value)])
            # Optuna's tell without the deep copy of the trial that study.tell returns
            elif value is None:
                optuna_compat.tell(self.study, asked.trial, state=TrialState.FAIL)
            else:
                optuna_compat.tell(self.study, asked.trial, value)
        self._mine.discard(asked.number)
        self._beats.discard(asked.trial_id)

    def _tell_wasted(self, asked: Asked, status: str, value: float) -> None:
        self._tell(asked, status, value)

    def _fail_stale(self) -> None:
        if time.monotonic() >= self._next_stale:
            self._next_stale = time.monotonic() + self._stale_every
            quietly(optuna.storages.fail_stale_trials, self.study)
            # A trial failed here is this worker's own write, which the storage's mark of
            # other workers' writes does not count: read the study next time, or the dead
            # trial's config stays "running elsewhere" and its slot is waited for forever.
            self._others_seen = None

    # --- the loop -------------------------------------------------------------------------
    def run(self, writer: RecordWriter, parallel: Callable[..., list[Any]] | None) -> None:
        if self.done >= self.target and not self.exhausted and self._runs == 0:
            self.notes.append(f"the study already holds {self.done} trials (--trials "
                              f"{self.target}): nothing to simulate; a larger --trials "
                              "continues it")
        self._runs += 1
        progress = Progress(self.label, self.target, self.done, enabled=self.show_progress)
        best = self.best_entry()
        progress.update(self.done, int(best[1].value) if best else None)
        stop = Interrupt()
        asked: list[Asked] = []
        try:
            with stop, heap_frozen():
                wasted_in_a_row = 0
                unstuck = False
                while self.done < self.target and not self.exhausted and not stop.flag:
                    self._fail_stale()
                    self._sync(force=False)
                    # Configs other workers are running count towards the study's total
                    # (they finish them, or die and heartbeats hand them back).
                    room = min(max(1, 2 * self.jobs if self.jobs > 1 else 1),
                               self.target - self.done - len(self._elsewhere))
                    if room <= 0:
                        time.sleep(0.05)
                        continue
                    batch: list[tuple[Asked, Config, Key]] = []
                    repeats: list[tuple[Asked, Key]] = []
                    while len(batch) < room and not self.exhausted and not stop.flag:
                        got = self._ask()
                        if got is None:
                            break
                        trial, config = got
                        asked.append(trial)
                        k = self.codec.key(config)
                        if k in self._elsewhere:
                            self.stats.gave_way += 1
                            wasted_in_a_row += 1
                            self._tell(trial, "duplicate", None)
                            asked.remove(trial)
                        elif k in self.cache or any(k == b[2] for b in batch):
                            self.stats.duplicate += 1
                            wasted_in_a_row += 1
                            if k in self.cache:
                                e = self.cache[k]
                                self._tell_wasted(trial, "duplicate", e.value)
                                asked.remove(trial)
                            else:
                                repeats.append((trial, k))
                        else:
                            try:
                                self.template.check(config)
                            except VtatuneError as exc:  # IllegalSchedule, or a bad config
                                self.stats.illegal += 1
                                wasted_in_a_row += 1
                                self._log_illegal(writer, trial.number, config, exc)
                                self.cache[k] = Entry("illegal", self._penalty(), trial.number)
                                self._tell(trial, "illegal", self.cache[k].value,
                                           rule=getattr(exc, "rule", None))
                                asked.remove(trial)
                            else:
                                batch.append((trial, config, k))
                                self._inflight.add(k)
                                wasted_in_a_row = 0
                        if wasted_in_a_row >= (STUCK_AGAIN if unstuck else STUCK):
                            wasted_in_a_row = 0
                            unstuck = True
                            self._unstick()
                    if batch:
                        batch = self._claim(batch, asked)
                    if batch:
                        self._score_batch(batch, writer, parallel)
                        for trial, _, _ in batch:
                            asked.remove(trial)
                    self._inflight.clear()
                    for trial, k in repeats:
                        self._tell_wasted(trial, "duplicate", self.cache[k].value)
                        asked.remove(trial)
                    best = self.best_entry()
                    progress.update(self.done, int(best[1].value) if best else None)
            if not stop.flag:
                self._note_brute_exhausted()
        except KeyboardInterrupt:
            stop.flag = True
        finally:
            for trial in asked:  # asked but not finished (interrupted): leave no RUNNING trial
                with contextlib.suppress(Exception):
                    self.study.tell(trial.number, state=TrialState.FAIL)
            self._beats.close()
            self.interrupted = stop.flag
            progress.close()

    def _note_brute_exhausted(self) -> None:
        """Bruteforce: whether the study's total used up the legal configs exactly (then the
        table says the space is exhausted). Looks one config ahead in the template's order
        and keeps it for the next run."""
        if self._brute is None or self.exhausted:
            return
        for c in self._brute:
            if self._untried(self.codec.key(c)):
                self._brute = itertools.chain([c], self._brute)
                return
        self.exhausted = True

    @property
    def other_trials(self) -> int:
        """Trials other workers added to the study while this one ran."""
        return max(0, self.done - self.done_at_start - self.stats.simulated)

    def all_notes(self) -> tuple[str, ...]:
        """What the table must say about this study besides its numbers."""
        others = self.other_trials
        return (*self.notes, *([f"other workers added {others} trial{'s' * (others != 1)} "
                                f"to this study during this run ({self.stats.simulated} "
                                "simulated here)"]
                               if others else []))

    def _claim(self, batch: list[tuple[Asked, Config, Key]],
               asked: list[Asked]) -> list[tuple[Asked, Config, Key]]:
        """Right before simulating, re-read the study: a config another worker finished or is
        running is given up (its trial told as a duplicate), so it is simulated once."""
        self._sync()
        keep = []
        for trial, config, k in batch:
            if k in self.cache:
                self.stats.duplicate += 1
                self._tell_wasted(trial, "duplicate", self.cache[k].value)
            elif k in self._elsewhere:
                self.stats.gave_way += 1
                self._tell(trial, "duplicate", None)
            else:
                keep.append((trial, config, k))
                continue
            asked.remove(trial)
            self._inflight.discard(k)
        return keep

    def _log_illegal(self, writer: RecordWriter, trial: int, config: Config,
                     exc: Exception) -> None:
        rule = getattr(exc, "rule", None)
        status = "illegal" if rule is not None else "error"
        writer.write(self._record(trial, config, Score(status, rule=rule, error=str(exc))))

    def _score_batch(self, batch: list[tuple[Asked, Config, Key]],
                  writer: RecordWriter, parallel: Callable[..., list[Any]] | None) -> None:
        jobs = [(self.workload, self.template.to_schedule(c), self.hw, self.bias)
                for _, c, _ in batch]
        t0 = time.perf_counter()
        if parallel is not None and len(jobs) > 1:
            results = parallel(jobs)
            self.stats.sim_seconds += time.perf_counter() - t0
        else:
            results = [timed_score(*j) for j in jobs]
            self.stats.sim_seconds += sum(dt for _, dt in results)
        for (trial, config, k), (ev, _) in zip(batch, results, strict=True):
            self.stats.simulated += 1
            writer.write(self._record(trial.number, config, ev))
            if ev.status == "ok":
                entry = Entry("ok", float(ev.cycles), trial.number)
                self.stats.scores[k] = ev
                self._tell(trial, "ok", entry.value, cycles=int(ev.cycles))
            else:
                # A legal config the simulator could not run: it costs a trial, like AutoTVM's
                # error_no != 0 records, and the sampler learns to avoid it.
                entry = Entry("error", self._penalty(), trial.number)
                self._tell_wasted(trial, "error", entry.value)
            self.cache[k] = entry

    # --- results --------------------------------------------------------------------------
    def score_of(self, config: Config) -> Any:
        """The Score of a config evaluated in this study: this run's, else the log's
        (any record of this problem: the simulator is deterministic), else simulated once
        more (a study other workers logged elsewhere)."""
        k = self.codec.key(config)
        if k in self.stats.scores:
            return self.stats.scores[k]
        logged = logged_score(self.log_path, self.problem, self.codec, k)
        if logged is not None:
            return logged
        ev, _ = timed_score(self.workload, self.template.to_schedule(config), self.hw,
                            self.bias)
        return ev

    def config_of(self, k: Key) -> Config:
        return dict(zip(self.codec.names, k, strict=True))
