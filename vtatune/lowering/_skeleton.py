"""A loop structure's queue program, its skeleton: the tile loop tree with TVM's dependency
insertion (CoProcSync) and virtual threads (``_ir``), recorded as the command queue's ops with
the leaves as macros that :mod:`._emit` turns into a schedule's runtime calls. Every schedule
with the same loop structure shares one skeleton, and every order and number of tile loops
shares the one recorded with a single tile loop.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import numpy as np

from vtatune.lowering._ir import Dep, For, Stage, Threaded, expand_threads, insert_deps, loop
from vtatune.lowering._runtime import (
    _OP_END,
    _OP_LOOP,
    _OP_POP,
    _OP_PUSH,
    _OP_SYNC,
    COMPUTE,
    LOAD,
    STORE,
)
from vtatune.workloads import INTO_SAVED, SAVED

#: Slots of the loop variables (a variable outside its loop is 0). ``g``: group_conv2d's
#: groups, when an oc tile lies within one group: the oc tile loop runs as a loop over the
#: groups around a loop over a group's tiles (the same iterations in the same order as
#: TVM's one loop, and CoProcSync puts no dependency between two directly nested loops),
#: so that the input's channel offset is affine in the loop variables.
_SLOT = {"b": 0, "h": 1, "c": 2, "w": 3, "bi": 4, "k0": 5, "g": 6}
_B, _H, _C, _W, _BI, _K0, _G = range(7)
_NLOOPS = len(_SLOT)  # the store's looped dims take the slots after these


class _Leaf:
    """A leaf operation inside a stage scope, by name; emit records it per thread."""

    def __init__(self, name: str) -> None:
        self.name = name


def epilogue_leaves(steps: tuple[tuple[str, int | None, str | None], ...]) -> tuple[str, ...]:
    """The epilogue's leaves in order: ``alu<i>`` per ALU instruction, each extra tensor's
    ``load_<tensor>`` right before the first instruction that reads it (where TVM's
    ``cache_read`` stage lands: for the benchmark graph after the shift, for a deployed
    conv first)."""
    leaves: list[str] = []
    for i, (_, _, tensor) in enumerate(steps):
        if tensor not in (None, SAVED, INTO_SAVED) and f"load_{tensor}" not in leaves:
            leaves.append(f"load_{tensor}")
        leaves.append(f"alu{i}")
    return tuple(leaves)


@lru_cache(maxsize=4096)
def _steps(looped: tuple[str, ...], epilogue: tuple[str, ...], nthreads: int,
           v01: bool = False) -> tuple[tuple[tuple, ...], tuple[tuple[int, int], ...]]:
    """The loop tree with TVM's dependencies and vthreads, as the flat sequence of steps
    that records it, and the pops TVM issues after the stream's synchronize. ``looped``:
    the tile loops that exist (extent > 1), outermost first, among the outer axes then
    ``bi`` and ``k0``. Dependencies depend on which loops exist, not on their extents, so a
    loop step names its slot and the extent is filled in when recording: every schedule
    with the same loop structure shares one sequence.

    TVM puts a function's one ``VTASynchronize`` after its body's root statement and the
    draining pops of a loop after the loop. With virtual threads the root is the
    ``virtual_thread`` attribute, the loop inside it: the drains come before the
    synchronize. Without, a root that is the tile loop itself gets them after the
    synchronize: the stream ends with the last iteration's token unpopped, and the pops
    stay pending in the runtime's queue for the next stream (``coproc_sync.cc``). ``v01``:
    every drain before the synchronize, as vtatune 0.1 emitted them."""
    def maybe(axis, body):  # any extent > 1 gives the structure of a loop
        return loop(axis, 2 if axis in looped else 1, body)

    inner = [Stage(COMPUTE, [_Leaf("reset")])]
    inner += maybe("k0", [Stage(LOAD, [_Leaf("load_inp"), _Leaf("load_wgt")]),
                          Stage(COMPUTE, [_Leaf("gemm")])])
    tile = maybe("bi", inner)
    tile += [Stage(COMPUTE, [_Leaf(name) for name in epilogue]),
             Stage(STORE, [_Leaf("store")])]
    body = tile
    for axis in reversed([a for a in looped if a not in ("bi", "k0")]):
        body = loop(axis, 2, body)
    synced = insert_deps(body)
    after: list[Dep] = []
    if nthreads == 1 and len(body) == 1 and isinstance(body[0], For) and not v01:
        while synced and isinstance(synced[-1], Dep) and not synced[-1].push:
            after.insert(0, synced.pop())
    steps: list[tuple] = []
    _flatten(expand_threads(synced, nthreads), None, steps)
    return tuple(steps), tuple((d.src, d.dst) for d in after)


_LOOP, _END, _PUSH, _POP, _LEAF = range(5)


def _flatten(items, thread: int | None, out: list[tuple]) -> None:
    """Steps of ``items`` (loops, thread-bound stage scopes, deps, leaves) in order."""
    for item in items:
        if isinstance(item, For):
            out.append((_LOOP, _SLOT[item.var], 0))  # the extent is the schedule's
            _flatten(item.body, thread, out)
            out.append((_END, 0, 0))
        elif isinstance(item, Threaded):
            _flatten(item.node.ops, item.thread, out)
        elif isinstance(item, Dep):
            out.append((_PUSH if item.push else _POP, item.src, item.dst))
        elif isinstance(item, _Leaf):
            out.append((_LEAF, item.name, thread))
        else:  # pragma: no cover
            raise TypeError(item)


class _Skeleton(NamedTuple):
    """A loop structure's queue program (see :func:`_skeleton`)."""

    ops: np.ndarray  # the queue's ops with leaves as macros (:func:`._emit._expand`)
    after_sync: tuple[tuple[int, int], ...]  # the pops TVM issues after the synchronize
    outer: tuple[int, int]  # the ops opening and closing the outermost loop ((0, 0): none)


