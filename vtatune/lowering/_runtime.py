"""TVM's VTA runtime command queue, re-expressed: how API calls become instructions.

Behaviour follows ``vta/runtime/runtime.cc``: pending pops per stage attach to the next
instruction created on that stage (merged into a NOP when a second pop of the same kind
arrives), pushes set a flag on the stream's last instruction when it belongs to the
pushing stage, micro-op kernels are cached in uop SRAM per (site, signature) with a
LOAD UOP on first use and the runtime's simple eviction, and ``synchronize`` ends the
stream with the dependency handshake and FINISH.

Speed: a lowered stream has thousands of instructions, so the queue does not run the calls
as they are made. :class:`CommandQueue` records them as a small loop program — runtime calls
inside ``begin_loop``/``end_loop``, each DMA address an affine function of the loop
variables, each kernel chosen by a loop variable — and :meth:`CommandQueue.run` executes it
in one compiled pass (:func:`_execute`, numba) that writes the instruction table
(:mod:`simulator.rows`) directly. The same queue serves straight-line call sequences
(export's replay, the vadd program): they are loop programs without loops.

Example:
    >>> from simulator.hardware import DEFAULT
    >>> from simulator.isa import MemId
    >>> q = CommandQueue(DEFAULT)
    >>> q.begin_loop(0, 3)                      # for v in range(3):
    >>> q.load_2d(MemId.INP, 0, 100, 1, 4, 4, coefs={0: 4})  #   load inp[100 + 4 v]
    >>> q.end_loop()
    >>> q.synchronize()                         # the end-of-stream handshake and FINISH
    >>> table, uops = q.run()
    >>> table[:3, 4].tolist()                   # dram_base of the three loads
    [100, 104, 108]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator import rows as R
from simulator.hardware import HardwareConfig
from simulator.isa import AluOp, MemId, Opcode, Uop
from simulator.jit import njit

LOAD, COMPUTE, STORE = 1, 2, 3
#: The runtime finds a call site's micro-op kernel by one int of closure data, key = value
#: + 1, in a table that must stay below this many keys (``UopKernelMap::Get``:
#: ``CHECK_LT(key, 100)``); more than one int of closure data is refused outright. A call
#: site whose kernel depends on a loop variable may therefore see at most 99 values of it.
KERNEL_KEYS = 100
#: Loop-variable slots a queue program may use: the emitter's 7 tile loops plus up to 5
#: looped store dims (b, co // k, co % k, h, w; see lowering._dma.store_dims).
NSLOTS = 12


@dataclass(frozen=True)
class KernelLoop:
    extent: int
    dst: int
    src: int
    wgt: int = 0


@dataclass(frozen=True, eq=False)
class Kernel:
    """A micro-op kernel as recorded by the runtime: up to two loops, then the uops.

    ``uop_table`` holds the uops as (dst, src, wgt) rows; a sequence of :class:`Uop` is
    accepted too. :attr:`uops` gives them as :class:`Uop` values."""

    uop_table: np.ndarray
    loops: tuple[KernelLoop, ...] = ()
    reset: bool = False
    alu_op: AluOp | None = None
    use_imm: bool = False
    imm: int = 0

    def __post_init__(self) -> None:
        table = self.uop_table
        if not isinstance(table, np.ndarray):
            table = np.array([(u.dst, u.src, u.wgt) for u in table], np.int64)
        if table.ndim != 2:
            table = table.reshape(-1, 3)
        table.flags.writeable = False
        object.__setattr__(self, "uop_table", table)

    @property
    def uops(self) -> tuple[Uop, ...]:
        return tuple(Uop(*u) for u in self.uop_table.tolist())

    def __len__(self) -> int:
        return len(self.uop_table)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Kernel):
            return NotImplemented
        return ((self.loops, self.reset, self.alu_op, self.use_imm, self.imm)
                == (other.loops, other.reset, other.alu_op, other.use_imm, other.imm)
                and np.array_equal(self.uop_table, other.uop_table))

    __hash__ = None  # type: ignore[assignment]


def _gemm_fields(kernel: Kernel) -> tuple:
    """(reset, iter_out, iter_in, dst_o, dst_i, src_o, src_i, wgt_o, wgt_i) of a GEMM."""
    loops = list(kernel.loops) + [KernelLoop(1, 0, 0, 0)] * (2 - len(kernel.loops))
    return (kernel.reset, loops[0].extent, loops[1].extent, loops[0].dst, loops[1].dst,
            loops[0].src, loops[1].src, loops[0].wgt, loops[1].wgt)


def _alu_fields(kernel: Kernel) -> tuple:
    """(alu_op, use_imm, imm, reset, iter_out, iter_in, dst_o, dst_i, src_o, src_i)."""
    if len(kernel.loops) == 1:
        # The runtime puts a single ALU loop in the inner slot (GEMM uses the outer).
        out, inn = KernelLoop(1, 0, 0), kernel.loops[0]
    else:
        lp = list(kernel.loops) + [KernelLoop(1, 0, 0)] * (2 - len(kernel.loops))
        out, inn = lp[0], lp[1]
    return (kernel.alu_op, kernel.use_imm, kernel.imm, kernel.reset,
            out.extent, inn.extent, out.dst, inn.dst, out.src, inn.src)


def _table_row(kernel: Kernel) -> tuple[int, ...]:
    """(uop count, is ALU, then the 10 instruction fields) of a kernel's GEMM or ALU; kept
    on the kernel, which is immutable (kernels are cached and reused across schedules)."""
    row = kernel.__dict__.get("_table_row")
    if row is None:
        alu = kernel.alu_op is not None
        f = _alu_fields(kernel) if alu else _gemm_fields(kernel)
        row = (len(kernel), int(alu), *(int(v) for v in f), *[0] * (10 - len(f)))
        object.__setattr__(kernel, "_table_row", row)
    return row


def window_tables(ywin, xwin, shapes) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Tables of windowed loads: per row tile ``(y0, y id)``, per column tile ``(x0, x id)``,
    and ``shapes[y id][x id] = (y, x, stride, y_pad_0, y_pad_1, x_pad_0, x_pad_1)``."""
    nx = len(shapes[0])
    flat = [tuple(s) for row in shapes for s in row]
    # Column 7: one id per distinct shape (a reused load compares shapes by value).
    first: dict[tuple, int] = {}
    table = [(*s, first.setdefault(s, i)) for i, s in enumerate(flat)]
    arrays = (np.array(ywin, np.int64).reshape(-1, 2), np.array(xwin, np.int64).reshape(-1, 2),
              np.array(table, np.int64).reshape(-1, 8))
    for a in arrays:
        a.flags.writeable = False
    return (*arrays, nx)


