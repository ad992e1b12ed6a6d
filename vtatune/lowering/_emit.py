"""Emitting a planned schedule: loop tree -> TVM's dependencies -> vthreads -> instructions.

The loop tree (with TVM's dependencies and vthreads) is compiled once into closures: a loop
variable is a slot of one list, each leaf is bound to its thread with the thread's SRAM
bases, coordinates and kernels precomputed, and the DMA windows are tabulated per tile row
and column. Running the closures feeds the command queue.
"""

from __future__ import annotations

from functools import partial

from simulator.isa import MemId
from simulator.program import Program, layout_tensors

from ..workloads import GemmWorkload
from ._ir import Dep, For, Stage, Threaded, expand_threads, insert_deps, loop
from ._plan import Plan, pattern_2d, window
from ._runtime import COMPUTE, LOAD, STORE, CommandQueue

#: Slots of the loop variables in the environment list (a variable outside its loop is 0).
_SLOT = {"b": 0, "h": 1, "c": 2, "w": 3, "bi": 4, "k0": 5}
_B, _H, _C, _W, _BI, _K0 = range(6)


class _Leaf:
    """A leaf operation inside a stage scope; ``make(t)`` gives its closure for thread t."""

    def __init__(self, make) -> None:
        self.make = make


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


def _windows(g, ntiles: int, size: int, extent: int):
    """Per tile: (first row, id of its (rows, pads) shape); and the shapes by id."""
    ids: dict[tuple[int, int, int], int] = {}
    starts = []
    for tile in range(ntiles):
        y0, n, p0, p1 = window(g.p, g.s, g.k, tile, size, extent)
        starts.append((y0, ids.setdefault((n, p0, p1), len(ids))))
    return starts, list(ids)


