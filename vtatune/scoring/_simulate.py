"""Simulating a program: fsim's counters and the timing model's cycles, in one value.

Example:
    >>> from simulator.hardware import DEFAULT
    >>> from vtatune.lowering import lower
    >>> from vtatune.schedule import tutorial_schedule
    >>> from vtatune.workloads import WORKLOADS
    >>> wl = WORKLOADS["gemm"]["tutorial"]
    >>> sim = simulate(lower(wl, tutorial_schedule(wl), DEFAULT))
    >>> sim.counters["gemm_counter"], sim.cycles > 0
    (4096, True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simulator.functional import count
from simulator.hardware import HardwareConfig
from simulator.program import Program
from simulator.timing import TimingProfile, time_program
from vtatune.errors import BuildError


@dataclass(frozen=True)
class Simulation:
    """What :func:`simulate` reports: fsim's counters and the timing model's cycles (and
    the fingerprint of the timing profile they come from)."""

    cycles: int
    seconds: float
    gops: float
    utilization: float
    counters: dict[str, int]
    instructions: int
    timing: str


def simulate(target: Any, hw: HardwareConfig | None = None, *,
             profile: TimingProfile | None = None) -> Simulation:
    """fsim's counters and the timing model's cycles for a Build, a lowered program, a
    loaded program (:func:`vtatune.builds.load_bin`) or a Program with its ``hw``.

    The numbers are those :func:`vtatune.scoring.score` logs for the same schedule.
    """
    program, macs = _program_of(target)
    hw = hw or getattr(target, "hw", None)
    if not isinstance(program, Program) or hw is None:
        raise BuildError("simulate takes a Build, a loaded program, or a Program and its hw")
    counters = count(program, hw).as_dict()
    timing = time_program(program, hw, profile)
    seconds = timing.seconds(hw)
    gops = 2 * macs / seconds / 1e9 if macs and seconds else 0.0
    return Simulation(timing.cycles, seconds, gops, timing.utilization, counters,
                      len(program), timing.profile.fingerprint())


def _program_of(target: Any) -> tuple[Any, int | None]:
    if isinstance(target, Program):
        return target, None
    wl = getattr(target, "workload", None)
    return getattr(target, "program", None), getattr(wl, "macs", None)