#: The window tables of a queue without windowed loads: read-only like every other's, so
#: the executor is compiled once for all queues (numba compiles anew for a writable array).
_NO_WINDOWS = window_tables([(0, 0)], [(0, 0)], [[(0,) * 7]])


# --- the loop program ------------------------------------------------------------------------
# ops: [code, a, b, c]
_OP_LOOP, _OP_END, _OP_PUSH, _OP_POP, _OP_DMA, _OP_KERNEL, _OP_SYNC = range(7)
# Most instructions one op can emit (synchronize: its pushes, pops, NOPs and FINISH).
_OP_MAX_ROWS = 7
# DMA table columns.
(_D_OPCODE, _D_MEM, _D_STAGE, _D_SRAM, _D_DRAM) = range(5)
_D_COEF = 5  # NSLOTS coefficients of the loop variables in the DRAM address
_D_SCOEF = _D_COEF + NSLOTS  # NSLOTS coefficients in the SRAM address
(_D_Y, _D_X, _D_STRIDE, _D_Y0, _D_Y1, _D_X0, _D_X1, _D_REUSE, _D_WINDOW, _D_GW, _D_YSLOT,
 _D_YMUL, _D_YOFF, _D_XSLOT, _D_SRAM_LOOPS) = range(_D_SCOEF + NSLOTS, _D_SCOEF + NSLOTS + 15)
