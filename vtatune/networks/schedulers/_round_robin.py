"""Round-robin: live tasks in turn."""

from __future__ import annotations

from collections.abc import Sequence

from vtatune.networks.schedulers._base import TaskScheduler, TaskState


class RoundRobin(TaskScheduler):
    """Each live task in turn, in the network's task order.

    Example:
        >>> from vtatune.networks.schedulers import TaskState
        >>> rr, tasks = RoundRobin(), [TaskState(1, 1), TaskState(1, 1), TaskState(1, 1)]
        >>> tasks[1].dead = "converged"
        >>> [rr.pick(tasks) for _ in range(4)]
        [0, 2, 0, 2]
    """

    name = "round-robin"

    def __init__(self) -> None:
        self._last = -1

    def pick(self, tasks: Sequence[TaskState]) -> int:
        n = len(tasks)
        for step in range(1, n + 1):
            i = (self._last + step) % n
            if not tasks[i].dead:
                self._last = i
                return i
        raise ValueError("no live task")
