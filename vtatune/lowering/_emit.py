"""Emitting a planned schedule: loop tree -> TVM's dependencies -> vthreads -> instructions."""

from __future__ import annotations

from simulator.isa import MemId, Uop
from simulator.program import Program, layout_tensors

from ..workloads import GemmWorkload
from ._ir import Dep, For, Stage, Threaded, expand_threads, insert_deps, loop
from ._plan import Plan, fold_2d, pattern_2d
from ._runtime import COMPUTE, LOAD, STORE, CommandQueue


class _Leaf:
    """A leaf operation inside a stage scope; ``emit`` runs it against the command queue."""

    def __init__(self, fn) -> None:
        self.fn = fn


def _tensors(plan: Plan):
    hw, g = plan.hw, plan.geo
    B, BI, BO = hw.batch, hw.block_in, hw.block_out
    gemm = isinstance(plan.workload, GemmWorkload)
    if gemm:
        specs = [("data", (g.nb, g.cib, B, BI), "int8", "input"),
                 ("weight", (g.cob, g.cib, BO, BI), "int8", "input")]
        out_shape = (g.nb, g.cob, B, BO)
    else:
        specs = [("data", (g.nb, g.cib, g.h, g.w, B, BI), "int8", "input"),
                 ("weight", (g.cob, g.cib, g.k, g.k, BO, BI), "int8", "input")]
        out_shape = (g.nb, g.cob, g.oh, g.ow, B, BO)
    if plan.bias:
        specs.append(("bias", (g.nb, g.cob, B, BO), "int32", "input"))
    specs.append(("output", out_shape, "int8", "output"))
    align = max(hw.inp_elem_bytes, hw.wgt_elem_bytes, hw.acc_elem_bytes, hw.out_elem_bytes)
    return layout_tensors(specs, align)


