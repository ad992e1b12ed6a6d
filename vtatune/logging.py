"""How talkative the library is, the way ``optuna.logging`` does it: quiet by default.

vtatune itself prints nothing from the library (the command line prints its own tables and
progress). Optuna, which the tuner drives, logs a line per study and per trial at INFO;
those lines pass only when asked for.

Example:
    >>> import logging
    >>> import vtatune.logging
    >>> vtatune.logging.get_verbosity() == logging.WARNING
    True
    >>> vtatune.logging.set_verbosity(logging.INFO)   # Optuna's INFO lines pass from now on
    >>> vtatune.logging.set_verbosity(logging.WARNING)
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = [
    "get_verbosity", "optuna_verbosity", "set_verbosity",
]

_verbosity = logging.WARNING


def set_verbosity(level: int) -> None:
    """Let log records of ``level`` and above through (``logging.INFO``, ``WARNING``, ...)."""
    global _verbosity
    _verbosity = int(level)


def get_verbosity() -> int:
    return _verbosity


@contextmanager
def optuna_verbosity() -> Iterator[None]:
    """Run a block with Optuna's verbosity at vtatune's, then restore Optuna's own."""
    import optuna

    before = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(_verbosity)
    try:
        yield
    finally:
        optuna.logging.set_verbosity(before)
