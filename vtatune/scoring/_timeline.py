"""Reporting a timed run: the JSON summary, the per-instruction CSV trace and a lane plot.

Example:
    >>> from simulator.hardware import DEFAULT
    >>> from simulator.timing import time_program
    >>> from vtatune.lowering import lower
    >>> from vtatune.schedule import tutorial_schedule
    >>> from vtatune.workloads import WORKLOADS
    >>> wl = WORKLOADS["gemm"]["tutorial"]
    >>> t = time_program(lower(wl, tutorial_schedule(wl), DEFAULT).program, DEFAULT)
    >>> sorted(timing_report(t, DEFAULT, wl.macs))[:4]
    ['bounds', 'cycles', 'gops', 'modules']
"""

from __future__ import annotations

import csv
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from simulator.hardware import HardwareConfig
from simulator.timing import MODULES, TimingResult, TraceRow
from vtatune.errors import VtatuneError


def timing_report(t: TimingResult, hw: HardwareConfig, macs: int | None) -> dict[str, Any]:
    """``cycles``, ``seconds``, ``gops``, ``utilization``, ``modules`` and ``bounds``."""
    seconds = t.seconds(hw)
    return {
        "cycles": t.cycles,
        "seconds": seconds,
        "gops": (2 * macs / seconds / 1e9) if macs else 0.0,
        "utilization": t.utilization,
        "modules": {name: asdict(m) for name, m in t.modules.items()},
        "bounds": {"compute_floor": t.compute_floor, "memory_floor": t.memory_floor,
                   "serial": t.serial_cycles},
    }


def write_trace_csv(rows: tuple[TraceRow, ...], path: str | Path) -> None:
    """One row per instruction: index, module, kind, start, end, token_wait, pops."""
    try:
        with open(path, "w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow([f.name for f in fields(TraceRow)])
            for r in rows:
                writer.writerow([getattr(r, f.name) for f in fields(TraceRow)])
    except OSError as exc:
        raise VtatuneError(f"cannot write trace {path}: {exc.strerror}") from None


def draw_timeline(rows: tuple[TraceRow, ...], path: str | Path, title: str = "") -> None:
    """The load, compute and store modules as lanes over time (PNG, needs matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise VtatuneError("--timeline needs matplotlib: pip install 'vtatune[plot]'") from None
    colours = {"LOAD": "tab:blue", "GEMM": "tab:red", "ALU": "tab:orange",
               "STORE": "tab:green", "NOP": "tab:gray", "FINISH": "black"}
    fig, ax = plt.subplots(figsize=(12, 2.8))
    lanes = {name: k for k, name in enumerate(reversed(MODULES))}
    for kind, colour in colours.items():
        spans = [(r.start, max(r.end - r.start, 1), lanes[r.module]) for r in rows
                 if r.kind.split()[0] == kind]
        for lane in set(s[2] for s in spans):
            ax.broken_barh([(s, w) for s, w, ln in spans if ln == lane], (lane - 0.4, 0.8),
                           facecolors=colour, label=kind)
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    ax.legend(unique.values(), unique.keys(), loc="lower right", bbox_to_anchor=(1.0, 1.0),
              ncol=len(unique), fontsize=8, frameon=False)
    ax.set_yticks(list(lanes.values()), list(lanes.keys()))
    ax.set_xlabel("cycle")
    ax.set_title(title, fontsize=9, loc="left")
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    except OSError as exc:
        raise VtatuneError(f"cannot write timeline {path}: {exc.strerror}") from None
    except ValueError as exc:  # an image format matplotlib does not know (from the suffix)
        raise VtatuneError(f"cannot write timeline {path}: {exc}") from None
    finally:
        plt.close(fig)
