"""Tune schedules with Optuna: one study per workload x hardware (x template), every trial
simulated, logged and replayable.

Example (AutoTVM's ``tuner.tune(n_trial=..., callbacks=[log_to_file(...)])`` in one call):

    >>> import vtatune
    >>> result = vtatune.tune("gemm", trials=20, seed=0, log="logs/gemm.jsonl")  # doctest: +SKIP
    >>> result.best_cycles, result.speedup_default  # doctest: +SKIP
    (131534, 1.21)

``trials`` counts distinct legal configs simulated in the study: illegal points are rejected
by the template's legality check without simulation, repeats are answered from the cache.
A resumed study runs until it holds ``trials`` of them (or the whole legal space).
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulator.hardware import HardwareConfig

from .errors import VtatuneError
from .evaluate import Evaluation, evaluate
from .logging import optuna_verbosity
from .records import RecordWriter, check_log_target, read_records, target_key
from .schedule import Schedule, tutorial_schedule
from .workloads import Workload, resolve

__all__ = ["DEFAULT_SAMPLER", "RUNS_DIR", "SAMPLERS", "SEED_MAX", "OpenStudy", "TuneResult",
           "TunerError", "check_seed", "default_log_path", "tune"]

from ._tuner._samplers import DEFAULT_SAMPLER, SAMPLERS, check_sampler  # noqa: E402

#: Where tuning writes its logs unless told (``--log``): the runs of this checkout, which git
#: ignores; the tracked, shipped logs live in ``logs/`` and are never a default.
RUNS_DIR = Path("runs")
#: numpy's seed range (Optuna's samplers seed numpy generators with it).
SEED_MAX = 2**32 - 1


def check_seed(seed: int | None) -> None:
    """A sampler seed numpy and Optuna accept (None: drawn later), or :class:`TunerError`."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)
                             or not 0 <= seed <= SEED_MAX):
        raise TunerError(f"seed must be an integer in 0..{SEED_MAX}, got {seed!r}")


class TunerError(VtatuneError):
    """Bad tuning input (trials < 1, jobs < 1, a log of another problem on resume)."""


@dataclass(frozen=True)
class TuneResult:
    """The outcome of one study.

    ``trials`` is the number of distinct legal configs evaluated in the study (this run and
    earlier ones when resumed); ``new_trials`` the ones simulated by this run. ``asks``,
    ``illegal_asks`` and ``duplicate_asks`` count this run's sampler proposals.
    """

    workload: Workload
    hw: HardwareConfig
    bias: bool
    template: str
    study: str
    storage: str
    log: str
    sampler: str
    seed: int | None
    requested: int
    trials: int
    new_trials: int
    legal_space: int | None
    exhausted: bool
    interrupted: bool
    resumed: bool
    best_config: dict[str, Any] | None
    best_schedule: Schedule | None
    best: Evaluation | None
    default_cycles: int | None
    tutorial: Evaluation | None
    asks: int
    illegal_asks: int
    duplicate_asks: int
    wall_seconds: float
    sim_seconds: float
    study_id: str = ""
    other_trials: int = 0
    notes: tuple[str, ...] = ()

    @property
    def best_cycles(self) -> int | None:
        return self.best.cycles if self.best else None

    @property
    def speedup_default(self) -> float | None:
        if self.best_cycles and self.default_cycles:
            return self.default_cycles / self.best_cycles
        return None

    @property
    def speedup_tutorial(self) -> float | None:
        if self.best_cycles and self.tutorial is not None and self.tutorial.status == "ok":
            return self.tutorial.cycles / self.best_cycles
        return None

    @property
    def wasted_fraction(self) -> float:
        """Share of this run's asks that were illegal or repeats (not simulated)."""
        return (self.illegal_asks + self.duplicate_asks) / self.asks if self.asks else 0.0

    @property
    def overhead_seconds(self) -> float:
        """Wall time not spent simulating: sampler, storage, legality checks, logging."""
        return max(0.0, self.wall_seconds - self.sim_seconds)


