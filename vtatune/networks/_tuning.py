"""Tune a whole network: one study per task in one storage and one log, the network's trial
budget shared out by a task scheduler.

Every tunable task first gets one round of ``warmup_trials`` distinct legal configs (the
warm-up round; default one round of ``round_trials``), then the scheduler
(:mod:`vtatune.networks.schedulers`: ``gradient``, Ansor's, or ``round-robin``) picks which task
gets each next round, until the network holds ``trials`` trials or every task is dead:
exhausted (its whole legal space tuned) or converged (no better config in its last
``patience`` rounds). The objective is the network's VTA time, Σ multiplicity × best
cycles.

The round loop is :func:`share_trials`, over any studies and weights: ``deploy`` shares
its tuning budget over a model's new workloads with it (:mod:`vtatune.deploy`).

``resume=True`` continues the network: each task's newest study in the storage, with the
trials they hold counting towards ``trials``. ``jobs`` and ``storage`` work as for one
layer (:func:`vtatune.tune`): the trials of a round run in ``jobs`` processes, and workers
sharing a storage skip each other's configs.

Example:
    >>> import tempfile, vtatune
    >>> log = Path(tempfile.mkdtemp()) / "r18.jsonl"
    >>> r = vtatune.tune_network("resnet18", "pynq", trials_per_task=1, seed=0, log=log)
    >>> len(r.tasks), r.trials, r.tasks[0].trials
    (10, 10, 1)
    >>> r.total_cycles == sum(t.task.multiplicity * t.best_cycles for t in r.tasks)
    True
"""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from simulator.hardware import HardwareConfig
from vtatune.logging import optuna_verbosity
from vtatune.networks._catalogue import load_network
from vtatune.networks._deployed import Applied, DeployedRun, deployed_run, schedules_from_logs
from vtatune.networks._layers import CpuLayer, CpuOp, Network, Task
from vtatune.networks.schedulers import TaskState, get_scheduler, objective
from vtatune.records import RecordWriter
from vtatune.tuning import (
    RUNS_DIR,
    OpenStudy,
    TunerError,
    TuneResult,
    check_log_belongs,
    check_seed,
)
from vtatune.workloads import Workload

__all__ = ["NetworkResult", "SharedTrials", "TaskResult", "default_network_log",
           "share_trials", "tune_network"]

DEFAULT_TRIALS_PER_TASK = 20
# Two trials a turn, converged after six turns without a better config (12 trials): on
# ResNet-50 at 20 trials a task this left fewer tasks short of their optimum than 4 x 3
# (scripts/bench_network.py; README, Networks).
DEFAULT_ROUND = 2
DEFAULT_PATIENCE = 6
# Each task's first round: one round, as Ansor's warm-up. A longer one (8: the default
# schedule, the guided sampler's six warm starts and one more) ends ResNet-50 as close to
# its optimum but reaches it later: the gradient scheduler, given the network's state after
# one round, spends the warm starts of the heavy tasks first (scripts/bench_network.py).
DEFAULT_WARMUP = DEFAULT_ROUND


@dataclass(frozen=True)
class TaskResult:
    """One task of a tuned network.

    ``best_cycles`` is None when the task was not tuned (``skipped`` says why) or found no
    legal config. ``dead``: why it stopped taking trials (``exhausted``, ``converged``) or
    ``""``. ``tophub_cycles``: TopHub's config for the shape on this hardware, simulated.
    """

    task: Task
    trials: int
    best_cycles: int | None
    default_cycles: int | None
    tophub_cycles: int | None
    dead: str
    skipped: str
    result: TuneResult | None

    def seconds(self, hw: HardwareConfig) -> float | None:
        """One run of the layer at the board clock."""
        return self.best_cycles / (hw.clock_mhz * 1e6) if self.best_cycles else None

    @property
    def network_cycles(self) -> int | None:
        """Multiplicity × best cycles: the task's part of the network's time."""
        return self.task.multiplicity * self.best_cycles if self.best_cycles else None


