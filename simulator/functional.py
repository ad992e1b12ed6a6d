"""Functional simulator: executes a program on numpy SRAM/DRAM with fsim's semantics.

Each module runs its queue in program order; dependency tokens are honoured (load greedily
first, which exposes a missing write-after-read dependency as a wrong result), and a
stream whose pops can never be satisfied raises :class:`DeadlockError` naming the
instruction and FIFO (:mod:`simulator.tokens`). A program is decoded once (:func:`decode`:
its order and every index worked out) and then run as whole-instruction numpy steps, each
GEMM as matrix products. Its counters are fsim's (:mod:`simulator.counters`).

Example:
    >>> result = run(program, hw)            # doctest: +SKIP
    >>> result.counters.gemm_counter         # doctest: +SKIP
    >>> decoded = decode(program, hw)        # doctest: +SKIP
    >>> decoded.outputs(inputs)["output"]    # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from functools import cache, cached_property
from typing import Any

import numpy as np

from simulator.counters import FsimCounters, count
from simulator.errors import ProgramError
from simulator.hardware import HardwareConfig
from simulator.isa import (
    AluInsn,
    AluOp,
    GemmInsn,
    Instruction,
    MemId,
    MemInsn,
    Opcode,
)
from simulator.program import Program, mem_elem_bytes
from simulator.tokens import FIFOS, execution_order, pops_of, pushes_of

__all__ = [
    "FIFOS", "DecodedProgram", "FsimCounters", "Machine", "RunResult", "count", "decode",
    "execution_order", "pops_of", "pushes_of", "run",
]


@dataclass
class Machine:
    """The architectural state: DRAM and the on-chip SRAMs (after a run: what it left)."""

    hw: HardwareConfig
    dram: np.ndarray
    uop_area: np.ndarray  # (n, 3) int64 micro-ops in DRAM: dst, src, wgt
    inp: np.ndarray
    wgt: np.ndarray
    acc: np.ndarray
    uop: np.ndarray  # (depth, 3) int64

    @classmethod
    def for_program(cls, program: Program, hw: HardwareConfig) -> Machine:
        return cls(
            hw=hw,
            dram=np.zeros(program.dram_bytes, dtype=np.uint8),
            uop_area=program.uop_table,
            inp=np.zeros((hw.inp_depth, hw.batch, hw.block_in), np.int8),
            wgt=np.zeros((hw.wgt_depth, hw.block_out, hw.block_in), np.int8),
            acc=np.zeros((hw.acc_depth, hw.batch, hw.block_out), np.int32),
            uop=np.zeros((hw.uop_depth, 3), np.int64),
        )

    # --- DRAM tensors ------------------------------------------------------------------
    def write_tensor(self, program: Program, name: str, value: np.ndarray) -> None:
        _write_tensor(self.dram, program, name, value)

    def read_tensor(self, program: Program, name: str) -> np.ndarray:
        return _read_tensor(self.dram, program, name)


def _write_tensor(dram: np.ndarray, program: Program, name: str, value: np.ndarray) -> None:
    t = program.tensor(name)
    arr = np.ascontiguousarray(value, dtype=t.dtype)
    if arr.shape != t.shape:
        raise ProgramError(f"tensor {name}: expected shape {t.shape}, got {arr.shape}")
    dram[t.address : t.address + t.nbytes] = arr.view(np.uint8).reshape(-1)


def _read_tensor(dram: np.ndarray, program: Program, name: str) -> np.ndarray:
    t = program.tensor(name)
    raw = dram[t.address : t.address + t.nbytes]
    return raw.view(t.dtype).reshape(t.shape).copy()


@dataclass
class RunResult:
    """What a functional run produced."""

    machine: Machine
    counters: FsimCounters
    order: list[int]


def run(
    program: Program, hw: HardwareConfig, inputs: dict[str, np.ndarray] | None = None
) -> RunResult:
    """Execute ``program`` with DRAM tensors initialised from ``inputs`` (by name)."""
    return decode(program, hw).run(inputs)


# --- decoding ----------------------------------------------------------------------------
# Everything but the data is fixed by the program: the execution order (the tokens), the
# micro-ops each GEMM and ALU instruction reads (LOAD UOP copies them from the program's own
# micro-op area) and so every SRAM and DRAM index. :func:`decode` works them out once and
# turns the stream into steps over numpy arrays; a run only moves and multiplies data.
#
# A GEMM instruction's iterations are gathered into matrix products: INP and WGT are held as
# float32 (products of int8 values are exact in it, and so is any sum of up to
# _F32_EXACT_TERMS of them, whatever the order: every partial sum is an integer below 2**24),
# so the products run on BLAS; the integer results are added to ACC in int32, which wraps
# as the hardware's accumulators do (and a wrapped sum does not depend on the order).

#: One step of a run: a function of the run's arrays (:class:`_State`) and its arguments.
_Step = tuple[Callable[..., None], tuple[Any, ...]]
#: Products of two int8 values (at most 2**14 in magnitude) that float32 sums exactly.
_F32_EXACT_TERMS = (1 << 24) // (1 << 14)
#: ... and float64 (a longer sum runs iteration by iteration: each iteration's BLOCK_IN
#: products summed in float32, added to ACC in int32).
_F64_EXACT_TERMS = (1 << 53) // (1 << 14)
#: A GEMM split into more matrix products than this runs as single iterations instead.
_MAX_BLOCKS = 16
#: Multiply-adds of the largest product handed to BLAS at once (see _product).
_ONE_THREAD = 1 << 18


class _State:
    """The arrays one run works on: DRAM as rows of each memory type's elements (the last
    row of each is zeros, never written: what a LOAD's padding reads), INP as float32
    (depth, batch, block_in), WGT as float32 (depth, block_in, block_out) (transposed: a
    matrix product's right operand), ACC as int32 (depth, batch, block_out); ``rows`` and
    ``sram`` index them by MemId."""

    __slots__ = ("acc", "inp", "inp2", "rows", "sram", "wgt")

    def __init__(self, buffer: np.ndarray, hw: HardwareConfig) -> None:
        b, ci, co = hw.batch, hw.block_in, hw.block_out
        self.inp = np.zeros((hw.inp_depth, b, ci), np.float32)
        self.wgt = np.zeros((hw.wgt_depth, ci, co), np.float32)
        self.acc = np.zeros((hw.acc_depth, b, co), np.int32)
        bytes_ = buffer.view(np.int8)
        rows: list[np.ndarray | None] = [None] * len(MemId)
        for mem in (MemId.INP, MemId.WGT, MemId.OUT, MemId.ACC_8BIT):
            rows[mem] = bytes_.reshape(-1, _elem_bytes(hw)[mem])
        rows[MemId.ACC] = buffer.view(np.int32).reshape(-1, b * co)
        self.rows = tuple(rows)
        acc_rows = self.acc.reshape(hw.acc_depth, -1)
        sram: list[np.ndarray | None] = [None] * len(MemId)
        sram[MemId.INP] = self.inp2 = self.inp.reshape(hw.inp_depth, -1)
        sram[MemId.ACC] = sram[MemId.ACC_8BIT] = acc_rows
        self.sram = tuple(sram)


def _buffer_bytes(dram_bytes: int, hw: HardwareConfig) -> int:
    """The DRAM buffer of a run: the program's DRAM rounded up to whole elements of every
    memory type, and one more element of each (zeros: the padding LOADs read)."""
    whole = math.lcm(*(mem_elem_bytes(m, hw) for m in MemId))
    return -(-dram_bytes // whole) * whole + whole


@dataclass(frozen=True, eq=False)
class DecodedProgram:
    """A program decoded for a hardware configuration: its execution order and the steps
    (numpy operations with their indices) that run it. Decode once, run many times (a
    deployed model runs the same programs on every inference)."""

    program: Program
    hw: HardwareConfig
    order: tuple[int, ...]
    steps: tuple[_Step, ...] = field(repr=False)
    uop: np.ndarray = field(repr=False)  # the micro-op SRAM as the run leaves it

    @cached_property
    def counters(self) -> FsimCounters:
        """fsim's counters (:func:`count`), counted when first asked (a deployed model's
        runs never ask: they need no numba)."""
        return count(self.program, self.hw)

    def run(self, inputs: dict[str, np.ndarray] | None = None) -> RunResult:
        """Execute the program with DRAM tensors initialised from ``inputs`` (by name)."""
        dram, state = self._execute(inputs)
        machine = Machine(self.hw, dram, self.program.uop_table, state.inp.astype(np.int8),
                          state.wgt.transpose(0, 2, 1).astype(np.int8), state.acc,
                          self.uop.copy())
        return RunResult(machine, self.counters, list(self.order))

    def outputs(self, inputs: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
        """The program's output tensors (by name) after a run on ``inputs``: :meth:`run`
        without the machine state."""
        dram, _ = self._execute(inputs)
        return {t.name: _read_tensor(dram, self.program, t.name)
                for t in self.program.tensors if t.role == "output"}

    def _execute(self, inputs: dict[str, np.ndarray] | None) -> tuple[np.ndarray, _State]:
        hw, program = self.hw, self.program
        buffer = np.zeros(_buffer_bytes(program.dram_bytes, hw), np.uint8)
        dram = buffer[: program.dram_bytes]
        for name, value in (inputs or {}).items():
            _write_tensor(dram, program, name, value)
        state = _State(buffer, hw)
        for step, args in self.steps:
            step(state, *args)
        return dram, state


def decode(program: Program, hw: HardwareConfig) -> DecodedProgram:
    """``program`` decoded for ``hw``. Raises DeadlockError as :func:`execution_order`, and
    ProgramError for an index outside its buffer (naming the first such instruction in
    execution order)."""
    order = execution_order(program)
    uop = np.zeros((hw.uop_depth, 3), np.int64)
    buffer_bytes = _buffer_bytes(program.dram_bytes, hw)
    steps: list[_Step] = []
    loops: dict[tuple[Any, ...], list[_Step]] = {}
    for i in order:
        insn = program.instructions[i]
        if isinstance(insn, MemInsn):
            if insn.is_nop:
                continue
            if insn.opcode != Opcode.LOAD:
                steps.append(_decode_store(insn, i, hw, program.dram_bytes))
            elif insn.mem == MemId.UOP:
                _load_uops(insn, i, hw, program.uop_table, uop)
            else:
                steps.append(_decode_load(insn, i, hw, program.dram_bytes, buffer_bytes))
        elif isinstance(insn, GemmInsn):
            steps += _decode_gemm(insn, i, uop, hw, loops)
        elif isinstance(insn, AluInsn):
            steps += _decode_alu(insn, i, uop, hw, loops)
    uop.flags.writeable = False
    return DecodedProgram(program, hw, tuple(order), tuple(steps), uop)


def _rows(idx: np.ndarray) -> slice | np.ndarray:
    """Row indices as a slice when they are consecutive (a view, no gather), else as they
    are."""
    if idx.size == 0:
        return slice(0, 0)
    first = int(idx[0])
    if int(idx[-1]) - first == idx.size - 1 and (idx.size == 1 or bool(np.all(np.diff(idx) == 1))):
        return slice(first, first + idx.size)
    return idx


_SRAM_NAMES = {MemId.INP: "INP", MemId.WGT: "WGT", MemId.ACC: "ACC", MemId.ACC_8BIT: "ACC",
               MemId.UOP: "UOP"}


@cache
def _sram_depths(hw: HardwareConfig) -> dict[MemId, int]:
    return {MemId.INP: hw.inp_depth, MemId.WGT: hw.wgt_depth, MemId.ACC: hw.acc_depth,
            MemId.ACC_8BIT: hw.acc_depth, MemId.UOP: hw.uop_depth}


@cache
def _elem_bytes(hw: HardwareConfig) -> dict[MemId, int]:
    return {mem: mem_elem_bytes(mem, hw) for mem in MemId}


def _load_block(insn: MemInsn, index: int, hw: HardwareConfig) -> tuple[int, np.ndarray]:
    """A LOAD's SRAM end and the DRAM elements of its unpadded block, in order."""
    if insn.mem not in _SRAM_NAMES:
        raise ProgramError(f"instruction #{index}: LOAD into memory {insn.mem.name}")
    rows = insn.y_pad_0 + insn.y_size + insn.y_pad_1
    cols = insn.x_pad_0 + insn.x_size + insn.x_pad_1
    end = insn.sram_base + rows * cols
    depth = _sram_depths(hw)[insn.mem]
    if end > depth:
        raise ProgramError(
            f"instruction #{index} ({insn.kind}): writes {_SRAM_NAMES[insn.mem]}"
            f"[{insn.sram_base}:{end}] past the buffer depth {depth}"
        )
    return end, _strided(insn)


