"""Functional simulator: executes a program on numpy SRAM/DRAM with fsim's semantics.

Each module runs its queue in program order; dependency tokens are honoured (load greedily
first, which exposes a missing write-after-read dependency as a wrong result), and a
stream whose pops can never be satisfied raises :class:`DeadlockError` naming the
instruction and FIFO. Each instruction is executed as a whole with numpy.

Example:
    >>> result = run(program, hw)            # doctest: +SKIP
    >>> result.counters.gemm_counter         # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import simulator.rows as R
from simulator.errors import DeadlockError, ProgramError
from simulator.hardware import HardwareConfig
from simulator.isa import (
    AluInsn,
    AluOp,
    FinishInsn,
    GemmInsn,
    Instruction,
    MemId,
    MemInsn,
    Module,
    Opcode,
)
from simulator.jit import njit
from simulator.program import Program, mem_elem_bytes

__all__ = [
    "FIFOS", "FsimCounters", "Machine", "RunResult", "count", "execution_order", "pops_of",
    "pushes_of", "run",
]

#: The token FIFOs: name -> (producer, consumer).
FIFOS = {
    "l2g": (Module.LOAD, Module.COMPUTE),
    "g2l": (Module.COMPUTE, Module.LOAD),
    "g2s": (Module.COMPUTE, Module.STORE),
    "s2g": (Module.STORE, Module.COMPUTE),
}


def pops_of(insn: Instruction) -> tuple[str, ...]:
    """The FIFOs an instruction pops from, given its module."""
    m = insn.module
    out = []
    if insn.pop_prev:
        if m == Module.LOAD:
            raise ProgramError(f"{insn.kind}: the load module has no previous stage to pop")
        out.append("l2g" if m == Module.COMPUTE else "g2s")
    if insn.pop_next:
        if m == Module.STORE:
            raise ProgramError(f"{insn.kind}: the store module has no next stage to pop")
        out.append("g2l" if m == Module.LOAD else "s2g")
    return tuple(out)


def pushes_of(insn: Instruction) -> tuple[str, ...]:
    """The FIFOs an instruction pushes to, given its module."""
    m = insn.module
    out = []
    if insn.push_prev:
        if m == Module.LOAD:
            raise ProgramError(f"{insn.kind}: the load module has no previous stage to push")
        out.append("g2l" if m == Module.COMPUTE else "s2g")
    if insn.push_next:
        if m == Module.STORE:
            raise ProgramError(f"{insn.kind}: the store module has no next stage to push")
        out.append("l2g" if m == Module.LOAD else "g2s")
    return tuple(out)


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


def execution_order(program: Program) -> list[int]:
    """A valid execution order of the instructions (indices), honouring every token.

    Raises DeadlockError when some pop can never be satisfied.
    """
    insns = program.instructions
    if not insns or not isinstance(insns[-1], FinishInsn):
        raise ProgramError("a program must end with FINISH")
    queues: dict[Module, list[int]] = {m: [] for m in Module}
    for i, insn in enumerate(insns):
        queues[insn.module].append(i)
    heads = dict.fromkeys(Module, 0)
    tokens = dict(zip(FIFOS, program.tokens_in, strict=True))
    pops = [pops_of(x) for x in insns]
    pushes = [pushes_of(x) for x in insns]
    order: list[int] = []
    remaining = len(insns)
    while remaining:
        progressed = False
        for m in (Module.LOAD, Module.COMPUTE, Module.STORE):
            q, h = queues[m], heads[m]
            while h < len(q):
                i = q[h]
                if any(tokens[f] == 0 for f in pops[i]):
                    break
                for f in pops[i]:
                    tokens[f] -= 1
                for f in pushes[i]:
                    tokens[f] += 1
                order.append(i)
                h += 1
                progressed = True
            remaining -= h - heads[m]
            heads[m] = h
        if not progressed:
            blocked = [
                (queues[m][heads[m]], m) for m in Module if heads[m] < len(queues[m])
            ]
            i, m = min(blocked)
            fifo = next(f for f in pops[i] if tokens[f] == 0)
            src, dst = FIFOS[fifo]
            raise DeadlockError(
                f"deadlock: instruction #{i} ({insns[i].kind}, {m.name.lower()} module) waits "
                f"on FIFO {fifo} ({src.name.lower()}->{dst.name.lower()}) and no remaining "
                "instruction can push it"
            )
    return order


@dataclass
class Machine:
    """The architectural state: DRAM and the on-chip SRAMs."""

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
        t = program.tensor(name)
        arr = np.ascontiguousarray(value, dtype=t.dtype)
        if arr.shape != t.shape:
            raise ProgramError(f"tensor {name}: expected shape {t.shape}, got {arr.shape}")
        self.dram[t.address : t.address + t.nbytes] = arr.view(np.uint8).reshape(-1)

    def read_tensor(self, program: Program, name: str) -> np.ndarray:
        t = program.tensor(name)
        raw = self.dram[t.address : t.address + t.nbytes]
        return raw.view(t.dtype).reshape(t.shape).copy()

    # --- execution ---------------------------------------------------------------------
    def execute(self, insn: Instruction, index: int) -> None:
        if isinstance(insn, MemInsn):
            if insn.is_nop:
                return
            if insn.opcode == Opcode.LOAD:
                self._load(insn, index)
            else:
                self._store(insn, index)
        elif isinstance(insn, GemmInsn):
            self._gemm(insn, index)
        elif isinstance(insn, AluInsn):
            self._alu(insn, index)

    def _sram(self, mem: MemId) -> tuple[np.ndarray, str]:
        return {
            MemId.INP: (self.inp, "INP"),
            MemId.WGT: (self.wgt, "WGT"),
            MemId.ACC: (self.acc, "ACC"),
            MemId.ACC_8BIT: (self.acc, "ACC"),
            MemId.UOP: (self.uop, "UOP"),
        }[mem]

    def _load(self, insn: MemInsn, index: int) -> None:
        hw = self.hw
        sram, name = self._sram(insn.mem)
        rows = insn.y_pad_0 + insn.y_size + insn.y_pad_1
        cols = insn.x_pad_0 + insn.x_size + insn.x_pad_1
        end = insn.sram_base + rows * cols
        if end > sram.shape[0]:
            raise ProgramError(
                f"instruction #{index} ({insn.kind}): writes {name}[{insn.sram_base}:{end}] "
                f"past the buffer depth {sram.shape[0]}"
            )
        r = np.arange(insn.y_size)[:, None] * insn.x_stride + np.arange(insn.x_size)[None, :]
        src = (insn.dram_base + r).reshape(-1)
        if insn.mem == MemId.UOP:
            if src.size and src.max() >= self.uop_area.shape[0]:
                raise ProgramError(f"instruction #{index} (LOAD UOP): reads past the uop area")
            data = self.uop_area[src]
        else:
            ebytes = mem_elem_bytes(insn.mem, hw)
            if src.size and (src.max() + 1) * ebytes > self.dram.size:
                raise ProgramError(
                    f"instruction #{index} ({insn.kind}): reads DRAM element {src.max()} "
                    f"past the end of DRAM"
                )
            byte_idx = (src[:, None] * ebytes + np.arange(ebytes)[None, :]).reshape(-1)
            raw = self.dram[byte_idx]
            if insn.mem == MemId.ACC:
                data = raw.view(np.int32).reshape((-1, *sram.shape[1:]))
            elif insn.mem == MemId.ACC_8BIT:
                data = raw.view(np.int8).astype(np.int32).reshape((-1, *sram.shape[1:]))
            else:
                data = raw.view(np.int8).reshape((-1, *sram.shape[1:]))
        block = np.zeros((rows, cols, *sram.shape[1:]), dtype=sram.dtype)
        block[
            insn.y_pad_0 : insn.y_pad_0 + insn.y_size, insn.x_pad_0 : insn.x_pad_0 + insn.x_size
        ] = data.reshape((insn.y_size, insn.x_size, *sram.shape[1:]))
        sram[insn.sram_base : end] = block.reshape((rows * cols, *sram.shape[1:]))

    def _store(self, insn: MemInsn, index: int) -> None:
        hw = self.hw
        if insn.mem != MemId.OUT:
            raise ProgramError(f"instruction #{index}: STORE supports memory OUT only")
        n = insn.y_size * insn.x_size
        end = insn.sram_base + n
        if end > self.acc.shape[0]:
            raise ProgramError(
                f"instruction #{index} (STORE): reads ACC[{insn.sram_base}:{end}] past the "
                f"buffer depth {self.acc.shape[0]}"
            )
        # fsim narrows each int32 lane by truncation (wraps, no saturation).
        data = self.acc[insn.sram_base : end].astype(np.int8).view(np.uint8)
        ebytes = hw.out_elem_bytes
        r = np.arange(insn.y_size)[:, None] * insn.x_stride + np.arange(insn.x_size)[None, :]
        dst = (insn.dram_base + r).reshape(-1)
        if dst.size and (dst.max() + 1) * ebytes > self.dram.size:
            raise ProgramError(f"instruction #{index} (STORE): writes past the end of DRAM")
        byte_idx = (dst[:, None] * ebytes + np.arange(ebytes)[None, :]).reshape(-1)
        self.dram[byte_idx] = data.reshape(-1)

    def _indices(self, insn: GemmInsn | AluInsn, index: int) -> tuple[np.ndarray, ...]:
        if insn.uop_end > self.uop.shape[0] or insn.uop_bgn > insn.uop_end:
            raise ProgramError(
                f"instruction #{index} ({insn.kind}): uop range [{insn.uop_bgn}, "
                f"{insn.uop_end}) outside the uop buffer"
            )
        u = self.uop[insn.uop_bgn : insn.uop_end]
        i = np.arange(insn.iter_out)[:, None, None]
        j = np.arange(insn.iter_in)[None, :, None]
        dst = (u[None, None, :, 0] + i * insn.dst_factor_out + j * insn.dst_factor_in).reshape(-1)
        src = (u[None, None, :, 1] + i * insn.src_factor_out + j * insn.src_factor_in).reshape(-1)
        wgt = None
        if isinstance(insn, GemmInsn):
            w = u[None, None, :, 2] + i * insn.wgt_factor_out + j * insn.wgt_factor_in
            wgt = w.reshape(-1)
        return dst, src, wgt

    def _check(self, idx: np.ndarray, depth: int, what: str, insn, index: int) -> None:
        if idx.size and idx.max() >= depth:
            raise ProgramError(
                f"instruction #{index} ({insn.kind}): {what} index {int(idx.max())} outside "
                f"the buffer (depth {depth})"
            )

    def _gemm(self, insn: GemmInsn, index: int) -> None:
        dst, src, wgt = self._indices(insn, index)
        self._check(dst, self.acc.shape[0], "ACC", insn, index)
        if insn.reset:
            self.acc[dst] = 0
            return
        self._check(src, self.inp.shape[0], "INP", insn, index)
        self._check(wgt, self.wgt.shape[0], "WGT", insn, index)
        prod = np.einsum(
            "nbk,nok->nbo", self.inp[src].astype(np.int32), self.wgt[wgt].astype(np.int32)
        )
        # int32 addition wraps, and the order of additions does not change a wrapped sum.
        np.add.at(self.acc, dst, prod)

    def _alu(self, insn: AluInsn, index: int) -> None:
        dst, src, _ = self._indices(insn, index)
        self._check(dst, self.acc.shape[0], "ACC dst", insn, index)
        if not insn.use_imm:
            self._check(src, self.acc.shape[0], "ACC src", insn, index)
        if _vectorizable(dst, None if insn.use_imm else src):
            a = self.acc[dst].astype(np.int64)
            b = np.int64(insn.imm) if insn.use_imm else self.acc[src].astype(np.int64)
            self.acc[dst] = _alu_apply(insn.alu_op, a, b)
            return
        # A destination written twice, or read after an earlier write: run in order.
        for k in range(dst.size):
            a = self.acc[dst[k]].astype(np.int64)
            b = np.int64(insn.imm) if insn.use_imm else self.acc[src[k]].astype(np.int64)
            self.acc[dst[k]] = _alu_apply(insn.alu_op, a, b)


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
        b = np.broadcast_to(b, a.shape)
        right = np.right_shift(a, np.clip(b, 0, 63))
        left = np.left_shift(a, np.clip(-b, 0, 63))
        r = np.where(b >= 0, right, left)
    else:  # pragma: no cover - AluOp is exhaustive
        raise ProgramError(f"unknown ALU op {op}")
    return (r & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


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
    machine = Machine.for_program(program, hw)
    for name, value in (inputs or {}).items():
        machine.write_tensor(program, name, value)
    order = execution_order(program)
    for i in order:
        machine.execute(program.instructions[i], i)
    return RunResult(machine, count(program, hw), order)
