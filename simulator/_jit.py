"""numba's ``njit``, imported on first use.

Importing numba costs ~0.2 s, more than the rest of vtatune's start-up. Commands that never
lower or time a program (``--help``, ``best``, ``analyze``, a bad option's error line) should
not pay it. :func:`njit` marks a function; the first call of any marked function of a module
imports numba and replaces every marked function of that module, in definition order, by its
compiled dispatcher, so compiled functions calling each other see dispatchers.
"""

from __future__ import annotations

import sys
from typing import Any

_PENDING: dict[str, list[_Lazy]] = {}  # module name -> its marked functions, in order


class _Lazy:
    def __init__(self, fn, options: dict[str, Any]) -> None:
        self.py_func, self.options = fn, options
        _PENDING.setdefault(fn.__module__, []).append(self)

    def __call__(self, *args):
        return _compile(self.py_func.__module__)[self.py_func.__name__](*args)


def _compile(module_name: str) -> dict[str, Any]:
    from numba import njit as numba_njit

    namespace = vars(sys.modules[module_name])
    for lazy in _PENDING.pop(module_name, ()):
        namespace[lazy.py_func.__name__] = numba_njit(**lazy.options)(lazy.py_func)
    return namespace


def njit(**options: Any):
    """``numba.njit(**options)``, deferred until a marked function is first called."""
    def mark(fn):
        return _Lazy(fn, options)
    return mark