def _strided(insn: MemInsn) -> np.ndarray:
    """The DRAM elements a LOAD or STORE moves, row by row."""
    r = np.arange(insn.y_size)[:, None] * insn.x_stride + np.arange(insn.x_size)[None, :]
    return (insn.dram_base + r).reshape(-1)


def _padded(insn: MemInsn, block: np.ndarray, fill: Any) -> np.ndarray:
    """``block`` (one entry per element moved, row by row) inside the LOAD's padding."""
    rows = insn.y_pad_0 + insn.y_size + insn.y_pad_1
    cols = insn.x_pad_0 + insn.x_size + insn.x_pad_1
    out = np.full((rows, cols, *block.shape[1:]), fill, block.dtype)
    out[insn.y_pad_0 : insn.y_pad_0 + insn.y_size, insn.x_pad_0 : insn.x_pad_0 + insn.x_size] \
        = block.reshape((insn.y_size, insn.x_size, *block.shape[1:]))
    return out.reshape((rows * cols, *block.shape[1:]))


def _load_uops(insn: MemInsn, index: int, hw: HardwareConfig, uop_area: np.ndarray,
               uop: np.ndarray) -> None:
    """A LOAD UOP, done while decoding: the micro-op SRAM holds the program's own data."""
    end, src = _load_block(insn, index, hw)
    if src.size and src.max() >= uop_area.shape[0]:
        raise ProgramError(f"instruction #{index} (LOAD UOP): reads past the uop area")
    uop[insn.sram_base : end] = _padded(insn, uop_area[src], 0)


