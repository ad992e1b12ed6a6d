"""A model's offloaded programs as one chain: each lowered with what the program that runs
before it leaves (:class:`vtatune.lowering.Carry`: the dependency tokens in VTA's four
FIFOs and the pops pending in the runtime's queue), as TVM's runtime runs one command stream
after another on the same hardware.

The order is the order they run in one inference: the regions as ``main`` calls them, each
region's layers in order, each layer's passes in order (a ``batch_matmul``: head by head,
each head's passes). The chain is lowered in its steady state: its first program takes what
its last one leaves (the inference before), as :func:`vtatune.networks.deployed_run` counts
a deployed network; when the chain lowered from an idle VTA ends idle, that is where it
starts (and a chain with no steady state, whose tokens would pile up from one inference to
the next, starts idle: the driver then evens the FIFOs out once per inference).

A program lowered with another carry is another program (its ``tokens_in``, its first
pops), so the layers' programs are lowered again here, once per (workload, schedule,
carry), and each is timed with the tokens it starts from
(:func:`simulator.timing.time_program`): the VTA time of an inference is the sum over the
chain.

A device started fresh (empty FIFOs) meets a steady chain's first program with other
tokens than it expects: VTA's driver puts NOPs in front once (``token_adjustments``), and
never again while the programs run in the order they were lowered for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from math import prod

from simulator.hardware import HardwareConfig
from simulator.timing import time_program
from vtatune.deploy._region import Region, region_layer
from vtatune.lowering import FRESH, Carry, Lowered, lower

#: Walks of the chain to find its steady state (the carry a walk ends with is the one it
#: started from); a chain whose tokens pile up from one inference to the next has none and
#: starts from an idle VTA instead.
_ROUNDS = 4


@dataclass(frozen=True)
class Chain:
    """A model's programs as they run one after another: ``start`` is what the first one
    finds (the steady state: what the last one leaves), ``programs`` the lowered programs
    in order, ``cycles`` each one's cycles timed from the tokens it starts with."""

    start: Carry
    programs: tuple[Lowered, ...]
    cycles: tuple[int, ...]

    @property
    def total(self) -> int:
        """The VTA cycles of one inference: the sum over the chain."""
        return sum(self.cycles)


def heads(region: Region, index: int) -> int:
    """How many times layer ``index`` of ``region`` runs its passes per call: a
    batch_matmul's heads (one GEMM per leading index), else 1."""
    built = region.built[index]
    if built.layer.spec.kind != "batch_matmul":
        return 1
    return prod(region.layers[index].operands[0][0][:-2])


def _slots(regions: Sequence[Region]) -> list[Lowered]:
    """Each call's program as the builder lowered it (from an idle VTA), in run order."""
    out = []
    for region in regions:
        for i, built in enumerate(region.built):
            out += list(built.programs.passes) * heads(region, i)
    return out


def link(regions: Sequence[Region], hw: HardwareConfig) -> Chain:
    """Lower the programs of ``regions`` (in the order ``main`` calls them) as one chain
    and give each region's layers their chained programs (``built`` and the runner's
    ``layers``, cycles included). Each region once: a region called again runs the
    programs lowered for its first call."""
    seen: set[int] = set()
    regions = [r for r in regions if not (id(r) in seen or seen.add(id(r)))]
    slots = _slots(regions)
    memo: dict[tuple, tuple[Lowered, int, Carry]] = {}

    def lowered(base: Lowered, carry: Carry) -> tuple[Lowered, int, Carry]:
        key = (base.workload, base.schedule, base.bias, carry)
        if key not in memo:
            low = base if carry == FRESH else \
                lower(base.workload, base.schedule, hw, bias=base.bias, carry=carry)
            timing = time_program(low.program, hw)
            memo[key] = (low, timing.cycles, Carry.left_by(low.pending_out, timing.tokens_out))
        return memo[key]

    def walk(start: Carry) -> tuple[list[tuple[Lowered, int, Carry]], Carry]:
        out, carry = [], start
        for base in slots:
            out.append(lowered(base, carry))
            carry = out[-1][2]
        return out, carry

    start = FRESH
    runs, end = walk(start)
    for _ in range(_ROUNDS):
        if end == start:
            break
        start = end
        runs, end = walk(start)
    if end != start:  # no steady state: each inference starts from an idle VTA
        start = FRESH
        runs, _ = walk(start)
    k = 0
    for region in regions:
        built = []
        for i, b in enumerate(region.built):
            n = len(b.programs.passes) * heads(region, i)
            passes = tuple(low for low, _, _ in runs[k:k + n])
            k += n
            built.append(replace(b, programs=replace(b.programs, passes=passes)))
        region.built = tuple(built)
        region.layers = tuple(map(region_layer, region.built))
    return Chain(start, tuple(low for low, _, _ in runs), tuple(c for _, c, _ in runs))
