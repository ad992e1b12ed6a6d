"""A VTA program: the instruction stream, the micro-op kernels in DRAM and the DRAM tensors.

DRAM is one byte-addressed space. Each tensor sits at a byte address aligned to the largest
element size, so a DMA's ``dram_base`` (counted in elements of its memory type) is exact.
The micro-op area is separate: a ``LOAD UOP``'s ``dram_base`` indexes :attr:`Program.uops`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simulator.isa import Instruction, MemId, Uop
from simulator.rows import WIDTH, instructions_of, rows_of

__all__ = [
    "NO_TOKENS", "DramTensor", "Program", "layout_tensors", "mem_elem_bytes",
]

#: No dependency token in any FIFO: a stream that runs alone.
NO_TOKENS = (0, 0, 0, 0)


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


class Program:
    """An instruction stream with the DRAM it works on.

    The stream is given either as instructions or as their integer table
    (:mod:`simulator.rows`); each form is built from the other on first use, so a lowered
    program that is only timed and counted never builds instruction objects. A program is
    an immutable value: equal streams, micro-ops, tensors and sizes make equal programs.
    """

    __slots__ = ("_instructions", "_rows", "_uops", "_uop_table", "tensors", "dram_bytes",
                 "tokens_in")

    def __init__(self, instructions: Sequence[Instruction] | np.ndarray,
                 uops: Sequence[Uop] | np.ndarray, tensors: tuple[DramTensor, ...],
                 dram_bytes: int, tokens_in: tuple[int, int, int, int] = NO_TOKENS) -> None:
        """``instructions``: instruction objects or their table; ``uops``: :class:`Uop`
        values or (dst, src, wgt) rows. A table or uop array passed in becomes read-only
        (the program shares it). ``tokens_in``: the dependency tokens in each FIFO when the
        stream starts (l2g, g2l, g2s, s2g: :data:`simulator.functional.FIFOS`' order), left
        there by the stream before it (a kernel of a network runs after another one that may
        end with a token it never popped); none for a stream run alone."""
        set_ = object.__setattr__
        if isinstance(instructions, np.ndarray):
            table = np.ascontiguousarray(instructions, dtype=np.int64)
            if table.ndim != 2 or table.shape[1] != WIDTH:
                raise ValueError(f"an instruction table has {WIDTH} columns")
            table.flags.writeable = False
            set_(self, "_rows", table)
            set_(self, "_instructions", None)
        else:
            set_(self, "_rows", None)
            set_(self, "_instructions", tuple(instructions))
        if isinstance(uops, np.ndarray):
            area = np.ascontiguousarray(uops, dtype=np.int64).reshape(-1, 3)
            area.flags.writeable = False
            set_(self, "_uop_table", area)
            set_(self, "_uops", None)
        else:
            set_(self, "_uop_table", None)
            set_(self, "_uops", tuple(uops))
        set_(self, "tensors", tuple(tensors))
        set_(self, "dram_bytes", dram_bytes)
        tokens_in = tuple(int(t) for t in tokens_in)
        if len(tokens_in) != 4 or min(tokens_in) < 0:
            raise ValueError(f"tokens_in holds a count per FIFO (4), got {tokens_in}")
        set_(self, "tokens_in", tokens_in)

    def __setattr__(self, name, value):
        raise AttributeError(f"a Program is immutable (cannot set {name})")

    @property
    def instructions(self) -> tuple[Instruction, ...]:
        if self._instructions is None:
            object.__setattr__(self, "_instructions", instructions_of(self._rows))
        return self._instructions

    @property
    def rows(self) -> np.ndarray:
        """The stream as a read-only int64 table (:mod:`simulator.rows`)."""
        if self._rows is None:
            table = rows_of(self._instructions)
            table.flags.writeable = False
            object.__setattr__(self, "_rows", table)
        return self._rows

    @property
    def uops(self) -> tuple[Uop, ...]:
        """The micro-op area (a ``LOAD UOP``'s ``dram_base`` indexes it)."""
        if self._uops is None:
            object.__setattr__(self, "_uops",
                               tuple(Uop(*u) for u in self._uop_table.tolist()))
        return self._uops

    @property
    def uop_table(self) -> np.ndarray:
        """The micro-op area as read-only (dst, src, wgt) int64 rows."""
        if self._uop_table is None:
            table = np.array([(u.dst, u.src, u.wgt) for u in self._uops],
                             np.int64).reshape(-1, 3)
            table.flags.writeable = False
            object.__setattr__(self, "_uop_table", table)
        return self._uop_table

    def __len__(self) -> int:
        return len(self._rows) if self._rows is not None else len(self._instructions)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Program):
            return NotImplemented
        return (np.array_equal(self.uop_table, other.uop_table)
                and self.tensors == other.tensors
                and self.dram_bytes == other.dram_bytes
                and self.tokens_in == other.tokens_in
                and np.array_equal(self.rows, other.rows))

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self):
        stream = self._rows if self._rows is not None else self._instructions
        return (Program, (stream, self.uop_table, self.tensors, self.dram_bytes,
                          self.tokens_in))

    def __repr__(self) -> str:
        return (f"Program({len(self)} instructions, {len(self.uops)} uops, "
                f"{len(self.tensors)} tensors, {self.dram_bytes} B)")

    def tensor(self, name: str) -> DramTensor:
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(name)

    def instruction_mix(self) -> dict[str, int]:
        """Instruction counts per kind (``LOAD INP``, ``GEMM``, ``NOP`` ...) and ``total``."""
        mix = Counter(insn.kind for insn in self.instructions)
        out = dict(sorted(mix.items()))
        out["total"] = len(self)
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