def emit(plan: Plan) -> Program:
    hw, g, sch = plan.hw, plan.geo, plan.schedule
    tensors, dram_bytes = _tensors(plan)
    base = {t.name: t.address for t in tensors}
    inp0 = base["data"] // hw.inp_elem_bytes
    wgt0 = base["weight"] // hw.wgt_elem_bytes
    out0 = base["output"] // hw.out_elem_bytes
    bias0 = base.get("bias", 0) // hw.acc_elem_bytes
    q = CommandQueue(hw)
    resident: dict[tuple[str, int], tuple] = {}
    oc_n, h_n = sch.oc_nthread, sch.h_nthread

    def coords(env, t):
        t_h, t_oc = divmod(t, oc_n)
        return (env.get("b", 0) * sch.tile_b + env.get("bi", 0),
                env.get("h", 0) * h_n + t_h,
                env.get("c", 0) * oc_n + t_oc,
                env.get("w", 0))

    def window(tile, size, extent):
        a = tile * size * g.s
        e = (size - 1) * g.s + g.k
        before = max(g.p - a, 0)
        after = max(a + e - (extent + g.p), 0)
        return a - g.p + before, e - before - after, before, after

    def load_inp(env, t):
        b, ht, ct, wt = coords(env, t)
        c0 = env.get("k0", 0) * sch.tile_ci
        y0, ny, py0, py1 = window(ht, sch.tile_h, g.h)
        x0, nx, px0, px1 = window(wt, sch.tile_w, g.w)
        loads = []
        if g.p > 0 or plan.inp_split:
            for c in range(sch.tile_ci):
                dram = inp0 + ((b * g.cib + c0 + c) * g.h + y0) * g.w + x0
                if g.p > 0:
                    loads.append((plan.inp_base(t) + c * g.eh * g.ew, dram, ny, nx, g.w,
                                  (py0, py1, px0, px1)))
                else:
                    y, x, st = pattern_2d([(ny, g.w), (nx, 1)])
                    loads.append((plan.inp_base(t) + c * g.eh * g.ew, dram, y, x, st,
                                  (0, 0, 0, 0)))
        else:
            y, x, st = pattern_2d([(sch.tile_ci, g.h * g.w), (ny, g.w), (nx, 1)])
            dram = inp0 + ((b * g.cib + c0) * g.h + y0) * g.w + x0
            loads.append((plan.inp_base(t), dram, y, x, st, (0, 0, 0, 0)))
        _issue(MemId.INP, ("inp", t), loads)

    kk = g.k * g.k
    wgt_pattern = pattern_2d([(sch.tile_co, g.cib * kk), (sch.tile_ci, kk), (kk, 1)])

    def load_wgt(env, t):
        _, _, ct, _ = coords(env, t)
        c0 = env.get("k0", 0) * sch.tile_ci
        y, x, st = wgt_pattern
        dram = wgt0 + (ct * sch.tile_co * g.cib + c0) * kk
        _issue(MemId.WGT, ("wgt", t), [(plan.wgt_base(t), dram, y, x, st, (0, 0, 0, 0))])

    def _issue(mem, slot, loads):
        key = tuple(loads)
        if sch.reuse and resident.get(slot) == key:
            return  # the tile is already in this SRAM slot
        resident[slot] = key
        for sram, dram, y, x, st, pads in loads:
            q.load_2d(mem, sram, dram, y, x, st, pads)

    def load_bias(env, t):
        b, _, ct, _ = coords(env, t)
        y, x, st = pattern_2d([(sch.tile_b, g.cob), (sch.tile_co, 1)])
        q.load_2d(MemId.ACC, plan.bias_base(t), bias0 + b * g.cob + ct * sch.tile_co, y, x, st)

    # A kernel depends only on (thread, batch row): build each once, not per GEMM call.
    kernels: dict[tuple[str, int, int], object] = {}

    def gemm(env, t):
        key = ("gemm", t, env.get("bi", 0))
        kernel = kernels.get(key)
        if kernel is None:
            kernel = kernels[key] = plan.gemm_kernel(t, key[2])
        q.push_gemm(key, kernel)

    def reset(env, t):
        key = ("reset", t, env.get("bi", 0))
        kernel = kernels.get(key)
        if kernel is None:
            kernel = kernels[key] = plan.reset_kernel(t, key[2])
        q.push_gemm(key, kernel)

    alu_kernels = [plan.alu_kernels(t) for t in range(plan.nthreads)]

    def alu(name):
        def fn(env, t):
            kernel = dict(alu_kernels[t])[name]
            q.push_alu(("alu", name, t), kernel)
        return fn

    store_sizes = [d[0] for d in plan.store_loops]
    store_strides = [d[1] for d in plan.store_loops]
    # SRAM strides of the looped store dims: the ACC tile is dense (b, co, h, w).
    tile_dims = [sch.tile_b, sch.tile_co, sch.tile_h, sch.tile_w]
    acc_strides = [sch.tile_co * sch.tile_h * sch.tile_w, sch.tile_h * sch.tile_w,
                   sch.tile_w, 1][: len(store_sizes)]
    y, x, st = plan.store_pattern
    _ = tile_dims

    def store(env, t):
        b, ht, ct, wt = coords({**env, "bi": 0}, t)
        origin = out0 + ((b * g.cob + ct * sch.tile_co) * g.oh + ht * sch.tile_h) * g.ow \
            + wt * sch.tile_w
        idx = [0] * len(store_sizes)
        total = 1
        for size in store_sizes:
            total *= size
        for _ in range(total):
            sram = plan.acc_base(t) + sum(i * s_ for i, s_ in zip(idx, acc_strides, strict=True))
            dram = origin + sum(i * s_ for i, s_ in zip(idx, store_strides, strict=True))
            q.store_2d(sram, dram, y, x, st)
            for d in reversed(range(len(idx))):
                idx[d] += 1
                if idx[d] < store_sizes[d]:
                    break
                idx[d] = 0

    # --- the loop tree of one tile, then the outer tile loops --------------------------
    inner = [Stage(COMPUTE, [_Leaf(reset)])]
    inner += loop("k0", g.cib // sch.tile_ci,
                  [Stage(LOAD, [_Leaf(load_inp), _Leaf(load_wgt)]),
                   Stage(COMPUTE, [_Leaf(gemm)])])
    tile = loop("bi", sch.tile_b, inner)
    epilogue = [_Leaf(alu("shr"))]
    if plan.bias:
        epilogue += [_Leaf(load_bias), _Leaf(alu("add"))]
    names = ["min", "max"] if sch.clip_order == "min_max" else ["max", "min"]
    epilogue += [_Leaf(alu(n)) for n in names]
    tile += [Stage(COMPUTE, epilogue), Stage(STORE, [_Leaf(store)])]
    body = tile
    for axis in reversed(sch.outer_order):
        body = loop(axis, g.counts[axis], body)

    tree = expand_threads(insert_deps(body), plan.nthreads)
    _run(tree, {}, q)
    q.synchronize()
    return Program(tuple(q.insns), tuple(q.uop_area), tensors, dram_bytes)


def _run(items, env, q) -> None:
    for item in items:
        if isinstance(item, For):
            for v in range(item.extent):
                env[item.var] = v
                _run(item.body, env, q)
            del env[item.var]
        elif isinstance(item, Threaded):
            _run_stage(item.node.ops, env, item.thread, q)
        elif isinstance(item, Dep):
            (q.dep_push if item.push else q.dep_pop)(item.src, item.dst)
        else:  # pragma: no cover
            raise TypeError(item)


def _run_stage(ops, env, t, q) -> None:
    for op in ops:
        if isinstance(op, _Leaf):
            op.fn(env, t)
        elif isinstance(op, Dep):
            (q.dep_push if op.push else q.dep_pop)(op.src, op.dst)
        elif isinstance(op, For):
            for v in range(op.extent):
                env[op.var] = v
                _run_stage(op.body, env, t, q)
            del env[op.var]
        else:  # pragma: no cover
            raise TypeError(op)


_ = (Uop, fold_2d)