_D_WIDTH = _D_SRAM_LOOPS + 1
# Kernel table columns: [uop count, is_alu, 10 instruction fields, first uop in the
# kernels' uop array].
_K_WIDTH = 13
_K_UOPS = 12
_STAGE_OF_MEM = {MemId.INP: LOAD, MemId.WGT: LOAD}


class CommandQueue:
    """Records runtime calls (optionally inside loops) and runs them into a stream.

    Calls mirror the runtime's API: :meth:`dep_pop`, :meth:`dep_push`, :meth:`load_2d`,
    :meth:`store_2d`, :meth:`push_gemm`, :meth:`push_alu`, :meth:`synchronize`. A DMA's
    DRAM address is ``dram + sum(coefs[s] * v[s])`` over the enclosing loop variables; a
    windowed input load (:meth:`set_windows`, :func:`window_tables`) also adds its tile's
    window origin and takes its shape from the window table. ``reuse=True`` skips a load
    identical to the one this call site issued last (the tile is still resident)."""

    def __init__(self, hw: HardwareConfig, pending: tuple[tuple[int, int], ...] = (),
                 merge_nop_push: bool = False) -> None:
        """``pending``: the pops ``(src, dst)`` a stream before left pending (issued after its
        synchronize): the runtime's queue keeps them, and this stream's first instruction
        of stage ``dst`` (or a NOP, when another such pop comes first) carries them.
        ``merge_nop_push``: let a push merge into a load or compute NOP, as vtatune 0.1's
        model of the runtime did (not ``runtime.cc``: only for rebuilding those streams)."""
        self.hw = hw
        self._merge_nop = int(merge_nop_push)
        self._pending = np.zeros(8, np.int64)
        for src, dst in pending:
            self._pending[2 * dst + (0 if src < dst else 1)] = 1
        self._ops: list[tuple[int, int, int, int]] = []
        self._open: list[int] = []  # indices of the open LOOP ops
        self._dmas: list[list[int]] = []
        self._kernels: list[Kernel] = []
        self._kernel_ids: dict[tuple, int] = {}
        self._windows = _NO_WINDOWS
        # About one instruction per executed call: the table's first size (doubled and run
        # again in the rare case that pushes and kernel misses add more). Counted as calls
        # are recorded.
        self._runs = [1]  # times the innermost open loop body runs
        self._row_estimate = 2 * _OP_MAX_ROWS

    # --- structure ----------------------------------------------------------------------
    def begin_loop(self, slot: int, extent: int) -> None:
        if not 0 <= slot < NSLOTS:
            raise ValueError(f"loop slot {slot} out of range 0..{NSLOTS - 1}")
        self._open.append(len(self._ops))
        self._ops.append((_OP_LOOP, slot, extent, -1))
        self._runs.append(self._runs[-1] * extent)

    def end_loop(self) -> None:
        start = self._open.pop()
        _, slot, extent, _ = self._ops[start]
        self._ops[start] = (_OP_LOOP, slot, extent, len(self._ops))
        self._ops.append((_OP_END, slot, extent, start))
        self._runs.pop()

    def _call(self, op: tuple[int, int, int, int]) -> None:
        self._ops.append(op)
        self._row_estimate += self._runs[-1]

    def set_windows(self, tables) -> None:
        """The tables of windowed loads, from :func:`window_tables`."""
        self._windows = tables

    # --- runtime calls ----------------------------------------------------------------------
    def dep_pop(self, src: int, dst: int) -> None:
        """The pop executes on stage ``dst``."""
        self._call((_OP_POP, src, dst, 0))

    def dep_push(self, src: int, dst: int) -> None:
        """The push executes on stage ``src``."""
        self._call((_OP_PUSH, src, dst, 0))

    def _dma(self, opcode: Opcode, mem: MemId, stage: int, sram: int, dram: int, y: int,
             x: int, stride: int, pads, coefs, reuse: bool, window, sram_coefs=None) -> None:
        row = [0] * _D_WIDTH
        row[_D_OPCODE], row[_D_MEM], row[_D_STAGE] = int(opcode), int(mem), stage
        row[_D_SRAM], row[_D_DRAM] = sram, dram
        for slot, coef in (coefs or {}).items():
            row[_D_COEF + slot] = coef
        if sram_coefs:
            row[_D_SRAM_LOOPS] = 1
            for slot, coef in sram_coefs.items():
                row[_D_SCOEF + slot] = coef
        row[_D_Y], row[_D_X], row[_D_STRIDE] = y, x, stride
        row[_D_Y0], row[_D_Y1], row[_D_X0], row[_D_X1] = pads
        row[_D_REUSE] = int(reuse)
        if window is not None:
            row[_D_WINDOW] = 1
            row[_D_GW], row[_D_YSLOT], row[_D_YMUL], row[_D_YOFF], row[_D_XSLOT] = window
        self._call((_OP_DMA, len(self._dmas), 0, 0))
        self._dmas.append(row)

    def load_2d(self, mem: MemId, sram: int, dram: int, y: int, x: int, stride: int,
                pads: tuple[int, int, int, int] = (0, 0, 0, 0), *, coefs=None,
                reuse: bool = False, window=None) -> None:
        """``window=(row stride, y slot, y multiplier, y offset, x slot)``: the tile's
        row is ``v[y slot] * y multiplier + y offset`` and its column ``v[x slot]``."""
        self._dma(Opcode.LOAD, mem, _STAGE_OF_MEM.get(mem, COMPUTE), sram, dram, y, x,
                  stride, pads, coefs, reuse, window)

    def store_2d(self, sram: int, dram: int, y: int, x: int, stride: int, *,
                 coefs=None, sram_coefs=None) -> None:
        """``sram_coefs``: per-slot coefficients of the SRAM address, as ``coefs`` are of
        the DRAM address (a tile stored row by row is one call inside loops)."""
        self._dma(Opcode.STORE, MemId.OUT, STORE, sram, dram, y, x, stride, (0, 0, 0, 0),
                  coefs, False, None, sram_coefs)

    def kernel_id(self, key: tuple, kernel: Kernel) -> int:
        """The id of the kernel cached under ``key`` (registered on first sight)."""
        kid = self._kernel_ids.get(key)
        if kid is None:
            kid = self._kernel_ids[key] = len(self._kernels)
            self._kernels.append(kernel)
        return kid

    def push_kernel(self, first: int, select: int = -1) -> None:
        """Run kernel ``first + v[select]`` (``select=-1``: kernel ``first``)."""
        self._call((_OP_KERNEL, first, select, 0))

    def push_gemm(self, key: tuple, kernel: Kernel) -> None:
        self.push_kernel(self.kernel_id(key, kernel))

    push_alu = push_gemm

    def synchronize(self) -> None:
        self._call((_OP_SYNC, 0, 0, 0))

    # --- running ------------------------------------------------------------------------
    def run(self) -> tuple[np.ndarray, np.ndarray]:
        """The instruction table (:mod:`simulator.rows`) and the micro-op area as
        (dst, src, wgt) rows."""
        if self._open:
            raise ValueError("a loop is still open")
        ops = np.array(self._ops, np.int64).reshape(-1, 4)
        dmas = np.array(self._dmas, np.int64).reshape(-1, _D_WIDTH)
        kernels = np.array([_table_row(k) for k in self._kernels] or [(0,) * (_K_WIDTH - 1)],
                           np.int64)
        kernels = np.concatenate([kernels, np.zeros((len(kernels), 1), np.int64)], axis=1)
        kernels[1:, _K_UOPS] = np.cumsum(kernels[:-1, 0])
        uops = (np.concatenate([k.uop_table for k in self._kernels]) if self._kernels
                else np.zeros((0, 3), np.int64))
        return run_program(ops, dmas, self._windows, kernels, uops, self.hw.uop_depth,
                           self._pending, self._merge_nop, self._row_estimate)


