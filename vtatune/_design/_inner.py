"""The inner search: every task of a network tuned on one hardware configuration.

The one place that knows how networks are tuned (today: :func:`vtatune.tune` per task of the
ResNet-18 table; the network API of the catalogue replaces :func:`network_tasks` and
:func:`tune_tasks` here, nowhere else). Each (task, hardware) has its own log and study
under ``logdir``, resumed on every call: a pair tuned once is never tuned again.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

from simulator.hardware import HardwareConfig

from ..errors import VtatuneError
from ..workloads import RESNET18_COUNTS, Workload, resnet18_layers


class DesignError(VtatuneError):
    """Bad design-search input (unknown network or board, trials < 1, ...)."""


@dataclass(frozen=True)
class Task:
    """One distinct layer shape of a network and how often the network runs it."""

    workload: Workload
    count: int

    @property
    def name(self) -> str:
        return self.workload.name or self.workload.key()


def network_tasks(network: str) -> tuple[Task, ...]:
    """The tasks of a named network (the catalogue's names when it lands)."""
    if network == "resnet18":
        return tuple(Task(w, RESNET18_COUNTS[w.name.split(".")[-1]]) for w in resnet18_layers())
    raise DesignError(f"unknown network {network!r} (known: resnet18)")


@dataclass(frozen=True)
class InnerResult:
    """Per task the best cycles found (``None`` where no legal schedule was), or the reason
    the hardware cannot run the network at all."""

    cycles: dict[str, int | None]
    reason: str | None
    seconds: float


def task_log(logdir: Path, hw: HardwareConfig, task: Task) -> Path:
    return Path(logdir) / hw.target_model / f"{task.name}.jsonl"


def tune_tasks(network: str, hw: HardwareConfig, trials: int, seed: int,
               logdir: str | Path) -> InnerResult:
    """Tune every task of ``network`` on ``hw`` (``trials`` legal schedules each, the same
    seed for every hardware: "tuned the same way")."""
    from ..tuner import tune

    logging.getLogger("optuna").setLevel(logging.WARNING)
    t0 = time.perf_counter()
    tasks = network_tasks(network)
    for t in tasks:  # shape rules first: no tuning for a network the hardware cannot run
        try:
            t.workload.check(hw)
        except VtatuneError as exc:
            return InnerResult({}, f"{t.name}: {exc}", time.perf_counter() - t0)
    cycles: dict[str, int | None] = {}
    for t in tasks:
        r = tune(t.workload, hw, trials=trials, seed=seed, log=task_log(logdir, hw, t),
                 resume=True)
        cycles[t.name] = r.best_cycles
        if r.best_cycles is None:
            return InnerResult(cycles, f"{t.name}: no legal schedule in {r.asks} proposals",
                               time.perf_counter() - t0)
    return InnerResult(cycles, None, time.perf_counter() - t0)
