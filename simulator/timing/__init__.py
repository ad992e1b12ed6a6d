"""Event-driven timing model of the VTA hardware, calibrated against VTA's Chisel RTL.

Four modules run concurrently — fetch, load, compute and store — each executing its own
queue strictly in order, one instruction at a time. They are joined by the four token FIFOs
(a pop waits for the matching push, posted when the pushing instruction completes) and
share the memory's read channel; the store module owns the write channel.

How time is spent (every constant is a field of :class:`TimingProfile`; the pynq defaults are
the cycles the RTL (apache/tvm-vta, ``DefaultPynqConfig``) measured under tsim's simulated
memory, see ``scripts/bench_fidelity.py``):

* Reads. A reader's request reaches the memory bridge ``request_cycles`` after it starts
  (``+ y_pad_0`` for a padded LOAD: the loader steps over the top pad rows first). The bridge
  serves requests one after another, in arrival order (ties: fetch > uop > inp > wgt > acc),
  streaming one ``bus_bytes`` beat per cycle with no gap between bursts; a request that finds
  the bridge's queue empty first waits ``read_latency`` cycles (its delay counter only runs
  while requests queue, so consecutive loads never overlap their delays, while a request
  queued behind another one is served as soon as the channel frees).
* Fetch reads the stream in chunks of ``fetch_chunk_insns`` instructions, two beats each
  on a 64-bit bus, and hands the chunk over only when all of it has arrived, one instruction
  per cycle; it reads the next chunk once the last one is handed over. A full module queue
  (``queue_depth``) stalls it. The run starts with the first chunk's request.
* LOAD (INP/WGT/ACC/UOP): its beats, then ``load_done_cycles`` (``wide_load_done_cycles``
  for a loader whose element fits in one beat, as UOP on a 64-bit bus). Zero padding is
  written one element per cycle from ``pad_start_cycles`` after the start, in every cycle
  that no data beat arrives: it is free while the request waits, and costs a cycle per
  element only once it outlasts that wait.
* GEMM: one micro-op iteration per cycle (reset ones too) plus ``gemm_pipeline``. ALU:
  ``alu_imm_cycles`` per iteration with an immediate, ``alu_reg_cycles`` without (one ACC
  read port), plus ``alu_pipeline``. NOP and FINISH: ``nop_cycles``.
* STORE: ``store_insn_cycles``, ``write_handshake`` per write burst (bursts split at
  ``burst_boundary`` and at every row), and per element one cycle per beat of each of its
  BATCH rows plus ``store_read_cycles`` to read the next row from SRAM. That is the RTL's
  narrow store unit (``TensorStoreNarrowVME``), which stops for an SRAM read after every
  row but the burst's last. Where an output element fits in one beat (BATCH x BLOCK_OUT
  bytes <= ``bus_bytes``) the RTL uses its wide store unit instead (``TensorStoreWideVME``,
  chosen in ``TensorStore.scala``): one beat per cycle, each carrying every element of the
  row that falls in that bus word, with no SRAM-read stops. A wide STORE costs
  ``store_insn_cycles``, ``write_handshake + store_read_cycles`` per burst (the same
  command and acknowledgement; the narrow unit's skipped last read is no longer skipped)
  and one cycle per beat, a row's beats counted from its first bus word to its last.
* The cycle count runs from launch to the end of FINISH.

The engine is deterministic: the same program and profile always give the same cycles.
A pop that can never be satisfied, or fetch blocked forever on a full queue, raises
:class:`DeadlockError` naming the instruction.

Speed: the engine runs on the program's instruction table (:mod:`simulator.rows`) in two
numba-compiled passes — ``_pricing._costs`` prices every instruction, ``_events._engine`` runs
the events — at a few tens of nanoseconds per instruction. ``tests/simulator/_slow_timing.py``
keeps a plain-Python engine with the same rules; the two give identical results on every test
program.

Modules: :mod:`~simulator.timing.profile` (the constants and the rules' version),
:mod:`~simulator.timing.result` (what a run gives), ``_pricing`` (the cost pass and the tables
it reads), ``_events`` (the event engine) and ``_run`` (:func:`time_program`: set-up, the two
passes, the result or the deadlock's error). Every public name is importable from here.

Example:
    >>> from simulator.hardware import DEFAULT
    >>> from simulator.isa import FinishInsn, MemId, MemInsn, Opcode
    >>> from simulator.program import NO_TOKENS, Program
    >>> load = MemInsn(Opcode.LOAD, MemId.INP, 0, 0, 1, 16, 16, push_next=True)
    >>> prog = Program((load, FinishInsn(pop_prev=True)), (), (), 4096)
    >>> r = time_program(prog, DEFAULT)
    >>> r.cycles  # launch, fetch 2 instructions, LOAD of 32 beats, FINISH: as the RTL counts
    82
"""

from simulator.timing._run import time_program
from simulator.timing.profile import MODEL_VERSION, TimingProfile
from simulator.timing.result import MODULES, ModuleTime, TimingResult, TraceRow

__all__ = [
    "MODEL_VERSION", "MODULES", "ModuleTime", "TimingProfile", "TimingResult", "TraceRow",
    "time_program",
]
