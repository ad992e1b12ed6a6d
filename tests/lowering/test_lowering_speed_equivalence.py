"""The fast emitter emits exactly what a slow, straightforward one does.

``_slow_emit`` is the emitter as it was before the speed work (commit 660f63f): it
interprets the loop tree with a dict of loop variables, rebuilds every DMA and kernel from
the schedule, keys tile reuse on the full tuple of loads, and builds each frozen
instruction with its constructor (``dataclasses.replace`` for push flags). Both must give
the same program — same instruction values of the same types, same uops, same tensors —
for random schedules of every kind.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import fields, replace

import numpy as np
import pytest

from search_spaces import get_template
from simulator.hardware import DEFAULT, PRESETS
from simulator.isa import AluInsn, FinishInsn, GemmInsn, MemId, MemInsn, Opcode, Uop
from simulator.program import Program
from vtatune.lowering import (
    COMPUTE,
    LOAD,
    STORE,
    Dep,
    For,
    Kernel,
    KernelLoop,
    Plan,
    Stage,
    Threaded,
    _emit,
    _skeleton,
    expand_threads,
    insert_deps,
    loop,
    lower,
    pattern_2d,
)
from vtatune.schedule import tutorial_schedule
from vtatune.workloads import WORKLOADS, Conv2dWorkload, GemmWorkload, resnet18_layers

# --- the slow reference ---------------------------------------------------------------------


class _SlowQueue:
    """TVM's runtime command queue with plain constructors (vta/runtime/runtime.cc)."""

    def __init__(self, hw) -> None:
        self.hw = hw
        self.insns: list = []
        self.pending_prev = [False] * 4
        self.pending_next = [False] * 4
        self.uop_area: list[Uop] = []
        self.resident: dict = {}
        self.cache: list = []
        self.sram_end = self.cache_idx = 0
        self.dram_offset: dict = {}

    def create(self, stage):
        flags = {"pop_prev": self.pending_prev[stage], "pop_next": self.pending_next[stage]}
        self.pending_prev[stage] = self.pending_next[stage] = False
        return flags

    def nop(self, stage, **flags):
        if stage == STORE:
            opcode, mem = Opcode.STORE, MemId.OUT
        else:
            opcode, mem = Opcode.LOAD, (MemId.INP if stage == LOAD else MemId.UOP)
        self.insns.append(MemInsn(opcode, mem, **flags))

    def commit(self, stage):
        if self.pending_prev[stage] or self.pending_next[stage]:
            self.nop(stage, pop_prev=self.pending_prev[stage], pop_next=self.pending_next[stage])
            self.pending_prev[stage] = self.pending_next[stage] = False

    def dep_pop(self, src, dst):
        pending = self.pending_prev if src < dst else self.pending_next
        if pending[dst]:
            self.commit(dst)
        pending[dst] = True

    def dep_push(self, src, dst):
        self.commit(src)
        last = self.insns[-1] if self.insns else None
        # GetPipelineStage: a LOAD of no elements (a load or compute NOP) has no stage
        nop_load = isinstance(last, MemInsn) and last.opcode == Opcode.LOAD and not last.x_size
        if last is not None and not nop_load and int(last.module) == src:
            last = self.insns[-1]
            flag = "push_next" if src < dst else "push_prev"
            if not getattr(last, flag):
                self.insns[-1] = replace(last, **{flag: True})
                return
        self.nop(src, **{"push_next" if src < dst else "push_prev": True})

    def load_2d(self, mem, sram, dram, y, x, stride, pads=(0, 0, 0, 0)):
        stage = LOAD if mem in (MemId.INP, MemId.WGT) else COMPUTE
        self.insns.append(MemInsn(Opcode.LOAD, mem, sram, dram, y, x, stride, *pads,
                                  **self.create(stage)))

    def store_2d(self, sram, dram, y, x, stride):
        self.insns.append(MemInsn(Opcode.STORE, MemId.OUT, sram, dram, y, x, stride,
                                  **self.create(STORE)))

    def push_kernel(self, key, kernel):
        if key in self.resident:
            return self.resident[key][:2]
        n, depth = len(kernel.uops), self.hw.uop_depth
        if self.sram_end + n > depth:
            self.cache_idx = 0
            begin, self.sram_end = 0, n
        else:
            begin = self.sram_end
            self.sram_end += n
        evict_begin = self.cache_idx
        while self.cache_idx < len(self.cache):
            k = self.cache[self.cache_idx]
            if self.resident[k][0] >= self.sram_end:
                break
            del self.resident[k]
            self.cache_idx += 1
        if key not in self.dram_offset:
            self.dram_offset[key] = len(self.uop_area)
            self.uop_area.extend(kernel.uops)
        self.resident[key] = (begin, self.sram_end, self.dram_offset[key])
        self.cache[evict_begin:self.cache_idx] = [key]
        self.cache_idx = evict_begin + 1
        self.load_2d(MemId.UOP, begin, self.dram_offset[key], 1, n, n)
        return begin, self.sram_end

    def push_gemm(self, key, kernel):
        begin, end = self.push_kernel(key, kernel)
        lp = list(kernel.loops) + [KernelLoop(1, 0, 0, 0)] * (2 - len(kernel.loops))
        self.insns.append(GemmInsn(kernel.reset, begin, end, lp[0].extent, lp[1].extent,
                                   lp[0].dst, lp[1].dst, lp[0].src, lp[1].src, lp[0].wgt,
                                   lp[1].wgt, **self.create(COMPUTE)))

    def push_alu(self, key, kernel):
        begin, end = self.push_kernel(key, kernel)
        if len(kernel.loops) == 1:
            out, inn = KernelLoop(1, 0, 0), kernel.loops[0]
        else:
            lp = list(kernel.loops) + [KernelLoop(1, 0, 0)] * (2 - len(kernel.loops))
            out, inn = lp
        self.insns.append(AluInsn(kernel.alu_op, kernel.use_imm, kernel.imm, kernel.reset,
                                  begin, end, out.extent, inn.extent, out.dst, inn.dst,
                                  out.src, inn.src, **self.create(COMPUTE)))

    def synchronize(self):
        self.dep_push(STORE, COMPUTE)
        self.dep_push(LOAD, COMPUTE)
        self.dep_pop(STORE, COMPUTE)
        self.dep_pop(LOAD, COMPUTE)
        self.commit(COMPUTE)
        self.insns.append(FinishInsn())


