"""TVM's VTA runtime command queue, re-expressed: how API calls become instructions.

Behaviour follows ``vta/runtime/runtime.cc``: pending pops per stage attach to the next
instruction created on that stage (merged into a NOP when a second pop of the same kind
arrives), pushes set a flag on the stream's last instruction when it belongs to the
pushing stage, micro-op kernels are cached in uop SRAM per (site, signature) with a
LOAD UOP on first use and the runtime's simple eviction, and ``synchronize`` ends the
stream with the dependency handshake and FINISH.

Speed: the queue keeps each instruction as a mutable row ``[maker, *fields]`` (the four
dependency flags last, so a push sets ``row[-1]`` / ``row[-2]`` in place) and builds the
frozen instructions once, in :meth:`CommandQueue.instructions`, with makers that fill the
slots directly (a frozen dataclass' ``__init__`` costs ~3 µs through ``object.__setattr__``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from simulator.hardware import HardwareConfig
from simulator.isa import AluInsn, AluOp, FinishInsn, GemmInsn, MemId, MemInsn, Opcode, Uop

LOAD, COMPUTE, STORE = 1, 2, 3


def fast_maker(cls):
    """``make(_, *values)`` -> ``cls(*values)`` for a frozen slots dataclass without
    ``__post_init__``, filling the slots through their descriptors (same object, ~3x
    cheaper than the generated ``__init__``). Every field must be given, in order; the
    first argument is ignored (a row's maker)."""
    names = [f.name for f in fields(cls)]
    if not hasattr(cls, "__slots__") or hasattr(cls, "__post_init__"):  # pragma: no cover
        def make(_, *values):
            return cls(*values)
        return make
    args = [f"a{i}" for i in range(len(names))]
    setters = {f"s{i}": getattr(cls, n).__set__ for i, n in enumerate(names)}
    src = (f"def make(_, {', '.join(args)}, new=new, cls=cls, "
           + ", ".join(f"{s}={s}" for s in setters) + "):\n    o = new(cls)\n"
           + "".join(f"    s{i}(o, a{i})\n" for i in range(len(names))) + "    return o\n")
    ns: dict = {}
    exec(src, {"new": object.__new__, "cls": cls, **setters}, ns)  # noqa: S102
    return ns["make"]


make_mem = fast_maker(MemInsn)
make_gemm = fast_maker(GemmInsn)
make_alu = fast_maker(AluInsn)
make_finish = fast_maker(FinishInsn)
_make_uop = fast_maker(Uop)


def make_uop(dst: int, src: int = 0, wgt: int = 0) -> Uop:
    return _make_uop(None, dst, src, wgt)


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


def _gemm_fields(kernel: Kernel) -> tuple:
    """(reset, iter_out, iter_in, dst_o, dst_i, src_o, src_i, wgt_o, wgt_i) of a GEMM."""
    loops = list(kernel.loops) + [KernelLoop(1, 0, 0, 0)] * (2 - len(kernel.loops))
    return (kernel.reset, loops[0].extent, loops[1].extent, loops[0].dst, loops[1].dst,
            loops[0].src, loops[1].src, loops[0].wgt, loops[1].wgt)


def _alu_fields(kernel: Kernel) -> tuple:
    """(alu_op, use_imm, imm, reset), (iter_out, iter_in, dst_o, dst_i, src_o, src_i)."""
    if len(kernel.loops) == 1:
        # The runtime puts a single ALU loop in the inner slot (GEMM uses the outer).
        out, inn = KernelLoop(1, 0, 0), kernel.loops[0]
    else:
        lp = list(kernel.loops) + [KernelLoop(1, 0, 0)] * (2 - len(kernel.loops))
        out, inn = lp[0], lp[1]
    return ((kernel.alu_op, kernel.use_imm, kernel.imm, kernel.reset),
            (out.extent, inn.extent, out.dst, inn.dst, out.src, inn.src))


_LOAD, _STORE = Opcode.LOAD, Opcode.STORE
_UOP, _OUT = MemId.UOP, MemId.OUT
_NOP_MEM = {LOAD: (_LOAD, MemId.INP), COMPUTE: (_LOAD, _UOP), STORE: (_STORE, _OUT)}
_STAGE_OF_MEM = {MemId.INP: LOAD, MemId.WGT: LOAD}


class CommandQueue:
    """Builds an instruction stream from runtime calls.

    ``rows`` holds the stream as ``[maker, *fields]`` lists (``maker(*row)`` builds the
    instruction); :attr:`insns` / :meth:`instructions` build the instructions."""

    def __init__(self, hw: HardwareConfig) -> None:
        self.hw = hw
        self.rows: list[list] = []
        self._last_stage = 0  # stage of rows[-1] (0: empty stream)
        self.pending_prev = [False] * 4
        self.pending_next = [False] * 4
        self.uop_area: list[Uop] = []
        # uop cache: key -> (sram_begin, sram_end, dram offset) while resident
        self._resident: dict[tuple, tuple[int, int, int]] = {}
        self._cache: list[tuple] = []  # resident keys in SRAM order
        self._sram_end = 0
        self._cache_idx = 0
        self._dram_offset: dict[tuple, int] = {}
        self._fields: dict[tuple, tuple] = {}  # kernel key -> (kernel, *its fields)

    # --- the stream -----------------------------------------------------------------------
    def instructions(self) -> tuple:
        """The stream as (frozen) instructions. Equal rows share one instruction object
        (most of a stream repeats: GEMMs, ALU ops, reloaded tiles), which is safe because
        instructions are immutable values once built."""
        built: dict[tuple, object] = {}
        get = built.get
        out = []
        append = out.append
        for row in self.rows:
            key = tuple(row)
            insn = get(key)
            if insn is None:
                insn = built[key] = row[0](*row)
            append(insn)
        return tuple(out)

    @property
    def insns(self) -> list:
        return list(self.instructions())

    # --- instruction creation -------------------------------------------------------------
    def _nop(self, stage: int, push_prev=False, push_next=False, pop_prev=False, pop_next=False):
        opcode, mem = _NOP_MEM[stage]
        self.rows.append([make_mem, opcode, mem, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                          pop_prev, pop_next, push_prev, push_next])
        self._last_stage = stage

    def commit_pending_pop(self, stage: int) -> None:
        pp, pn = self.pending_prev[stage], self.pending_next[stage]
        if pp or pn:
            self._nop(stage, pop_prev=pp, pop_next=pn)
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
        if self._last_stage == src:
            last = self.rows[-1]
            # The row is still mutable: set the flag in place.
            if src < dst and not last[-1]:
                last[-1] = True
                return
            if src > dst and not last[-2]:
                last[-2] = True
                return
        if src < dst:
            self._nop(src, push_next=True)
        else:
            self._nop(src, push_prev=True)

    # --- DMA ------------------------------------------------------------------------------
    def load_2d(self, mem: MemId, sram: int, dram: int, y: int, x: int, stride: int,
                pads: tuple[int, int, int, int] = (0, 0, 0, 0)) -> None:
        stage = _STAGE_OF_MEM.get(mem, COMPUTE)
        pp, pn = self.pending_prev[stage], self.pending_next[stage]
        if pp or pn:
            self.pending_prev[stage] = self.pending_next[stage] = False
        y0, y1, x0, x1 = pads
        self.rows.append([make_mem, _LOAD, mem, sram, dram, y, x, stride, y0, y1, x0, x1,
                          pp, pn, False, False])
        self._last_stage = stage

    def load_inp(self, mem: MemId, sram: int, dram: int, y: int, x: int, stride: int,
                 y0: int, y1: int, x0: int, x1: int) -> None:
        """:meth:`load_2d` of a LOAD-stage memory (INP/WGT), pads as arguments."""
        pp, pn = self.pending_prev[LOAD], self.pending_next[LOAD]
        if pp or pn:
            self.pending_prev[LOAD] = self.pending_next[LOAD] = False
        self.rows.append([make_mem, _LOAD, mem, sram, dram, y, x, stride, y0, y1, x0, x1,
                          pp, pn, False, False])
        self._last_stage = LOAD

    def store_2d(self, sram: int, dram: int, y: int, x: int, stride: int) -> None:
        pp, pn = self.pending_prev[STORE], self.pending_next[STORE]
        if pp or pn:
            self.pending_prev[STORE] = self.pending_next[STORE] = False
        self.rows.append([make_mem, _STORE, _OUT, sram, dram, y, x, stride, 0, 0, 0, 0,
                          pp, pn, False, False])
        self._last_stage = STORE

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
        self.load_2d(_UOP, begin, offset, 1, n, n)
        return begin, self._sram_end

    def _use_kernel(self, key: tuple, kernel: Kernel, fields_of) -> tuple[int, int, tuple]:
        """(uop begin, uop end, cached instruction fields) of a kernel made resident, and
        the compute stage's pending pops taken for the instruction about to be built."""
        res = self._resident.get(key)
        if res is None:
            begin, end = self._push_kernel(key, kernel)
        else:
            begin, end = res[0], res[1]
        f = self._fields.get(key)
        if f is None or f[0] is not kernel:
            f = self._fields[key] = (kernel, *fields_of(kernel))
        return begin, end, f

    def _take_compute_pops(self) -> tuple[bool, bool]:
        pp, pn = self.pending_prev[COMPUTE], self.pending_next[COMPUTE]
        if pp or pn:
            self.pending_prev[COMPUTE] = self.pending_next[COMPUTE] = False
        self._last_stage = COMPUTE
        return pp, pn

    def push_gemm(self, key: tuple, kernel: Kernel) -> None:
        begin, end, f = self._use_kernel(key, kernel, _gemm_fields)
        pp, pn = self._take_compute_pops()
        self.rows.append([make_gemm, f[1], begin, end, f[2], f[3], f[4], f[5], f[6], f[7],
                          f[8], f[9], pp, pn, False, False])

    def push_alu(self, key: tuple, kernel: Kernel) -> None:
        begin, end, f = self._use_kernel(key, kernel, _alu_fields)
        _, (op, use_imm, imm, reset), lp = f
        pp, pn = self._take_compute_pops()
        self.rows.append([make_alu, op, use_imm, imm, reset, begin, end, *lp,
                          pp, pn, False, False])

    # --- end of stream --------------------------------------------------------------------
    def synchronize(self) -> None:
        self.dep_push(STORE, COMPUTE)
        self.dep_push(LOAD, COMPUTE)
        self.dep_pop(STORE, COMPUTE)
        self.dep_pop(LOAD, COMPUTE)
        self.commit_pending_pop(COMPUTE)
        self.rows.append([make_finish, False, False, False, False])
        self._last_stage = COMPUTE
        # All kernels become non-resident after a synchronize.
        self._resident.clear()
        self._cache.clear()
        self._sram_end = self._cache_idx = 0