@dataclass(frozen=True)
class NetworkResult:
    """A tuned network: per-task results and the network's VTA time.

    ``trials`` counts the distinct legal configs the network's studies hold (resumed runs
    included); ``history`` is ``(trials, objective)`` after every round (objective: inf
    until every task has a result). ``stopped`` says why tuning ended. ``seed``: the
    studies' sampler seed (None when they differ: a continued study keeps its own; every
    record names its study's).
    """

    network: Network
    scheduler: str
    requested: int
    trials: int
    tasks: tuple[TaskResult, ...]
    log: str
    storage: str
    sampler: str
    seed: int | None
    stopped: str
    interrupted: bool
    history: tuple[tuple[int, float], ...]
    wall_seconds: float
    sim_seconds: float
    #: the deployed model's VTA kernels run in order with these schedules (None when a task
    #: has none: no legal config)
    deployed: DeployedRun | None = None
    #: where each task's schedule comes from: ``tuned``, a log record (``log:line``) or
    #: ``fallback`` (TVM's fallback config: no record)
    sources: tuple[tuple[str, str], ...] = ()

    @property
    def hw(self) -> HardwareConfig:
        return self.network.hw

    @property
    def total_cycles(self) -> int:
        """Σ multiplicity × best cycles over the tasks tuned."""
        return sum(t.network_cycles or 0 for t in self.tasks)

    @property
    def total_ms(self) -> float:
        return self.total_cycles / (self.hw.clock_mhz * 1e3)

    @property
    def vta_cycles(self) -> int | None:
        """The deployed model's VTA time: every VTA kernel in order (epilogues, ALU-only
        kernels and the tokens one kernel leaves the next included)."""
        return self.deployed.cycles if self.deployed else None

    def _speedup(self, attr: str) -> float | None:
        pairs = [(getattr(t, attr), t.best_cycles, t.task.multiplicity) for t in self.tasks
                 if t.best_cycles and getattr(t, attr)]
        if not pairs:
            return None
        return sum(b * m for b, _, m in pairs) / sum(c * m for _, c, m in pairs)

    @property
    def speedup_default(self) -> float | None:
        """The network's time with default schedules over its tuned time."""
        return self._speedup("default_cycles")

    @property
    def speedup_tophub(self) -> float | None:
        """Over TopHub's configs, on the tasks TopHub has (None if none)."""
        return self._speedup("tophub_cycles")

    def as_dict(self) -> dict[str, Any]:
        """The ``network --json`` object."""
        hw = self.hw
        total = self.total_cycles
        return {
            "network": self.network.name, "source": self.network.source,
            "hw": {"target": hw.target, "bitstream": hw.bitstream, "model": hw.target_model,
                   "clock_mhz": hw.clock_mhz},
            "scheduler": self.scheduler, "sampler": self.sampler, "seed": self.seed,
            "requested": self.requested, "trials": self.trials, "stopped": self.stopped,
            "interrupted": self.interrupted,
            "tasks": [{
                "name": t.task.name, "operator": t.task.operator,
                "shape": t.task.workload.shape_args(), "multiplicity": t.task.multiplicity,
                "epilogue": t.task.workload.epilogue.describe(),
                "cycles": t.best_cycles, "schedule_source": dict(self.sources).get(
                    t.task.name),
                "layers": list(t.task.layers), "trials": t.trials,
                "best_cycles": t.best_cycles, "default_cycles": t.default_cycles,
                "tophub_cycles": t.tophub_cycles,
                "ms": t.seconds(hw) * 1e3 if t.best_cycles else None,
                "share": t.network_cycles / total if t.network_cycles and total else None,
                "dead": t.dead, "skipped": t.skipped,
                "study": t.result.study if t.result else None,
            } for t in self.tasks],
            "cpu": [{"name": c.name, "operator": c.operator, "shape": c.shape,
                     "reason": c.reason} for c in self.network.cpu],
            "cpu_ops": [cpu_op_dict(c) for c in self.network.cpu_ops],
            "vta_cycles": self.vta_cycles,
            "vta_ms": self.vta_cycles / (hw.clock_mhz * 1e3) if self.deployed else None,
            "vta_counters": dict(self.deployed.counters) if self.deployed else None,
            "vta_breakdown": self.deployed.as_dict()["breakdown"] if self.deployed else None,
            "total_cycles": total, "total_ms": self.total_ms,
            "speedup_default": self.speedup_default, "speedup_tophub": self.speedup_tophub,
            "log": self.log, "storage": self.storage,
            "history": [[n, v if math.isfinite(v) else None] for n, v in self.history],
            "wall_seconds": self.wall_seconds, "sim_seconds": self.sim_seconds,
        }


