"""A sensible legal fallback schedule for any workload."""

from __future__ import annotations

from typing import Any

from simulator.hardware import HardwareConfig
from vtatune.errors import IllegalSchedule, ScheduleError
from vtatune.lowering import check, context
from vtatune.schedule import Schedule, parse_schedule, schedule_from_knobs
from vtatune.workloads import AddWorkload, Workload


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def default_schedule(workload: Workload, hw: HardwareConfig, bias: bool = False) -> Schedule:
    """The first legal schedule among simple, reasonable candidates: full-width rows, one
    input-channel block per load step, as many rows and output channels as fit, two
    threads on the output channels when possible. Deterministic. An ALU-only operator takes
    TVM's fallback config (entity 0 of add.vta's space: one block a tile), as AutoTVM does
    for a task its log lacks."""
    if isinstance(workload, AddWorkload):
        s = Schedule(tile_h=1, tile_w=1, tile_co=1, tvm_strict=True)
        check(workload, s, hw, bias)
        return s
    ctx = context(workload, hw)
    candidates = []
    for tile_co in sorted((d for d in _divisors(ctx.cob) if d <= 8), reverse=True):
        for tile_h in sorted(_divisors(ctx.oh), reverse=True):
            for oc_nthread in (2, 1):
                candidates.append(Schedule(
                    tile_b=1, tile_h=tile_h, tile_w=ctx.ow,
                    tile_co=tile_co, tile_ci=1, oc_nthread=oc_nthread))
    last: IllegalSchedule | None = None
    for s in candidates:
        try:
            check(workload, s, hw, bias)
            return s
        except IllegalSchedule as exc:
            last = exc
    raise IllegalSchedule("no_default", f"no default schedule fits {workload.describe()} on "
                                        f"{hw.bitstream}: {last}")


def resolve_schedule(spec: Schedule | dict[str, Any] | str | None, workload: Workload,
                     hw: HardwareConfig, bias: bool = False) -> Schedule:
    """The schedule a user means: a Schedule as is; a dict of knobs (``{"tile_h": 14}``, the
    others at their defaults) or ``{"autotvm": {...}}``; a string as ``--schedule`` takes it
    (``tutorial``, ``default``, JSON, ``@file``); None: ``tutorial`` for the conv2d and
    gemm tutorial workloads, else ``default``. Raises ScheduleError for anything else."""
    if isinstance(spec, Schedule):
        return spec
    if isinstance(spec, dict):
        return schedule_from_knobs(spec, workload, hw)
    if spec is not None and not isinstance(spec, str):
        raise ScheduleError(f"a schedule is a Schedule, a dict of knobs or a string, got "
                            f"{type(spec).__name__}")
    if spec is None:  # the seed tutorials exist for conv2d and gemm only
        tutorial = workload.name == "tutorial" and workload.operator in ("conv2d", "gemm")
        spec = "tutorial" if tutorial else "default"
    parsed = parse_schedule(spec, workload, hw)
    return default_schedule(workload, hw, bias) if parsed == "default" else parsed
