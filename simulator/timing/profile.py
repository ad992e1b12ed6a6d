"""The timing model's constants: :class:`TimingProfile` (every constant, pynq's measured on
VTA's RTL, each board's derived by the RTL's rules) and :data:`MODEL_VERSION` (the rules)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from simulator._jsonfile import load_json
from simulator.errors import ConfigError
from simulator.hardware import HardwareConfig

__all__ = ["MODEL_VERSION", "TimingProfile"]

#: The timing model's rules. Bump it when a rule (not a constant) changes: a profile's
#: :meth:`TimingProfile.fingerprint` covers both, so scores made under other rules are known.
#: rtl-2: the wide store unit (an output element of one beat), after rtl-1 (the RTL calibration).
MODEL_VERSION = "rtl-2"

#: AXI burst length limit (beats) of each board's shell: AXI4's 256 (VTA's ``lenBits`` 8),
#: except the de10nano shell, which limits bursts to 16 beats (AXI3).
_BURST_BEATS = {"de10nano": 16}


@dataclass(frozen=True)
class TimingProfile:
    """Every timing constant of the model, with the pynq defaults measured on VTA's RTL.

    Use :meth:`for_hw` to derive the profile of a hardware preset (bus width, burst limit and
    fetch chunk follow the board; the other constants carry over from the pynq measurements)
    and :meth:`from_json` to override fields from a file.

    >>> p = TimingProfile()
    >>> p.read_latency, p.request_cycles, p.gemm_pipeline, p.fingerprint()[:6] == \\
    ...     TimingProfile().fingerprint()[:6]
    (16, 5, 7, True)
    """

    bus_bytes: int = 8  # bytes per beat (64-bit AXI)
    max_burst_beats: int = 256  # AXI burst length limit (lenBits 8)
    burst_boundary: int = 2048  # bytes; a burst never crosses it (max_burst_beats * bus_bytes)
    read_latency: int = 16  # memory bridge delay of a request that finds its queue empty
    request_cycles: int = 5  # from a reader's start to its request at the bridge
    load_done_cycles: int = 2  # last beat (or pad) to LOAD completion, element wider than a beat
    wide_load_done_cycles: int = 1  # the same for a loader whose element fits in a beat (UOP)
    pad_start_cycles: int = 1  # from a LOAD's start to its first zero-pad write
    write_handshake: int = 3  # cycles per write burst (command and acknowledgement)
    store_insn_cycles: int = 1  # control cycles of a STORE
    store_read_cycles: int = 1  # SRAM read between the rows of beats a STORE writes
    fetch_chunk_insns: int = 128  # instructions per fetch read (max_burst_beats beats)
    queue_depth: int = 512  # per-module instruction queue
    nop_cycles: int = 2  # a NOP (any module) or FINISH
    gemm_pipeline: int = 7  # fixed cycles of a GEMM: decode, uop read, pipeline fill/drain
    alu_imm_cycles: int = 1
    alu_reg_cycles: int = 2
    alu_pipeline: int = 7  # fixed cycles of an ALU instruction

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            low = 0 if f.name in _MAY_BE_ZERO else 1
            if not isinstance(v, int) or isinstance(v, bool) or v < low:
                raise ConfigError(f"timing profile {f.name}: must be an integer >= {low}, "
                                  f"got {v!r}")

    @classmethod
    def for_hw(cls, hw: HardwareConfig) -> TimingProfile:
        """The board's profile, derived by the RTL's rules: beats of the board's bus, bursts of
        its shell's AXI length limit (never crossing their own size), fetch chunks of one
        burst of instructions. Only pynq's (64-bit, 256-beat bursts) is measured."""
        bus = hw.bus_bits // 8
        beats = _BURST_BEATS.get(hw.target, cls.max_burst_beats)
        return cls(bus_bytes=bus, max_burst_beats=beats, burst_boundary=beats * bus,
                   fetch_chunk_insns=max(1, beats * bus // hw.insn_bytes))

    @classmethod
    def from_dict(cls, data: Any, base: TimingProfile | None = None) -> TimingProfile:
        if not isinstance(data, dict):
            raise ConfigError("a timing profile must be a JSON object of fields")
        known = {f.name for f in fields(cls)}
        for key in data:
            if key not in known:
                raise ConfigError(f"timing profile {key}: unknown field (known: "
                                  f"{', '.join(sorted(known))})")
        return replace(base or cls(), **data)

    @classmethod
    def from_json(cls, path: str | Path, base: TimingProfile | None = None) -> TimingProfile:
        data = load_json(path, "timing profile")
        return cls.from_dict(data, base)

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    def fingerprint(self) -> str:
        """``<MODEL_VERSION>:<12 hex digits>`` naming the rules and every constant: two
        profiles with the same fingerprint give the same cycles on every program."""
        return _fingerprint(self)

    def wide_store(self, hw: HardwareConfig) -> bool:
        """Whether ``hw``'s store unit is the RTL's wide one: an output element (BATCH x
        BLOCK_OUT bytes) fits in one beat (``TensorStore.scala``: ``mp.dataBits >=
        tp.tensorSizeBits``). Stock 1x16 on a 128-bit bus is wide, on a 64-bit bus narrow."""
        return hw.out_elem_bytes <= self.bus_bytes

    def store_elem_cycles(self, hw: HardwareConfig) -> float:
        """Cycles a STORE spends per output element. The narrow unit writes each of its
        BATCH rows in beats, then reads the next row from SRAM (3 on pynq: 2 beats + 1
        read); the wide unit writes a beat per cycle, so an element costs its share of a
        beat (1 for 1x16 on a 128-bit bus; bus-word alignment at a row's ends aside)."""
        if self.wide_store(hw):
            return hw.out_elem_bytes / self.bus_bytes
        row_bytes = hw.block_out * hw.out_width // 8
        return hw.batch * (-(-row_bytes // self.bus_bytes) + self.store_read_cycles)


@lru_cache(maxsize=64)
def _fingerprint(p: TimingProfile) -> str:  # every evaluation names its profile: hash once
    text = json.dumps(p.to_dict(), sort_keys=True)
    return f"{MODEL_VERSION}:{hashlib.sha256(f'{MODEL_VERSION}|{text}'.encode()).hexdigest()[:12]}"


_MAY_BE_ZERO = frozenset({"read_latency", "request_cycles", "load_done_cycles",
                          "wide_load_done_cycles", "pad_start_cycles", "write_handshake",
                          "store_insn_cycles", "store_read_cycles", "nop_cycles",
                          "gemm_pipeline", "alu_pipeline"})