def cpu_op_dict(op: CpuOp | CpuLayer) -> dict[str, Any]:
    """One ``cpu_ops`` entry of ``network --json``: name, ops, shape, MACs or bytes."""
    if isinstance(op, CpuOp):
        return {"name": op.name, "ops": op.ops, "shape": op.shape, "macs": op.macs,
                "bytes": op.bytes}
    return {"name": op.name, "ops": op.operator, "shape": op.shape, "macs": op.macs,
            "bytes": 0, "reason": op.reason}


def default_network_log(network: Network, space: str = "full", bias: bool = False,
                        directory: str | Path = RUNS_DIR) -> Path:
    """``runs/<network>-<hw model>[-autotvm][-bias].jsonl`` (git-ignored, as for
    :func:`vtatune.tuning.default_log_path`)."""
    parts = [network.name, network.hw.target_model, *([space] if space != "full" else []),
             *(["bias"] if bias else [])]
    return Path(directory) / ("-".join(parts) + ".jsonl")


def _tag(wl: Workload) -> str:
    """Ansor's similarity tag: the operator and kernel, and log_1.618 of the work."""
    kernel = getattr(wl, "kernel", 1)
    return f"{wl.operator}.k{kernel}.{int(math.log(wl.macs + 1, 1.618))}"


@optuna_verbosity()
def tune_network(network: str | Path | Network, hw: HardwareConfig | str | None = None, *,
                 trials: int | None = None, trials_per_task: int | None = None,
                 scheduler: str = "gradient", round_trials: int = DEFAULT_ROUND,
                 patience: int | None = DEFAULT_PATIENCE, sampler: str | None = None,
                 seed: int | None = None, jobs: int = 1, log: str | Path | None = None,
                 storage: str | None = None, resume: bool = False, space: str = "full",
                 bias: bool = False, batch: int | None = None,
                 progress: bool = False,
                 warmup_trials: int = DEFAULT_WARMUP) -> NetworkResult:
    """Tune every tunable task of ``network`` on ``hw``; see the module docstring.

    ``network``: a catalogue name, an ONNX file or a :class:`~vtatune.networks.Network`
    (then ``hw`` and ``batch`` are its own). ``trials``: the network's total (default
    ``trials_per_task`` × tunable tasks; ``trials_per_task`` defaults to 20).
    ``scheduler``: ``gradient`` or ``round-robin``. ``round_trials``: trials per round
    (at most the budget over the tasks); ``warmup_trials``: each task's first round (at
    least ``round_trials``, at most the budget over the tasks). ``patience``: rounds
    without improvement after which a task has converged (None: never). ``sampler``,
    ``seed``, ``jobs``, ``storage``, ``space``, ``bias`` as for :func:`vtatune.tune`; the
    seed is each task's study seed. ``log``: default :func:`default_network_log`.
    ``progress``: a progress line on stderr.
    """
    from vtatune.tuning.samplers import DEFAULT_SAMPLER, check_sampler
    from vtatune.tuning.storages import open_storage

    if isinstance(network, Network):
        net = network
    else:  # AutoTVM's space tunes AutoTVM's tasks (one per key, TVM v0.14 applies them so)
        net = load_network(network, hw, batch=batch,
                           tasks="autotvm" if space == "autotvm" else "deployed")
    hw = net.hw
    tunable = [t for t in net.tasks if not t.skip]
    for name, v in (("trials", trials), ("trials_per_task", trials_per_task),
                    ("round_trials", round_trials), ("patience", patience),
                    ("warmup_trials", warmup_trials)):
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
            raise TunerError(f"{name} must be a positive integer, got {v!r}")
    if trials is not None and trials_per_task is not None:
        raise TunerError("give trials (the network's total) or trials_per_task, not both")
    if not isinstance(jobs, int) or jobs < 1:
        raise TunerError(f"jobs must be a positive integer, got {jobs!r}")
    sampler = sampler or DEFAULT_SAMPLER
    check_seed(seed)
    check_sampler(sampler)
    if space not in ("full", "autotvm"):
        raise TunerError(f"unknown space {space!r} (known: full, autotvm)")
    total = trials if trials is not None else \
        (trials_per_task or DEFAULT_TRIALS_PER_TASK) * len(tunable)
    if tunable and total < len(tunable):  # the warm-up gives every task a round first
        raise TunerError(f"a budget of {total} trials is smaller than the {len(tunable)} "
                         f"tunable tasks of {net.name}: each task's first round takes a "
                         f"trial; give at least {len(tunable)} trials (or trials per task)")
    policy = get_scheduler(scheduler, seed)
    log_path = Path(log) if log is not None else default_network_log(net, space, bias)
    if resume:
        check_log_belongs(log_path, [t.workload for t in tunable], hw, bias)
    # The studies created now share one seed (the one given, else drawn); a study that
    # exists keeps its own (see OpenStudy).
    new_seed = seed if seed is not None else secrets.randbits(31)
    t0 = time.perf_counter()
    if not tunable:
        return _result(net, policy.name, total, [], {}, str(log_path), "", sampler, new_seed,
                       "no tunable task", False, (), t0)
    store = open_storage(storage, log_path)
    try:
        return _tune(net, tunable, store, policy, total, log_path, sampler, seed, new_seed,
                     jobs, resume, space, bias, round_trials, patience, progress, t0,
                     warmup_trials)
    finally:
        store.close()


