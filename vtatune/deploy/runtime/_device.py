"""The device behind the offloaded calls: one small interface, and vtatune's functional VTA
behind it.

A :class:`Device` holds buffers in the accelerator's DRAM and runs programs on them. That
is all an offloaded function needs: weights are uploaded once when the model is built,
activations stay in device buffers from one VTA layer to the next (packed as VTA lays them
out), and only a region's inputs and outputs cross to the host.

:class:`SimulatedDevice` is vtatune's functional VTA (:mod:`simulator.functional`, bit-exact
as TVM's fsim) with the cycles of the timing model (:func:`simulator.timing.time_program`).

A board is the next step: a Device over VTA's C driver API (``vta/include/vta/driver.h``),
which TVM's VTA runtime uses the same way: ``VTADeviceAlloc()`` once; ``alloc`` =
``VTAMemAlloc(bytes, cached)`` and ``VTAMemGetPhyAddr`` (the address programs are linked
to); ``upload`` / ``download`` = ``VTAMemCopyFromHost`` / ``VTAMemCopyToHost`` with
``VTAFlushCache`` / ``VTAInvalidateCache``; ``run`` = the program's micro-ops and
instructions copied to device memory, every DRAM operand's address patched to its buffer's
physical address (vtatune's programs address their tensors by offsets in one DRAM image:
:class:`simulator.program.Program`), then ``VTADeviceRun(device, insn_phy_addr,
insn_count, wait_cycles)``, the cycles read from the board's counter. vtatune has no such
implementation yet.

Example:
    >>> import numpy as np
    >>> from simulator.hardware import DEFAULT
    >>> from search_spaces import default_schedule
    >>> from vtatune.lowering import lower
    >>> from vtatune.workloads import GemmWorkload, pack_data, pack_weight, unpack_output
    >>> wl = GemmWorkload(1, 16, 16)
    >>> program = lower(wl, default_schedule(wl, DEFAULT), DEFAULT).program
    >>> dev = SimulatedDevice(DEFAULT)
    >>> x, w = np.ones((1, 16), np.int8), np.eye(16, dtype=np.int8) * 8
    >>> out = dev.alloc(program.tensor("output").shape, np.int8)
    >>> cycles = dev.run(program, {"data": dev.upload(pack_data(wl, x, DEFAULT)),
    ...                            "weight": dev.upload(pack_weight(wl, w, DEFAULT)),
    ...                            "output": out})
    >>> unpack_output(wl, dev.download(out)).tolist()[0][:4], cycles > 0
    ([0, 0, 0, 0], True)
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simulator.hardware import HardwareConfig
from simulator.program import NO_TOKENS, Program
from vtatune.deploy.runtime._errors import DeployError


@dataclass(eq=False)
class Buffer:
    """A tensor in device DRAM: its shape and dtype, and the implementation's handle on the
    memory (the simulator's: a flat host array standing for the DRAM bytes; a board's: the
    buffer's virtual and physical address)."""

    shape: tuple[int, ...]
    dtype: np.dtype
    handle: Any = field(repr=False)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * np.dtype(self.dtype).itemsize

    def view(self, shape: tuple[int, ...]) -> Buffer:
        """The same memory as a tensor of another shape (same size): a producer's output read
        as its consumer's input, no byte moved."""
        shape = tuple(int(s) for s in shape)
        if int(np.prod(shape)) != int(np.prod(self.shape)):
            raise DeployError(f"a {list(self.shape)} buffer viewed as {list(shape)}")
        return Buffer(shape, self.dtype, self.handle)


class Device(ABC):
    """Where offloaded layers run: buffers in device DRAM and programs over them."""

    #: The VTA configuration the device is (programs must be lowered for it).
    hw: HardwareConfig
    #: What it is, for reports (``functional simulator``, a board's name).
    name: str
    #: What counts the cycles :meth:`run` returns when it is not the timing model (``RTL``:
    #: VTA's RTL through TVM's tsim driver); None: the timing model's, or none counted.
    cycle_counter: str | None = None

    @abstractmethod
    def alloc(self, shape: tuple[int, ...], dtype: Any) -> Buffer:
        """A buffer of ``shape`` and ``dtype`` in device DRAM (contents undefined)."""

    @abstractmethod
    def upload(self, array: np.ndarray) -> Buffer:
        """A new buffer holding ``array`` (host to device)."""

    @abstractmethod
    def download(self, buffer: Buffer) -> np.ndarray:
        """A host copy of ``buffer`` (device to host)."""

    @abstractmethod
    def run(self, program: Program, tensors: Mapping[str, Buffer]) -> int | None:
        """Run ``program`` with each of its DRAM tensors bound to a buffer (by the
        program's tensor names: ``data``, ``weight``, ``bias``, ``output``); the program's
        output lands in the buffer bound to ``output``. Returns the cycles it took, or None
        when the device counts none (VTA's driver API has no cycle counter: the regions
        then report the timing model's cycles, recorded when the model was built)."""


def bound(program: Program, tensors: Mapping[str, Buffer]) -> list[tuple[Any, Buffer]]:
    """Each of ``program``'s DRAM tensors with the buffer bound to it (by name); DeployError
    when one is unbound or its buffer of another shape or dtype."""
    out = []
    for t in program.tensors:
        buf = tensors.get(t.name)
        if buf is None:
            raise DeployError(f"program tensor {t.name!r} is bound to no buffer")
        if buf.shape != tuple(t.shape) or buf.dtype != np.dtype(t.dtype):
            raise DeployError(f"program tensor {t.name!r} is {t.dtype}{list(t.shape)}, "
                              f"its buffer {buf.dtype}{list(buf.shape)}")
        out.append((t, buf))
    return out


class SimulatedDevice(Device):
    """vtatune's functional VTA: programs run bit-exactly on numpy DRAM and SRAM
    (:mod:`simulator.functional`), timed by the timing model. Each program is decoded
    (:func:`simulator.functional.decode`) and timed once, on its first run: neither depends
    on the data, and a deployed model runs the same programs on every inference."""

    name = "functional simulator"

    def __init__(self, hw: HardwareConfig, timed: bool = True) -> None:
        self.hw = hw
        #: Whether :meth:`run` times each program (the timing model, numba's engines); a
        #: loaded bundle's device is not (False: :meth:`run` returns None and the regions
        #: report the cycles the timing model gave each pass when the model was built,
        #: which the bundle records).
        self.timed = timed
        # id(program) -> (the program, its cycles, the tokens it leaves in the FIFOs)
        self._timed: dict[int, tuple[Program, int, tuple[int, ...]]] = {}
        #: The tokens the last program left in VTA's four FIFOs (l2g, g2l, g2s, s2g), as
        #: the timing model counts them: what the next program finds.
        self.tokens: tuple[int, ...] = NO_TOKENS
        #: Runs whose program started from other tokens than the program before left (run
        #: out of the order it was lowered for). The functional model runs each program from
        #: its own ``tokens_in``; VTA's driver (:class:`DriverDevice`) puts NOPs in front.
        self.token_adjustments = 0
        # id(program) -> the program decoded (which holds the program: the id stays its own)
        self._decoded: dict[int, Any] = {}
        # id(program) -> (the program, what reads it decoded): a bundle's, kept decoded
        self._stored: dict[int, tuple[Program, Callable[[], Any]]] = {}

    def alloc(self, shape: tuple[int, ...], dtype: Any) -> Buffer:
        shape = tuple(int(s) for s in shape)
        return Buffer(shape, np.dtype(dtype), np.zeros(int(np.prod(shape)), dtype))

    def upload(self, array: np.ndarray) -> Buffer:
        a = np.array(array, order="C")
        return Buffer(a.shape, a.dtype, a.reshape(-1))

    def download(self, buffer: Buffer) -> np.ndarray:
        return buffer.handle.reshape(buffer.shape).copy()

    def _timing(self, program: Program) -> tuple[Program, int | None, tuple[int, ...]]:
        """The program's cycles (None when the device is not :attr:`timed`) and the tokens
        it leaves, worked out on its first run."""
        hit = self._timed.get(id(program))
        if hit is None or hit[0] is not program:
            if self.timed:
                from simulator.timing import time_program  # numba engines: this device's

                timing = time_program(program, self.hw)
                hit = (program, timing.cycles, tuple(int(t) for t in timing.tokens_out))
            else:
                hit = (program, None, tokens_left(program))
            self._timed[id(program)] = hit
        return hit

    def cycles(self, program: Program) -> int | None:
        """The program's cycles on the timing model (from the tokens it starts with:
        :attr:`~simulator.program.Program.tokens_in`); None when not :attr:`timed`."""
        return self._timing(program)[1]

    def decoded(self, program: Program) -> Any:
        """The program decoded for this device's hardware
        (:class:`simulator.functional.DecodedProgram`)."""
        hit = self._decoded.get(id(program))
        if hit is None or hit.program is not program:
            stored = self._stored.pop(id(program), None)
            if stored is not None and stored[0] is program:
                hit = self._decoded[id(program)] = stored[1]()
                return hit
            from simulator.functional import decode

            hit = self._decoded[id(program)] = decode(program, self.hw)
        return hit

    def decoded_by(self, program: Program, read: Callable[[], Any]) -> None:
        """``program`` is kept decoded: on its first run ``read()`` gives it decoded for
        this device's hardware, instead of :meth:`decoded` decoding it (a bundle stores
        each program decoded when it is saved)."""
        self._stored[id(program)] = (program, read)

    def run(self, program: Program, tensors: Mapping[str, Buffer]) -> int | None:
        inputs = {t.name: buf.handle.reshape(buf.shape)
                  for t, buf in bound(program, tensors) if t.name != "output"}
        output = self.decoded(program).outputs(inputs)["output"]
        tensors["output"].handle[:] = output.reshape(-1)
        _, cycles, left = self._timing(program)
        if program.tokens_in != self.tokens:
            self.token_adjustments += 1
        self.tokens = left
        return cycles


def tokens_left(program: Program) -> tuple[int, ...]:
    """The tokens ``program`` leaves in VTA's four FIFOs (l2g, g2l, g2s, s2g): those it
    starts with, plus its pushes, less its pops (what the timing model's ``tokens_out``
    counts, without timing it)."""
    from simulator.functional import FIFOS, pops_of, pushes_of

    index = {name: k for k, name in enumerate(FIFOS)}
    left = list(program.tokens_in)
    distinct: dict[int, list[Any]] = {}  # a stream repeats a few instruction objects
    for insn in program.instructions:
        distinct.setdefault(id(insn), [insn, 0])[1] += 1
    for insn, n in distinct.values():
        for name in pushes_of(insn):
            left[index[name]] += n
        for name in pops_of(insn):
            left[index[name]] -= n
    return tuple(left)
