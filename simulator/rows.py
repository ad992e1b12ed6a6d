"""Instruction streams as integer tables: one int64 row per instruction.

The engines that must be fast (lowering's command queue, the timing model, the counters)
work on this table instead of on instruction objects; the objects are built from it only
when something asks for them (the functional simulator, export, printing).

A row is ``[class, *fields, flags]``: the class code (:data:`MEM`, :data:`GEMM`,
:data:`ALU`, :data:`FINISH`), then the class' own fields in declaration order (zero-padded
to :data:`NFIELDS`), then the four dependency flags as bits (:data:`POP_PREV` ...
:data:`PUSH_NEXT`) of one column, :data:`FLAGS`.

Example:
    >>> from simulator.isa import FinishInsn, MemId, MemInsn, Opcode
    >>> insns = (MemInsn(Opcode.LOAD, MemId.INP, 0, 64, 1, 4, 4, push_next=True),
    ...          FinishInsn(pop_prev=True))
    >>> table = rows_of(insns)
    >>> table.shape, instructions_of(table) == insns
    ((2, 14), True)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields

import numpy as np

from simulator.isa import AluInsn, AluOp, FinishInsn, GemmInsn, Instruction, MemId, MemInsn, Opcode

__all__ = [
    "ALU", "ALU_ITER_IN", "ALU_ITER_OUT", "ALU_UOP_BGN", "ALU_UOP_END", "ALU_USE_IMM", "FINISH",
    "FLAGS", "GEMM", "GEMM_ITER_IN", "GEMM_ITER_OUT", "GEMM_RESET", "GEMM_UOP_BGN", "GEMM_UOP_END",
    "MEM", "MEM_DRAM", "MEM_MEM", "MEM_OPCODE", "MEM_STRIDE", "MEM_X", "MEM_X0", "MEM_X1", "MEM_Y",
    "MEM_Y0", "MEM_Y1", "NFIELDS", "POP_NEXT", "POP_PREV", "PUSH_NEXT", "PUSH_PREV", "WIDTH",
    "column", "instructions_of", "rows_of",
]

MEM, GEMM, ALU, FINISH = 0, 1, 2, 3
_CLASSES = (MemInsn, GemmInsn, AluInsn, FinishInsn)
_FLAG_NAMES = ("pop_prev", "pop_next", "push_prev", "push_next")
#: Own (non-flag) fields per class, in declaration order.
_OWN = tuple(tuple(f.name for f in fields(c) if f.name not in _FLAG_NAMES) for c in _CLASSES)
NFIELDS = max(len(names) for names in _OWN)
FLAGS = 1 + NFIELDS  # the flags' column
WIDTH = FLAGS + 1
#: Bit of each flag in the FLAGS column (in _FLAG_NAMES order).
POP_PREV, POP_NEXT, PUSH_PREV, PUSH_NEXT = 1, 2, 4, 8


def column(cls: type, name: str) -> int:
    """The column of field ``name`` of instruction class ``cls``."""
    return 1 + _OWN[_CLASSES.index(cls)].index(name)


# The columns the compiled engines read (timing, counters), named once.
(MEM_OPCODE, MEM_MEM, MEM_DRAM, MEM_Y, MEM_X, MEM_STRIDE, MEM_Y0, MEM_Y1, MEM_X0,
 MEM_X1) = (column(MemInsn, f) for f in ("opcode", "mem", "dram_base", "y_size", "x_size",
                                         "x_stride", "y_pad_0", "y_pad_1", "x_pad_0",
                                         "x_pad_1"))
GEMM_RESET, GEMM_UOP_BGN, GEMM_UOP_END, GEMM_ITER_OUT, GEMM_ITER_IN = (
    column(GemmInsn, f) for f in ("reset", "uop_bgn", "uop_end", "iter_out", "iter_in"))
ALU_USE_IMM, ALU_UOP_BGN, ALU_UOP_END, ALU_ITER_OUT, ALU_ITER_IN = (
    column(AluInsn, f) for f in ("use_imm", "uop_bgn", "uop_end", "iter_out", "iter_in"))


def rows_of(instructions: Sequence[Instruction]) -> np.ndarray:
    """The table of an instruction sequence (equal instructions give equal rows)."""
    out = np.zeros((len(instructions), WIDTH), np.int64)
    memo: dict[int, list[int]] = {}
    for i, insn in enumerate(instructions):
        row = memo.get(id(insn))
        if row is None:
            code = _CLASSES.index(type(insn))
            own = [int(getattr(insn, n)) for n in _OWN[code]]
            flags = sum(1 << k for k, n in enumerate(_FLAG_NAMES) if getattr(insn, n))
            row = memo[id(insn)] = [code, *own, *[0] * (NFIELDS - len(own)), flags]
        out[i] = row
    return out


# Per class: how each own field's integer becomes its typed value.
_TYPES = {MemInsn: {"opcode": Opcode, "mem": MemId},
          AluInsn: {"alu_op": AluOp, "use_imm": bool, "reset": bool},
          GemmInsn: {"reset": bool}}


def _builder(code: int):
    cls = _CLASSES[code]
    convert = [_TYPES.get(cls, {}).get(n, int) for n in _OWN[code]]
    nown = len(convert)

    def build(row: list[int]) -> Instruction:
        own = [f(v) for f, v in zip(convert, row[1:1 + nown], strict=True)]
        return cls(*own, *(bool(row[FLAGS] >> k & 1) for k in range(len(_FLAG_NAMES))))
    return build


_BUILDERS = tuple(_builder(code) for code in range(len(_CLASSES)))


def instructions_of(table: np.ndarray) -> tuple[Instruction, ...]:
    """The instructions of a table. Equal rows share one (immutable) instruction object:
    most of a lowered stream repeats, so this builds only the distinct ones."""
    if not len(table):
        return ()
    distinct, inverse = np.unique(table, axis=0, return_inverse=True)
    built = [_BUILDERS[row[0]](row) for row in distinct.tolist()]
    return tuple([built[k] for k in inverse.reshape(-1).tolist()])
