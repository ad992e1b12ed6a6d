"""Program files: ``program.json`` (readable) and ``program.bin`` (binary image), written and
loaded; ``program.c`` is :mod:`._c_source`'s.

``program.bin`` is :mod:`simulator.image`'s binary image (its layout and checksum are
described there); the metadata vtatune writes into it holds the hardware config, the DRAM
tensors, the workload, schedule and provenance of the build.

Example:
    >>> paths = write_all(build, "out")            # doctest: +SKIP
    >>> load_bin(paths["bin"]).program == build.program  # doctest: +SKIP
    True
"""


from __future__ import annotations

import json
from dataclasses import dataclass, fields
from enum import IntEnum
from importlib import resources
from pathlib import Path
from typing import Any

from simulator.hardware import HardwareConfig
from simulator.image import FORMAT, ImageError, decode, encode, program_of, tensors_meta
from simulator.isa import (
    AluInsn,
    AluOp,
    FinishInsn,
    GemmInsn,
    Instruction,
    MemId,
    MemInsn,
    Opcode,
    Uop,
    describe,
)
from simulator.program import NO_TOKENS, Program
from vtatune import __version__
from vtatune.errors import VtatuneError
from vtatune.records import workload_fields, workload_from
from vtatune.scoring import simulate
from vtatune.workloads import Workload

LOAD, COMPUTE, STORE = 1, 2, 3  # the runtime's stage numbers (DepPush/DepPop queue ids)


class ExportError(VtatuneError):
    """A program file that cannot be written or read."""


@dataclass(frozen=True)
class LoadedProgram:
    """A program read back from ``program.bin`` / ``program.json``, with its hardware and
    metadata (workload, schedule, bias, provenance when the writer knew them)."""

    program: Program
    hw: HardwareConfig
    meta: dict[str, Any]

    @property
    def workload(self) -> Workload | None:
        """The workload built, with its epilogue (a log record's fields: none written
        means the benchmark's)."""
        return workload_from(self.meta) if self.meta.get("workload") else None

    @property
    def bias(self) -> bool:
        return bool(self.meta.get("bias", False))


def header_path() -> Path:
    """The shipped ``vta_runtime.h`` that ``program.c`` includes."""
    return Path(str(resources.files("vtatune.builds") / "data" / "vta_runtime.h"))


# --- metadata -----------------------------------------------------------------------------
def _meta(source: Any) -> dict[str, Any]:
    """Metadata of a Build or LoadedProgram (hardware and tensors always)."""
    program, hw = source.program, source.hw
    meta: dict[str, Any] = {
        "vtatune": __version__,
        "hw": {"target": hw.target, "bitstream": hw.bitstream, "model": hw.target_model,
               "clock_mhz": hw.clock_mhz, "config": hw.to_dict()},
        "tensors": tensors_meta(program),
        "dram_bytes": program.dram_bytes,
    }
    if program.tokens_in != NO_TOKENS:  # as the binary image keeps them
        meta["tokens_in"] = list(program.tokens_in)
    if isinstance(source, LoadedProgram):
        for k in ("workload", "bias", "schedule", "provenance"):
            if k in source.meta:
                meta[k] = source.meta[k]
        return meta
    meta["workload"] = workload_fields(source.workload)
    meta["bias"] = bool(source.bias)
    meta["schedule"] = source.schedule.to_dict()
    meta["provenance"] = source.provenance.to_dict()
    return meta


def _program_from_meta(meta: dict[str, Any], insns: tuple, uops: tuple) -> LoadedProgram:
    try:
        image = program_of(meta, insns, uops)
    except ImageError as exc:
        raise ExportError(str(exc)) from None
    return LoadedProgram(image.program, image.hw, image.meta)


# --- program.bin --------------------------------------------------------------------------
def to_bin(source: Any) -> bytes:
    """The binary image of a Build or LoadedProgram."""
    return encode(source.program, source.hw, _meta(source))


