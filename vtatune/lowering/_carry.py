"""What one stream leaves to the next: dependency tokens in the FIFOs and pops pending in
the runtime's command queue.

A network is a sequence of VTA kernels, each its own stream, run one after another by the
same runtime on the same hardware. TVM does not always balance a stream's tokens: a kernel
without virtual threads whose body is its tile loop ends with the last iteration's
store->compute token unpopped, and the draining pop is issued after its synchronize, so it
waits in the runtime's queue and the next stream's first compute instruction (or a NOP
before it) carries it (``vta/runtime/runtime.cc``: ``DepPop``, ``Synchronize``; fsim's and
the hardware's FIFOs keep their tokens between streams). A network timed kernel by kernel
must hand both on, as :func:`vtatune.lowering.lower` does with ``carry`` in and
:attr:`~vtatune.lowering.Lowered.pending_out` out.

Example:
    >>> FRESH.tokens, FRESH.pending
    ((0, 0, 0, 0), ())
    >>> Carry((0, 0, 0, 1), ((3, 2),)).describe()
    's2g 1 token; pending pop 3->2'
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.functional import FIFOS
from simulator.program import NO_TOKENS


@dataclass(frozen=True)
class Carry:
    """``tokens``: per FIFO (l2g, g2l, g2s, s2g) the tokens a stream finds when it starts;
    ``pending``: the pops ``(src stage, dst stage)`` the runtime's queue holds for it."""

    tokens: tuple[int, int, int, int] = NO_TOKENS
    pending: tuple[tuple[int, int], ...] = ()

    @classmethod
    def left_by(cls, pending_out: tuple[tuple[int, int], ...],
                tokens_out: tuple[int, ...]) -> Carry:
        """What a stream leaves the next: the tokens its timing ends with
        (:attr:`simulator.timing.TimingResult.tokens_out`) and the pops its lowering leaves
        pending (:attr:`~vtatune.lowering.Lowered.pending_out`)."""
        return cls(tuple(int(t) for t in tokens_out), tuple(pending_out))

    def describe(self) -> str:
        parts = [f"{name} {n} token{'s' * (n != 1)}"
                 for name, n in zip(FIFOS, self.tokens, strict=True) if n]
        parts += [f"pending pop {a}->{b}" for a, b in self.pending]
        return "; ".join(parts) or "nothing"


#: A stream that runs first (a fresh process: empty FIFOs, nothing pending).
FRESH = Carry()