def emit(plan: Plan) -> Program:
    hw, g, sch = plan.hw, plan.geo, plan.schedule
    tensors, dram_bytes = _tensors(plan)
    base = {t.name: t.address for t in tensors}
    inp0 = base["data"] // hw.inp_elem_bytes
    wgt0 = base["weight"] // hw.wgt_elem_bytes
    out0 = base["output"] // hw.out_elem_bytes
    bias0 = base.get("bias", 0) // hw.acc_elem_bytes
    q = CommandQueue(hw)
    env = [0] * len(_SLOT)
    oc_n, h_n = sch.oc_nthread, sch.h_nthread
    tile_b, tile_h, tile_w, tile_co, tile_ci = (sch.tile_b, sch.tile_h, sch.tile_w,
                                                sch.tile_co, sch.tile_ci)
    reuse = sch.reuse
    cib, cob, gh, gw = g.cib, g.cob, g.h, g.w

    def thread_coords(t):
        """(t_h, t_oc): a thread's row-tile and oc-tile offsets."""
        return divmod(t, oc_n)

    # --- input loads: windows per tile row / column, DMA shape per window pair -----------
    ywin, yshapes = _windows(g, g.oh // tile_h, tile_h, g.h)
    xwin, xshapes = _windows(g, g.ow // tile_w, tile_w, g.w)
    split = g.p > 0 or plan.inp_split
    shapes = []  # [y id][x id] -> (y_size, x_size, x_stride, y_pad_0, y_pad_1, x_pad_0, x_pad_1)
    for ny, py0, py1 in yshapes:
        row = []
        for nx, px0, px1 in xshapes:
            if g.p > 0:
                row.append((ny, nx, gw, py0, py1, px0, px1))
            elif split:
                row.append((*pattern_2d([(ny, gw), (nx, 1)]), 0, 0, 0, 0))
            else:
                row.append((*pattern_2d([(tile_ci, gh * gw), (ny, gw), (nx, 1)]), 0, 0, 0, 0))
        shapes.append(row)
    chan = [(c * g.eh * g.ew, c * gh * gw) for c in range(tile_ci if split else 1)]
    INP, WGT = MemId.INP, MemId.WGT

    def load_inp(t):
        t_h, _ = thread_coords(t)
        sram0 = plan.inp_base(t)
        chans = [(sram0 + ds, dd) for ds, dd in chan]
        push = q.load_inp
        last = [None]  # the tile resident in this thread's INP slot: (dram, shape)

        def fn():
            y0, yid = ywin[env[_H] * h_n + t_h]
            x0, xid = xwin[env[_W]]
            dram = inp0 + (((env[_B] * tile_b + env[_BI]) * cib + env[_K0] * tile_ci) * gh
                           + y0) * gw + x0
            shape = shapes[yid][xid]
            # The loads are a function of (dram, shape) exactly: skip a resident tile.
            if reuse:
                key = (dram, shape)
                if last[0] == key:
                    return
                last[0] = key
            for sram, dd in chans:
                push(INP, sram, dram + dd, *shape)
        return fn

    kk = g.k * g.k
    wy, wx, wst = pattern_2d([(tile_co, cib * kk), (tile_ci, kk), (kk, 1)])

    def load_wgt(t):
        _, t_oc = thread_coords(t)
        sram = plan.wgt_base(t)
        push = q.load_inp
        last = [None]

        def fn():
            dram = wgt0 + ((env[_C] * oc_n + t_oc) * tile_co * cib + env[_K0] * tile_ci) * kk
            if reuse:
                if last[0] == dram:
                    return
                last[0] = dram
            push(WGT, sram, dram, wy, wx, wst, 0, 0, 0, 0)
        return fn

    by, bx, bst = pattern_2d([(tile_b, cob), (tile_co, 1)])
    ACC = MemId.ACC

    def load_bias(t):
        _, t_oc = thread_coords(t)
        sram = plan.bias_base(t)
        push = q.load_2d

        def fn():
            b = env[_B] * tile_b + env[_BI]
            ct = env[_C] * oc_n + t_oc
            push(ACC, sram, bias0 + b * cob + ct * tile_co, by, bx, bst)
        return fn

    # A kernel depends only on (thread, batch row): each is built once.
    def kernel_leaf(kind, build):
        def make(t):
            keyed = [((kind, t, bi), build(t, bi)) for bi in range(tile_b)]
            push = q.push_gemm
            if tile_b == 1:
                key, kernel = keyed[0]
                return partial(push, key, kernel)

            def fn():
                key, kernel = keyed[env[_BI]]
                push(key, kernel)
            return fn
        return make

    alu_kernels = [dict(plan.alu_kernels(t)) for t in range(plan.nthreads)]

    def alu(name):
        def make(t):
            return partial(q.push_alu, ("alu", name, t), alu_kernels[t][name])
        return make

    store_sizes = [d[0] for d in plan.store_loops]
    store_strides = [d[1] for d in plan.store_loops]
    # SRAM strides of the looped store dims: the ACC tile is dense (b, co, h, w).
    acc_strides = [tile_co * tile_h * tile_w, tile_h * tile_w, tile_w, 1][: len(store_sizes)]
    offsets = [(0, 0)]  # (sram, dram) offset per store, innermost dim fastest
    for size, a_st, d_st in zip(store_sizes, acc_strides, store_strides, strict=True):
        offsets = [(so + i * a_st, do + i * d_st) for so, do in offsets for i in range(size)]
    sy, sx, sst = plan.store_pattern

    def store(t):
        t_h, t_oc = thread_coords(t)
        acc = plan.acc_base(t)
        offs = [(acc + so, do) for so, do in offsets]
        push = q.store_2d

        def fn():
            origin = out0 + (((env[_B] * tile_b * cob + (env[_C] * oc_n + t_oc) * tile_co) * g.oh
                              + (env[_H] * h_n + t_h) * tile_h) * g.ow + env[_W] * tile_w)
            for sram, do in offs:
                push(sram, origin + do, sy, sx, sst)
        return fn

    # --- the loop tree of one tile, then the outer tile loops --------------------------
    inner = [Stage(COMPUTE, [_Leaf(kernel_leaf("reset", plan.reset_kernel))])]
    inner += loop("k0", g.cib // sch.tile_ci,
                  [Stage(LOAD, [_Leaf(load_inp), _Leaf(load_wgt)]),
                   Stage(COMPUTE, [_Leaf(kernel_leaf("gemm", plan.gemm_kernel))])])
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
    for fn in _compile(tree, env, q, None):
        fn()
    q.synchronize()
    return Program(q.instructions(), tuple(q.uop_area), tensors, dram_bytes)


def _compile(items, env: list[int], q: CommandQueue, thread: int | None) -> list:
    """The closures running ``items`` (loops, thread-bound stage scopes, deps, leaves)."""
    out = []
    for item in items:
        if isinstance(item, For):
            out.append(_loop(env, _SLOT[item.var], item.extent,
                             _compile(item.body, env, q, thread)))
        elif isinstance(item, Threaded):
            out.extend(_compile(item.node.ops, env, q, item.thread))
        elif isinstance(item, Dep):
            out.append(partial(q.dep_push if item.push else q.dep_pop, item.src, item.dst))
        elif isinstance(item, _Leaf):
            out.append(item.make(thread))
        else:  # pragma: no cover
            raise TypeError(item)
    return out


def _loop(env: list[int], slot: int, extent: int, body: list):
    if len(body) == 1:
        fn = body[0]

        def run() -> None:
            for v in range(extent):
                env[slot] = v
                fn()
            env[slot] = 0
        return run
    seq = tuple(body)

    def run_seq() -> None:
        for v in range(extent):
            env[slot] = v
            for f in seq:
                f()
        env[slot] = 0
    return run_seq
