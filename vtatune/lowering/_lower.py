"""Lowering: plan, check and emit a schedule (:func:`lower`), the entry point of the package.

Example:
    >>> from vtatune.workloads import WORKLOADS
    >>> from vtatune.schedule import tutorial_schedule
    >>> from simulator.hardware import DEFAULT
    >>> wl = WORKLOADS["gemm"]["tutorial"]
    >>> lowered = lower(wl, tutorial_schedule(wl), DEFAULT)
    >>> len(lowered.program.instructions)
    142
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.errors import EncodingError
from simulator.hardware import HardwareConfig
from simulator.isa import encode_insn, encode_uop
from simulator.program import Program
from vtatune.errors import IllegalSchedule
from vtatune.lowering._emit import emit
from vtatune.lowering._plan import Plan, plan
from vtatune.schedule import Schedule
from vtatune.workloads import Workload


@dataclass(frozen=True)
class Lowered:
    """A lowered schedule: the program plus what it was built from."""

    workload: Workload
    schedule: Schedule
    hw: HardwareConfig
    bias: bool  # the program reads a per-channel bias (the run's flag, or the epilogue's)
    program: Program
    plan: Plan


def check(workload: Workload, schedule: Schedule, hw: HardwareConfig, bias: bool = False) -> Plan:
    """Legality without emitting instructions; raises IllegalSchedule naming the rule."""
    return plan(workload, schedule, hw, bias)


def lower(workload: Workload, schedule: Schedule, hw: HardwareConfig, bias: bool = False,
          verify_encoding: bool = False) -> Lowered:
    """Plan, check and emit ``schedule``; raises IllegalSchedule for a schedule that cannot
    run on ``hw``.

    The ``field_width`` rule of :func:`check` already guarantees that every field of a
    legal schedule's program fits its bits; ``verify_encoding=True`` also encodes every
    instruction and micro-op (~15% of the lowering time) to prove it."""
    p = plan(workload, schedule, hw, bias)
    program = emit(p)
    if verify_encoding:
        try:
            for insn in program.instructions:
                encode_insn(insn, hw)
            for uop in program.uops:
                encode_uop(uop, hw)
        except EncodingError as exc:
            raise IllegalSchedule("field_width", str(exc)) from None
    return Lowered(workload, schedule, hw, p.bias, program, p)