def _tune(net: Network, tunable: list[Task], store: Any, policy: Any, total: int,
          log_path: Path, sampler: str, seed: int | None, new_seed: int, jobs: int,
          resume: bool, space: str, bias: bool, round_trials: int, patience: int | None,
          progress: bool, t0: float, warmup_trials: int) -> NetworkResult:
    from vtatune.tuning import Progress, parallel_pool

    hw = net.hw
    studies = [OpenStudy(t.workload, hw, store, log=log_path, sampler=sampler, seed=seed,
                         new_seed=new_seed, jobs=jobs, resume=resume, space=space, bias=bias,
                         allow_others=True, progress=False) for t in tunable]
    seeds = {study.search.seed for study in studies}
    seed = seeds.pop() if len(seeds) == 1 else None  # None: each study has its own
    bar = Progress(net.name, total, sum(s.trials for s in studies), enabled=progress)
    with RecordWriter(log_path) as writer, parallel_pool(jobs) as pool:
        shared = share_trials(studies, [t.multiplicity for t in tunable], policy, total,
                              writer, pool, round_trials=round_trials,
                              warmup_trials=warmup_trials, patience=patience, bar=bar)
    bar.close()
    wall = time.perf_counter() - t0
    tuned = {t.name: (study, st) for t, study, st in zip(tunable, studies, shared.states,
                                                         strict=True)}
    return _result(net, policy.name, total, tunable, tuned, str(log_path), store.desc, sampler,
                   seed, shared.stopped, shared.interrupted, shared.history, t0, wall)