def _slow_kernel(axes, base, reset):
    folded = tuple(KernelLoop(e, c[0], 0, 0) if reset else KernelLoop(e, *c)
                   for _, e, c in axes[:2])
    uops = [base]
    for _, e, (cd, cs, cw) in axes[2:]:
        uops = [(d + i * cd, s + i * cs, w + i * cw) for d, s, w in uops for i in range(e)]
    if reset:
        return Kernel(tuple(Uop(d, 0, 0) for d, _, _ in uops), folded, reset=True)
    return Kernel(tuple(Uop(d, s, w) for d, s, w in uops), folded)


class _Leaf:
    def __init__(self, fn) -> None:
        self.fn = fn


def _slow_emit(plan: Plan) -> Program:
    hw, g, sch = plan.hw, plan.geo, plan.schedule
    tensors, dram_bytes = _emit._tensors(plan.workload, plan.hw, plan.bias)
    base = {t.name: t.address for t in tensors}
    inp0 = base["data"] // hw.inp_elem_bytes
    wgt0 = base["weight"] // hw.wgt_elem_bytes
    out0 = base["output"] // hw.out_elem_bytes
    bias0 = base.get("bias", 0) // hw.acc_elem_bytes
    q = _SlowQueue(hw)
    resident: dict = {}
    oc_n, h_n = sch.oc_nthread, sch.h_nthread

    def coords(env, t):
        t_h, t_oc = divmod(t, oc_n)
        return (env.get("b", 0) * sch.tile_b + env.get("bi", 0), env.get("h", 0) * h_n + t_h,
                env.get("c", 0) * oc_n + t_oc, env.get("w", 0))

    def window(tile, size, extent):
        a = tile * size * g.s
        e = (size - 1) * g.s + g.k
        before = max(g.p - a, 0)
        after = max(a + e - (extent + g.p), 0)
        return a - g.p + before, e - before - after, before, after

    def issue(mem, slot, loads):
        key = tuple(loads)
        if sch.reuse and resident.get(slot) == key:
            return
        resident[slot] = key
        for sram, dram, y, x, st, pads in loads:
            q.load_2d(mem, sram, dram, y, x, st, pads)

    def load_inp(env, t):
        b, ht, _, wt = coords(env, t)
        c0 = env.get("k0", 0) * sch.tile_ci
        y0, ny, py0, py1 = window(ht, sch.tile_h, g.h)
        x0, nx, px0, px1 = window(wt, sch.tile_w, g.w)
        loads = []
        if g.p > 0 or plan.inp_split:
            for c in range(sch.tile_ci):
                dram = inp0 + ((b * g.cib + c0 + c) * g.h + y0) * g.w + x0
                sram = t * plan.inp_tile + c * g.eh * g.ew
                if g.p > 0:
                    loads.append((sram, dram, ny, nx, g.w, (py0, py1, px0, px1)))
                else:
                    loads.append((sram, dram, *pattern_2d([(ny, g.w), (nx, 1)]), (0, 0, 0, 0)))
        else:
            y, x, st = pattern_2d([(sch.tile_ci, g.h * g.w), (ny, g.w), (nx, 1)])
            dram = inp0 + ((b * g.cib + c0) * g.h + y0) * g.w + x0
            loads.append((t * plan.inp_tile, dram, y, x, st, (0, 0, 0, 0)))
        issue(MemId.INP, ("inp", t), loads)

    kk = g.k * g.k

    def load_wgt(env, t):
        _, _, ct, _ = coords(env, t)
        y, x, st = pattern_2d([(sch.tile_co, g.cib * kk), (sch.tile_ci, kk), (kk, 1)])
        dram = wgt0 + (ct * sch.tile_co * g.cib + env.get("k0", 0) * sch.tile_ci) * kk
        issue(MemId.WGT, ("wgt", t), [(t * plan.wgt_tile, dram, y, x, st, (0, 0, 0, 0))])

    def load_bias(env, t):
        b, _, ct, _ = coords(env, t)
        y, x, st = pattern_2d([(sch.tile_b, g.cob), (sch.tile_co, 1)])
        q.load_2d(MemId.ACC, plan.nthreads * plan.acc_tile + t * plan.bias_tile,
                  bias0 + b * g.cob + ct * sch.tile_co, y, x, st)

    def acc_row(env, t):
        return t * plan.acc_tile + env.get("bi", 0) * plan.acc_tile // sch.tile_b

    def gemm(env, t):
        key = ("gemm", t, env.get("bi", 0))
        q.push_gemm(key, _slow_kernel(plan.gemm_axes, (acc_row(env, t), t * plan.inp_tile,
                                                       t * plan.wgt_tile), reset=False))

    def reset(env, t):
        key = ("reset", t, env.get("bi", 0))
        q.push_gemm(key, _slow_kernel(plan.reset_axes, (acc_row(env, t), 0, 0), reset=True))

    def alu(i):
        def fn(env, t):
            q.push_alu(("alu", i, t), plan.alu_kernels(t)[i])
        return fn

    sizes = [d[0] for d in plan.store_loops]
    strides = [d[1] for d in plan.store_loops]
    acc_strides = [sch.tile_co * sch.tile_h * sch.tile_w, sch.tile_h * sch.tile_w, sch.tile_w,
                   1][: len(sizes)]

    def store(env, t):
        b, ht, ct, wt = coords({**env, "bi": 0}, t)
        origin = out0 + ((b * g.cob + ct * sch.tile_co) * g.oh + ht * sch.tile_h) * g.ow \
            + wt * sch.tile_w
        idx = [0] * len(sizes)
        total = 1
        for size in sizes:
            total *= size
        for _ in range(total):
            sram = t * plan.acc_tile + sum(i * s for i, s in zip(idx, acc_strides, strict=True))
            dram = origin + sum(i * s for i, s in zip(idx, strides, strict=True))
            q.store_2d(sram, dram, *plan.store_pattern)
            for d in reversed(range(len(idx))):
                idx[d] += 1
                if idx[d] < sizes[d]:
                    break
                idx[d] = 0

    inner = [Stage(COMPUTE, [_Leaf(reset)])]
    inner += loop("k0", g.cib // sch.tile_ci,
                  [Stage(LOAD, [_Leaf(load_inp), _Leaf(load_wgt)]),
                   Stage(COMPUTE, [_Leaf(gemm)])])
    tile = loop("bi", sch.tile_b, inner)
    # the benchmark epilogue: shift, [bias load, add], the clip's two steps
    epilogue = [_Leaf(alu(0))]
    if plan.bias:
        epilogue += [_Leaf(load_bias), _Leaf(alu(1))]
    epilogue += [_Leaf(alu(i)) for i in range(1 + plan.bias, 3 + plan.bias)]
    tile += [Stage(COMPUTE, epilogue), Stage(STORE, [_Leaf(store)])]
    body = tile
    for axis in reversed(sch.outer_order):
        body = loop(axis, g.counts[axis], body)

    def run(items, env):
        for item in items:
            if isinstance(item, For):
                for v in range(item.extent):
                    env[item.var] = v
                    run(item.body, env)
                del env[item.var]
            elif isinstance(item, Threaded):
                for op in item.node.ops:
                    if isinstance(op, Dep):
                        (q.dep_push if op.push else q.dep_pop)(op.src, op.dst)
                    else:
                        op.fn(env, item.thread)
            else:
                (q.dep_push if item.push else q.dep_pop)(item.src, item.dst)

    synced = insert_deps(body)
    if plan.nthreads == 1 and len(body) == 1 and isinstance(body[0], For):
        # the body is its tile loop: TVM's draining pops come after the synchronize
        while isinstance(synced[-1], Dep) and not synced[-1].push:
            synced.pop()
    run(expand_threads(synced, plan.nthreads), {})
    q.synchronize()
    return Program(tuple(q.insns), tuple(q.uop_area), tensors, dram_bytes)


