"""The task schedulers by name."""

from __future__ import annotations

from vtatune.errors import VtatuneError
from vtatune.networks.schedulers._base import TaskScheduler
from vtatune.networks.schedulers._gradient import Gradient
from vtatune.networks.schedulers._round_robin import RoundRobin

SCHEDULERS: dict[str, type[TaskScheduler]] = {"gradient": Gradient, "round-robin": RoundRobin}


def get_scheduler(name: str, seed: int | None = None) -> TaskScheduler:
    """A scheduler by name (``gradient`` or ``round-robin``)."""
    cls = SCHEDULERS.get(name)
    if cls is None:
        raise VtatuneError(f"unknown task scheduler {name!r} (known: {', '.join(SCHEDULERS)})")
    return cls(seed=seed) if cls is Gradient else cls()
