"""The schedule a user means: the default schedule of any workload (legal whenever any
schedule is) and the parsing of ``--schedule``."""

from __future__ import annotations

from typing import Any

from search_spaces._defaults import first_legal_candidate
from search_spaces._template import get_template
from simulator.hardware import HardwareConfig
from vtatune.errors import IllegalSchedule, ScheduleError
from vtatune.schedule import Schedule, parse_schedule, schedule_from_knobs, tutorial_schedule
from vtatune.workloads import Workload


def default_schedule(workload: Workload, hw: HardwareConfig, bias: bool = False) -> Schedule:
    """A legal schedule of ``workload`` on ``hw``, whenever any is. Deterministic.

    The first legal candidate of :func:`search_spaces._defaults.default_candidates`
    (full-width rows, as many rows and output channels as fit, two threads on the output
    channels when possible, the load step and output tile the layout rules require); when
    none is legal (tiny buffers), the first legal config of the workload's ``full``
    template. Raises IllegalSchedule (rule ``no_default``) naming why when no schedule can
    run.

    Example:
        >>> from simulator.hardware import DEFAULT
        >>> from vtatune.workloads import WORKLOADS
        >>> default_schedule(WORKLOADS["conv2d"]["resnet18.C8"], DEFAULT).short()
        'b1 h14 w14 co8 ci1 vt1x1 bhcw [ci,w,kw,kh,co,h] store=tile'
    """
    found, first = first_legal_candidate(workload, hw, bias)
    if found is not None:
        return found
    tpl = get_template(workload, hw, bias)
    why = tpl.no_legal_config()
    if why is None:
        config = next(tpl.legal_configs(), None)
        if config is not None:
            return tpl.to_schedule(config)
        why = f"none of the {tpl.size()} configs of {tpl.name} is legal; the default's " \
              f"first candidate fails with: {first}"
    raise IllegalSchedule("no_default", f"no schedule fits {workload.describe()} on "
                                        f"{hw.bitstream}: {why}")


def resolve_schedule(spec: Schedule | dict[str, Any] | str | None, workload: Workload,
                     hw: HardwareConfig, bias: bool = False) -> Schedule:
    """The schedule a user means: a Schedule as is; a dict of knobs (``{"tile_h": 14}``, the
    others at their defaults) or ``{"autotvm": {...}}``; a string as ``--schedule`` takes it
    (``tutorial``, ``default``, JSON, ``@file``); None: ``tutorial`` for the conv2d and
    gemm tutorial workloads where the tutorial's schedule exists on ``hw``, else
    ``default``. Raises ScheduleError for anything else."""
    if isinstance(spec, Schedule):
        return spec
    if isinstance(spec, dict):
        return schedule_from_knobs(spec, workload, hw)
    if spec is not None and not isinstance(spec, str):
        raise ScheduleError(f"a schedule is a Schedule, a dict of knobs or a string, got "
                            f"{type(spec).__name__}")
    if spec is None:  # the seed tutorials exist for conv2d and gemm only
        if workload.name == "tutorial" and workload.operator in ("conv2d", "gemm"):
            try:
                return tutorial_schedule(workload, hw)
            except ScheduleError:  # not on this hardware (the GEMM one, BLOCK_IN != OUT)
                pass
        spec = "default"
    parsed = parse_schedule(spec, workload, hw)
    return default_schedule(workload, hw, bias) if parsed == "default" else parsed
