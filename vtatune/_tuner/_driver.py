"""The ask-and-tell loop of one study: legality and duplicates first, then simulation.

Why the loop looks like this:

- A config is checked by ``Template.check`` (microseconds) before anything is simulated.
  An illegal ask is told a penalty (twice the slowest legal time seen), so TPE learns where
  the capacity walls are instead of proposing into them forever; the study marks it
  ``status=illegal`` and the log records it once, with the rule that fails.
- A config already evaluated in the study is told its cached value and never simulated
  again; it does not count towards ``trials``.
- A sampler that only proposes wasted points for ``STUCK`` asks in a row (``STUCK_AGAIN``
  once it has been stuck before) is handed an unevaluated legal config (seeded order);
  when the legal space is smaller than what is left to do, the rest of it is queued at
  once. So a tiny space cannot spin forever.
- Each simulated trial is written to the log (one line, one system call) before it is
  told to the study: a killed run keeps it in the log, and resume finds it there.
"""

from __future__ import annotations

import contextlib
import os
import random
import secrets
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

from .. import __version__
from ..errors import VtatuneError
from ..records import (
    RecordWriter,
    hw_fields,
    now,
    read_records,
    workload_fields,
)
from ._progress import Progress
from ._samplers import GuidedSampler, encoding_for, make_sampler
from ._space import Codec, Config, Key
from ._storage import pick_study_name, problem_of

STUCK = 64  # wasted asks in a row before the loop hands the sampler a fresh legal config
# Once a sampler has been stuck, it usually stays so (CMA-ES converged on one point keeps
# proposing it): from then on, hand it a fresh config after this many wasted asks.
STUCK_AGAIN = 4
NO_PENALTY_YET = float(2**40)


@dataclass
class Entry:
    """What the study knows about one config."""

    status: str  # ok | error | illegal
    value: float
    trial: int


@dataclass
class Stats:
    asks: int = 0
    illegal: int = 0
    duplicate: int = 0
    simulated: int = 0
    sim_seconds: float = 0.0
    evaluations: dict[Key, Any] = field(default_factory=dict)  # this run's Evaluations


def simulate(workload: Any, schedule: Any, hw: Any, bias: bool) -> tuple[Any, float]:
    """One evaluation and its duration (runs in a worker process with ``--jobs``)."""
    from .. import evaluate as evaluate_module

    t0 = time.perf_counter()
    ev = evaluate_module.evaluate(workload, schedule, hw, bias=bias)
    return ev, time.perf_counter() - t0


