"""Scoring one schedule: lower it, count fsim's counters, time it on the VTA model.

Example:
    >>> from simulator.hardware import DEFAULT
    >>> from vtatune.workloads import WORKLOADS
    >>> from vtatune.schedule import tutorial_schedule
    >>> wl = WORKLOADS["gemm"]["tutorial"]
    >>> s = score(wl, tutorial_schedule(wl), DEFAULT)
    >>> s.status, s.counters["gemm_counter"]
    ('ok', 4096)
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from simulator.errors import VTAError
from simulator.hardware import HardwareConfig
from simulator.timing import TimingProfile
from vtatune.errors import IllegalSchedule
from vtatune.lowering import lower
from vtatune.schedule import Schedule
from vtatune.scoring._simulate import simulate
from vtatune.workloads import Workload


@dataclass(frozen=True)
class Score:
    """The score of one schedule. ``status``: ``ok``, ``illegal`` (with the rule) or
    ``error``; an ``ok`` score carries the :class:`Simulation`'s numbers."""

    status: str
    cycles: int | None = None
    seconds: float | None = None
    gops: float | None = None
    utilization: float | None = None
    counters: dict[str, int] | None = None
    instructions: int | None = None
    rule: str | None = None
    error: str | None = None
    timing: str | None = None  # the timing profile's fingerprint the cycles come from

    def as_dict(self) -> dict[str, Any]:
        """The fields a log record stores as its score."""
        out = dict(vars(self))  # plain values but the counters (asdict deep-copies all)
        if self.counters is not None:
            out["counters"] = dict(self.counters)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Score:
        """The inverse of :meth:`as_dict`; other keys (a whole log record's) are ignored."""
        return cls(**{f.name: data.get(f.name) for f in fields(cls)})


#: The modules whose compiled engines :func:`score` runs.
ENGINE_MODULES = ("simulator.", "vtatune.lowering.")


def announce_worker_compile() -> None:
    """Right before worker processes score (``--jobs``): the first-compile notice
    (:func:`simulator.jit.on_first_compile`) now, when they are about to compile the engines
    :func:`score` runs; this process would not see them compile."""
    from simulator.jit import announce_compile

    announce_compile(ENGINE_MODULES)


def score(workload: Workload, schedule: Schedule, hw: HardwareConfig, *, bias: bool = False,
          profile: TimingProfile | None = None) -> Score:
    """Lower and simulate ``schedule``; never raises for a schedule that cannot run."""
    try:
        lowered = lower(workload, schedule, hw, bias=bias)
    except IllegalSchedule as exc:
        return Score("illegal", rule=exc.rule, error=str(exc))
    except VTAError as exc:
        return Score("error", error=str(exc))
    sim = simulate(lowered, profile=profile)
    return Score("ok", cycles=sim.cycles, seconds=sim.seconds, gops=sim.gops,
                 utilization=sim.utilization, counters=sim.counters,
                 instructions=sim.instructions, timing=sim.timing)
