"""Emitting a planned schedule: loop tree -> TVM's dependencies -> vthreads -> instructions.

The loop tree (with TVM's dependencies and vthreads) is recorded once into the command
queue's loop program: each loop variable is a slot, each leaf is bound to its thread with
the thread's SRAM bases, coordinates and kernels, every DRAM address is recorded as its
constant and per-slot coefficients, and the input windows (origin and shape per tile row
and column) are tables. The queue then runs the whole nest in one compiled pass.
"""

from __future__ import annotations

from functools import lru_cache

from simulator.isa import MemId
from simulator.program import Program, layout_tensors
from vtatune.lowering._carry import FRESH, Carry
from vtatune.lowering._context import context
from vtatune.lowering._dma import pattern_2d, window
from vtatune.lowering._ir import Dep, For, Stage, Threaded, expand_threads, insert_deps, loop
from vtatune.lowering._plan import Plan
from vtatune.lowering._runtime import COMPUTE, LOAD, STORE, CommandQueue, window_tables
from vtatune.workloads import GemmWorkload

#: Slots of the loop variables (a variable outside its loop is 0). ``g``: group_conv2d's
#: groups, when an oc tile lies within one group: the oc tile loop runs as a loop over the
#: groups around a loop over a group's tiles (the same iterations in the same order as
#: TVM's one loop, and CoProcSync puts no dependency between two directly nested loops),
#: so that the input's channel offset is affine in the loop variables.
_SLOT = {"b": 0, "h": 1, "c": 2, "w": 3, "bi": 4, "k0": 5, "g": 6}
_B, _H, _C, _W, _BI, _K0, _G = range(7)


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
        if tensor and f"load_{tensor}" not in leaves:
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