def run_program(ops: np.ndarray, dmas: np.ndarray, windows, kernels: np.ndarray,
                kernel_uops: np.ndarray, uop_depth: int, pending: np.ndarray, merge_nop: int,
                capacity: int) -> tuple[np.ndarray, np.ndarray]:
    """Run a recorded queue program (what :class:`CommandQueue` records, as arrays: its ops,
    DMA table, window tables, kernel table with each kernel's first row in ``kernel_uops``)
    into (instruction table, micro-op area). ``capacity``: the table's first size (doubled
    and run again while too small)."""
    ywin, xwin, shapes, nx = windows
    area = np.empty((max(len(kernel_uops), 1), 3), np.int64)
    while True:
        # numpy allocates the table (not numba): its allocator reuses freed memory, where
        # fresh pages for a table of ~100k rows would cost more than filling it.
        table = np.empty((capacity, R.WIDTH), np.int64)
        n, n_uops, status = _execute(ops, dmas, ywin, xwin, shapes, nx, kernels, kernel_uops,
                                     uop_depth, table, area, pending, merge_nop)
        if status != _FULL:
            break
        capacity *= 2
    if status >= 0:
        raise ValueError(f"micro-op kernel of {kernels[status, 0]} uops exceeds "
                         f"the uop buffer ({uop_depth})")
    return table[:n], area[:n_uops]


