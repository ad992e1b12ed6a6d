"""fsim's profiler counters of a program, counted from its instructions alone.

Example:
    >>> counters = count(program, hw)        # doctest: +SKIP
    >>> counters.gemm_counter                # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import simulator.rows as R
from simulator.hardware import HardwareConfig
from simulator.isa import MemId, Opcode
from simulator.jit import njit
from simulator.program import Program

__all__ = ["FsimCounters", "count"]


@dataclass(frozen=True)
class FsimCounters:
    """The seven counters of TVM's fsim profiler."""

    inp_load_nbytes: int = 0
    wgt_load_nbytes: int = 0
    acc_load_nbytes: int = 0
    uop_load_nbytes: int = 0
    out_store_nbytes: int = 0
    gemm_counter: int = 0
    alu_counter: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))  # plain ints: asdict's deep copy of each is not needed


def count(program: Program, hw: HardwareConfig) -> FsimCounters:
    """The fsim counters of a program, from its instructions alone (no execution needed)."""
    loaded, stored, gemm, alu = _count(program.rows)
    return FsimCounters(
        inp_load_nbytes=int(loaded[MemId.INP]) * hw.inp_elem_bytes,
        wgt_load_nbytes=int(loaded[MemId.WGT]) * hw.wgt_elem_bytes,
        acc_load_nbytes=int(loaded[MemId.ACC] + loaded[MemId.ACC_8BIT]) * hw.acc_elem_bytes,
        uop_load_nbytes=int(loaded[MemId.UOP]) * hw.uop_elem_bytes,
        out_store_nbytes=int(stored) * hw.out_elem_bytes,
        gemm_counter=int(gemm),
        alu_counter=int(alu),
    )


@njit(cache=True)
def _count(rows):
    """(elements loaded per MemId, elements stored, GEMM and ALU micro-op iterations)."""
    loaded = np.zeros(8, np.int64)
    stored = gemm = alu = 0
    for i in range(rows.shape[0]):
        cls = rows[i, 0]
        if cls == R.MEM:
            n = rows[i, R.MEM_X] * rows[i, R.MEM_Y]
            if rows[i, R.MEM_OPCODE] == Opcode.STORE:
                stored += n
            else:
                loaded[rows[i, R.MEM_MEM]] += n
        elif cls == R.GEMM:
            if not rows[i, R.GEMM_RESET]:
                gemm += (rows[i, R.GEMM_ITER_OUT] * rows[i, R.GEMM_ITER_IN]
                         * (rows[i, R.GEMM_UOP_END] - rows[i, R.GEMM_UOP_BGN]))
        elif cls == R.ALU:
            alu += (rows[i, R.ALU_ITER_OUT] * rows[i, R.ALU_ITER_IN]
                    * (rows[i, R.ALU_UOP_END] - rows[i, R.ALU_UOP_BGN]))
    return loaded, stored, gemm, alu