class Search:
    """One study of one problem (workload x hardware x template x bias)."""

    def __init__(self, *, template: Any, workload: Any, hw: Any, bias: bool, trials: int,
                 sampler: str, seed: int, jobs: int, log: Path, storage: Any,
                 storage_desc: str, flush: Callable[[], None], shared: bool, resume: bool,
                 allow_others: bool, progress: bool, label: str) -> None:
        self.template, self.workload, self.hw, self.bias = template, workload, hw, bias
        self.target, self.sampler_name, self.seed, self.jobs = trials, sampler, seed, jobs
        self.log_path, self.storage, self.storage_desc = log, storage, storage_desc
        self.shared, self.label, self.show_progress = shared, label, progress
        self.flush = flush
        self.problem = {
            "workload_key": workload.key(), "workload": workload_fields(workload),
            "hw_model": hw.target_model, "hw": hw_fields(hw), "template": template.name,
            "space": template.space, "bias": bool(bias), "version": __version__,
        }
        base = f"{workload.operator}.{workload.name or workload.key()}.{hw.target_model}." \
               f"{template.space}{'.bias' if bias else ''}"
        name, exists = pick_study_name(storage, base, self.problem, resume, storage_desc,
                                       allow_others)
        self.study_name, self.resumed = name, exists
        attrs: dict[str, Any] = {}
        if exists:
            attrs = problem_of(optuna.load_study(study_name=name, storage=storage)
                               .user_attrs) or {}
            self.sampler_name = sampler if sampler else attrs.get("sampler", "tpe")
            if self.seed is None:
                self.seed = attrs.get("seed")
        if self.seed is None:
            self.seed = secrets.randbits(31)
        encoding = attrs.get("encoding") or encoding_for(self.sampler_name)
        self.codec = Codec(template, encoding)
        self.distributions = self.codec.distributions()
        self.sampler = make_sampler(self.sampler_name, self.seed, parallel=jobs > 1)
        self.study = optuna.create_study(
            study_name=name, storage=storage, direction="minimize", load_if_exists=True,
            sampler=self.sampler)
        if not exists:
            self.study.set_user_attr("vtatune", {**self.problem, "encoding": encoding,
                                                 "sampler": self.sampler_name,
                                                 "seed": self.seed})
        self.flush()
        self._rng = random.Random(self.seed)
        self.cache: dict[Key, Entry] = {}
        self.stats = Stats()
        self.default_config: Config | None = None
        self._queue: list[Config] = []
        self._inflight: set[Key] = set()  # asked in the current batch, not yet told
        self._brute: Iterator[Config] | None = None
        self.legal_space: int | None = None
        self.exhausted = False
        self.interrupted = False
        self._sync()
        if exists:
            self._sync_log()
        try:
            self.default_config = template.default_config()
        except VtatuneError:  # no default schedule fits this workload: search without it
            self.default_config = None
        if self.default_config is not None and \
                self.codec.key(self.default_config) not in self.cache:
            # Seed the study with the default schedule (the speed-up baseline).
            self._queue.append(self.default_config)
        if isinstance(self.sampler, GuidedSampler):
            self._guide(self.sampler)
        if self.sampler_name == "bruteforce":
            self._brute = template.legal_configs()
        self._record_base = {
            "schema": 1, "workload": self.problem["workload"], "hw": self.problem["hw"],
            "bias": bool(bias), "template": template.name, "space": template.space,
            "study": name, "sampler": self.sampler_name, "seed": self.seed,
            "version": __version__,
        }

    def _guide(self, sampler: GuidedSampler) -> None:
        """Bind the guided sampler to this study (legal + new filter, cost-model prior) and
        queue its warm starts: the best tile shapes by the analytic cost model."""
        from ._prior import estimate, warm_starts

        template, codec = self.template, self.codec
        knobs = template.knobs

        # Single-choice knobs are not in TPE's relative search space: fill them in.
        single = codec.to_params({k.name: k.choices[0] for k in knobs})
        single = {k.name: single[k.name] for k in knobs if len(k.choices) == 1}

        def accept(params: dict[str, Any]) -> bool:
            try:
                config = codec.from_params({**single, **params})
                k = codec.key(config)
                return (k not in self.cache and k not in self._inflight
                        and template.legal(config))
            except (KeyError, IndexError, TypeError, VtatuneError):
                return False

        def draw(rng: random.Random) -> dict[str, Any]:
            return codec.to_params({k.name: rng.choice(k.choices) for k in knobs})

        def prior(params: dict[str, Any]) -> float:
            return max(1.0, estimate(template, codec.from_params({**single, **params})))

        sampler.bind(accept, draw, prior)
        try:
            self._queue.extend(warm_starts(template))
        except VtatuneError:  # a template the cost model cannot read: no warm start
            pass

    # --- study state ----------------------------------------------------------------------
    def _sync(self) -> None:
        """Rebuild the cache from the study (resume; other workers on a shared storage)."""
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            status = t.user_attrs.get("status", "ok")
            if status == "duplicate" or not t.params:
                continue
            try:
                config = self.codec.from_params(t.params)
            except (KeyError, IndexError):
                continue
            k = self.codec.key(config)
            if k not in self.cache:
                self.cache[k] = Entry(status, float(t.value), t.number)

    def _sync_log(self) -> None:
        """Trials logged but never told (killed between the two) are not simulated again."""
        if not self.log_path.exists():
            return
        late = []
        for _, r in read_records(self.log_path):
            if r.get("study") != self.study_name or not isinstance(r.get("config"), dict):
                continue
            k = self.codec.key(r["config"])
            if k not in self.cache:
                late.append((k, r))
        for k, r in late:
            if r.get("status") == "ok":
                self.cache[k] = Entry("ok", float(r["cycles"]), int(r.get("trial", -1)))
        for k, r in late:
            if r.get("status") != "ok":
                self.cache[k] = Entry("error" if r.get("status") == "error" else "illegal",
                                      self._penalty(), int(r.get("trial", -1)))

    @property
    def done(self) -> int:
        """Distinct legal configs evaluated in the study."""
        return sum(1 for e in self.cache.values() if e.status != "illegal")

    def best_entry(self) -> tuple[Key, Entry] | None:
        ok = [(k, e) for k, e in self.cache.items() if e.status == "ok"]
        return min(ok, key=lambda ke: (ke[1].value, ke[1].trial)) if ok else None

    def _penalty(self) -> float:
        ok = [e.value for e in self.cache.values() if e.status == "ok"]
        return 2.0 * max(ok) if ok else NO_PENALTY_YET

    # --- asking ---------------------------------------------------------------------------
    def _next_fixed(self) -> Config | None:
        while self._queue:
            c = self._queue.pop(0)
            if self.codec.key(c) not in self.cache:
                return c
        if self._brute is not None:
            for c in self._brute:
                if self.codec.key(c) not in self.cache:
                    return c
            self.exhausted = True
        return None

    def _ask(self) -> tuple[optuna.trial.Trial, Config] | None:
        fixed = self._next_fixed()
        if fixed is not None:
            self.study.enqueue_trial(self.codec.to_params(fixed), skip_if_exists=False)
        elif self._brute is not None:
            return None
        trial = self.study.ask(self.distributions)
        self.stats.asks += 1
        return trial, self.codec.from_params(trial.params)

    def _unstick(self) -> None:
        """The sampler only wastes asks: queue an unevaluated legal config, or stop.

        A few seeded random draws usually find one in microseconds each; only when they
        fail (the space is nearly used up) are the legal configs enumerated, which also
        tells whether the whole legal space is smaller than what is left to do.
        """
        rng = self._rng
        for _ in range(256):
            c = {k.name: rng.choice(k.choices) for k in self.template.knobs}
            if self.codec.key(c) not in self.cache and self.template.legal(c):
                self._queue.append(c)
                return
        pending = [c for c in self.template.legal_configs()
                   if self.codec.key(c) not in self.cache]
        self.legal_space = sum(1 for e in self.cache.values() if e.status != "illegal") \
            + len(pending)
        if not pending:
            self.exhausted = True
        elif len(pending) <= self.target - self.done:
            self._queue.extend(pending)
        else:
            self._queue.append(pending[rng.randrange(len(pending))])

    # --- telling and logging --------------------------------------------------------------
    def _record(self, trial: int, config: Config, ev: Any) -> dict[str, Any]:
        return {**self._record_base, "config": config,
                "schedule": self.template.to_schedule(config).to_dict(), **ev.as_dict(),
                "trial": trial, "timestamp": now()}

    def _tell_wasted(self, trial: optuna.trial.Trial, status: str, value: float) -> None:
        trial.set_user_attr("status", status)
        self.study.tell(trial, value)

    # --- the loop -------------------------------------------------------------------------
    def run(self, writer: RecordWriter, parallel: Callable[..., list[Any]] | None) -> None:
        progress = Progress(self.label, self.target, self.done, enabled=self.show_progress)
        best = self.best_entry()
        progress.update(self.done, int(best[1].value) if best else None)
        stop = _Interrupt()
        asked: list[optuna.trial.Trial] = []
        try:
            with stop:
                wasted_in_a_row = 0
                unstuck = False
                while self.done < self.target and not self.exhausted and not stop.flag:
                    if self.shared:
                        self._sync()
                    room = min(max(1, 2 * self.jobs if self.jobs > 1 else 1),
                               self.target - self.done)
                    batch: list[tuple[optuna.trial.Trial, Config, Key]] = []
                    repeats: list[tuple[optuna.trial.Trial, Key]] = []
                    while len(batch) < room and not self.exhausted and not stop.flag:
                        got = self._ask()
                        if got is None:
                            break
                        trial, config = got
                        asked.append(trial)
                        k = self.codec.key(config)
                        if k in self.cache or any(k == b[2] for b in batch):
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
                                self._tell_wasted(trial, "illegal", self.cache[k].value)
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
                        self._evaluate(batch, writer, parallel)
                        for trial, _, _ in batch:
                            asked.remove(trial)
                    self._inflight.clear()
                    for trial, k in repeats:
                        self._tell_wasted(trial, "duplicate", self.cache[k].value)
                        asked.remove(trial)
                    self.flush()
                    best = self.best_entry()
                    progress.update(self.done, int(best[1].value) if best else None)
        except KeyboardInterrupt:
            stop.flag = True
        finally:
            for trial in asked:  # asked but not finished (interrupted): leave no RUNNING trial
                with contextlib.suppress(Exception):
                    self.study.tell(trial, state=TrialState.FAIL)
            self.interrupted = stop.flag
            self.flush()
            progress.close()

    def _log_illegal(self, writer: RecordWriter, trial: int, config: Config,
                     exc: Exception) -> None:
        from ..evaluate import Evaluation

        rule = getattr(exc, "rule", None)
        status = "illegal" if rule is not None else "error"
        writer.write(self._record(trial, config, Evaluation(status, rule=rule, error=str(exc))))

    def _evaluate(self, batch: list[tuple[optuna.trial.Trial, Config, Key]],
                  writer: RecordWriter, parallel: Callable[..., list[Any]] | None) -> None:
        jobs = [(self.workload, self.template.to_schedule(c), self.hw, self.bias)
                for _, c, _ in batch]
        t0 = time.perf_counter()
        if parallel is not None and len(jobs) > 1:
            results = parallel(jobs)
            self.stats.sim_seconds += time.perf_counter() - t0
        else:
            results = [simulate(*j) for j in jobs]
            self.stats.sim_seconds += sum(dt for _, dt in results)
        for (trial, config, k), (ev, _) in zip(batch, results, strict=True):
            self.stats.simulated += 1
            writer.write(self._record(trial.number, config, ev))
            if ev.status == "ok":
                entry = Entry("ok", float(ev.cycles), trial.number)
                self.stats.evaluations[k] = ev
                self.study.tell(trial, entry.value)
            else:
                # A legal config the simulator could not run: it costs a trial, like AutoTVM's
                # error_no != 0 records, and the sampler learns to avoid it.
                entry = Entry("error", self._penalty(), trial.number)
                self._tell_wasted(trial, "error", entry.value)
            self.cache[k] = entry

    # --- results --------------------------------------------------------------------------
    def evaluation_of(self, config: Config) -> Any:
        """The Evaluation of a config evaluated in this study: this run's, else the log's,
        else (a study resumed from another log) simulated once more."""
        k = self.codec.key(config)
        if k in self.stats.evaluations:
            return self.stats.evaluations[k]
        from ..evaluate import Evaluation

        if self.log_path.exists():
            for _, r in read_records(self.log_path):
                if (r.get("study") == self.study_name and r.get("status") == "ok"
                        and self.codec.key(r["config"]) == k):
                    return Evaluation.from_dict(r)
        ev, _ = simulate(self.workload, self.template.to_schedule(config), self.hw, self.bias)
        return ev

    def config_of(self, k: Key) -> Config:
        return dict(zip(self.codec.names, k, strict=True))


class _Interrupt:
    """First Ctrl-C: finish the trial in flight, log it, stop. Second: stop at once."""

    def __init__(self) -> None:
        self.flag = False
        self._old: Any = None

    def _handler(self, signum: int, frame: Any) -> None:
        if self.flag:
            raise KeyboardInterrupt
        self.flag = True

    def __enter__(self) -> _Interrupt:
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)


def parallel_pool(jobs: int) -> contextlib.AbstractContextManager[Any]:
    """A joblib (loky) pool kept alive across batches: ``pool(list of simulate args)``."""
    if jobs <= 1:
        return contextlib.nullcontext(None)

    @contextlib.contextmanager
    def pool() -> Iterator[Callable[[list[Any]], list[Any]]]:
        from joblib import Parallel, delayed

        with Parallel(n_jobs=jobs, backend="loky") as par:
            yield lambda items: par(delayed(simulate)(*a) for a in items)

    return pool()


def cpu_count() -> int:
    return os.cpu_count() or 1
