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
    "tune_network": "vtatune.network_tuning",
    "NetworkResult": "vtatune.network_tuning",
    "load_network": "vtatune.networks",
    "TuneResult": "vtatune.tuner",
    "SAMPLERS": "vtatune.tuner",
    "replay": "vtatune.records",
    "read_records": "vtatune.records",
    "best_records": "vtatune.records",
    "build": "vtatune.builds",
    "apply_history_best": "vtatune.builds",
    "simulate": "vtatune.builds",
    "read_log": "vtatune.analysis",
    "co_design": "vtatune.design",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'vtatune' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