# --- the comparison -------------------------------------------------------------------------


def _typed(value):
    """A value with the type of every field spelled out (True == 1, but not here)."""
    if isinstance(value, tuple):
        return tuple(_typed(v) for v in value)
    if hasattr(value, "__dataclass_fields__"):
        return (type(value).__name__,
                *(_typed(getattr(value, f.name)) for f in fields(value)))
    return (type(value).__name__, value)


def _assert_same(wl, s, hw, bias):
    low = lower(wl, s, hw, bias)
    ref = _slow_emit(low.plan)
    assert low.program == ref, (wl.describe(), s.short(), hw.bitstream, bias)
    assert _typed(low.program) == _typed(ref), (wl.describe(), s.short())
    return len(ref.instructions)


HW48 = PRESETS["4x8"]
BIG = replace(DEFAULT, log_uop_buff_size=10, log_inp_buff_size=20, log_wgt_buff_size=18,
              log_acc_buff_size=17)


def _cases():
    rng = random.Random(5)
    cases = []
    wls = [(wl, DEFAULT) for wl in resnet18_layers()]
    wls += [(WORKLOADS["gemm"]["dense128"], DEFAULT), (WORKLOADS["gemm"]["tutorial"], DEFAULT),
            (WORKLOADS["conv2d"]["resnet18.C9"], PRESETS["ultra96"]),
            (Conv2dWorkload(4, 14, 14, 64, 64, 3, 1, 1), HW48), (GemmWorkload(16, 256, 128), HW48),
            (WORKLOADS["conv2d"]["resnet18.C11"], BIG)]
    for wl, hw in wls:
        for space in ("full", "autotvm"):
            bias = rng.random() < 0.5
            tpl = get_template(wl, hw, bias=bias, space=space, tune_store=space == "full")
            for _ in range(200):
                c = {k.name: rng.choice(k.choices) for k in tpl.knobs}
                # the slow reference lays a GEMM's rows out as batch blocks only (its rows as
                # pixels, rows="spatial", are checked bit-exact in test_gemm_rows.py)
                if c.get("rows") == "spatial" or not tpl.legal(c):
                    continue
                s = tpl.to_schedule(c)
                if space == "full":
                    s = replace(s, reuse=rng.random() < 0.7,
                                clip_order=rng.choice(("min_max", "max_min")))
                # keep the slow reference cheap: short programs only (a program's length
                # is its table's: decoding every instruction here made collection 10 s)
                if len(lower(wl, s, hw, bias).program) <= 2500:
                    cases.append((wl, s, hw, bias))
                    break
    for wl in (WORKLOADS["conv2d"]["tutorial"], WORKLOADS["gemm"]["tutorial"]):
        cases.append((wl, tutorial_schedule(wl), DEFAULT, True))
    return cases


