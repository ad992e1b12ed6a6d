"""numba's ``njit``, imported on first use.

Importing numba costs ~0.2 s, more than the rest of vtatune's start-up. Commands that never
lower or time a program (``--help``, ``best``, ``analyze``, a bad option's error line) should
not pay it. :func:`njit` marks a function; the first call of any marked function of a module
imports numba and replaces every marked function of that module, in definition order, by its
compiled dispatcher, so compiled functions calling each other see dispatchers.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

__all__ = [
    "engines_to_compile", "njit",
]

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


def engines_to_compile() -> list[str]:
    """The marked, not yet compiled functions of the imported modules that numba's on-disk
    cache does not hold (``__pycache__/<file>.<function>-<line>.py<version>.nbi``): the
    first run after install compiles them (about 10-15 s). Cheap: looks for files only. Empty
    when ``NUMBA_CACHE_DIR`` moves the cache elsewhere (not guessed)."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return []
    tag = f"py{sys.version_info.major}{sys.version_info.minor}.nbi"
    missing = []
    for module_name, lazies in _PENDING.items():
        source = Path(sys.modules[module_name].__file__ or "")
        for lazy in lazies:
            if not lazy.options.get("cache") or lazy.options.get("inline") == "always":
                continue  # not cached, or compiled only into its callers
            code = lazy.py_func.__code__
            index = (source.parent / "__pycache__" /
                     f"{source.stem}.{lazy.py_func.__qualname__}-{code.co_firstlineno}.{tag}")
            if not index.exists():
                missing.append(f"{module_name}.{lazy.py_func.__name__}")
    return missing
