"""A program's binary image (``program.bin``): its instruction and micro-op words and the
metadata that says how to read them, encoded and decoded.

Layout (all little-endian)::

    0   8 B  magic b"VTATUNE\\0"
    8   u16  format version (1)        10  u16  reserved (0)
    12  u32  metadata bytes (M)        16  u32  instructions (N)
    20  u32  micro-ops (U)             24  u64  DRAM bytes
    32  M B  metadata: UTF-8 JSON (``hw.config``: the hardware config; ``tensors``: the DRAM
             tensors; ``tokens_in``: the dependency tokens the program starts from, when
             it starts from any (:attr:`simulator.program.Program.tokens_in`); whatever
             else the writer adds; ``sha256``), zero-padded to a multiple of 16
    ..  N x 16 B  instruction words (two little-endian 64-bit units each, simulator.isa)
    ..  U x 4 B   micro-op words

The hardware config is in the metadata because the instruction fields' widths depend on it.
``sha256`` is the SHA-256 of the rest of the metadata (compact JSON) and the instruction and
micro-op words: :func:`decode` refuses an image whose contents no longer match it (a flipped
bit would otherwise run as another program). Images without it still load.

This is the machine's part of vtatune's program files (``vtatune.builds`` writes the
metadata of a build around it), free of the engines (numba), so that a deployed runtime reads the
programs of a bundle with it alone.

Example:
    >>> from simulator.hardware import DEFAULT
    >>> from simulator.isa import FinishInsn
    >>> from simulator.program import Program
    >>> p = Program((FinishInsn(),), (), (), 0)
    >>> data = encode(p, DEFAULT, {"hw": {"config": DEFAULT.to_dict()}, "tensors": [],
    ...                            "note": "empty"})
    >>> len(data) % 16, decode(data).program == p, decode(data).meta["note"]
    (0, True, 'empty')
"""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass
from typing import Any

from simulator.errors import VTAError
from simulator.hardware import HardwareConfig
from simulator.isa import Instruction, decode_insn, decode_uop, encode_insn, encode_uop
from simulator.program import NO_TOKENS, DramTensor, Program

__all__ = ["FORMAT", "HEAD", "Image", "ImageError", "MAGIC", "decode", "digest", "encode",
           "program_of", "tensors_meta"]

MAGIC = b"VTATUNE\0"
FORMAT = 1
HEAD = struct.Struct("<8sHHIIIQ")  # 32 bytes


class ImageError(VTAError):
    """An image that cannot be read: damaged, truncated, of another format."""


@dataclass(frozen=True)
class Image:
    """A decoded image: the program, its hardware config and the whole metadata."""

    program: Program
    hw: HardwareConfig
    meta: dict[str, Any]


def tensors_meta(program: Program) -> list[dict[str, Any]]:
    """The ``tensors`` entry of the metadata: each DRAM tensor of ``program``."""
    return [{"name": t.name, "address": t.address, "shape": list(t.shape), "dtype": t.dtype,
             "role": t.role, "nbytes": t.nbytes} for t in program.tensors]


def digest(meta: dict[str, Any], code: bytes) -> str:
    """SHA-256 of the metadata (without its ``sha256`` field) and the instruction and
    micro-op words: any changed bit of what a run depends on changes it."""
    text = json.dumps({k: v for k, v in meta.items() if k != "sha256"}, separators=(",", ":"))
    return hashlib.sha256(text.encode() + code).hexdigest()


def encode(program: Program, hw: HardwareConfig, meta: dict[str, Any]) -> bytes:
    """The image of ``program`` on ``hw`` with ``meta`` (which must hold ``hw.config`` and
    ``tensors`` for :func:`decode` to read it back; ``dram_bytes`` and ``sha256`` are
    added)."""
    body = b"".join(encode_insn(i, hw) for i in program.instructions)
    uops = struct.pack(f"<{len(program.uops)}I", *(encode_uop(u, hw) for u in program.uops))
    meta = {**meta, "dram_bytes": program.dram_bytes}
    if program.tokens_in != NO_TOKENS:  # a stream that starts from what the one before left
        meta["tokens_in"] = list(program.tokens_in)
    meta["sha256"] = digest(meta, body + uops)
    text = json.dumps(meta, separators=(",", ":")).encode()
    text += b"\0" * (-(HEAD.size + len(text)) % 16)
    head = HEAD.pack(MAGIC, FORMAT, 0, len(text), len(program.instructions),
                     len(program.uops), program.dram_bytes)
    return head + text + body + uops


def program_of(meta: dict[str, Any], insns: tuple, uops: tuple) -> Image:
    """The image of a program whose instructions and micro-ops are decoded already (a
    readable ``program.json`` gives them so)."""
    try:
        hw = HardwareConfig.from_dict(meta["hw"]["config"])
        tensors = tuple(DramTensor(t["name"], int(t["address"]), tuple(t["shape"]),
                                   t["dtype"], t["role"]) for t in meta["tensors"])
        program = Program(insns, uops, tensors, int(meta["dram_bytes"]),
                          tuple(meta.get("tokens_in", NO_TOKENS)))
    except (KeyError, TypeError, ValueError) as exc:
        raise ImageError(f"program metadata is incomplete ({exc})") from None
    return Image(program, hw, meta)


def decode(data: bytes, name: str = "program.bin",
           memo: dict[bytes, Instruction] | None = None) -> Image:
    """Inverse of :func:`encode`; a damaged image raises ImageError naming the problem.
    ``memo``: instructions decoded already, by their words, shared between the images of one
    hardware config (instructions are values: a network's programs repeat most of theirs)."""
    if len(data) < HEAD.size:
        raise ImageError(f"{name}: {len(data)} bytes is too short for a program image")
    magic, version, _, meta_len, n_insns, n_uops, dram = HEAD.unpack_from(data)
    if magic != MAGIC:
        raise ImageError(f"{name}: not a vtatune program image (bad magic)")
    if version != FORMAT:
        raise ImageError(f"{name}: program image format {version}, this vtatune reads "
                         f"{FORMAT}")
    start = HEAD.size + meta_len
    want = start + 16 * n_insns + 4 * n_uops
    if len(data) != want:
        raise ImageError(f"{name}: {len(data)} bytes, the header announces {want} "
                         "(truncated or damaged)")
    try:
        meta = json.loads(data[HEAD.size:start].rstrip(b"\0"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ImageError(f"{name}: damaged metadata") from None
    stored = meta.get("sha256") if isinstance(meta, dict) else None
    if stored is not None and (stored != digest(meta, data[start:])
                               or meta.get("dram_bytes") != dram):
        raise ImageError(f"{name}: the contents differ from the SHA-256 stored when vtatune "
                         "wrote it (the file was changed or damaged), so its instructions, "
                         "cycles and results may not be the build's; rebuild it")
    try:
        hw = HardwareConfig.from_dict(meta["hw"]["config"])
        memo = {} if memo is None else memo
        words = [data[start + 16 * i:start + 16 * i + 16] for i in range(n_insns)]
        for w in words:
            if w not in memo:
                memo[w] = decode_insn(w, hw)
        insns = tuple(memo[w] for w in words)
        uop_words = struct.unpack_from(f"<{n_uops}I", data, start + 16 * n_insns)
        uops = tuple(decode_uop(w, hw) for w in uop_words)
    except (VTAError, KeyError, TypeError) as exc:
        raise ImageError(f"{name}: {exc}") from None
    meta["dram_bytes"] = dram
    return program_of(meta, insns, uops)