@lru_cache(maxsize=256)
def _tensors(workload, hw, bias: bool):
    """The DRAM layout: a function of the workload, hardware and bias only."""
    g = context(workload, hw)
    B, BI, BO = hw.batch, hw.block_in, hw.block_out
    gemm = isinstance(workload, GemmWorkload)
    if gemm:
        specs = [("data", (g.nb, g.cib, B, BI), "int8", "input"),
                 ("weight", (g.cob, g.cib, BO, BI), "int8", "input")]
        out_shape = (g.nb, g.cob, B, BO)
    else:
        # conv2d_transpose: "data" is the stride-dilated input (TVM's DilatedInput, which
        # the host writes to DRAM before VTA runs).
        # packed by BLOCK_OUT when BLOCK_OUT > BLOCK_IN (the previous layer's output layout)
        specs = [("data", (g.nb, g.in_blocks // g.in_pack, g.h, g.w, B, BI * g.in_pack),
                  "int8", "input"),
                 ("weight", (g.cob, g.cib, g.k, g.k, BO, BI), "int8", "input")]
        # packed by BLOCK_IN when BLOCK_IN > BLOCK_OUT (the next layer's input layout)
        out_shape = (g.nb, g.cob // g.out_pack, g.oh, g.ow, B, BO * g.out_pack)
    if bias:
        specs.append(("bias", (g.nb, g.cob, B, BO), "int32", "input"))
    specs.append(("output", out_shape, "int8", "output"))
    align = max(hw.inp_elem_bytes, hw.wgt_elem_bytes, hw.acc_elem_bytes, hw.out_elem_bytes)
    return layout_tensors(specs, align)


def _windows(p: int, s: int, k: int, ntiles: int, size: int, extent: int):
    """Per tile: (first row, id of its (rows, pads) shape); and the shapes by id."""
    ids: dict[tuple[int, int, int], int] = {}
    starts = []
    for tile in range(ntiles):
        y0, n, p0, p1 = window(p, s, k, tile, size, extent)
        starts.append((y0, ids.setdefault((n, p0, p1), len(ids))))
    return starts, list(ids)


@lru_cache(maxsize=1024)
def _input_windows(p: int, s: int, k: int, oh: int, ow: int, gh: int, gw: int, tile_h: int,
                   tile_w: int, nch: int, split: bool, pk: int):
    """The queue's window tables of the input loads (see CommandQueue.set_windows). With
    the input packed by BLOCK_OUT (``pk`` BLOCK_IN blocks a pixel, lowering.input_pack) a
    row's columns, pads and stride count pk elements a pixel."""
    ywin, yshapes = _windows(p, s, k, oh // tile_h, tile_h, gh)
    xwin, xshapes = _windows(p, s, k, ow // tile_w, tile_w, gw)
    xwin = [(x0 * pk, i) for x0, i in xwin]
    row_len = gw * pk
    shapes = []  # [y id][x id] -> (y_size, x_size, x_stride, y_pad_0, y_pad_1, x_pad_0, x_pad_1)
    for ny, py0, py1 in yshapes:
        row = []
        for nx, px0, px1 in xshapes:
            if p > 0:
                row.append((ny, nx * pk, row_len, py0, py1, px0 * pk, px1 * pk))
            elif split:
                row.append((*pattern_2d([(ny, row_len), (nx * pk, 1)]), 0, 0, 0, 0))
            else:
                row.append((*pattern_2d([(nch // pk, gh * row_len), (ny, row_len),
                                         (nx * pk, 1)]), 0, 0, 0, 0))
        shapes.append(row)
    return window_tables(ywin, xwin, shapes)


def emit(plan: Plan, carry: Carry = FRESH, stream: str = "tvm"
         ) -> tuple[Program, tuple[tuple[int, int], ...]]:
    """The program of ``plan`` after a stream that left ``carry`` (tokens in the FIFOs,
    pops pending in the runtime's queue), and the pops it leaves pending itself.
    ``stream="v0.1"`` rebuilds the stream vtatune 0.1 emitted (see :func:`lower`)."""
    v01 = _stream_v01(stream)
    hw, g, sch = plan.hw, plan.geo, plan.schedule
    tensors, dram_bytes = _tensors(plan.workload, hw, plan.bias)
    base = {t.name: t.address for t in tensors}
    inp0 = base["data"] // hw.inp_elem_bytes
    wgt0 = base["weight"] // hw.wgt_elem_bytes
    out0 = base["output"] // hw.out_elem_bytes
    bias0 = base.get("bias", 0) // hw.acc_elem_bytes
    q = CommandQueue(hw, carry.pending, merge_nop_push=v01)
    oc_n, h_n = sch.oc_nthread, sch.h_nthread
    tile_b, tile_h, tile_w, tile_co, tile_ci = (sch.tile_b, sch.tile_h, sch.tile_w,
                                                sch.tile_co, sch.tile_ci)
    reuse = sch.reuse
    cib, cob, gh, gw = g.cib, g.cob, g.h, g.w

    def thread_coords(t):
        """(t_h, t_oc): a thread's row-tile and oc-tile offsets."""
        return divmod(t, oc_n)

    # --- input loads: windows per tile row / column, DMA shape per window pair -----------
    nch = plan.inp_channels
    split = g.p > 0 or plan.inp_split
    pk = g.in_pack
    q.set_windows(_input_windows(g.p, g.s, g.k, g.oh, g.ow, gh, gw, tile_h, tile_w, nch,
                                 split, pk))
    # one load per channel block (per BLOCK_OUT block when the input is packed so)
    chan = [(c * g.eh * g.ew * pk, c * gh * gw * pk) for c in range(nch // pk if split else 1)]
    INP, WGT = MemId.INP, MemId.WGT
    group_loop, per_tile = plan.group_loop, plan.groups_per_tile

    # DRAM addresses as functions of the loop variables e and the thread's coordinates
    # (t_h, t_oc): linear in e, so the queue gets each as its constant and coefficients.
    def oc_tile(e, t_oc):
        return (e[_G] * group_loop + e[_C]) * oc_n + t_oc

    def first_group(e, t_oc):
        """The first group an oc tile reads (group_conv2d; 0 otherwise)."""
        if g.groups == 1:
            return 0
        return e[_G] if group_loop else oc_tile(e, t_oc) * per_tile

    def inp_address(e, t_h, t_oc):
        # The window adds the tile's (y0 * gw + x0) and gives the DMA shape.
        return inp0 + ((e[_B] * tile_b + e[_BI]) * g.in_blocks + first_group(e, t_oc) * cib
                       + e[_K0] * tile_ci) * gh * gw

    def wgt_address(e, t_h, t_oc):
        return wgt0 + (oc_tile(e, t_oc) * tile_co * cib + e[_K0] * tile_ci) * kk

    def bias_address(e, t_h, t_oc):
        return bias0 + (e[_B] * tile_b + e[_BI]) * cob + oc_tile(e, t_oc) * tile_co

    def out_address(e, t_h, t_oc):
        # The tile's first pixel; its first channel block starts a BLOCK_IN block
        # (store_layout rule), so the pixel offset is scaled by the output packing.
        return out0 + ((e[_B] * tile_b * cob + oc_tile(e, t_oc) * tile_co) * g.oh * g.ow
                       + (((e[_H] * h_n + t_h) * tile_h) * g.ow + e[_W] * tile_w) * g.out_pack)

    def affine(address, t):
        """(constant, coefficients) of ``address`` for thread t (coefficients are the
        same for every thread: computed once)."""
        coefs = coef_cache.get(address)
        if coefs is None:
            coefs = coef_cache[address] = _coefficients(address)
        return address(_ZERO, *thread_coords(t)), coefs

    coef_cache: dict = {}
    kk = g.k * g.k

    def load_inp(t):
        sram0 = plan.inp_base(t)
        t_h, _ = thread_coords(t)
        const, coefs = affine(inp_address, t)
        for ds, dd in chan:
            # The loads are a function of (dram, shape) exactly: skip a resident tile.
            q.load_2d(INP, sram0 + ds, const + dd, 0, 0, 0, coefs=coefs, reuse=reuse,
                      window=(gw * pk, _H, h_n, t_h, _W))

    wy, wx, wst = pattern_2d([(tile_co, cib * kk), (tile_ci, kk), (kk, 1)])

    def load_wgt(t):
        const, coefs = affine(wgt_address, t)
        q.load_2d(WGT, plan.wgt_base(t), const, wy, wx, wst, coefs=coefs, reuse=reuse)

    by, bx, bst = pattern_2d([(tile_b, cob), (tile_co, 1)])
    ACC = MemId.ACC

    def load_bias(t):
        const, coefs = affine(bias_address, t)
        q.load_2d(ACC, plan.bias_base(t), const, by, bx, bst, coefs=coefs)

    # A kernel depends only on (thread, batch row): one per row, chosen by the bi loop.
    def kernel_leaf(kind, build):
        def make(t):
            ids = [q.kernel_id((kind, t, bi), build(t, bi)) for bi in range(tile_b)]
            assert ids == list(range(ids[0], ids[0] + tile_b))
            q.push_kernel(ids[0], _BI if tile_b > 1 else -1)
        return make

    alu_kernels = [plan.alu_kernels(t) for t in range(plan.nthreads)]

    def alu(i):
        def make(t):
            q.push_alu(("alu", i, t), alu_kernels[t][i])
        return make

    # A tile is stored by one DMA per element of its looped dims (outermost first): the
    # queue gets one store inside those loops, on the slots after the tile loops'.
    store_loops = [(len(_SLOT) + j, size, a_st, d_st)
                   for j, (size, d_st, a_st) in enumerate(plan.store_loops) if size > 1]
    sy, sx, sst = plan.store_pattern

    def store(t):
        const, coefs = affine(out_address, t)
        for slot, size, _, _ in store_loops:
            q.begin_loop(slot, size)
        q.store_2d(plan.acc_base(t), const, sy, sx, sst,
                   coefs={**coefs, **{slot: d_st for slot, _, _, d_st in store_loops}},
                   sram_coefs={slot: a_st for slot, _, a_st, _ in store_loops})
        for _ in store_loops:
            q.end_loop()

    # --- the loop tree, recorded leaf by leaf -------------------------------------------
    makers = {"reset": kernel_leaf("reset", plan.reset_kernel),
              "gemm": kernel_leaf("gemm", plan.gemm_kernel), "load_inp": load_inp,
              "load_wgt": load_wgt, "load_bias": load_bias, "store": store,
              **{f"alu{i}": alu(i) for i in range(len(plan.alu_steps))}}
    extents = {_SLOT[axis]: g.counts[axis] for axis in sch.outer_order}
    extents[_SLOT["bi"]], extents[_SLOT["k0"]] = sch.tile_b, g.cib // sch.tile_ci
    outer = sch.outer_order
    if group_loop:
        outer = outer.replace("c", "gc")
        extents[_G], extents[_C] = g.groups, group_loop
    looped = tuple(axis for axis in (*outer, "bi", "k0") if extents[_SLOT[axis]] > 1)
    steps, after_sync = _steps(looped, epilogue_leaves(plan.alu_steps), plan.nthreads, v01)
    for kind, a, b in steps:
        if kind == _LEAF:
            makers[a](b)
        elif kind == _LOOP:
            q.begin_loop(a, extents[a])
        elif kind == _END:
            q.end_loop()
        elif kind == _PUSH:
            q.dep_push(a, b)
        else:
            q.dep_pop(a, b)
    q.synchronize()
    table, uops = q.run()
    return Program(table, uops, tensors, dram_bytes, carry.tokens), after_sync


_ZERO = (0,) * len(_SLOT)


def _coefficients(address) -> dict[int, int]:
    """Per-slot coefficients of ``address(e, t_h, t_oc)``, linear in the loop variables e."""
    const = address(_ZERO, 0, 0)
    coefs = {}
    for slot in range(len(_SLOT)):
        unit = [0] * len(_SLOT)
        unit[slot] = 1
        if c := address(unit, 0, 0) - const:
            coefs[slot] = c
    return coefs


#: The streams :func:`emit` can build: TVM's (``vta/runtime/runtime.cc`` and CoProcSync as
#: TVM v0.14 has them) and vtatune 0.1's, which merged a push into a load or compute NOP and
#: drained a single-thread tile loop before the synchronize (the shared RTL measurements ran
#: those streams: :mod:`vtatune.fidelity` rebuilds them to score the timing model).
STREAMS = ("tvm", "v0.1")


def _stream_v01(stream: str) -> bool:
    if stream not in STREAMS:
        raise ValueError(f"unknown stream rules {stream!r} (known: {', '.join(STREAMS)})")
    return stream == "v0.1"
