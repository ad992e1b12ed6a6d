"""User-facing errors of vtatune. Each message is one line naming the rule and numbers."""

from __future__ import annotations

from simulator.errors import VTAError

__all__ = [
    "BuildError", "IllegalSchedule", "ScheduleError", "VtatuneError", "WorkloadError",
]


class VtatuneError(VTAError):
    """Base class: bad input that the CLI reports in one line with exit status 2."""


class WorkloadError(VtatuneError, ValueError):
    """A workload shape is invalid for the hardware."""


class ScheduleError(VtatuneError, ValueError):
    """A schedule is malformed (unknown knob, bad value, bad JSON)."""


class IllegalSchedule(VtatuneError, ValueError):
    """A well-formed schedule that cannot run: names the rule that fails and its numbers.

    ``rule`` is a short machine-readable tag (``inp_capacity``, ``dst_dependency``, ...).
    """

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(message)
        self.rule = rule


class BuildError(VtatuneError):
    """A build that cannot be made or run (bad operands, a record that no longer lowers)."""
