"""Program files: ``program.json`` (readable) and ``program.bin`` (binary image), written and
loaded; ``program.c`` is :mod:`._c_source`'s.

``program.bin`` layout (all little-endian)::

    0   8 B  magic b"VTATUNE\\0"
    8   u16  format version (1)        10  u16  reserved (0)
    12  u32  metadata bytes (M)        16  u32  instructions (N)
    20  u32  micro-ops (U)             24  u64  DRAM bytes
    32  M B  metadata: UTF-8 JSON (hardware config, DRAM tensors, workload, schedule,
             provenance, ``sha256``), zero-padded to a multiple of 16
    ..  N x 16 B  instruction words (two little-endian 64-bit units each, simulator.isa)
    ..  U x 4 B   micro-op words

The hardware config is in the metadata because the instruction fields' widths depend on it.
``sha256`` is the SHA-256 of the rest of the metadata (compact JSON) and the instruction and
micro-op words: :func:`load_bin` refuses an image whose contents no longer match it (a
flipped bit would otherwise run as another program). Images without it still load.

Example:
    >>> paths = write_all(build, "out")            # doctest: +SKIP
    >>> load_bin(paths["bin"]).program == build.program  # doctest: +SKIP
    True
"""


from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass, fields
from enum import IntEnum
from importlib import resources
from pathlib import Path
from typing import Any

from simulator.errors import VTAError
from simulator.hardware import HardwareConfig
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
    decode_insn,
    decode_uop,
    describe,
    encode_insn,
    encode_uop,
)
from simulator.program import DramTensor, Program
from vtatune import __version__
from vtatune.errors import VtatuneError
from vtatune.scoring import simulate
from vtatune.workloads import WORKLOAD_CLASSES, Workload

MAGIC = b"VTATUNE\0"


FORMAT = 1


_HEAD = struct.Struct("<8sHHIIIQ")  # 32 bytes


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
        w = self.meta.get("workload")
        if not w:
            return None
        return WORKLOAD_CLASSES[w["operator"]](**w["shape"], name=w.get("name", ""))

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
        "tensors": [{"name": t.name, "address": t.address, "shape": list(t.shape),
                     "dtype": t.dtype, "role": t.role, "nbytes": t.nbytes}
                    for t in program.tensors],
        "dram_bytes": program.dram_bytes,
    }
    if isinstance(source, LoadedProgram):
        for k in ("workload", "bias", "schedule", "provenance"):
            if k in source.meta:
                meta[k] = source.meta[k]
        return meta
    wl = source.workload
    meta["workload"] = {"operator": wl.operator, "name": wl.name, "key": wl.key(),
                        "shape": wl.shape_args()}
    meta["bias"] = bool(source.bias)
    meta["schedule"] = source.schedule.to_dict()
    meta["provenance"] = source.provenance.to_dict()
    return meta


def _program_from_meta(meta: dict[str, Any], insns: tuple, uops: tuple) -> LoadedProgram:
    try:
        hw = HardwareConfig.from_dict(meta["hw"]["config"])
        tensors = tuple(DramTensor(t["name"], int(t["address"]), tuple(t["shape"]),
                                   t["dtype"], t["role"]) for t in meta["tensors"])
        program = Program(insns, uops, tensors, int(meta["dram_bytes"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ExportError(f"program metadata is incomplete ({exc})") from None
    return LoadedProgram(program, hw, meta)


# --- program.bin --------------------------------------------------------------------------
def to_bin(source: Any) -> bytes:
    """The binary image of a Build or LoadedProgram."""
    program, hw = source.program, source.hw
    body = b"".join(encode_insn(i, hw) for i in program.instructions)
    uops = struct.pack(f"<{len(program.uops)}I", *(encode_uop(u, hw) for u in program.uops))
    meta_dict = _meta(source)
    meta_dict["sha256"] = _digest(meta_dict, body + uops)
    meta = json.dumps(meta_dict, separators=(",", ":")).encode()
    meta += b"\0" * (-(_HEAD.size + len(meta)) % 16)
    head = _HEAD.pack(MAGIC, FORMAT, 0, len(meta), len(program.instructions),
                      len(program.uops), program.dram_bytes)
    return head + meta + body + uops


def _digest(meta: dict[str, Any], code: bytes) -> str:
    """SHA-256 of the metadata (without this field) and the instruction and micro-op words:
    any changed bit of what a run depends on changes it."""
    text = json.dumps({k: v for k, v in meta.items() if k != "sha256"}, separators=(",", ":"))
    return hashlib.sha256(text.encode() + code).hexdigest()


def from_bin(data: bytes, name: str = "program.bin") -> LoadedProgram:
    """Inverse of :func:`to_bin`; a damaged image raises ExportError naming the problem."""
    if len(data) < _HEAD.size:
        raise ExportError(f"{name}: {len(data)} bytes is too short for a program image")
    magic, version, _, meta_len, n_insns, n_uops, dram = _HEAD.unpack_from(data)
    if magic != MAGIC:
        raise ExportError(f"{name}: not a vtatune program image (bad magic)")
    if version != FORMAT:
        raise ExportError(f"{name}: program image format {version}, this vtatune reads "
                          f"{FORMAT}")
    start = _HEAD.size + meta_len
    want = start + 16 * n_insns + 4 * n_uops
    if len(data) != want:
        raise ExportError(f"{name}: {len(data)} bytes, the header announces {want} "
                          "(truncated or damaged)")
    try:
        meta = json.loads(data[_HEAD.size:start].rstrip(b"\0"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ExportError(f"{name}: damaged metadata") from None
    stored = meta.get("sha256") if isinstance(meta, dict) else None
    if stored is not None and (stored != _digest(meta, data[start:])
                               or meta.get("dram_bytes") != dram):
        raise ExportError(f"{name}: the contents differ from the SHA-256 stored when vtatune "
                          "wrote it (the file was changed or damaged), so its instructions, "
                          "cycles and results may not be the build's; rebuild it")
    try:
        hw = HardwareConfig.from_dict(meta["hw"]["config"])
        insns = tuple(decode_insn(data[start + 16 * i:start + 16 * i + 16], hw)
                      for i in range(n_insns))
        words = struct.unpack_from(f"<{n_uops}I", data, start + 16 * n_insns)
        uops = tuple(decode_uop(w, hw) for w in words)
    except (VTAError, KeyError, TypeError) as exc:
        raise ExportError(f"{name}: {exc}") from None
    meta["dram_bytes"] = dram
    return _program_from_meta(meta, insns, uops)


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