def default_log_path(workload: Workload, hw: HardwareConfig, space: str = "full",
                     bias: bool = False, directory: str | Path = RUNS_DIR) -> Path:
    """``runs/<operator>-<workload>-<hw model>[-autotvm][-bias].jsonl``."""
    name = workload.name or workload.key()
    parts = [workload.operator, name, hw.target_model]
    if space != "full":
        parts.append(space)
    if bias:
        parts.append("bias")
    return Path(directory) / ("-".join(parts) + ".jsonl")


def _check_log_belongs(log: Path, workloads: list[Workload], hw: HardwareConfig,
                       bias: bool) -> None:
    """On resume, a log holding only other problems is somebody else's: refuse."""
    if not log.exists():
        return
    wanted = {(w.key(), hw.target_model, bool(bias)) for w in workloads}
    for _, r in read_records(log):
        try:
            k = target_key(r)
        except (KeyError, TypeError):
            continue
        if k not in wanted:
            raise TunerError(f"cannot resume: {log} holds {r['workload'].get('name') or k[0]} "
                             f"on {k[1]}{' with bias' if k[2] else ''}, not "
                             f"{' / '.join(w.name or w.key() for w in workloads)} on "
                             f"{hw.target_model}{' with bias' if bias else ''}")
        return


@optuna_verbosity()
def tune(workload: Workload | str, hw: HardwareConfig | str | None = None, *,
         trials: int = 200, sampler: str = DEFAULT_SAMPLER, seed: int | None = None, jobs: int = 1,
         log: str | Path | None = None, storage: str | None = None, resume: bool = False,
         space: str = "full", bias: bool = False, progress: bool = False) -> TuneResult:
    """Tune one workload on one hardware config; see the module docstring.

    ``workload``: a Workload, an operator (``"conv2d"``, ``"gemm"``: its tutorial), a
    workload name as the command line takes it (``"resnet18.C8"``, ``"C8"``,
    ``"dense128"``) or both (``"conv2d:resnet18.C8"``).
    ``hw``: a HardwareConfig, a preset name or a ``vta_config.json`` path (default pynq).
    ``sampler``: one of :data:`SAMPLERS`. ``seed``: fixes a serial run (drawn and recorded
    when omitted). ``jobs``: simulation processes (joblib/loky). ``log``: the JSON-lines
    log (default :func:`default_log_path`). ``storage``: an Optuna storage URL shared by
    several workers (default: a journal file beside the log). ``resume``: continue the
    newest study of this problem in the storage. Optuna's INFO lines are shown only when
    asked (:mod:`vtatune.logging`).
    """
    from search_spaces import get_template

    from ._tuner._driver import parallel_pool
    from ._tuner._storage import open_storage

    if not isinstance(trials, int) or trials < 1:
        raise TunerError(f"trials must be a positive integer, got {trials!r}")
    if not isinstance(jobs, int) or jobs < 1:
        raise TunerError(f"jobs must be a positive integer, got {jobs!r}")
    check_seed(seed)
    check_sampler(sampler)
    wl, hw = resolve(workload, hw)
    if space not in ("full", "autotvm"):
        raise TunerError(f"unknown space {space!r} (known: full, autotvm)")
    log_path = Path(log) if log is not None else default_log_path(wl, hw, space, bias)
    check_log_target(log_path)
    if resume:
        _check_log_belongs(log_path, [wl], hw, bias)
    if seed is None and not resume:
        seed = secrets.randbits(31)
    t0 = time.perf_counter()
    impossible = get_template(wl, hw, bias=bias, space=space).no_legal_config()
    if impossible is not None:
        raise TunerError(f"no schedule of {wl.describe()} can run on {hw.target_model}: "
                         f"{impossible} ({impossible.rule})")
    store = open_storage(storage, log_path)
    try:
        study = OpenStudy(wl, hw, store, log=log_path, sampler=sampler, seed=seed, jobs=jobs,
                          resume=resume, space=space, bias=bias, allow_others=False,
                          progress=progress)
        with RecordWriter(log_path) as writer, parallel_pool(jobs) as pool:
            study.run(trials, writer, pool)
    finally:
        store.close()
    return study.result(trials, time.perf_counter() - t0)