@dataclass(frozen=True)
class SharedTrials:
    """How :func:`share_trials` spent a budget: each study's :class:`TaskState` (trials,
    rounds, best, why it died), why it stopped, and ``(trials, objective)`` after every
    round."""

    states: tuple[TaskState, ...]
    stopped: str
    interrupted: bool
    history: tuple[tuple[int, float], ...]


def share_trials(studies: Sequence[OpenStudy], weights: Sequence[int], policy: Any,
                 total: int, writer: RecordWriter, pool: Any, *,
                 round_trials: int = DEFAULT_ROUND, warmup_trials: int = DEFAULT_WARMUP,
                 patience: int | None = DEFAULT_PATIENCE, bar: Any = None) -> SharedTrials:
    """Run ``studies`` (one per task, each counted ``weights`` times in the objective) round
    by round until they hold ``total`` trials or every one is dead: each study a warm-up
    round first, then the task ``policy`` (a :mod:`.schedulers` scheduler) picks (see the
    module docstring). A study holding trials already (resumed, or joined in a shared
    storage) counts them as rounds run. ``bar``: a :class:`vtatune.tuning.Progress` to
    update after each round."""
    states = [TaskState(w, s.workload.macs, _tag(s.workload)) for s, w in
              zip(studies, weights, strict=True)]
    per_round = max(1, min(round_trials, total // max(1, len(studies))))
    for st, study in zip(states, studies, strict=True):
        if study.trials:  # resumed: its trials count as rounds already run
            st.trials, st.rounds, st.best = study.trials, -(-study.trials // per_round), \
                study.best_cycles or math.inf
            st.history.append(st.best)
            if study.exhausted:
                st.dead = "exhausted"
    history: list[tuple[int, float]] = []
    stopped, interrupted = "", False

    def spent() -> int:
        return sum(s.trials for s in states)

    warmup = [i for i, s in enumerate(states) if s.rounds == 0]
    while True:
        if spent() >= total:
            stopped = "budget spent"
            break
        if all(s.dead for s in states):
            stopped = "every task " + ("exhausted" if all(s.dead == "exhausted"
                                                          for s in states) else
                                       "converged or exhausted")
            break
        first = bool(warmup)
        i = warmup.pop(0) if warmup else policy.pick(states)
        st, study = states[i], studies[i]
        before = study.trials
        size = max(per_round, min(warmup_trials, total // len(studies))) if first \
            else per_round
        study.run(before + min(size, total - spent()), writer, pool)
        st.record_round(study.trials - before, study.best_cycles)
        st.trials = study.trials  # other workers' trials on a shared storage count too
        if study.interrupted:
            stopped, interrupted = "interrupted", True
            break
        if study.exhausted or study.trials == before:
            st.dead = "exhausted"
        elif patience is not None and st.flat(patience):
            st.dead = "converged"
        policy.observe(states, i)
        history.append((spent(), objective(states)))
        if bar is not None:
            finite = [s.best for s in states if math.isfinite(s.best)]
            bar.update(spent(), int(sum(s.weight * s.best for s in states
                                        if math.isfinite(s.best))) if finite else None)
    return SharedTrials(tuple(states), stopped, interrupted, tuple(history))


def _result(net: Network, scheduler: str, total: int, tunable: list[Task],
            tuned: dict[str, tuple[OpenStudy, TaskState]], log: str, storage: str,
            sampler: str, seed: int | None, stopped: str, interrupted: bool,
            history: tuple[tuple[int, float], ...], t0: float,
            wall: float | None = None) -> NetworkResult:
    results = []
    sim = 0.0
    schedules: dict[str, Applied] = {}
    for task in net.tasks:
        if task.name not in tuned:
            results.append(TaskResult(task, 0, None, None, _tophub(task, net.hw), "",
                                      task.skip or "not tuned", None))
            continue
        study, st = tuned[task.name]
        r = study.result(st.trials, wall or 0.0)
        sim += r.sim_seconds
        results.append(TaskResult(task, r.trials, r.best_cycles, r.default_cycles,
                                  _tophub(task, net.hw), st.dead, "", r))
        if r.best_schedule is not None:
            schedules[task.name] = Applied(r.best_schedule, "tuned")
    wall = time.perf_counter() - t0 if wall is None else wall
    deployed, sources = _deploy(net, schedules)
    return NetworkResult(net, scheduler, total, sum(r.trials for r in results), tuple(results),
                         log, storage, sampler, seed, stopped, interrupted, history, wall, sim,
                         deployed, sources)


def _deploy(net: Network, schedules: dict[str, Applied]
            ) -> tuple[DeployedRun | None, tuple[tuple[str, str], ...]]:
    """The deployed run with ``schedules``, TVM's fallback config for a task without one
    (None when some task cannot run at all)."""
    from vtatune.errors import IllegalSchedule
    from vtatune.schedule import tvm_fallback

    chosen = dict(schedules)
    for task in net.tasks:
        if task.name not in chosen:
            chosen[task.name] = Applied(tvm_fallback(task.workload, net.hw), "fallback")
    sources = tuple((name, a.source) for name, a in chosen.items())
    try:
        return deployed_run(net, {k: a.schedule for k, a in chosen.items()}), sources
    except IllegalSchedule:
        return None, sources


def network_from_logs(network: str | Path | Network, logs: Iterable[str | Path],
                      hw: HardwareConfig | str | None = None, *,
                      batch: int | None = None) -> NetworkResult:
    """The network as TVM v0.14 deploys it with the records of ``logs`` (no tuning): each
    task the schedule ``apply_history_best`` gives it (:func:`schedules_from_logs`; a task
    the logs lack takes TVM's fallback config, flagged), scored, and the deployed model's
    VTA kernels run in order.

    Example:
        >>> import tempfile, vtatune
        >>> r = network_from_logs("resnet18", [], "sim")  # no log: every task falls back
        >>> d = r.deployed  # GEMM kernels, their fused epilogues, the ALU-only adds
        >>> d.gemm_kernels + d.epilogues + d.alu_kernels == r.vta_cycles, d.alu_kernels > 0
        (True, True)
        >>> dict(r.sources)["resnet18.C8"]
        'fallback'
    """
    from vtatune.scoring import score

    net = network if isinstance(network, Network) else load_network(network, hw, batch=batch)
    t0 = time.perf_counter()
    logs = [Path(p) for p in logs]
    applied = schedules_from_logs(net, logs)
    results = []
    for task in net.tasks:
        ev = score(task.workload, applied[task.name].schedule, net.hw)
        results.append(TaskResult(task, 0, ev.cycles, None, _tophub(task, net.hw), "",
                                  "" if ev.status == "ok" else ev.error or ev.status, None))
    deployed, sources = _deploy(net, applied)
    return NetworkResult(net, "", 0, 0, tuple(results), ", ".join(map(str, logs)), "", "",
                         None, "from logs", False, (), time.perf_counter() - t0, 0.0,
                         deployed, sources)


def _tophub(task: Task, hw: HardwareConfig) -> int | None:
    """TopHub's config for the task's shape on ``hw``, simulated with the task's epilogue
    (None if TopHub has none). TopHub holds AutoTVM's records, tuned on the benchmark
    epilogue and applied by AutoTVM key (operator and shapes) whatever the epilogue, so it
    is looked up on the shape: a deployed task's fused epilogue is no other key."""
    from vtatune.autotvm import tophub_config
    from vtatune.schedule import from_autotvm
    from vtatune.scoring import score

    wl = task.workload
    knobs = tophub_config(replace(wl, epilogue=type(wl).__dataclass_fields__["epilogue"].default),
                          hw)
    if knobs is None:
        return None
    ev = score(task.workload, from_autotvm(knobs, task.workload, hw), hw)
    return ev.cycles if ev.status == "ok" else None