# --- the compiled executor -------------------------------------------------------------------
# Scalar state lives in one array (fewer arrays to pass: each costs a reference count per
# call): the stream length, the stage of its last instruction, the uop cache's end of
# allocation, eviction cursor and entry count, then the pending pops: pop_prev of stage s
# at _PEND + 2 s, pop_next at _PEND + 2 s + 1.
_N, _LAST, _SRAM_END, _CACHE_IDX, _CACHE_LEN, _PEND = range(6)
_FULL = -2  # status: the table is too small
_MERGE_NOP = _PEND + 8  # 1: a push may merge into a load/compute NOP (vtatune 0.1's streams)
_STATE = _MERGE_NOP + 1


@njit(inner=True)
def _append(rows, st, stage, code, f0, f1, f2, f3, f4, f5, f6, f7, f8, f9,
            f10, f11):
    """Append an instruction of ``stage``, taking that stage's pending pops."""
    n = st[_N]
    # Element-wise stores: a row view would cost a reference count per instruction.
    rows[n, 0] = code
    rows[n, 1] = f0
    rows[n, 2] = f1
    rows[n, 3] = f2
    rows[n, 4] = f3
    rows[n, 5] = f4
    rows[n, 6] = f5
    rows[n, 7] = f6
    rows[n, 8] = f7
    rows[n, 9] = f8
    rows[n, 10] = f9
    rows[n, 11] = f10
    rows[n, 12] = f11
    rows[n, R.FLAGS] = (st[_PEND + 2 * stage] * R.POP_PREV
                        + st[_PEND + 2 * stage + 1] * R.POP_NEXT)
    st[_PEND + 2 * stage] = 0
    st[_PEND + 2 * stage + 1] = 0
    st[_N] = n + 1
    st[_LAST] = stage


