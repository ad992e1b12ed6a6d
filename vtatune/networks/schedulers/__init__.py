"""Task schedulers: which task of a network gets the next round of trials.

A network's objective is its VTA time, Σ multiplicity × best cycles over its tasks. The
network tuner (:func:`vtatune.networks.tune_network`) gives every task one round first (the warm-up
round, as Ansor's task scheduler does), then asks a :class:`TaskScheduler` which live task
gets the next round, until the network's trial budget is spent or every task is dead:
exhausted (its whole legal space evaluated) or converged (no better config in its last
``window`` rounds).

- ``round-robin`` (:class:`RoundRobin`): live tasks in turn.
- ``gradient`` (:class:`Gradient`): Ansor's strategy (Zheng et al., OSDI 2020, section 6;
  TVM's ``auto_scheduler/task_scheduler.py``): the task whose next round is expected to
  lower the objective most.

Example:
    >>> tasks = [TaskState(weight=4, macs=10**8), TaskState(weight=1, macs=10**8)]
    >>> for t, best in zip(tasks, (500_000.0, 480_000.0)):
    ...     t.record_round(4, best)
    >>> Gradient().pick(tasks)   # the task that occurs four times weighs four times
    0
    >>> objective(tasks)
    2480000.0
"""

from vtatune.networks.schedulers._base import TaskScheduler, TaskState, objective
from vtatune.networks.schedulers._gradient import Gradient
from vtatune.networks.schedulers._registry import SCHEDULERS, get_scheduler
from vtatune.networks.schedulers._round_robin import RoundRobin

__all__ = ["SCHEDULERS", "Gradient", "RoundRobin", "TaskScheduler", "TaskState",
           "get_scheduler", "objective"]
