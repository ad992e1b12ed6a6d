"""Errors raised by the VTA machine model.

Every error carries a one-line message meant for the user: it names the rule, key or
instruction that failed and the numbers involved.
"""

from __future__ import annotations

__all__ = [
    "ConfigError", "DeadlockError", "EncodingError", "ProgramError", "VTAError",
]


class VTAError(Exception):
    """Base class of every error the machine model raises."""


class ConfigError(VTAError, ValueError):
    """A hardware configuration is malformed or inconsistent."""


class EncodingError(VTAError, ValueError):
    """An instruction or micro-op field does not fit its bit field."""


class ProgramError(VTAError, ValueError):
    """An instruction stream is invalid (bad SRAM index, bad dependency flag, ...)."""


class DeadlockError(VTAError, RuntimeError):
    """A dependency pop can never be satisfied."""