@pytest.mark.parametrize("case", _cases(), ids=lambda c: f"{c[0].name or c[0].key()}")
def test_fast_emitter_matches_slow_reference(case):
    assert _assert_same(*case) > 0


def test_every_tile_loop_nest_shares_the_one_loop_skeleton():
    """Skeletons of two or more tile loops are the one-loop skeleton with that loop replaced
    by the nest (CoProcSync puts no dependency between directly nested loops): equal to the
    skeleton recorded from the loop tree for every order of the tile loops."""
    structures = 0
    for k in range(5):
        for outer in itertools.permutations(("b", "h", "c", "w", "g"), k):
            for inner in ((), ("bi",), ("k0",), ("bi", "k0")):
                for nthreads, v01 in ((1, False), (2, False), (1, True)):
                    looped = (*outer, *inner)
                    leaves = ("load_bias", "alu0", "alu1")
                    shared = _skeleton._skeleton(looped, leaves, nthreads, v01)
                    recorded = _skeleton._record_skeleton(looped, leaves, nthreads, v01)
                    assert np.array_equal(shared.ops, recorded.ops), (looped, nthreads, v01)
                    assert shared.after_sync == recorded.after_sync, (looped, nthreads, v01)
                    structures += 1
    assert structures == 206 * 4 * 3  # orders of 0-4 of the 5 tile axes x inner loops x threads
