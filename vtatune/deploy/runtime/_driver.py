"""A :class:`Device` over VTA's C driver API: any ``libvta`` shared library, through ctypes.

``vta/include/vta/driver.h`` (apache/tvm-vta) is what a board's ``libvta.so`` exports and
what TVM v0.14's functional simulator ``libvta_fsim.so`` and its RTL simulator's driver
``libvta_tsim.so`` export too: ``VTADeviceAlloc``,
``VTAMemAlloc`` / ``VTAMemGetPhyAddr`` for physically contiguous buffers,
``VTAMemCopyFromHost`` / ``VTAMemCopyToHost``, ``VTAFlushCache`` / ``VTAInvalidateCache``
and ``VTADeviceRun(device, insn_phy_addr, insn_count, wait_cycles)``. :class:`DriverDevice`
drives it the way TVM's VTA runtime (``vta/runtime/runtime.cc``) does:

- every buffer is ``VTAMemAlloc(bytes, cached=1)``; an upload is a copy then a cache
  flush, a download a cache invalidation then a copy (``VTABufferCopy``); a program's
  output buffer is invalidated after the run (the write barrier);
- a run copies the program's micro-ops and then its instructions into device memory,
  flushes both, and calls ``VTADeviceRun`` with TVM's wait budget (``1 << 31`` cycles);
- DRAM addresses in instructions count elements of the instruction's memory type, from
  physical address 0 (TVM: ``dram_base = phy_addr / elem_bytes + offset``). vtatune's
  programs address their tensors by byte offsets in one DRAM image
  (:class:`simulator.program.Program`) and their micro-ops by index in their own area; each
  LOAD and STORE is relocated to the buffer bound to the tensor it reads or writes, each
  micro-op LOAD to where the micro-ops were copied.

Instructions and micro-ops are encoded with :mod:`simulator.isa`'s layout, which is
``hw_spec.h``'s when the ACC and INP buffers have the same depth (every stock
configuration); a library is used only for programs of the hardware it was built for (its
``vta_config.json``, kept next to it).

How a library is loaded (TVM's runtime first, in a linker namespace of their own; tsim
started with its verilated hardware library; everything tried first in a child process) is
:mod:`._libvta`'s.

fsim's profiler (``vta.simulator.profiler_status``, reached through the runtime's C API)
counts the bytes each DMA moved and the GEMM and ALU micro-op iterations; tsim's
(``vta.tsim.profiler_status``) the RTL's cycles: :attr:`DriverDevice.counters` holds them
for the last run. On tsim ``run`` returns the RTL's cycles; the driver API itself has no
cycle count, so on fsim or a board ``run`` returns what the ``cycles`` function given to the
device says (the timing model's estimate, say), else None.

This module imports numpy, ctypes and vtatune's instruction set only (no lowering, tuning,
numba or TVM): it is what a board runs.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import simulator.rows as R
from simulator.chisel import RTL_INSTRUCTIONS
from simulator.errors import ConfigError
from simulator.hardware import HardwareConfig
from simulator.isa import (
    AluInsn,
    FinishInsn,
    GemmInsn,
    MemId,
    MemInsn,
    Opcode,
    describe,
    encode_insn,
    insn_layout,
    uop_widths,
)
from simulator.program import Program, mem_elem_bytes
from simulator.rows import rows_of
from vtatune.deploy.runtime._device import Buffer, Device, bound
from vtatune.deploy.runtime._errors import DeployError
from vtatune.deploy.runtime._libvta import (
    CACHED,
    RUNTIME,
    TSIM,
    WAIT_CYCLES,
    LibraryError,
    Loaded,
    guard_exit,
    load,
    probe,
)

__all__ = ["DriverDevice", "program_words"]

_CONFIG = "vta_config.json"


# --- the binary stream --------------------------------------------------------------------

_FLAG_BITS = {"pop_prev": R.POP_PREV, "pop_next": R.POP_NEXT, "push_prev": R.PUSH_PREV,
              "push_next": R.PUSH_NEXT}
#: Row class -> (instruction class, the opcode of its layout, or None: the row's own).
_ROW_CLASSES = {R.MEM: (MemInsn, None), R.GEMM: (GemmInsn, Opcode.GEMM),
                R.ALU: (AluInsn, Opcode.ALU), R.FINISH: (None, Opcode.FINISH)}


def _check_layout(hw: HardwareConfig) -> None:
    """simulator.isa gives the ALU's src factors and the micro-op's src index the INP
    buffer's width; hw_spec.h the ACC buffer's (and the larger of the two): the same bits
    when both buffers have the same depth."""
    acc, inp, _ = uop_widths(hw)
    if acc != inp:
        raise DeployError(f"{hw.bitstream}: ACC and INP buffer depths differ ({acc} vs {inp} "
                          "index bits); the driver's instruction layout (hw_spec.h) is not "
                          "vtatune's there")


def _encode_rows(rows: np.ndarray, hw: HardwareConfig) -> np.ndarray:
    """The 128-bit words of an instruction table as (n, 2) little-endian uint64 units."""
    words = np.zeros((len(rows), 2), np.uint64)
    flags = rows[:, R.FLAGS]
    for code, (cls, opcode) in _ROW_CLASSES.items():
        sel = np.flatnonzero(rows[:, 0] == code)
        if not len(sel):
            continue
        layout = insn_layout(hw, opcode if opcode is not None else Opcode.LOAD)
        for name, pos, width in layout:
            if name == "opcode":
                value = (rows[sel, R.MEM_OPCODE] if opcode is None
                         else np.full(len(sel), int(opcode), np.int64))
            elif name in _FLAG_BITS:
                value = (flags[sel] & _FLAG_BITS[name]) != 0
            elif cls is None:
                continue  # FINISH: flags only
            else:
                value = rows[sel, R.column(cls, name)]
            value = np.asarray(value, np.int64)
            if name == "imm":  # 16-bit two's complement
                bad = (value < -(1 << 15)) | (value >= (1 << 15))
                value = value & 0xFFFF
            else:
                bad = (value < 0) | (value >= (1 << width))
            if bad.any():
                raise DeployError(f"instruction {int(sel[np.argmax(bad)])}: {name}="
                                  f"{int(value[np.argmax(bad)])} does not fit its {width} bits")
            unit, shift = divmod(pos, 64)
            words[sel, unit] |= value.astype(np.uint64) << np.uint64(shift)
    return words


def _encode_uops(table: np.ndarray, hw: HardwareConfig) -> np.ndarray:
    """The 32-bit micro-ops of a (dst, src, wgt) table."""
    dst_w, src_w, wgt_w = uop_widths(hw)
    for k, (name, width) in enumerate((("dst", dst_w), ("src", src_w), ("wgt", wgt_w))):
        bad = (table[:, k] < 0) | (table[:, k] >= (1 << width))
        if bad.any():
            raise DeployError(f"micro-op {int(np.argmax(bad))}: {name}="
                              f"{int(table[np.argmax(bad), k])} does not fit its {width} bits")
    return (table[:, 0] | table[:, 1] << dst_w | table[:, 2] << (dst_w + src_w)).astype(np.uint32)


def program_words(program: Program, hw: HardwareConfig) -> tuple[np.ndarray, np.ndarray]:
    """The program as VTA reads it, with its DRAM addresses as vtatune lays them out:
    instructions as an (n, 2) array of little-endian uint64 units (the 16 bytes of each:
    :func:`simulator.isa.encode_insn`'s), micro-ops as uint32 words. Raises DeployError
    naming the field that does not fit, or when ``hw``'s layout is not the driver's."""
    _check_layout(hw)
    return _encode_rows(program.rows, hw), _encode_uops(program.uop_table, hw)


@dataclass(frozen=True)
class _Dma:
    """A program's LOADs and STOREs, located once: which rows, their element sizes, their
    byte offsets in the program's DRAM image, and the tensor each one addresses."""

    rows: np.ndarray  # row indices of the data DMAs
    elem_bytes: np.ndarray
    offsets: np.ndarray  # byte offset of each DMA's first element in its tensor
    tensor: np.ndarray  # index into program.tensors
    uop_rows: np.ndarray  # row indices of the micro-op loads


def _locate(program: Program, hw: HardwareConfig) -> _Dma:
    rows = program.rows
    mem = (rows[:, 0] == R.MEM) & (rows[:, R.MEM_X] > 0)  # x_size 0: a NOP, never read
    kinds = rows[:, R.MEM_MEM]
    uop_rows = np.flatnonzero(mem & (kinds == MemId.UOP))
    sel = np.flatnonzero(mem & (kinds != MemId.UOP))
    sizes = {int(m): mem_elem_bytes(MemId(int(m)), hw) for m in np.unique(kinds[sel])}
    eb = np.array([sizes[int(m)] for m in kinds[sel]], np.int64)
    first = rows[sel, R.MEM_DRAM] * eb
    last = first + ((rows[sel, R.MEM_Y] - 1) * rows[sel, R.MEM_STRIDE] + rows[sel, R.MEM_X]) * eb
    starts = np.array([t.address for t in program.tensors], np.int64)
    ends = starts + np.array([t.nbytes for t in program.tensors], np.int64)
    order = np.argsort(starts)
    k = order[np.clip(np.searchsorted(starts[order], first, "right") - 1, 0, None)]
    outside = (first < starts[k]) | (last > ends[k])
    if outside.any():
        i = int(np.argmax(outside))
        raise DeployError(f"instruction {int(sel[i])} moves DRAM bytes [{int(first[i])}, "
                          f"{int(last[i])}), in no tensor of the program")
    return _Dma(sel, eb, first - starts[k], k, uop_rows)


def _rtl_unknown(program: Program) -> int | None:
    """The first instruction VTA's RTL does not dispatch (its fetch stage stops the
    simulation and the process on one: tsim's Verilog ``$stop``), else None."""
    rows = program.rows
    op = np.where(rows[:, 0] == R.MEM, rows[:, R.MEM_OPCODE],
                  np.where(rows[:, 0] == R.ALU, int(Opcode.ALU),
                           np.where(rows[:, 0] == R.GEMM, int(Opcode.GEMM),
                                    int(Opcode.FINISH))))
    sub = np.where((rows[:, 0] == R.MEM) & (op == Opcode.LOAD), rows[:, R.MEM_MEM],
                   np.where(rows[:, 0] == R.ALU, rows[:, R.column(AluInsn, "alu_op")], -1))
    known = np.zeros(len(rows), bool)
    for code, s in RTL_INSTRUCTIONS:
        known |= (op == code) & ((sub == s) if s is not None else True)
    bad = np.flatnonzero(~known)
    return int(bad[0]) if len(bad) else None


# --- dependency tokens ---------------------------------------------------------------------
# The four token FIFOs between VTA's modules keep their tokens from one VTADeviceRun to the
# next (fsim's TlppVerify and a board's hardware queues alike): a stream that ends with a
# push nobody popped leaves a token, which the next stream's first pop of that FIFO takes.
# A program states what it starts from (Program.tokens_in, in simulator.functional.FIFOS'
# order: l2g, g2l, g2s, s2g); the device knows what the stream before left, and when the
# two differ it puts NOPs in front that pop the surplus or push the lack (a NOP moves no
# data and counts nothing in fsim's profiler).

#: Per FIFO: the NOP that pops one token of it, the NOP that pushes one.
_NOP_LOAD = {"opcode": Opcode.LOAD, "mem": MemId.INP}  # the load module's NOP
_NOP_COMPUTE = {"opcode": Opcode.LOAD, "mem": MemId.UOP}  # the compute module's (TVM's)
_NOP_STORE = {"opcode": Opcode.STORE, "mem": MemId.OUT}
_TOKEN_NOPS = (
    (MemInsn(**_NOP_COMPUTE, pop_prev=True), MemInsn(**_NOP_LOAD, push_next=True)),  # l2g
    (MemInsn(**_NOP_LOAD, pop_next=True), MemInsn(**_NOP_COMPUTE, push_prev=True)),  # g2l
    (MemInsn(**_NOP_STORE, pop_prev=True), MemInsn(**_NOP_COMPUTE, push_next=True)),  # g2s
    (MemInsn(**_NOP_COMPUTE, pop_next=True), MemInsn(**_NOP_STORE, push_prev=True)),  # s2g
)


def _token_balance(rows: np.ndarray) -> np.ndarray:
    """Tokens each FIFO gains over the stream (pushes minus pops), l2g, g2l, g2s, s2g. The
    module of an instruction is fsim's: STOREs the store module's, LOADs of INP and WGT the
    load module's, everything else the compute module's."""
    is_mem = rows[:, 0] == R.MEM
    store = is_mem & (rows[:, R.MEM_OPCODE] == Opcode.STORE)
    load = is_mem & (rows[:, R.MEM_OPCODE] == Opcode.LOAD) & np.isin(
        rows[:, R.MEM_MEM], (MemId.INP, MemId.WGT))
    compute = ~store & ~load
    flags = rows[:, R.FLAGS]

    def n(module: np.ndarray, bit: int) -> int:
        return int(np.count_nonzero(module & ((flags & bit) != 0)))

    return np.array([
        n(load, R.PUSH_NEXT) - n(compute, R.POP_PREV),  # l2g
        n(compute, R.PUSH_PREV) - n(load, R.POP_NEXT),  # g2l
        n(compute, R.PUSH_NEXT) - n(store, R.POP_PREV),  # g2s
        n(store, R.PUSH_PREV) - n(compute, R.POP_NEXT),  # s2g
    ], np.int64)


def _token_prologue(held: tuple[int, ...], wanted: tuple[int, ...]) -> np.ndarray:
    """The NOP rows that turn the FIFOs' ``held`` tokens into the program's ``wanted``."""
    insns = []
    for (pop, push), h, w in zip(_TOKEN_NOPS, held, wanted, strict=True):
        insns += [pop] * max(h - w, 0) + [push] * max(w - h, 0)
    return rows_of(insns)


# --- the library ----------------------------------------------------------------------------

#: Libraries loaded, by their resolved paths (driver, runtime, hardware): each load takes a
#: linker namespace (glibc has 16), and a library's state (fsim's DRAM, its FIFOs, tsim's
#: simulation) is per load, so devices on one library share it.
_LOADED: dict[tuple[Path, Path | None, Path | None], Loaded] = {}


def _loaded(driver: Path, runtime: Path | None, hardware: Path | None,
            hw: HardwareConfig) -> Loaded:
    """The library, probed in a child process, then loaded here (once per process); one
    tsim simulation per process."""
    key = (driver.resolve(), runtime and runtime.resolve(), hardware and hardware.resolve())
    hit = _LOADED.get(key)
    if hit is not None:
        return hit
    try:
        report = probe(driver, runtime, hardware, encode_insn(FinishInsn(), hw))
        running = next((v for v in _LOADED.values() if v.kind == TSIM), None)
        if report["kind"] == TSIM and running is not None:
            if running.hardware is not None and (running.path.resolve(), running.hardware.resolve(
            )) == (key[0], Path(str(report["hardware"])).resolve()):
                _LOADED[key] = running  # the same simulation, named another way
                return running
            raise DeployError(f"{driver.name}: one tsim simulation per process, and "
                              f"{running.hardware} is running in this one")
        loaded = load(driver, runtime, hardware)
    except LibraryError as exc:
        raise DeployError(str(exc)) from None
    if loaded.kind == TSIM:
        guard_exit()
    _LOADED[key] = loaded
    return loaded


@dataclass(eq=False)
class _Prepared:
    """What a program's runs share: its DMAs located, its instruction table (relocated in
    place by each run), its micro-op words, the tokens it adds to each FIFO."""

    program: Program
    dma: _Dma
    rows: np.ndarray
    uop_words: np.ndarray
    token_balance: np.ndarray


@dataclass(eq=False)
class _Memory:
    """A region of device memory: its virtual address (the host's handle on it), its
    physical address (what VTA reads) and its size. Freed when the last buffer on it goes."""

    virt: int
    phys: int
    nbytes: int


def _library_config(library: Path, config: Path | None, hardware: Path | None) -> HardwareConfig:
    """The hardware the library runs: ``config``, else the ``vta_config.json`` next to tsim's
    hardware library (the RTL is the hardware), else the one next to the library."""
    near = [p.with_name(_CONFIG) for p in (hardware, library) if p is not None]
    path = config if config is not None else next((p for p in near if p.is_file()), near[-1])
    if not path.is_file():
        raise DeployError(f"no {_CONFIG} next to {library}: give the hardware the library was "
                          "built for (copy the vta_config.json of its build)")
    try:
        return HardwareConfig.from_json(path)
    except ConfigError as exc:
        raise DeployError(f"{path}: {exc}") from None


class DriverDevice(Device):
    """VTA behind its C driver API: ``library`` is a ``libvta`` shared library (a board's
    ``libvta.so``, TVM's ``libvta_fsim.so`` or ``libvta_tsim.so``), ``hw`` the configuration
    programs are lowered for; it must be the library's (its ``vta_config.json``: by default
    the one next to tsim's hardware library, else next to the library; the board facts,
    such as the target's name, may differ).

    ``runtime``: TVM's runtime library the VTA library resolves TVM's symbols against (by
    default ``libtvm_runtime.so`` next to it, when there is one). ``hardware``: tsim's
    verilated RTL (by default ``libvta_hw.so`` next to the library); tsim is started with
    it as TVM starts it, and :meth:`run` returns the RTL's own cycle count. ``cycles``: what
    :meth:`run` returns for a program on a library that counts no cycles (fsim, a board's),
    e.g. :meth:`SimulatedDevice.cycles`; None when not given (a region then reports the
    timing model's cycles it recorded when the model was built).

    Before it is loaded here, the library is loaded and run (one FINISH instruction) in a
    child process: one that would crash this process is refused in one line.

    Example (with the library built by ``scripts/tvm014/build_libvta_fsim.sh``)::

        dev = DriverDevice("/work/build/tvm014/build/libvta_fsim.so", DEFAULT)
        dev.run(program, {"data": dev.upload(x), "weight": dev.upload(w), "output": out})
        dev.counters  # {'inp_load_nbytes': ..., 'gemm_counter': ..., ...}
    """

    def __init__(self, library: str | os.PathLike[str], hw: HardwareConfig, *,
                 config: str | os.PathLike[str] | None = None,
                 runtime: str | os.PathLike[str] | None = None,
                 hardware: str | os.PathLike[str] | None = None,
                 cycles: Callable[[Program], int] | None = None) -> None:
        path = Path(library)
        if not path.is_file():
            raise DeployError(f"libvta: no library at {path}")
        hw_lib = Path(hardware) if hardware is not None else None
        if hw_lib is not None and not hw_lib.is_file():
            raise DeployError(f"libvta: no hardware library at {hw_lib}")
        built_for = _library_config(path, None if config is None else Path(config), hw_lib)
        if built_for.bitstream != hw.bitstream:
            raise DeployError(f"{(hw_lib or path).name} was built for {built_for.bitstream}, "
                              f"the programs are for {hw.bitstream}")
        rt = Path(runtime) if runtime is not None else path.with_name(RUNTIME)
        if runtime is not None and not rt.is_file():
            raise DeployError(f"no TVM runtime library at {rt}")
        self._loaded = _loaded(path, rt if rt.is_file() else None, hw_lib, hw)
        if self._loaded.kind != TSIM:
            # hw_spec.h's layout, which fsim and a board's driver decode with; tsim's RTL
            # decodes with its own (a design's decoder is built from vtatune's layout)
            _check_layout(hw)
        lib = self._lib = self._loaded.driver
        self.hw = hw
        tsim = self._loaded.kind == TSIM
        self.name = f"VTA's RTL (tsim {path}, {self._loaded.hardware})" if tsim else \
            f"VTA driver {path}"
        #: Where :meth:`run`'s cycles come from: the RTL's own counter on tsim.
        self.cycle_counter = "RTL" if tsim else None
        self._cycles = cycles
        handle = lib.VTADeviceAlloc()
        if not handle:
            raise DeployError(f"{path.name}: VTADeviceAlloc failed")
        self._handle = handle
        weakref.finalize(self, lib.VTADeviceFree, handle).atexit = False
        self._staging: dict[str, _Memory] = {}  # "insn", "uop": reused, grown on demand
        self._programs: dict[int, _Prepared] = {}  # by id, as SimulatedDevice's cycles
        #: The simulator's profiler counters of the last run (fsim: bytes moved, micro-op
        #: iterations; tsim: the RTL's ``cycle_count``); None for a board's driver.
        self.counters: dict[str, int] | None = None
        #: Runs whose program started from other tokens than the stream before left.
        self.token_adjustments = 0

    @property
    def kind(self) -> str:
        """``fsim``, ``tsim`` or ``driver`` (a board's): what the library registers."""
        return self._loaded.kind

    @property
    def isolated(self) -> bool:
        """Whether the library lives in a linker namespace of its own (else: the process's,
        where a TVM runtime of another release may clash with it)."""
        return self._loaded.isolated

    # --- memory ---------------------------------------------------------------------------

    def _mem_alloc(self, nbytes: int) -> _Memory:
        virt = self._lib.VTAMemAlloc(max(nbytes, 1), CACHED)
        if not virt:
            raise DeployError(f"VTAMemAlloc({nbytes}) failed: device memory exhausted")
        memory = _Memory(virt, int(self._lib.VTAMemGetPhyAddr(virt)), nbytes)
        weakref.finalize(memory, self._lib.VTAMemFree, virt).atexit = False
        return memory

    def _copy_in(self, memory: _Memory, data: np.ndarray) -> None:
        data = np.ascontiguousarray(data)
        self._lib.VTAMemCopyFromHost(memory.virt, data.ctypes.data, data.nbytes)
        self._lib.VTAFlushCache(memory.virt, memory.phys, data.nbytes)

    def alloc(self, shape: tuple[int, ...], dtype: Any) -> Buffer:
        shape = tuple(int(s) for s in shape)
        dtype = np.dtype(dtype)
        memory = self._mem_alloc(int(np.prod(shape)) * dtype.itemsize)
        # Zeroed, as the simulated device's buffers are: a run compares equal on any bytes
        # a program leaves unwritten.
        self._copy_in(memory, np.zeros(memory.nbytes, np.uint8))
        return Buffer(shape, dtype, memory)

    def upload(self, array: np.ndarray) -> Buffer:
        a = np.ascontiguousarray(array)
        memory = self._mem_alloc(a.nbytes)
        self._copy_in(memory, a)
        return Buffer(a.shape, a.dtype, memory)

    def download(self, buffer: Buffer) -> np.ndarray:
        memory: _Memory = buffer.handle
        out = np.empty(buffer.shape, buffer.dtype)
        self._lib.VTAInvalidateCache(memory.virt, memory.phys, out.nbytes)
        self._lib.VTAMemCopyToHost(out.ctypes.data, memory.virt, out.nbytes)
        return out

    def _stage(self, key: str, data: np.ndarray) -> _Memory:
        """``data`` copied to the device area ``key`` (grown when too small) and flushed."""
        memory = self._staging.get(key)
        if memory is None or memory.nbytes < data.nbytes:
            memory = self._staging[key] = self._mem_alloc(max(data.nbytes, 4096))
        self._copy_in(memory, data)
        return memory

    # --- programs -------------------------------------------------------------------------

    def _prepared(self, program: Program) -> _Prepared:
        hit = self._programs.get(id(program))
        if hit is None or hit.program is not program:
            k = _rtl_unknown(program) if self._loaded.kind == TSIM else None
            if k is not None:
                raise DeployError(f"instruction {k} ({describe(program.instructions[k])}): "
                                  "VTA's RTL dispatches no such instruction (its fetch stage "
                                  "would stop the simulation)")
            hit = _Prepared(program, _locate(program, self.hw), program.rows.copy(),
                            _encode_uops(program.uop_table, self.hw),
                            _token_balance(program.rows))
            self._programs[id(program)] = hit
        return hit

    def run(self, program: Program, tensors: Mapping[str, Buffer]) -> int | None:
        phys = []
        for t, buf in bound(program, tensors):
            if not isinstance(buf.handle, _Memory):
                raise DeployError(f"program tensor {t.name!r} is bound to a buffer of "
                                  "another device")
            phys.append(buf.handle.phys)
        prepared = self._prepared(program)
        dma, rows = prepared.dma, prepared.rows
        uops = self._stage("uop", prepared.uop_words)
        # Relocation: the buffer's physical address in elements of the DMA's memory type.
        base = np.array(phys, np.int64)[dma.tensor] + dma.offsets
        if (base % dma.elem_bytes).any():
            raise DeployError("a buffer is not aligned to its elements (VTAMemAlloc gave an "
                              "unaligned physical address)")
        rows[dma.rows, R.MEM_DRAM] = base // dma.elem_bytes
        uop_base = uops.phys // self.hw.uop_elem_bytes
        rows[dma.uop_rows, R.MEM_DRAM] = program.rows[dma.uop_rows, R.MEM_DRAM] + uop_base
        held = self._loaded.tokens
        if held != program.tokens_in:
            rows = np.vstack([_token_prologue(held, program.tokens_in), rows])
            self.token_adjustments += 1
        insns = self._stage("insn", _encode_rows(rows, self.hw))
        try:
            self._loaded.clear_profile()
            if self._lib.VTADeviceRun(self._handle, insns.phys, len(rows), WAIT_CYCLES) != 0:
                raise DeployError(f"VTADeviceRun timed out after {WAIT_CYCLES} cycles")
            counters = self._loaded.profile()
        except LibraryError as exc:
            raise DeployError(str(exc)) from None
        left = np.array(program.tokens_in) + prepared.token_balance
        self._loaded.tokens = tuple(int(t) for t in left)
        out = tensors["output"].handle
        self._lib.VTAInvalidateCache(out.virt, out.phys, out.nbytes)
        self.counters = counters or None
        if self.cycle_counter is not None:
            return counters["cycle_count"]
        return self._cycles(program) if self._cycles is not None else None