# The skeleton's leaf macros (after the queue's op codes), [code, thread, ALU step or
# per-channel tensor, 0]: an input load step (one load per channel block), a weight, a
# per-channel tensor's load (the bias's, the shift's: its index in the order the epilogue
# loads them), a tile's store (inside its own loops), a reset, a GEMM (their kernel chosen by
# the bi loop), an ALU step.
_M_INP, _M_WGT, _M_BIAS, _M_STORE, _M_RESET, _M_GEMM, _M_ALU = range(10, 17)
_LEAF_MACROS = {"load_inp": _M_INP, "load_wgt": _M_WGT, "load_bias": _M_BIAS,
                "store": _M_STORE, "reset": _M_RESET, "gemm": _M_GEMM}


@lru_cache(maxsize=4096)
def _skeleton(looped: tuple[str, ...], leaves: tuple[str, ...], nthreads: int, v01: bool
              ) -> _Skeleton:
    """The queue program of a loop structure (:func:`_steps`) with its leaves as macros
    that :func:`._emit._expand` turns into runtime calls for a schedule (every schedule with the
    same loop structure shares it): loops' extents and matching ops left to fill in.

    The tile loops (the outer axes) nest directly around the tile, and TVM's CoProcSync
    puts no dependency between two directly nested loops: to it they are one loop. So
    every order and number of tile loops shares the program recorded with one loop, on the
    first slot, which only has that loop replaced by the nest."""
    outer = tuple(_SLOT[axis] for axis in looped if axis not in ("bi", "k0"))
    if outer and outer != (_B,):
        one = _skeleton(("b", *looped[len(outer):]), leaves, nthreads, v01)
        return _Skeleton(_nest(one, outer), one.after_sync, one.outer)
    return _record_skeleton(looped, leaves, nthreads, v01)


def _nest(one: _Skeleton, slots: tuple[int, ...]) -> np.ndarray:
    """The ops of ``one`` with its outermost loop replaced by loops on ``slots``, outermost
    first, around the same body."""
    first, end = one.outer
    loops = np.zeros((len(slots), 4), np.int64)
    loops[:, 0], loops[:, 1] = _OP_LOOP, slots
    ends = np.zeros((len(slots), 4), np.int64)
    ends[:, 0] = _OP_END
    ops = one.ops
    table = np.concatenate([ops[:first], loops, ops[first + 1:end], ends, ops[end + 1:]])
    table.flags.writeable = False
    return table


def _record_skeleton(looped: tuple[str, ...], leaves: tuple[str, ...], nthreads: int,
                     v01: bool) -> _Skeleton:
    """:func:`_skeleton` recorded from the loop tree itself."""
    steps, after_sync = _steps(looped, leaves, nthreads, v01)
    channel_loads = [name for name in leaves if name.startswith("load_")]
    ops: list[tuple[int, int, int, int]] = []
    depth, outer = 0, [0, 0]
    for kind, a, b in steps:
        if kind == _LEAF:
            if a.startswith("alu"):
                ops.append((_M_ALU, b, int(a[3:]), 0))
            elif a in channel_loads:
                ops.append((_M_BIAS, b, channel_loads.index(a), 0))
            else:
                ops.append((_LEAF_MACROS[a], b, 0, 0))
        elif kind == _LOOP:
            if depth == 0:
                outer[0] = len(ops)
            depth += 1
            ops.append((_OP_LOOP, a, 0, 0))
        elif kind == _END:
            depth -= 1
            if depth == 0:
                outer[1] = len(ops)
            ops.append((_OP_END, 0, 0, 0))
        else:
            ops.append((_OP_PUSH if kind == _PUSH else _OP_POP, a, b, 0))
    ops.append((_OP_SYNC, 0, 0, 0))
    table = np.array(ops, np.int64)
    table.flags.writeable = False
    return _Skeleton(table, after_sync, (outer[0], outer[1]))