@njit(inner=True)
def _nop(rows, st, stage):
    """A NOP of ``stage`` (carrying its pending pops). The runtime reads the stage of a LOAD
    of no elements as none (``GetPipelineStage``: ``x_size == 0``), so a push never merges
    into a load or compute NOP; a STORE NOP is the store stage's and takes one."""
    if stage == STORE:
        opcode, mem = Opcode.STORE, MemId.OUT
    elif stage == LOAD:
        opcode, mem = Opcode.LOAD, MemId.INP
    else:
        opcode, mem = Opcode.LOAD, MemId.UOP
    _append(rows, st, stage, R.MEM, opcode, mem, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    if stage != STORE and not st[_MERGE_NOP]:
        st[_LAST] = 0


@njit(inner=True)
def _commit(rows, st, stage):
    if st[_PEND + 2 * stage] or st[_PEND + 2 * stage + 1]:
        _nop(rows, st, stage)


# The helpers are plain compiled functions, which LLVM inlines into the executor with no
# reference counting on its arrays; numba's own inlining (inline='always') would rebind the
# arrays in every call site and count references there, on nearly every instruction.
@njit(inner=True)
def _dep_pop(rows, st, src, dst):
    at = _PEND + 2 * dst + (0 if src < dst else 1)
    if st[at]:
        _commit(rows, st, dst)
    st[at] = 1


@njit(inner=True)
def _dep_push(rows, st, src, dst):
    _commit(rows, st, src)
    bit = R.PUSH_NEXT if src < dst else R.PUSH_PREV
    if st[_LAST] == src and not rows[st[_N] - 1, R.FLAGS] & bit:
        rows[st[_N] - 1, R.FLAGS] |= bit
        return
    _nop(rows, st, src)
    rows[st[_N] - 1, R.FLAGS] |= bit


@njit(cache=True)
def _execute(ops, dmas, ywin, xwin, shapes, nx, kernels, kernel_uops, uop_depth, rows, area,
             pending, merge_nop):
    """Run a queue program into ``rows`` and the micro-op area into ``area`` (each kernel's
    uops, from ``kernel_uops``, when it is first loaded): (instructions written, micro-ops
    written, status). ``status`` is -1, :data:`_FULL`, or the id of a kernel larger than
    the uop buffer. ``pending``: the pending pops the queue starts with (pop_prev of stage s
    at 2 s, pop_next at 2 s + 1)."""
    st = np.zeros(_STATE, np.int64)
    for j in range(8):
        st[_PEND + j] = pending[j]
    st[_MERGE_NOP] = merge_nop
    env = np.zeros(NSLOTS, np.int64)
    nk = kernels.shape[0]
    res_begin = np.full(nk, -1, np.int64)  # resident kernels: their uop SRAM range
    res_end = np.zeros(nk, np.int64)
    cache = np.zeros(nk + 1, np.int64)  # resident kernel ids in SRAM order
    dram_off = np.full(nk, -1, np.int64)
    uop_total = 0
    nd = dmas.shape[0]
    last_dram = np.full(nd, -1, np.int64)  # per reusing DMA: its last (address, shape)
    last_shape = np.full(nd, -1, np.int64)
    pc = 0
    nops = ops.shape[0]
    while pc < nops:
        if st[_N] + _OP_MAX_ROWS > rows.shape[0]:
            return st[_N], uop_total, _FULL
        code = ops[pc, 0]
        if code == _OP_LOOP:
            env[ops[pc, 1]] = 0
        elif code == _OP_END:
            slot = ops[pc, 1]
            env[slot] += 1
            if env[slot] < ops[pc, 2]:
                pc = ops[pc, 3]
            else:
                env[slot] = 0
        elif code == _OP_PUSH:
            _dep_push(rows, st, ops[pc, 1], ops[pc, 2])
        elif code == _OP_POP:
            _dep_pop(rows, st, ops[pc, 1], ops[pc, 2])
        elif code == _OP_DMA:
            di = ops[pc, 1]
            dram = dmas[di, _D_DRAM]
            for s in range(NSLOTS):
                dram += dmas[di, _D_COEF + s] * env[s]
            sram = dmas[di, _D_SRAM]
            if dmas[di, _D_SRAM_LOOPS]:
                for s in range(NSLOTS):
                    sram += dmas[di, _D_SCOEF + s] * env[s]
            y, x, stride = dmas[di, _D_Y], dmas[di, _D_X], dmas[di, _D_STRIDE]
            y0, y1 = dmas[di, _D_Y0], dmas[di, _D_Y1]
            x0, x1 = dmas[di, _D_X0], dmas[di, _D_X1]
            sid = -1
            if dmas[di, _D_WINDOW]:
                yi = env[dmas[di, _D_YSLOT]] * dmas[di, _D_YMUL] + dmas[di, _D_YOFF]
                xi = env[dmas[di, _D_XSLOT]]
                dram += ywin[yi, 0] * dmas[di, _D_GW] + xwin[xi, 0]
                sid = ywin[yi, 1] * nx + xwin[xi, 1]
                y, x, stride = shapes[sid, 0], shapes[sid, 1], shapes[sid, 2]
                y0, y1, x0, x1 = shapes[sid, 3], shapes[sid, 4], shapes[sid, 5], shapes[sid, 6]
                sid = shapes[sid, 7]
            if dmas[di, _D_REUSE]:
                if last_dram[di] == dram and last_shape[di] == sid:
                    pc += 1
                    continue
                last_dram[di] = dram
                last_shape[di] = sid
            _append(rows, st, dmas[di, _D_STAGE], R.MEM, dmas[di, _D_OPCODE],
                    dmas[di, _D_MEM], sram, dram, y, x, stride, y0, y1, x0, x1, 0)
        elif code == _OP_KERNEL:
            k = ops[pc, 1]
            if ops[pc, 2] >= 0:
                k += env[ops[pc, 2]]
            if res_begin[k] < 0:
                # Make it resident: LOAD UOP on a miss, the runtime's simple eviction.
                n = kernels[k, 0]
                if n > uop_depth:
                    return st[_N], uop_total, k
                if st[_SRAM_END] + n > uop_depth:
                    st[_CACHE_IDX] = 0
                    begin = 0
                    st[_SRAM_END] = n
                else:
                    begin = st[_SRAM_END]
                    st[_SRAM_END] += n
                evict = st[_CACHE_IDX]
                idx = evict
                while idx < st[_CACHE_LEN]:
                    other = cache[idx]
                    if res_begin[other] >= st[_SRAM_END]:
                        break
                    res_begin[other] = -1
                    idx += 1
                if dram_off[k] < 0:
                    dram_off[k] = uop_total
                    first = kernels[k, _K_UOPS]
                    for u in range(n):
                        area[uop_total + u, 0] = kernel_uops[first + u, 0]
                        area[uop_total + u, 1] = kernel_uops[first + u, 1]
                        area[uop_total + u, 2] = kernel_uops[first + u, 2]
                    uop_total += n
                res_begin[k] = begin
                res_end[k] = st[_SRAM_END]
                # cache[evict:idx] = [k]
                removed = idx - evict
                length = st[_CACHE_LEN]
                if removed == 0:
                    for j in range(length, evict, -1):
                        cache[j] = cache[j - 1]
                elif removed > 1:
                    for j in range(idx, length):
                        cache[j - removed + 1] = cache[j]
                cache[evict] = k
                st[_CACHE_LEN] = length - removed + 1
                st[_CACHE_IDX] = evict + 1
                _append(rows, st, COMPUTE, R.MEM, Opcode.LOAD, MemId.UOP, begin, dram_off[k],
                        1, n, n, 0, 0, 0, 0, 0)
            begin, end = res_begin[k], res_end[k]
            # kernels[k]: uops, is_alu, fields... (no alias: each costs a reference count)
            if kernels[k, 1]:  # ALU: op, use_imm, imm, reset, then the loops
                _append(rows, st, COMPUTE, R.ALU, kernels[k, 2], kernels[k, 3], kernels[k, 4],
                        kernels[k, 5], begin, end, kernels[k, 6], kernels[k, 7],
                        kernels[k, 8], kernels[k, 9], kernels[k, 10], kernels[k, 11])
            else:  # GEMM: reset, then the loops
                _append(rows, st, COMPUTE, R.GEMM, kernels[k, 2], begin, end, kernels[k, 3],
                        kernels[k, 4], kernels[k, 5], kernels[k, 6], kernels[k, 7],
                        kernels[k, 8], kernels[k, 9], kernels[k, 10], 0)
        else:  # _OP_SYNC
            _dep_push(rows, st, STORE, COMPUTE)
            _dep_push(rows, st, LOAD, COMPUTE)
            _dep_pop(rows, st, STORE, COMPUTE)
            _dep_pop(rows, st, LOAD, COMPUTE)
            _commit(rows, st, COMPUTE)
            _append(rows, st, COMPUTE, R.FINISH, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            # All kernels become non-resident after a synchronize.
            for j in range(st[_CACHE_LEN]):
                res_begin[cache[j]] = -1
            st[_CACHE_LEN] = 0
            st[_SRAM_END] = 0
            st[_CACHE_IDX] = 0
        pc += 1
    return st[_N], uop_total, -1
