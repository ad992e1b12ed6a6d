"""A tiny loop-nest IR for VTA schedules, with TVM's dependency insertion and vthreads.

The tree mirrors what TVM's lowering holds just before code generation:

* :class:`For` — a CPU loop (unit loops never exist, as in TVM).
* :class:`Stage` — a ``coproc_scope`` of one pipeline stage (1 load, 2 compute, 3 store)
  holding leaf operations (DMA, GEMM/ALU kernels, nested loops of those).
* :class:`Dep` — ``DepPush``/``DepPop`` between stages.

:func:`insert_deps` is TVM's CoProcSync (coproc_sync.cc): a push at the end of a scope and
a pop at the start of the next one on another stage, loop-carried dependencies, and the
priming push / draining pop at the top. :func:`expand_threads` then replicates every
stage scope and every bare dependency per virtual thread, copies adjacent (TVM's
InjectVirtualThread for ``cthread``), binding the thread index for the leaves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Pair = tuple[int, int]


@dataclass(eq=False)
class For:
    var: str
    extent: int
    body: list[Any]


@dataclass(eq=False)
class Stage:
    stage: int
    ops: list[Any]


@dataclass(eq=False)
class Dep:
    push: bool
    src: int
    dst: int
    thread: int | None = None


@dataclass(eq=False)
class Threaded:
    """A stage scope bound to one virtual thread."""

    thread: int
    node: Stage


def loop(var: str, extent: int, body: list[Any]) -> list[Any]:
    """A loop, or its body alone when the extent is 1 (TVM never emits unit loops)."""
    if extent == 1:
        return list(body)
    return [For(var, extent, list(body))]


@dataclass
class _State:
    node: Any = None
    enter_ctx: list[int] = field(default_factory=list)
    exit_ctx: list[int] = field(default_factory=list)
    enter_pop: list[Pair] = field(default_factory=list)
    exit_push: list[Pair] = field(default_factory=list)


class _CoProcSync:
    def __init__(self) -> None:
        self.first: _State | None = None
        self.last: _State | None = None
        self.before: dict[int, list[Dep]] = {}
        self.after: dict[int, list[Dep]] = {}

    def plan(self, body: list[Any]) -> None:
        self.visit_seq(body)
        if self.last is not None:
            for a, b in self.first.enter_pop:
                self.before.setdefault(id(self.first.node), []).append(Dep(True, a, b))
            for a, b in self.last.exit_push:
                self.after.setdefault(id(self.last.node), []).append(Dep(False, a, b))

    def visit_seq(self, items: list[Any]) -> None:
        for item in items:
            if isinstance(item, Stage):
                self.update(_State(item, [item.stage], [item.stage]))
            elif isinstance(item, For):
                self.visit_for(item)

    def visit_for(self, node: For) -> None:
        saved = (self.first, self.last)
        self.first = self.last = None
        self.visit_seq(node.body)
        curr = None
        if self.last is not None:
            curr = _State(node)
            self.inject(self.last, self.first, curr.exit_push, curr.enter_pop)
            curr.enter_ctx = list(self.first.enter_ctx)
            curr.exit_ctx = list(self.last.exit_ctx)
        self.first, self.last = saved
        if curr is not None:
            self.update(curr)

    def update(self, curr: _State) -> None:
        if self.last is not None:
            self.inject(self.last, curr, [], [])
            self.last = curr
        else:
            self.first = self.last = curr

    def inject(self, prev: _State, nxt: _State, prev_exit_push: list, next_enter_pop: list):
        prev_exit_push.clear()
        next_enter_pop.clear()
        if (
            not prev.exit_push
            and not nxt.enter_pop
            and len(prev.exit_ctx) == 1
            and len(nxt.enter_ctx) == 1
        ):
            a, b = prev.exit_ctx[0], nxt.enter_ctx[0]
            if a != b:
                self.after.setdefault(id(prev.node), []).append(Dep(True, a, b))
                self.before.setdefault(id(nxt.node), []).append(Dep(False, a, b))
                prev_exit_push.append((a, b))
                next_enter_pop.append((a, b))
            return
        vpush, vpop = list(prev.exit_push), list(nxt.enter_pop)
        pending = [(a, b) for a in prev.exit_ctx for b in nxt.enter_ctx if a != b]
        prev_after: list[Dep] = []
        next_before: list[Dep] = []
        for p in pending:
            if p not in prev.exit_push:
                vpush.append(p)
                prev_after.append(Dep(True, *p))
            if p not in nxt.enter_pop:
                vpop.append(p)
                next_before.append(Dep(False, *p))
        for p in vpush:
            if p not in vpop:
                prev_after.append(Dep(False, *p))
            else:
                prev_exit_push.append(p)
        for p in vpop:
            if p not in vpush:
                next_before.append(Dep(True, *p))
            else:
                next_enter_pop.append(p)
        if prev_after:
            self.after.setdefault(id(prev.node), []).extend(prev_after)
        if next_before:
            lst = self.before.setdefault(id(nxt.node), [])
            lst[:0] = next_before

    def rewrite(self, items: list[Any]) -> list[Any]:
        out: list[Any] = []
        for item in items:
            before = self.before.get(id(item), [])
            after = self.after.get(id(item), [])
            if isinstance(item, Stage):
                # Inserted inside the scope: CoProcSync keys scopes by their body.
                out.append(Stage(item.stage, [*before, *item.ops, *after]))
            elif isinstance(item, For):
                out.extend(before)
                out.append(For(item.var, item.extent, self.rewrite(item.body)))
                out.extend(after)
            else:
                out.append(item)
        return out


def insert_deps(body: list[Any]) -> list[Any]:
    """TVM's CoProcSync over a statement list: returns the list with Dep nodes inserted."""
    sync = _CoProcSync()
    sync.plan(body)
    return sync.rewrite(body)


def expand_threads(body: list[Any], nthreads: int) -> list[Any]:
    """Replicate each stage scope and bare Dep per virtual thread, copies adjacent."""
    out: list[Any] = []
    for item in body:
        if isinstance(item, For):
            out.append(For(item.var, item.extent, expand_threads(item.body, nthreads)))
        elif isinstance(item, Stage):
            out.extend(Threaded(t, item) for t in range(nthreads))
        else:
            out.extend(Dep(item.push, item.src, item.dst, t) for t in range(nthreads))
    return out