class OpenStudy:
    """One study of one problem, opened on a storage and kept open between runs.

    :func:`tune` is one ``OpenStudy``, one :meth:`run` and its :meth:`result`; the network
    tuner (:mod:`vtatune.network_tuning`) keeps one per task in one storage and log and
    runs each further, round by round. ``store`` is what
    ``vtatune._tuner._storage.open_storage`` gives (the caller closes it); ``allow_others``:
    the storage may hold studies of other problems (a network's other tasks).
    """

    def __init__(self, workload: Workload, hw: HardwareConfig, store: Any, *, log: Path,
                 sampler: str, seed: int | None, jobs: int, resume: bool, space: str,
                 bias: bool, allow_others: bool, progress: bool) -> None:
        from search_spaces import get_template

        from ._tuner._driver import Search

        self.workload, self.hw, self.bias = workload, hw, bias
        self.template = get_template(workload, hw, bias=bias, space=space)
        self.search = Search(template=self.template, workload=workload, hw=hw, bias=bias,
                             trials=0, sampler=sampler, seed=seed, jobs=jobs, log=log,
                             store=store, resume=resume, allow_others=allow_others,
                             progress=progress, label=workload.name or workload.key())

    def run(self, trials: int, writer: RecordWriter, pool: Any) -> None:
        """Tune until the study holds ``trials`` distinct legal configs (or the whole legal
        space, or Ctrl-C: then :attr:`interrupted`)."""
        self.search.target = trials
        self.search.run(writer, pool)

    @property
    def trials(self) -> int:
        """Distinct legal configs evaluated in the study (all runs, all workers)."""
        return self.search.done

    @property
    def best_cycles(self) -> int | None:
        best = self.search.best_entry()
        return int(best[1].value) if best else None

    @property
    def exhausted(self) -> bool:
        """Every legal config of the space has been evaluated."""
        s = self.search
        return s.exhausted or (s.legal_space is not None and s.done >= s.legal_space)

    @property
    def interrupted(self) -> bool:
        return self.search.interrupted

    def result(self, requested: int, wall_seconds: float) -> TuneResult:
        search, wl, hw, bias = self.search, self.workload, self.hw, self.bias
        best = search.best_entry()
        best_config = search.config_of(best[0]) if best else None
        default_cycles = None
        if search.default_config is not None:
            e = search.cache.get(search.codec.key(search.default_config))
            default_cycles = int(e.value) if e is not None and e.status == "ok" else None
        return TuneResult(
            workload=wl, hw=hw, bias=bias, template=self.template.name,
            study=search.study_name, storage=search.storage_desc, log=str(search.log_path),
            sampler=search.sampler_name, seed=search.seed, requested=requested,
            trials=search.done, new_trials=search.stats.simulated,
            legal_space=search.legal_space, exhausted=search.exhausted,
            interrupted=search.interrupted, resumed=search.resumed, best_config=best_config,
            best_schedule=self.template.to_schedule(best_config) if best_config else None,
            best=search.evaluation_of(best_config) if best_config else None,
            default_cycles=default_cycles, tutorial=_tutorial(wl, hw, bias),
            asks=search.stats.asks, illegal_asks=search.stats.illegal,
            duplicate_asks=search.stats.duplicate + search.stats.gave_way,
            wall_seconds=wall_seconds, sim_seconds=search.stats.sim_seconds,
            study_id=search.study_id,
            other_trials=search.other_trials, notes=search.all_notes())


def _tutorial(wl: Workload, hw: HardwareConfig, bias: bool) -> Evaluation | None:
    """The seed tutorial's schedule on this workload, where it is defined and legal."""
    try:
        ev = evaluate(wl, tutorial_schedule(wl, hw), hw, bias=bias)
    except VtatuneError:
        return None
    return ev if ev.status == "ok" else None
