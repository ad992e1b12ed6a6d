"""A design: one VTA configuration with its network latency, resources and speed-up over
the board's stock configuration; the Pareto front of latency against area."""


from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simulator.chisel import DecoderCheck, decoder_check
from simulator.hardware import HardwareConfig
from simulator.resources import ResourceEstimate
from vtatune.design._space import (
    TVM_STOCK,
    toolchain,
)


@dataclass(frozen=True)
class Design:
    """One evaluated configuration: its resources and its tuned network latency."""

    hw: HardwareConfig
    resources: ResourceEstimate
    tasks: dict[str, int]  # best cycles per task
    total_cycles: int  # the deployed network's VTA time: every kernel in order
    stock_cycles: int

    @property
    def total_ms(self) -> float:
        return self.total_cycles / (self.hw.clock_mhz * 1e3)

    @property
    def speedup(self) -> float:
        """Stock design's network time over this one's (same board, same clock)."""
        return self.stock_cycles / self.total_cycles

    @property
    def area(self) -> float:
        """Mean percent of the board's LUT, block RAM and DSP used (the front's second
        axis; whether it fits at all is ``resources.fits``, the tightest is ``binding``)."""
        u = self.resources.utilization
        return (u["LUT"] + u["BRAM"] + u["DSP"]) / 3

    @property
    def toolchain(self) -> str:
        """"TVM stock", or the change building and compiling this design takes."""
        return toolchain(self.hw)

    @property
    def stock_toolchain(self) -> bool:
        return self.toolchain == TVM_STOCK

    @property
    def decoder(self) -> DecoderCheck:
        """Whether the Chisel RTL's stock decoder reads this design's instructions and
        micro-ops (``decoder.summary()``: ``stock`` or the index widths it must change)."""
        return decoder_check(self.hw)

    def to_dict(self) -> dict[str, Any]:
        return {"bitstream": self.hw.bitstream, "config": self.hw.to_dict(),
                "toolchain": self.toolchain, "decoder": self._decoder_dict(),
                "resources": self.resources.to_dict(), "total_cycles": self.total_cycles,
                "total_ms": round(self.total_ms, 4), "speedup": round(self.speedup, 4),
                "area_percent": round(self.area, 2),
                "clock_mhz": self.hw.clock_mhz, "tasks": self.tasks}

    def _decoder_dict(self) -> dict[str, Any]:
        d = self.decoder.to_dict()
        return {k: d[k] for k in ("stock_decoder", "summary", "index_widths", "widened")}


@dataclass(frozen=True)
class DesignResult:
    """The outcome of a design search."""

    network: str
    board: str
    objective: str
    trials_per_task: int
    stock: Design
    designs: tuple[Design, ...]  # the Pareto front (latency, area), fastest first
    evaluated: tuple[Design, ...]  # every feasible design evaluated (this run and resumed)
    infeasible: dict[str, str]  # bitstream -> reason, for candidates rejected
    skipped: tuple[str, ...]  # shapes skipped by the compute-floor bound, with numbers
    study: str
    storage: str
    out: str
    new_evaluations: int
    wall_seconds: float

    @property
    def best(self) -> Design:
        return self.designs[0]

    def to_dict(self) -> dict[str, Any]:
        return {"network": self.network, "board": self.board, "objective": self.objective,
                "device": self.stock.resources.device.part,
                "trials_per_task": self.trials_per_task, "stock": self.stock.to_dict(),
                "designs": [d.to_dict() for d in self.designs],
                "evaluated": len(self.evaluated), "infeasible": self.infeasible,
                "skipped": list(self.skipped), "study": self.study, "storage": self.storage,
                "out": self.out, "new_evaluations": self.new_evaluations,
                "wall_seconds": round(self.wall_seconds, 1)}


def pareto_front(designs: list[Design] | tuple[Design, ...]) -> tuple[Design, ...]:
    """The designs no other beats on both latency and area, fastest first.

    >>> pareto_front([])
    ()
    """
    ranked = sorted(designs, key=lambda d: (d.total_cycles, d.area, d.hw.bitstream))
    front: list[Design] = []
    for d in ranked:
        if not front or d.area < front[-1].area:
            front.append(d)
    return tuple(front)
