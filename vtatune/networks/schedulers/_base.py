"""The base of task schedulers and the per-task state they read."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class TaskState:
    """What the scheduler knows of one task (mutable: the tuner updates it every round).

    ``weight`` is the task's multiplicity; ``macs`` its work (Ansor's FLOP count, for the
    similarity groups); ``tag`` groups similar tasks (None: in no group). ``history`` is the
    best cycles after each round; ``dead`` why the task takes no more trials ('' if live).
    """

    weight: int
    macs: int
    tag: str | None = None
    trials: int = 0
    rounds: int = 0
    best: float = math.inf
    history: list[float] = field(default_factory=list)
    dead: str = ""

    def record_round(self, trials: int, best: float | None) -> None:
        self.trials += trials
        self.rounds += 1
        if best is not None:
            self.best = min(self.best, float(best))
        self.history.append(self.best)

    def flat(self, window: int) -> bool:
        """No improvement over the last ``window`` rounds."""
        h = self.history
        return len(h) > window and h[-1] >= h[-1 - window]


def objective(tasks: Sequence[TaskState]) -> float:
    """Σ weight × best cycles (inf while a task has no legal result)."""
    return sum(t.weight * t.best for t in tasks)


class TaskScheduler(ABC):
    """Picks the live task that gets the next round (the tuner marks dead tasks)."""

    name: str = ""

    @abstractmethod
    def pick(self, tasks: Sequence[TaskState]) -> int:
        """The index of a live task (at least one task is live)."""

    def observe(self, tasks: Sequence[TaskState], index: int) -> None:
        """Called after task ``index`` ran a round (default: nothing to learn)."""
        return None
