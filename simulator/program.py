"""A VTA program: the instruction stream, the micro-op kernels in DRAM and the DRAM tensors.

DRAM is one byte-addressed space. Each tensor sits at a byte address aligned to the largest
element size, so a DMA's ``dram_base`` (counted in elements of its memory type) is exact.
The micro-op area is separate: a ``LOAD UOP``'s ``dram_base`` indexes :attr:`Program.uops`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from .isa import Instruction, MemId, Uop


@dataclass(frozen=True)
class DramTensor:
    """A tensor in DRAM: ``shape`` in the packed layout, ``dtype`` a numpy dtype name."""

    name: str
    address: int  # byte address
    shape: tuple[int, ...]
    dtype: str
    role: str  # "input" or "output"

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * np.dtype(self.dtype).itemsize


@dataclass(frozen=True)
class Program:
    """An instruction stream with the DRAM it works on."""

    instructions: tuple[Instruction, ...]
    uops: tuple[Uop, ...]
    tensors: tuple[DramTensor, ...]
    dram_bytes: int

    def tensor(self, name: str) -> DramTensor:
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(name)

    def instruction_mix(self) -> dict[str, int]:
        """Instruction counts per kind (``LOAD INP``, ``GEMM``, ``NOP`` ...) and ``total``."""
        mix = Counter(insn.kind for insn in self.instructions)
        out = dict(sorted(mix.items()))
        out["total"] = len(self.instructions)
        return out


def layout_tensors(
    specs: list[tuple[str, tuple[int, ...], str, str]], align: int
) -> tuple[tuple[DramTensor, ...], int]:
    """Place (name, shape, dtype, role) tensors one after another, each ``align``-aligned."""
    tensors, address = [], 0
    for name, shape, dtype, role in specs:
        address = -(-address // align) * align
        t = DramTensor(name, address, tuple(shape), dtype, role)
        tensors.append(t)
        address += t.nbytes
    return tuple(tensors), -(-address // align) * align


def mem_elem_bytes(mem: MemId, hw) -> int:
    """Bytes of one element of memory type ``mem`` (DRAM addresses count these)."""
    return {
        MemId.UOP: hw.uop_elem_bytes,
        MemId.WGT: hw.wgt_elem_bytes,
        MemId.INP: hw.inp_elem_bytes,
        MemId.ACC: hw.acc_elem_bytes,
        MemId.OUT: hw.out_elem_bytes,
        # ACC_8BIT reads int8 lanes from DRAM into ACC.
        MemId.ACC_8BIT: hw.batch * hw.block_out,
    }[mem]
