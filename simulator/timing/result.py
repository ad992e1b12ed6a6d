"""What timing a program gives: :class:`TimingResult`, per module a :class:`ModuleTime`,
per instruction (when traced) a :class:`TraceRow`."""

from __future__ import annotations

import math
from dataclasses import dataclass

from simulator.hardware import HardwareConfig
from simulator.program import NO_TOKENS
from simulator.timing.profile import TimingProfile

__all__ = ["MODULES", "ModuleTime", "TimingResult", "TraceRow"]

MODULES = ("load", "compute", "store")


@dataclass(frozen=True)
class ModuleTime:
    """Where one module's cycles went."""

    busy: int  # executing instructions (including waits for the read channel)
    stall: int  # ready to start but waiting for a dependency token
    idle: int  # the rest: nothing fetched yet, or done
    mem_wait: int  # part of busy spent waiting for the read channel


@dataclass(frozen=True)
class TraceRow:
    index: int
    module: str
    kind: str
    start: int
    end: int
    token_wait: int  # cycles spent waiting for tokens before starting
    pops: str  # FIFOs popped, e.g. "l2g+s2g"


@dataclass(frozen=True)
class TimingResult:
    """The timing of one run."""

    cycles: int
    modules: dict[str, ModuleTime]
    gemm_cycles: int  # GEMM micro-op cycles doing MACs (fsim's gemm_counter)
    read_bytes: int  # DMA reads including instruction fetch
    write_bytes: int
    serial_cycles: int  # every instruction and fetch read run alone, one after another
    profile: TimingProfile
    trace: tuple[TraceRow, ...] | None = None
    #: tokens left in each FIFO when the stream ends (l2g, g2l, g2s, s2g), for the stream
    #: that runs next (:attr:`simulator.program.Program.tokens_in`)
    tokens_out: tuple[int, int, int, int] = NO_TOKENS

    @property
    def compute_floor(self) -> int:
        """No schedule can beat one GEMM micro-op per cycle."""
        return self.gemm_cycles

    @property
    def memory_floor(self) -> int:
        """Bytes over the busier AXI channel (reads and writes travel separately)."""
        return math.ceil(max(self.read_bytes, self.write_bytes) / self.profile.bus_bytes)

    @property
    def utilization(self) -> float:
        return self.gemm_cycles / self.cycles if self.cycles else 0.0

    def seconds(self, hw: HardwareConfig) -> float:
        return self.cycles / (hw.clock_mhz * 1e6)

