"""Scoring one schedule: lower it, count fsim's counters, time it on the VTA model.

Example:
    >>> from simulator.hardware import DEFAULT
    >>> from vtatune.workloads import WORKLOADS
    >>> from vtatune.schedule import tutorial_schedule
    >>> wl = WORKLOADS["gemm"]["tutorial"]
    >>> ev = evaluate(wl, tutorial_schedule(wl), DEFAULT)
    >>> ev.status, ev.counters["gemm_counter"]
    ('ok', 4096)
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from simulator.errors import VTAError
from simulator.functional import count
from simulator.hardware import HardwareConfig
from simulator.timing import TimingProfile, simulate

from .errors import IllegalSchedule
from .lowering import lower
from .schedule import Schedule
from .workloads import Workload


@dataclass(frozen=True)
class Evaluation:
    """The score of one schedule. ``status``: ``ok``, ``illegal`` (with the rule) or ``error``."""

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
    def from_dict(cls, data: dict[str, Any]) -> Evaluation:
        """The inverse of :meth:`as_dict`; other keys (a whole log record's) are ignored."""
        return cls(**{f.name: data.get(f.name) for f in fields(cls)})


def evaluate(workload: Workload, schedule: Schedule, hw: HardwareConfig, *, bias: bool = False,
             profile: TimingProfile | None = None) -> Evaluation:
    """Lower and time ``schedule``; never raises for a schedule that cannot run."""
    try:
        lowered = lower(workload, schedule, hw, bias=bias)
    except IllegalSchedule as exc:
        return Evaluation("illegal", rule=exc.rule, error=str(exc))
    except VTAError as exc:
        return Evaluation("error", error=str(exc))
    counters = count(lowered.program, hw)
    timing = simulate(lowered.program, hw, profile)
    seconds = timing.seconds(hw)
    return Evaluation(
        "ok", cycles=timing.cycles, seconds=seconds, gops=2 * workload.macs / seconds / 1e9,
        utilization=timing.utilization, counters=counters.as_dict(),
        instructions=len(lowered.program), timing=timing.profile.fingerprint())
