"""Lowering: plan, check and emit a schedule (:func:`lower`), the entry point of the package,
for every operator: the GEMM operators (``_context``, ``_rules``, ``_plan``, ``_emit``) and
the ALU-only ones (``_alu_only``). :func:`context`, :func:`rules`, :func:`shape_rules`,
:func:`legality` and :func:`check` answer for both.

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
from vtatune.lowering import _context, _rules
from vtatune.lowering._alu_only import (
    AluContext,
    AluFacts,
    alu_context,
    alu_rules,
    alu_shape_rules,
    lower_alu,
)
from vtatune.lowering._carry import FRESH, Carry
from vtatune.lowering._emit import emit
from vtatune.lowering._plan import Plan, plan
from vtatune.schedule import Schedule
from vtatune.workloads import AddWorkload, MultiplyWorkload, Workload

_ALU_ONLY = (AddWorkload, MultiplyWorkload)


def context(workload: Workload, hw: HardwareConfig) -> _context.Context | AluContext:
    """The rule constants of ``workload`` on ``hw`` (raises WorkloadError for bad shapes)."""
    if isinstance(workload, _ALU_ONLY):
        return alu_context(workload, hw)
    return _context.context(workload, hw)


def rules(ctx: _context.Context | AluContext, sch: Schedule, bias: bool = False
          ) -> _rules.Facts | AluFacts:
    """Every legality rule of ``sch``, in order; raises IllegalSchedule naming the first that
    fails (arithmetic only: a search asks it of every candidate)."""
    if type(ctx) is AluContext:
        return alu_rules(ctx, sch, bias)
    return _rules.rules(ctx, sch, bias)


def shape_rules(ctx: _context.Context | AluContext) -> None:
    """The rules a workload fails on a hardware config whatever its schedule."""
    if type(ctx) is AluContext:
        alu_shape_rules(ctx)
    else:
        _rules.shape_rules(ctx)


def legality(workload: Workload, schedule: Schedule, hw: HardwareConfig,
             bias: bool = False) -> _rules.Facts | AluFacts:
    """All legality rules of ``schedule`` (cheap: no kernel is built)."""
    return rules(context(workload, hw), schedule, bias)


@dataclass(frozen=True)
class Lowered:
    """A lowered schedule: the program plus what it was built from."""

    workload: Workload
    schedule: Schedule
    hw: HardwareConfig
    bias: bool  # the program reads a per-channel bias (the run's flag, or the epilogue's)
    program: Program
    plan: Plan | AluFacts
    #: the pops this stream leaves pending for the next one (see :class:`Carry`)
    pending_out: tuple[tuple[int, int], ...] = ()


def check(workload: Workload, schedule: Schedule, hw: HardwareConfig,
          bias: bool = False) -> Plan | AluFacts:
    """Legality without emitting instructions; raises IllegalSchedule naming the rule."""
    if isinstance(workload, _ALU_ONLY):
        return alu_rules(alu_context(workload, hw), schedule, bias)
    return plan(workload, schedule, hw, bias)


def lower(workload: Workload, schedule: Schedule, hw: HardwareConfig, bias: bool = False,
          verify_encoding: bool = False, carry: Carry = FRESH, stream: str = "tvm") -> Lowered:
    """Plan, check and emit ``schedule``; raises IllegalSchedule for a schedule that cannot
    run on ``hw``.

    The ``field_width`` rule of :func:`check` already guarantees that every field of a
    legal schedule's program fits its bits; ``verify_encoding=True`` also encodes every
    instruction and micro-op (~15% of the lowering time) to prove it.

    ``carry``: what the stream before left (see :class:`Carry`; the program's
    :attr:`~simulator.program.Program.tokens_in`, the pending pops its first instructions
    take). ``stream``: ``"tvm"`` builds the stream as TVM v0.14's runtime does; ``"v0.1"``
    as vtatune 0.1 did (a push merged into a load or compute NOP, a single-thread tile loop
    drained before the synchronize: one NOP more or less, the same counters), for the
    programs the RTL measurements in tests/data ran."""
    if isinstance(workload, _ALU_ONLY):
        if bias:
            raise IllegalSchedule("alu_bias", "an ALU-only kernel reads no bias")
        program, pending_out, facts = lower_alu(workload, schedule, hw, carry)
        return Lowered(workload, schedule, hw, False, program, facts, pending_out)
    p = plan(workload, schedule, hw, bias)
    program, pending_out = emit(p, carry, stream)
    if verify_encoding:
        try:
            for insn in program.instructions:
                encode_insn(insn, hw)
            for uop in program.uops:
                encode_uop(uop, hw)
        except EncodingError as exc:
            raise IllegalSchedule("field_width", str(exc)) from None
    return Lowered(workload, schedule, hw, p.bias, program, p, pending_out)
