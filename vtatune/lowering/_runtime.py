"""TVM's VTA runtime command queue, re-expressed: how API calls become instructions.

Behaviour follows ``vta/runtime/runtime.cc``: pending pops per stage attach to the next
instruction created on that stage (merged into a NOP when a second pop of the same kind
arrives), pushes set a flag on the stream's last instruction when it belongs to the
pushing stage, micro-op kernels are cached in uop SRAM per (site, signature) with a
LOAD UOP on first use and the runtime's simple eviction, and ``synchronize`` ends the
stream with the dependency handshake and FINISH.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.hardware import HardwareConfig
from simulator.isa import AluInsn, AluOp, FinishInsn, GemmInsn, MemId, MemInsn, Opcode, Uop

LOAD, COMPUTE, STORE = 1, 2, 3


@dataclass(frozen=True)
class KernelLoop:
    extent: int
    dst: int
    src: int
    wgt: int = 0


@dataclass(frozen=True)
class Kernel:
    """A micro-op kernel as recorded by the runtime: up to two loops, then the uops."""

    uops: tuple[Uop, ...]
    loops: tuple[KernelLoop, ...] = ()
    reset: bool = False
    alu_op: AluOp | None = None
    use_imm: bool = False
    imm: int = 0


def _stage_of(insn) -> int:
    return int(insn.module)


class CommandQueue:
    """Builds an instruction stream from runtime calls."""

    def __init__(self, hw: HardwareConfig) -> None:
        self.hw = hw
        self.insns: list = []
        self.pending_prev = [False] * 4
        self.pending_next = [False] * 4
        self.uop_area: list[Uop] = []
        # uop cache: key -> (sram_begin, sram_end, dram offset) while resident
        self._resident: dict[tuple, tuple[int, int, int]] = {}
        self._cache: list[tuple] = []  # resident keys in SRAM order
        self._sram_end = 0
        self._cache_idx = 0
        self._dram_offset: dict[tuple, int] = {}

    # --- instruction creation -------------------------------------------------------------
    def _create(self, stage: int) -> dict:
        flags = {"pop_prev": self.pending_prev[stage], "pop_next": self.pending_next[stage]}
        self.pending_prev[stage] = self.pending_next[stage] = False
        return flags

    def _nop(self, stage: int, push_prev=False, push_next=False, pop_prev=False, pop_next=False):
        if stage == STORE:
            opcode, mem = Opcode.STORE, MemId.OUT
        else:
            opcode, mem = Opcode.LOAD, (MemId.INP if stage == LOAD else MemId.UOP)
        self.insns.append(
            MemInsn(opcode, mem, pop_prev=pop_prev, pop_next=pop_next,
                    push_prev=push_prev, push_next=push_next)
        )

    def commit_pending_pop(self, stage: int) -> None:
        if self.pending_prev[stage] or self.pending_next[stage]:
            self._nop(stage, pop_prev=self.pending_prev[stage], pop_next=self.pending_next[stage])
            self.pending_prev[stage] = self.pending_next[stage] = False

    def dep_pop(self, src: int, dst: int) -> None:
        """The pop executes on stage ``dst``."""
        if src < dst:
            if self.pending_prev[dst]:
                self.commit_pending_pop(dst)
            self.pending_prev[dst] = True
        else:
            if self.pending_next[dst]:
                self.commit_pending_pop(dst)
            self.pending_next[dst] = True

    def dep_push(self, src: int, dst: int) -> None:
        """The push executes on stage ``src``."""
        self.commit_pending_pop(src)
        if self.insns:
            last = self.insns[-1]
            if _stage_of(last) == src:
                # The stream is still being built and nothing else holds ``last``: set the
                # flag in place (dataclasses.replace costs more than the rest of the call).
                if src < dst and not last.push_next:
                    object.__setattr__(last, "push_next", True)
                    return
                if src > dst and not last.push_prev:
                    object.__setattr__(last, "push_prev", True)
                    return
        if src < dst:
            self._nop(src, push_next=True)
        else:
            self._nop(src, push_prev=True)

    # --- DMA ------------------------------------------------------------------------------
    def load_2d(self, mem: MemId, sram: int, dram: int, y: int, x: int, stride: int,
                pads: tuple[int, int, int, int] = (0, 0, 0, 0)) -> None:
        stage = LOAD if mem in (MemId.INP, MemId.WGT) else COMPUTE
        flags = self._create(stage)
        y0, y1, x0, x1 = pads
        self.insns.append(MemInsn(Opcode.LOAD, mem, sram, dram, y, x, stride, y0, y1, x0, x1,
                                  **flags))

    def store_2d(self, sram: int, dram: int, y: int, x: int, stride: int) -> None:
        flags = self._create(STORE)
        self.insns.append(MemInsn(Opcode.STORE, MemId.OUT, sram, dram, y, x, stride, **flags))

    # --- micro-op kernels ---------------------------------------------------------------
    def _push_kernel(self, key: tuple, kernel: Kernel) -> tuple[int, int]:
        """Make ``kernel`` resident (emitting its LOAD UOP on a miss); its SRAM range."""
        if key in self._resident:
            begin, end, _ = self._resident[key]
            return begin, end
        n = len(kernel.uops)
        depth = self.hw.uop_depth
        if n > depth:
            raise ValueError(f"micro-op kernel of {n} uops exceeds the uop buffer ({depth})")
        if self._sram_end + n > depth:
            # Evict everything from the start of the buffer (the runtime's simple policy).
            self._cache_idx = 0
            begin, self._sram_end = 0, n
        else:
            begin = self._sram_end
            self._sram_end += n
        evict_begin = self._cache_idx
        while self._cache_idx < len(self._cache):
            k = self._cache[self._cache_idx]
            if self._resident[k][0] >= self._sram_end:
                break
            del self._resident[k]
            self._cache_idx += 1
        if key not in self._dram_offset:
            self._dram_offset[key] = len(self.uop_area)
            self.uop_area.extend(kernel.uops)
        offset = self._dram_offset[key]
        self._resident[key] = (begin, self._sram_end, offset)
        self._cache[evict_begin:self._cache_idx] = [key]
        self._cache_idx = evict_begin + 1
        flags = self._create(COMPUTE)
        self.insns.append(MemInsn(Opcode.LOAD, MemId.UOP, begin, offset, 1, n, n, **flags))
        return begin, self._sram_end

    def push_gemm(self, key: tuple, kernel: Kernel) -> None:
        begin, end = self._push_kernel(key, kernel)
        loops = list(kernel.loops) + [KernelLoop(1, 0, 0, 0)] * (2 - len(kernel.loops))
        flags = self._create(COMPUTE)
        self.insns.append(GemmInsn(
            kernel.reset, begin, end, loops[0].extent, loops[1].extent,
            loops[0].dst, loops[1].dst, loops[0].src, loops[1].src, loops[0].wgt, loops[1].wgt,
            **flags,
        ))

    def push_alu(self, key: tuple, kernel: Kernel) -> None:
        begin, end = self._push_kernel(key, kernel)
        if len(kernel.loops) == 1:
            # The runtime puts a single ALU loop in the inner slot (GEMM uses the outer).
            out, inn = KernelLoop(1, 0, 0), kernel.loops[0]
        else:
            lp = list(kernel.loops) + [KernelLoop(1, 0, 0)] * (2 - len(kernel.loops))
            out, inn = lp[0], lp[1]
        flags = self._create(COMPUTE)
        self.insns.append(AluInsn(
            kernel.alu_op, kernel.use_imm, kernel.imm, kernel.reset, begin, end,
            out.extent, inn.extent, out.dst, inn.dst, out.src, inn.src, **flags,
        ))

    # --- end of stream --------------------------------------------------------------------
    def synchronize(self) -> None:
        self.dep_push(STORE, COMPUTE)
        self.dep_push(LOAD, COMPUTE)
        self.dep_pop(STORE, COMPUTE)
        self.dep_pop(LOAD, COMPUTE)
        self.commit_pending_pop(COMPUTE)
        self.insns.append(FinishInsn())
        # All kernels become non-resident after a synchronize.
        self._resident.clear()
        self._cache.clear()
        self._sram_end = self._cache_idx = 0
