"""vtatune: schedule search for the VTA deep-learning accelerator.

Glossary (each word means this, everywhere in vtatune):

workload
    One operator with its shapes: a conv2d, GEMM, grouped or transposed conv2d
    (:mod:`vtatune.workloads`). Equal shapes are equal workloads.
key
    The text that names a workload's shape in logs and studies
    (``conv2d.batch1.height14...``; ``Workload.key()``); a record's *target key* adds the
    hardware model and the bias flag.
task
    A workload of a network, with how many layers of the network it stands for (its
    multiplicity): what network tuning tunes once (:class:`vtatune.networks.Task`).
template
    The search space of a workload on one hardware config: its knobs, their legality and
    the mapping config <-> schedule (:mod:`search_spaces`). Its *space* is ``full``
    (vtatune's) or ``autotvm`` (TVM's ``conv2d_packed`` / ``dense_packed``).
knob
    One dimension of a template with fixed, ordered choices (``tile_h``, ``oc_nthread``,
    ``gemm_order``, ...).
config
    A point of a template: ``{knob: choice}``. What samplers propose and logs record.
schedule
    How an operator is tiled, ordered, threaded and stored: every field TVM's lowering
    needs (:class:`vtatune.schedule.Schedule`); a config maps to exactly one.
program
    The VTA instruction stream, micro-op kernels and DRAM layout a schedule lowers to
    (:class:`simulator.program.Program`; :mod:`vtatune.lowering`), exported as
    ``program.json`` / ``.bin`` / ``.c`` by :mod:`vtatune.builds`.
score
    What scoring one schedule gives: ``ok`` with fsim's counters and the cycles, or
    ``illegal`` with the rule that fails (:func:`vtatune.scoring.score`).
record, log
    A record is one scored trial, complete enough to replay; a log is a JSON-lines file of
    them (:mod:`vtatune.records`).
study, problem
    A problem is workload x hardware x template x space x bias; its study is the Optuna
    study that tunes it, shared by every worker on one storage (:mod:`vtatune.tuning`).
design
    One VTA hardware configuration considered by co-design, with the network's latency on it
    and its FPGA resources (:mod:`vtatune.design`).

The layers, bottom up: :mod:`simulator` (the machine: hardware config, ISA, programs,
functional and timing engines) < :mod:`vtatune.workloads`, :mod:`vtatune.schedule`,
:mod:`vtatune.lowering` < :mod:`search_spaces` (templates) < :mod:`vtatune.scoring` <
:mod:`vtatune.records` < :mod:`vtatune.tuning` < :mod:`vtatune.networks`,
:mod:`vtatune.autotvm`, :mod:`vtatune.builds` < :mod:`vtatune.design` < :mod:`vtatune.cli`.

The names below are loaded on first use: :mod:`search_spaces` sits between vtatune's lower
layers (which it imports) and its upper ones (which import it), so this package imports
none of them itself.

Example:
    >>> import vtatune
    >>> vtatune.tune  # doctest: +ELLIPSIS
    <function tune at ...>
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: The public API: each name and the package that defines it.
_API = {
    "tune": "vtatune.tuning",
    "TuneResult": "vtatune.tuning",
    "SAMPLERS": "vtatune.tuning",
    "tune_network": "vtatune.networks",
    "NetworkResult": "vtatune.networks",
    "load_network": "vtatune.networks",
    "replay": "vtatune.records",
    "read_records": "vtatune.records",
    "best_records": "vtatune.records",
    "read_log": "vtatune.records.analysis",
    "build": "vtatune.builds",
    "apply_history_best": "vtatune.builds",
    "simulate": "vtatune.scoring",
    "score": "vtatune.scoring",
    "co_design": "vtatune.design",
}

__all__ = [
    "SAMPLERS", "NetworkResult", "TuneResult", "__version__", "apply_history_best",
    "best_records", "build", "co_design", "load_network", "read_log", "read_records", "replay",
    "score", "simulate", "tune", "tune_network",
]

if TYPE_CHECKING:
    from vtatune.builds import apply_history_best, build
    from vtatune.design import co_design
    from vtatune.networks import NetworkResult, load_network, tune_network
    from vtatune.records import best_records, read_records, replay
    from vtatune.records.analysis import read_log
    from vtatune.scoring import score, simulate
    from vtatune.tuning import SAMPLERS, TuneResult, tune


def __getattr__(name: str) -> Any:
    package = _API.get(name)
    if package is None:
        raise AttributeError(f"module 'vtatune' has no attribute {name!r}")
    value = getattr(importlib.import_module(package), name)
    globals()[name] = value
    return value
