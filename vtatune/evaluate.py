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

from dataclasses import asdict, dataclass
from typing import Any

from simulator.errors import VTAError
from simulator.functional import count
from simulator.hardware import HardwareConfig

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

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def evaluate(workload: Workload, schedule: Schedule, hw: HardwareConfig, *, bias: bool = False,
             profile=None) -> Evaluation:
    """Lower and time ``schedule``; never raises for a schedule that cannot run."""
    try:
        lowered = lower(workload, schedule, hw, bias=bias)
    except IllegalSchedule as exc:
        return Evaluation("illegal", rule=exc.rule, error=str(exc))
    except VTAError as exc:
        return Evaluation("error", error=str(exc))
    counters = count(lowered.program, hw)
    # Placeholder until the timing engine lands: the larger of the compute and memory floors.
    moved = (counters.inp_load_nbytes + counters.wgt_load_nbytes + counters.acc_load_nbytes
             + counters.uop_load_nbytes + counters.out_store_nbytes)
    cycles = max(counters.gemm_counter, moved // (hw.bus_bits // 8)) + len(
        lowered.program.instructions) * 3
    seconds = cycles / (hw.clock_mhz * 1e6)
    macs = workload.macs
    return Evaluation(
        "ok", cycles=cycles, seconds=seconds, gops=2 * macs / seconds / 1e9,
        utilization=counters.gemm_counter / cycles, counters=counters.as_dict(),
        instructions=len(lowered.program.instructions))