def from_bin(data: bytes, name: str = "program.bin") -> LoadedProgram:
    """Inverse of :func:`to_bin`; a damaged image raises ExportError naming the problem."""
    try:
        image = decode(data, name)
    except ImageError as exc:
        raise ExportError(str(exc)) from None
    return LoadedProgram(image.program, image.hw, image.meta)


def write_bin(source: Any, path: str | Path) -> Path:
    return _write(path, to_bin(source))


def load_bin(path: str | Path) -> LoadedProgram:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ExportError(f"cannot read {path}: {exc.strerror}") from None
    return from_bin(data, str(path))


# --- program.json -------------------------------------------------------------------------
def insn_to_dict(insn: Instruction, index: int) -> dict[str, Any]:
    """Every field of an instruction (enums by name), plus its module and a text rendering."""
    d: dict[str, Any] = {"index": index, "opcode": insn.opcode.name,
                         "module": insn.module.name.lower(), "kind": insn.kind,
                         "text": describe(insn)}
    for f in fields(insn):
        v = getattr(insn, f.name)
        if f.name == "opcode":
            continue
        d[f.name] = v.name if isinstance(v, IntEnum) else v
    return d


def insn_from_dict(d: dict[str, Any]) -> Instruction:
    try:
        op = Opcode[d["opcode"]]
        cls = {Opcode.LOAD: MemInsn, Opcode.STORE: MemInsn, Opcode.GEMM: GemmInsn,
               Opcode.ALU: AluInsn, Opcode.FINISH: FinishInsn}[op]
        kw = {f.name: d[f.name] for f in fields(cls) if f.name in d and f.name != "opcode"}
        if cls is MemInsn:
            kw["mem"] = MemId[kw["mem"]]
            return MemInsn(op, **kw)
        if cls is AluInsn:
            kw["alu_op"] = AluOp[kw["alu_op"]]
        return cls(**kw)
    except (KeyError, TypeError) as exc:
        raise ExportError(f"instruction {d.get('index', '?')}: bad field {exc}") from None


def to_json_dict(source: Any) -> dict[str, Any]:
    """The human-readable program: metadata, instructions, kernels, uops and the counters
    and cycles the simulator gives it."""
    program = source.program
    sim = simulate(source)
    kernels = []
    for i, insn in enumerate(program.instructions):
        if isinstance(insn, MemInsn) and insn.mem == MemId.UOP and not insn.is_nop:
            kernels.append({"loaded_by": i, "sram_base": insn.sram_base,
                            "dram_offset": insn.dram_base, "uops": insn.x_size})
    return {
        "format": "vtatune.program", "version": FORMAT, **_meta(source),
        "expected": {"cycles": sim.cycles, "counters": sim.counters,
                     "instructions": program.instruction_mix()},
        "kernels": kernels,
        "uops": [[u.dst, u.src, u.wgt] for u in program.uops],
        "instructions": [insn_to_dict(x, i) for i, x in enumerate(program.instructions)],
    }


def write_json(source: Any, path: str | Path) -> Path:
    text = json.dumps(to_json_dict(source), indent=1)
    return _write(path, text.encode())


def load_json(path: str | Path) -> LoadedProgram:
    try:
        d = json.loads(Path(path).read_text())
    except OSError as exc:
        raise ExportError(f"cannot read {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise ExportError(f"{path}: not valid JSON ({exc.msg}: line {exc.lineno} column "
                          f"{exc.colno})") from None
    if not isinstance(d, dict) or d.get("format") != "vtatune.program":
        raise ExportError(f"{path}: not a vtatune program.json")
    insns = tuple(insn_from_dict(x) for x in d.get("instructions", ()))
    uops = tuple(Uop(*u) for u in d.get("uops", ()))
    meta = {k: v for k, v in d.items() if k not in ("instructions", "uops", "kernels")}
    return _program_from_meta(meta, insns, uops)


# --- all three ----------------------------------------------------------------------------
def _write(path: str | Path, data: bytes) -> Path:
    p = Path(path)
    try:
        p.write_bytes(data)
    except OSError as exc:
        raise ExportError(f"cannot write {p}: {exc.strerror}") from None
    return p
