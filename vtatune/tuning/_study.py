"""One study of one problem, opened on a storage and kept open between runs (the tuner runs
one; the network tuner one per task, round after round), and what it found (:class:`TuneResult`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from search_spaces import get_template
from simulator.hardware import HardwareConfig
from vtatune.errors import VtatuneError
from vtatune.records import RecordWriter
from vtatune.schedule import Schedule, tutorial_schedule
from vtatune.scoring import Score, score
from vtatune.tuning._search import Search
from vtatune.tuning.storages import Store
from vtatune.workloads import Workload


class OpenStudy:
    """One study of one problem, opened on a storage and kept open between runs.

    :func:`tune` is one ``OpenStudy``, one :meth:`run` and its :meth:`result`; the network
    tuner (:func:`vtatune.networks.tune_network`) keeps one per task in one storage and log
    and runs each further, round by round. ``store`` is what
    :func:`vtatune.tuning.storages.open_storage` gives (the caller closes it); ``allow_others``:
    the storage may hold studies of other problems (a network's other tasks). ``seed``: the
    sampler seed given (None: a study created now takes ``new_seed``, else a drawn one; a
    serial later run of a study keeps the study's seed).
    """

    def __init__(self, workload: Workload, hw: HardwareConfig, store: Store, *, log: Path,
                 sampler: str, seed: int | None, jobs: int, resume: bool, space: str,
                 bias: bool, allow_others: bool, progress: bool,
                 new_seed: int | None = None) -> None:
        self.workload, self.hw, self.bias = workload, hw, bias
        self.template = get_template(workload, hw, bias=bias, space=space)
        self.search = Search(template=self.template, workload=workload, hw=hw, bias=bias,
                             trials=0, sampler=sampler, seed=seed, jobs=jobs, log=log,
                             store=store, resume=resume, allow_others=allow_others,
                             progress=progress, label=workload.name or workload.key(),
                             new_seed=new_seed)

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
            best=search.score_of(best_config) if best_config else None,
            default_cycles=default_cycles, tutorial=_tutorial(wl, hw, bias),
            asks=search.stats.asks, illegal_asks=search.stats.illegal,
            duplicate_asks=search.stats.duplicate + search.stats.gave_way,
            wall_seconds=wall_seconds, sim_seconds=search.stats.sim_seconds,
            study_id=search.study_id,
            other_trials=search.other_trials, notes=search.all_notes())


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
    best: Score | None
    default_cycles: int | None
    tutorial: Score | None
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


def _tutorial(wl: Workload, hw: HardwareConfig, bias: bool) -> Score | None:
    """The seed tutorial's schedule on this workload, where it is defined and legal."""
    try:
        ev = score(wl, tutorial_schedule(wl, hw), hw, bias=bias)
    except VtatuneError:
        return None
    return ev if ev.status == "ok" else None
