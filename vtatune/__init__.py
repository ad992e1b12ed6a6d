"""vtatune: schedule search for the VTA deep-learning accelerator.

Kept import-light (``search_spaces`` imports vtatune submodules): the public API below is
loaded on first use.

Example:
    >>> import vtatune
    >>> vtatune.tune  # doctest: +ELLIPSIS
    <function tune at ...>
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "tune": "vtatune.tuner",
    "tune_network": "vtatune.tuner",
    "TuneResult": "vtatune.tuner",
    "SAMPLERS": "vtatune.tuner",
    "evaluate": "vtatune.evaluate",
    "Evaluation": "vtatune.evaluate",
    "replay": "vtatune.records",
    "read_records": "vtatune.records",
    "best_records": "vtatune.records",
    "build": "vtatune.build",
    "apply_history_best": "vtatune.build",
    "simulate": "vtatune.build",
    "read_log": "vtatune.analysis",
}
# vtatune.build is a callable module (vtatune.build(...) and vtatune.build.X): return it.
_MODULES = {"build"}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'vtatune' has no attribute {name!r}")
    import importlib

    mod = importlib.import_module(module)
    value = mod if name in _MODULES else getattr(mod, name)
    if name != "evaluate":  # vtatune.evaluate is also the submodule's name: don't shadow it
        globals()[name] = value
    return value
