"""The inner search: a network placed on one hardware configuration and its tasks tuned.

The one place that knows how networks are loaded and tuned (:func:`vtatune.networks
.load_network`, :func:`vtatune.networks.tune_network`, round-robin so every task gets
the same trials on every design). Each hardware has its own network log and study under
``logdir``, resumed on every call: a (task, hardware) pair tuned once is never tuned again.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from simulator.hardware import HardwareConfig
from vtatune.errors import VtatuneError
from vtatune.networks import Network


class DesignError(VtatuneError):
    """Bad design-search input (unknown board or objective, trials < 1, ...)."""


@lru_cache(maxsize=256)
def placed(network: str, hw: HardwareConfig) -> Network:
    """``network`` (a catalogue name or an ONNX file) placed on ``hw``: an ONNX model as
    deploy runs it (:func:`vtatune.deploy.load_placed`), its passes counted as deploy runs
    them."""
    from vtatune.deploy import load_placed  # TVM's import, for an ONNX model only

    return load_placed(network, hw)


def vta_layers(net: Network) -> frozenset[str]:
    """The layers VTA runs and vtatune can tune on this placement."""
    return frozenset(name for t in net.tasks if not t.skip for name in t.layers)


def placement_difference(net: Network, reference: frozenset[str]) -> str | None:
    """Why ``net`` does not run the reference's VTA layers (a different network's work)."""
    mine = vta_layers(net)
    lost = sorted(reference - mine)
    if lost:
        why = {c.name: c.reason for c in net.cpu}
        return f"layer {lost[0]} leaves VTA: {why.get(lost[0], 'not tunable')}"
    gained = sorted(mine - reference)
    if gained:
        return f"layer {gained[0]} runs on VTA here but not on the stock design"
    return None


@dataclass(frozen=True)
class InnerResult:
    """Per task the best cycles found and its multiplicity, the deployed network's VTA time
    with those schedules, or why the hardware cannot run the network."""

    cycles: dict[str, int | None]
    counts: dict[str, int]
    reason: str | None
    seconds: float
    vta_cycles: int | None = None  # every VTA kernel of the deployed model, in order

    @property
    def tasks_cycles(self) -> int:
        """Σ multiplicity × best cycles of the tasks."""
        return sum(self.counts[n] * (c or 0) for n, c in self.cycles.items())

    @property
    def total_cycles(self) -> int:
        """The network's VTA time as deployed (each layer's epilogue, the ALU-only
        kernels, tokens carried); the tasks' sum for a result stored without it."""
        return self.vta_cycles if self.vta_cycles is not None else self.tasks_cycles


def network_log(logdir: str | Path, network: str, hw: HardwareConfig) -> Path:
    return Path(logdir) / hw.target_model / f"{Path(network).stem}.jsonl"


def tune_tasks(network: str, hw: HardwareConfig, trials: int, seed: int,
               logdir: str | Path) -> InnerResult:
    """Tune every task of ``network`` on ``hw`` (``trials`` legal schedules each, the same
    seed for every hardware: "tuned the same way")."""
    from vtatune.networks import tune_network

    logging.getLogger("optuna").setLevel(logging.WARNING)
    t0 = time.perf_counter()
    r = tune_network(placed(network, hw), trials_per_task=trials, scheduler="round-robin",
                     patience=None, seed=seed, log=network_log(logdir, network, hw),
                     resume=True)
    cycles = {t.task.name: t.best_cycles for t in r.tasks if not t.skipped}
    counts = {t.task.name: t.task.multiplicity for t in r.tasks if not t.skipped}
    missing = [n for n, c in cycles.items() if c is None]
    reason = f"{missing[0]}: no legal schedule found" if missing else None
    if reason is None and r.vta_cycles is None:
        reason = "the deployed network does not run: a task has no legal schedule"
    return InnerResult(cycles, counts, reason, time.perf_counter() - t0,
                       None if reason else r.vta_cycles)