def _decode_load(insn: MemInsn, index: int, hw: HardwareConfig, dram_bytes: int,
                 buffer_bytes: int) -> _Step:
    end, src = _load_block(insn, index, hw)
    ebytes = _elem_bytes(hw)[insn.mem]
    if src.size and (src.max() + 1) * ebytes > dram_bytes:
        raise ProgramError(
            f"instruction #{index} ({insn.kind}): reads DRAM element {src.max()} "
            f"past the end of DRAM"
        )
    zero_row = buffer_bytes // ebytes - 1
    rows = _rows(_padded(insn, src, zero_row))
    step = _load_wgt if insn.mem == MemId.WGT else _load
    return step, (int(insn.mem), insn.sram_base, end, rows)


def _gather(array: np.ndarray, rows: slice | np.ndarray) -> np.ndarray:
    """``array[rows]``: a view for a slice; for indices, ``take`` (on rows of a 2-D array,
    5-20x faster than indexing)."""
    return array[rows] if isinstance(rows, slice) else array.take(rows, axis=0)


def _load(s: _State, mem: int, base: int, end: int, rows: slice | np.ndarray) -> None:
    s.sram[mem][base:end] = _gather(s.rows[mem], rows)


def _load_wgt(s: _State, mem: int, base: int, end: int, rows: slice | np.ndarray) -> None:
    w = _gather(s.rows[mem], rows)
    s.wgt[base:end] = w.reshape(w.shape[0], s.wgt.shape[2], s.wgt.shape[1]).transpose(0, 2, 1)


