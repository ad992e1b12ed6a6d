"""The dependency tokens between VTA's three modules, and the execution order they allow.

Each module (load, compute, store) runs its queue in program order; an instruction pops
tokens from the FIFOs between it and its neighbours and pushes tokens to them
(:data:`FIFOS`). :func:`execution_order` runs the queues greedily (load first, which
exposes a missing write-after-read dependency as a wrong result) and raises
:class:`DeadlockError` naming the instruction and FIFO when some pop can never be satisfied.

Example:
    >>> order = execution_order(program)     # doctest: +SKIP
    >>> pops_of(program.instructions[0])     # doctest: +SKIP
"""

from __future__ import annotations

from simulator.errors import DeadlockError, ProgramError
from simulator.isa import FinishInsn, Instruction, Module
from simulator.program import Program

__all__ = ["FIFOS", "execution_order", "pops_of", "pushes_of"]

#: The token FIFOs: name -> (producer, consumer).
FIFOS = {
    "l2g": (Module.LOAD, Module.COMPUTE),
    "g2l": (Module.COMPUTE, Module.LOAD),
    "g2s": (Module.COMPUTE, Module.STORE),
    "s2g": (Module.STORE, Module.COMPUTE),
}


#: The FIFO of each (producer, consumer).
_FIFO_BETWEEN = {ends: name for name, ends in FIFOS.items()}


def _token_fifos(insn: Instruction, verb: str, prev: bool, next_: bool) -> tuple[str, ...]:
    """The FIFOs between ``insn``'s module and the neighbours its flags name (the previous
    stage first), in the direction of ``verb``: a pop reads the FIFO the neighbour
    produces, a push writes the one it consumes."""
    m = insn.module
    out = []
    for side, flagged, step in (("previous", prev, -1), ("next", next_, 1)):
        if not flagged:
            continue
        try:
            neighbour = Module(m + step)
        except ValueError:
            raise ProgramError(f"{insn.kind}: the {m.name.lower()} module has no {side} "
                               f"stage to {verb}") from None
        out.append(_FIFO_BETWEEN[(neighbour, m) if verb == "pop" else (m, neighbour)])
    return tuple(out)


def pops_of(insn: Instruction) -> tuple[str, ...]:
    """The FIFOs an instruction pops from, given its module."""
    return _token_fifos(insn, "pop", insn.pop_prev, insn.pop_next)


def pushes_of(insn: Instruction) -> tuple[str, ...]:
    """The FIFOs an instruction pushes to, given its module."""
    return _token_fifos(insn, "push", insn.push_prev, insn.push_next)


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

