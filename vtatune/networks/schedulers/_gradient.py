"""Ansor's gradient task scheduler on a network's objective Σ multiplicity × cycles.

The facts, from TVM's ``auto_scheduler/task_scheduler.py`` (Zheng et al., OSDI 2020, §6):
for each live task i with best cost g_i after t_i rounds, the expected change of the
objective f from one more round of task i is

    ∂f/∂g_i · (α · backward + (1 − α) · forward)

- ∂f/∂g_i is the task's weight (here its multiplicity: f is a weighted sum);
- backward = (g_i(t_i) − g_i(t_i − w)) / w over the last ``w`` rounds (0 until there are
  w + 1 of them);
- forward = min(g_i − g_i / t_i, β · macs_i / best rate of its similarity group) − g_i:
  the optimistic guess that the next round gains as much as an average round so far, or
  that the task reaches 1/β of the best throughput (macs per cycle) of similar tasks.
  Similar tasks share an operator and kernel, and the same log_1.618 of their work.

The task with the most negative gradient gets the round; when all are equal, a seeded
random one. A task that keeps lagging its group's rate by more than β after five more
rounds than any group member leaves the group (Ansor's ``_adjust_similarity_group``).
Defaults α = 0.2, β = 2, w = 3 are Ansor's.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from vtatune.networks.schedulers._base import TaskScheduler, TaskState


class Gradient(TaskScheduler):
    """Ansor's gradient strategy (see the module docstring).

    Example:
        >>> from vtatune.networks.schedulers import TaskState
        >>> a, b = TaskState(1, 10**6), TaskState(1, 10**6)
        >>> for best in (900.0, 600.0, 500.0, 450.0):
        ...     a.record_round(4, best)      # still improving
        >>> for best in (300.0, 300.0, 300.0, 300.0):
        ...     b.record_round(4, best)      # flat, and cheaper
        >>> Gradient().pick([a, b])
        0
    """

    name = "gradient"

    def __init__(self, alpha: float = 0.2, beta: float = 2.0, window: int = 3,
                 seed: int | None = None) -> None:
        self.alpha, self.beta, self.window = alpha, beta, window
        self._rng = random.Random(seed)
        self._groups: dict[str, list[int]] | None = None

    def _group_of(self, tasks: Sequence[TaskState], i: int) -> list[int]:
        if self._groups is None:
            self._groups = {}
            for j, t in enumerate(tasks):
                if t.tag is not None:
                    self._groups.setdefault(t.tag, []).append(j)
        tag = tasks[i].tag
        group = self._groups.get(tag, []) if tag is not None else []
        return group if i in group and len(group) > 1 else []

    @staticmethod
    def _rate(t: TaskState) -> float:
        return t.macs / t.best if t.best > 0 else 0.0

    def gradient(self, tasks: Sequence[TaskState], i: int) -> float:
        t = tasks[i]
        w = self.window
        h = t.history
        backward = (h[-1] - h[-1 - w]) / w if len(h) > w else 0.0
        g_next = t.best - t.best / max(1, t.rounds)
        group = self._group_of(tasks, i)
        if group:
            best_rate = max(self._rate(tasks[j]) for j in group)
            if best_rate > 0:
                g_next = min(g_next, self.beta * t.macs / best_rate)
        forward = g_next - t.best
        return t.weight * (self.alpha * backward + (1 - self.alpha) * forward)

    def pick(self, tasks: Sequence[TaskState]) -> int:
        live = [i for i, t in enumerate(tasks) if not t.dead]
        if not live:
            raise ValueError("no live task")
        grads = {i: self.gradient(tasks, i) for i in live}
        lo = min(grads.values())
        if lo == max(grads.values()):
            return self._rng.choice(live)
        return min(live, key=lambda i: grads[i])

    def observe(self, tasks: Sequence[TaskState], index: int) -> None:
        group = self._group_of(tasks, index)
        if not group:
            return
        best_rate = max(self._rate(tasks[j]) for j in group)
        others = max(tasks[j].rounds for j in group if j != index)
        if self._rate(tasks[index]) < best_rate / self.beta and \
                tasks[index].rounds > 5 + others:
            group.remove(index)