def _decode_store(insn: MemInsn, index: int, hw: HardwareConfig,
                  dram_bytes: int) -> _Step:
    if insn.mem != MemId.OUT:
        raise ProgramError(f"instruction #{index}: STORE supports memory OUT only")
    end = insn.sram_base + insn.y_size * insn.x_size
    if end > hw.acc_depth:
        raise ProgramError(
            f"instruction #{index} (STORE): reads ACC[{insn.sram_base}:{end}] past the "
            f"buffer depth {hw.acc_depth}"
        )
    dst = _strided(insn)
    if dst.size and (dst.max() + 1) * hw.out_elem_bytes > dram_bytes:
        raise ProgramError(f"instruction #{index} (STORE): writes past the end of DRAM")
    return _store, (insn.sram_base, end, _rows(dst))


def _store(s: _State, base: int, end: int, rows: slice | np.ndarray) -> None:
    # fsim narrows each int32 lane by truncation (wraps, no saturation).
    s.rows[MemId.OUT][rows] = s.sram[MemId.ACC][base:end].astype(np.int8)


def _indices(insn: GemmInsn | AluInsn, index: int,
             uop: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The (dst, src, wgt) index of every iteration, in execution order."""
    if insn.uop_end > uop.shape[0] or insn.uop_bgn > insn.uop_end:
        raise ProgramError(
            f"instruction #{index} ({insn.kind}): uop range [{insn.uop_bgn}, "
            f"{insn.uop_end}) outside the uop buffer"
        )
    u = uop[insn.uop_bgn : insn.uop_end]
    i = np.arange(insn.iter_out)[:, None, None]
    j = np.arange(insn.iter_in)[None, :, None]
    dst = (u[None, None, :, 0] + i * insn.dst_factor_out + j * insn.dst_factor_in).reshape(-1)
    src = (u[None, None, :, 1] + i * insn.src_factor_out + j * insn.src_factor_in).reshape(-1)
    wgt = None
    if isinstance(insn, GemmInsn):
        w = u[None, None, :, 2] + i * insn.wgt_factor_out + j * insn.wgt_factor_in
        wgt = w.reshape(-1)
    return dst, src, wgt


def _check(idx: np.ndarray, depth: int, what: str, insn: Instruction, index: int) -> None:
    if idx.size and idx.max() >= depth:
        raise ProgramError(
            f"instruction #{index} ({insn.kind}): {what} index {int(idx.max())} outside "
            f"the buffer (depth {depth})"
        )


#: Per class: the fields that, with the micro-ops of its range, decide a GEMM's or ALU's
#: steps (all but the dependency flags and where the range is).
_LOOP_FIELDS = {cls: tuple(f.name for f in fields(cls) if f.name not in (
    "pop_prev", "pop_next", "push_prev", "push_next", "uop_bgn", "uop_end"))
    for cls in (GemmInsn, AluInsn)}


def _loop_key(insn: GemmInsn | AluInsn, uop: np.ndarray) -> tuple[Any, ...]:
    """Instructions with equal keys decode alike (and pass the same checks): a convolution's
    tiles repeat a few kernels."""
    return (type(insn), *(getattr(insn, f) for f in _LOOP_FIELDS[type(insn)]),
            uop[insn.uop_bgn : insn.uop_end].tobytes())


def _decode_gemm(insn: GemmInsn, index: int, uop: np.ndarray, hw: HardwareConfig,
                 memo: dict[tuple[Any, ...], list[_Step]]
                 ) -> list[_Step]:
    key = _loop_key(insn, uop)
    steps = memo.get(key)
    if steps is not None:
        return steps
    dst, src, wgt = _indices(insn, index, uop)
    _check(dst, hw.acc_depth, "ACC", insn, index)
    if insn.reset:
        steps = [(_reset, (_rows(np.unique(dst)),))]
    else:
        _check(src, hw.inp_depth, "INP", insn, index)
        _check(wgt, hw.wgt_depth, "WGT", insn, index)
        blocks = _gemm_blocks(dst, src, wgt, hw.block_in)
        steps = [(_gemm_scatter, (dst, src, wgt))] if blocks is None else \
            [(_gemm_product, block) for block in blocks]
    memo[key] = steps
    return steps


def _reset(s: _State, rows: slice | np.ndarray) -> None:
    s.acc[rows] = 0


def _gemm_blocks(dst: np.ndarray, src: np.ndarray, wgt: np.ndarray,
                 block_in: int) -> list[tuple[Any, ...]] | None:
    """A GEMM's iterations as matrix products ``ACC[dst[p, q]] += sum_k INP[src[p, k]] @
    WGT[wgt[q, k]]``, one per block; None when they do not fall into a few such blocks.

    An ACC row ``d`` receives the sum over its iterations' (src, wgt) pairs. Sorted by
    weight row, the pairs of ``d`` give its weight list and its input list; the rows with
    equal weight lists are the columns ``q`` of a product, those with equal input lists
    its rows ``p``. When every (p, q) pair is one ACC row (a convolution: output pixels by
    output-channel blocks), the GEMM is one product; otherwise one per weight list.
    """
    if dst.size == 0:
        return []
    order = np.lexsort((src, wgt, dst))
    d, s, w = dst[order], src[order], wgt[order]
    starts = np.flatnonzero(np.r_[True, d[1:] != d[:-1]])
    counts = np.diff(np.r_[starts, d.size])
    blocks = []
    for terms in np.unique(counts).tolist():
        if terms * block_in > _F64_EXACT_TERMS:
            return None
        first = starts[counts == terms]
        at = first[:, None] + np.arange(terms)[None, :]
        rows = d[first]
        wgt_lists, q = np.unique(w[at], axis=0, return_inverse=True)
        src_lists, p = np.unique(s[at], axis=0, return_inverse=True)
        q, p = q.reshape(-1), p.reshape(-1)
        if np.unique(p * len(wgt_lists) + q).size == rows.size == len(src_lists) * len(wgt_lists):
            grid = np.empty((len(src_lists), len(wgt_lists)), np.int64)
            grid[p, q] = rows
            blocks.append((src_lists, wgt_lists, _grid_rows(grid), terms * block_in))
            continue
        for k in range(len(wgt_lists)):
            mine = q == k
            blocks.append((s[at[mine]], wgt_lists[k : k + 1], _grid_rows(rows[mine][:, None]),
                           terms * block_in))
        if len(blocks) > _MAX_BLOCKS:
            return None
    return blocks


def _grid_rows(grid: np.ndarray) -> np.ndarray | tuple[int, bool]:
    """The ACC rows of a product's (p, q) grid: (first row, by column) when they are
    consecutive row by row (False) or column by column (True), else the grid."""
    n = grid.size
    first = int(grid.min())
    span = np.arange(first, first + n)
    if np.array_equal(grid.reshape(-1), span):
        return first, False
    if np.array_equal(grid.T.reshape(-1), span):
        return first, True
    return grid


def _gemm_product(s: _State, src: np.ndarray, wgt: np.ndarray,
                  dst: np.ndarray | tuple[int, bool], terms: int) -> None:
    (rows, k), cols = src.shape, wgt.shape[0]
    depth, batch, block_out = s.acc.shape
    block_in = s.inp.shape[2]
    a = s.inp2.take(src, axis=0)  # (rows, k, batch * block_in)
    if batch > 1:
        a = a.reshape(rows, k, batch, block_in).transpose(0, 2, 1, 3)
    a = a.reshape(rows * batch, k * block_in)
    b = s.wgt.take(wgt, axis=0).transpose(1, 2, 0, 3).reshape(k * block_in, cols * block_out)
    out = _product(a, b, terms)
    if isinstance(dst, np.ndarray):  # any grid of rows
        acc = s.acc.reshape(depth, batch * block_out)
        acc[dst] += out.reshape(rows, batch, cols, block_out).transpose(0, 2, 1, 3).reshape(
            rows, cols, batch * block_out)
        return
    first, by_column = dst
    acc = s.acc[first : first + rows * cols]
    if by_column:  # ACC (cols, rows, batch, block_out)
        acc.reshape(cols, rows * batch, block_out)[...] += \
            out.reshape(rows * batch, cols, block_out).transpose(1, 0, 2)
    elif batch == 1:  # ACC (rows, cols, 1, block_out): the product's own layout
        acc.reshape(rows, cols * block_out)[...] += out
    else:
        acc.reshape(rows, cols, batch, block_out)[...] += \
            out.reshape(rows, batch, cols, block_out).transpose(0, 2, 1, 3)


def _product(a: np.ndarray, b: np.ndarray, terms: int) -> np.ndarray:
    """``a @ b`` (float32, integer values) as int32, exact: in float32 up to
    _F32_EXACT_TERMS terms, else in float64 (and int64 to int32 wraps as the accumulator
    does). Run as products of at most _ONE_THREAD multiply-adds each: OpenBLAS runs larger
    ones on several threads, which on a busy machine wait for one another (a 224x144x32
    product: 12 us alone, a millisecond or more at a load of 5 on two cores)."""
    if terms > _F32_EXACT_TERMS:
        a, b = a.astype(np.float64), b.astype(np.float64)
    m, k = a.shape
    n = b.shape[1]
    step = max(1, _ONE_THREAD // max(1, k * n))
    if step >= m:
        out = a @ b
    else:
        out = np.empty((m, n), a.dtype)
        for i in range(0, m, step):
            np.matmul(a[i : i + step], b, out=out[i : i + step])
    if terms > _F32_EXACT_TERMS:
        out = out.astype(np.int64)
    return out.astype(np.int32)


def _gemm_scatter(s: _State, dst: np.ndarray, src: np.ndarray, wgt: np.ndarray) -> None:
    """Iteration by iteration (each a sum of block_in products: exact in float32)."""
    prod = np.einsum("nbk,nko->nbo", s.inp.take(src, axis=0), s.wgt.take(wgt, axis=0))
    np.add.at(s.acc, dst, prod.astype(np.int32))


def _decode_alu(insn: AluInsn, index: int, uop: np.ndarray, hw: HardwareConfig,
                memo: dict[tuple[Any, ...], list[_Step]]
                ) -> list[_Step]:
    key = _loop_key(insn, uop)
    steps = memo.get(key)
    if steps is None:
        steps = memo[key] = [_alu_step(insn, index, uop, hw)]
    return steps


def _alu_step(insn: AluInsn, index: int, uop: np.ndarray,
              hw: HardwareConfig) -> _Step:
    dst, src, _ = _indices(insn, index, uop)
    _check(dst, hw.acc_depth, "ACC dst", insn, index)
    if not insn.use_imm:
        _check(src, hw.acc_depth, "ACC src", insn, index)
    operand = None if insn.use_imm else src
    imm = np.int64(insn.imm)
    if not _vectorizable(dst, operand):
        # A destination written twice, or read after an earlier write: run in order.
        return _alu_in_order, (insn.alu_op, dst, operand, imm)
    rows = _rows(dst)
    operand_rows = None if operand is None else _rows(operand)
    if insn.alu_op in _INT32_OPS and (operand is not None or -(1 << 31) <= insn.imm < 1 << 31):
        return _alu_int32, (_INT32_OPS[insn.alu_op], rows, operand_rows, np.int32(insn.imm))
    if insn.alu_op == AluOp.SHR and operand is None and 0 <= insn.imm < 32:
        return _alu_int32, (np.right_shift, rows, None, np.int32(insn.imm))
    return _alu, (insn.alu_op, rows, operand_rows, imm)


#: ALU ops whose int32 numpy ufunc is the hardware's (two's complement, wrapping) op.
_INT32_OPS = {AluOp.MIN: np.minimum, AluOp.MAX: np.maximum, AluOp.ADD: np.add,
              AluOp.MUL: np.multiply}


def _alu_int32(s: _State, op: np.ufunc, dst: slice | np.ndarray,
               src: slice | np.ndarray | None, imm: np.int32) -> None:
    acc = s.acc
    b = imm if src is None else acc[src]
    if isinstance(dst, slice):
        op(acc[dst], b, out=acc[dst])  # numpy copies an overlapping operand first
    else:
        acc[dst] = op(acc[dst], b)


def _alu(s: _State, op: AluOp, dst: slice | np.ndarray, src: slice | np.ndarray | None,
         imm: np.int64) -> None:
    acc = s.acc
    b = imm if src is None else acc[src].astype(np.int64)
    acc[dst] = _alu_apply(op, acc[dst].astype(np.int64), b)


def _alu_in_order(s: _State, op: AluOp, dst: np.ndarray, src: np.ndarray | None,
                  imm: np.int64) -> None:
    acc = s.acc
    for k in range(dst.size):
        b = imm if src is None else acc[src[k]].astype(np.int64)
        acc[dst[k]] = _alu_apply(op, acc[dst[k]].astype(np.int64), b)


def _vectorizable(dst: np.ndarray, src: np.ndarray | None) -> bool:
    """True when executing all iterations at once equals executing them in order."""
    order = np.argsort(dst, kind="stable")
    sorted_dst = dst[order]
    if sorted_dst.size > 1 and np.any(sorted_dst[1:] == sorted_dst[:-1]):
        return False
    if src is None:
        return True
    pos = np.searchsorted(sorted_dst, src)
    pos = np.minimum(pos, sorted_dst.size - 1)
    hit = sorted_dst[pos] == src
    written_at = order[pos]
    return not np.any(hit & (written_at < np.arange(src.size)))


def _alu_apply(op: AluOp, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if op == AluOp.MIN:
        r = np.minimum(a, b)
    elif op == AluOp.MAX:
        r = np.maximum(a, b)
    elif op == AluOp.ADD:
        r = a + b
    elif op == AluOp.MUL:
        r = a * b
    elif op == AluOp.SHR:
        # fsim's: a negative amount shifts left, an immediate's or a register's. The RTL
        # (TensorAlu.scala) agrees on an immediate -31..31 but shifts by a register's low 5
        # bits, right, whatever its sign (scripts/alu_forms_judge.py): vtatune's epilogues
        # read only amounts 0..31 from registers.
        b = np.broadcast_to(b, a.shape)
        right = np.right_shift(a, np.clip(b, 0, 63))
        left = np.left_shift(a, np.clip(-b, 0, 63))
        r = np.where(b >= 0, right, left)
    else:  # pragma: no cover - AluOp is exhaustive
        raise ProgramError(f"unknown ALU op {op}")
    return (r & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
