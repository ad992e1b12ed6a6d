"""The legality rules: everything that can make a schedule illegal, decided before a
single instruction is emitted. Each failure raises :class:`IllegalSchedule` naming the rule
and the numbers.

All legality rules live in ONE function, :func:`rules`: arithmetic only (no micro-op kernel
is built), so it costs microseconds and search spaces can call it on every candidate.
The micro-op kernel rules are decided analytically from the inner loop order and extents:

* a kernel's uop count is the product of its unrolled (non-folded) extents;
* its folded loops are the two outermost non-unit axes (their extents are the loop fields);
* dst-distinct: a uop's ACC index is injective in the (co, h, w) indices and independent of
  (ci, kh, kw). Uops are generated in mixed-radix order (innermost axis fastest), so two
  uops one apart write the same ACC row iff the innermost unrolled axis has no dst stride,
  and (otherwise) two apart iff the innermost has extent 2 and the next one out has no dst
  stride; the first clash is then uops #0/#1 resp. #0/#2, both writing the kernel's base.

The last rule, ``field_width``, makes every legal schedule encodable: from the plan it
knows the largest value the program puts in each instruction and micro-op field (SRAM
bases, DMA sizes and strides, DRAM addresses, uop indices, loop factors) and compares it
with the field's width in ``simulator.isa``'s layout, one line per fact. On a hardware
config where buffer depths, DMA strides and DRAM size put no field at risk
(``Context.fits_all``: every preset with the ResNet-18 layers) it costs nothing. The input
LOAD's four pad fields take the same values whatever the tiles (:func:`input_pads`), so
their rule, ``pad_field``, is one of :func:`shape_rules`, checked on every hardware: a
pixel of the input packed by BLOCK_OUT is ``in_pack`` elements, and so is each pixel of
its pads.

Example:
    >>> from simulator.hardware import DEFAULT
    >>> from vtatune.schedule import Schedule
    >>> from vtatune.workloads import WORKLOADS
    >>> wl = WORKLOADS["conv2d"]["resnet18.C8"]
    >>> facts = legality(wl, Schedule(tile_h=7, tile_w=14, tile_co=4), DEFAULT)
    >>> facts.n_gemm_uops, facts.acc_tile
    (84, 392)
    >>> legality(wl, Schedule(tile_h=7, tile_w=14, tile_co=3), DEFAULT)
    Traceback (most recent call last):
    ...
    vtatune.errors.IllegalSchedule: tile_co=3 does not divide the 16 output-channel blocks
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, NamedTuple

from simulator.hardware import HardwareConfig
from vtatune.errors import IllegalSchedule
from vtatune.lowering._context import (
    Context,
    channel_tile,
    context,
    schedule_context,
    tile_pack,
)
from vtatune.lowering._dma import inp_dims, input_pads, pattern_2d, store_dims, window
from vtatune.lowering._field_width import field_error, field_width_rule, pad_field_error
from vtatune.lowering._layouts import acc_coefficients
from vtatune.lowering._nest import _RESET_AXES, Axes, folds, inner_nest, kernel_rules
from vtatune.lowering._runtime import KERNEL_KEYS
from vtatune.schedule import Schedule
from vtatune.workloads import (
    CHANNEL_TENSORS,
    INTO_SAVED,
    Epilogue,
    Workload,
)


def alu_loops(extents, dst, src) -> tuple[tuple[int, int, int], ...]:
    """TVM's InjectALUIntrin loop flattening (innermost first, merge when contiguous):
    (extent, dst, src) per loop, outer to inner."""
    merged: list[tuple[int, int, int]] = []  # innermost first
    for i in range(len(extents) - 1, -1, -1):
        e = extents[i]
        if e == 1:
            continue
        d, s = dst[i], src[i]
        if merged:
            ve, vd, vs = merged[-1]
            if s == vs * ve and d == vd * ve:
                merged[-1] = (ve * e, vd, vs)
                continue
        merged.append((e, d, s))
    merged.reverse()
    return tuple(merged)


class Facts(NamedTuple):
    """What the rules computed on the way (``plan`` builds on it)."""

    eh: int  # input window rows of a tile (padded coordinates)
    ew: int
    nthreads: int
    inp_tile: int  # elements per thread
    wgt_tile: int
    acc_tile: int
    bias_tile: int  # the per-channel tensors' (bias, shift) area, one tile_b x tile_co each
    gemm_axes: Axes  # non-unit inner axes in order: (axis, extent, (dst, src, wgt) coeffs)
    reset_axes: Axes
    gemm_folds: int  # leading axes folded into the instruction's loops (at most 2)
    reset_folds: int
    n_gemm_uops: int
    n_reset_uops: int
    inp_channels: int  # input channel blocks per load step
    group_loop: int  # group_conv2d: oc tile loop iterations per group (0: no group loop)
    groups_per_tile: int  # group_conv2d: whole groups an oc tile covers (1 otherwise)
    inp_split: bool  # one input LOAD per channel block
    strict_store_pattern: tuple[int, int, int] | None  # tvm_strict tile store only
    alu_flat: tuple[tuple[int, int, int], ...]  # (extent, dst, src) per loop
    alu_bias: tuple[tuple[int, int, int], ...]  # reading a per-channel tensor


def shape_rules(ctx: Context) -> None:
    """The rules a workload fails on a hardware config whatever its schedule (the
    instruction layout, the input LOAD's pad fields, the layouts BLOCK_IN != BLOCK_OUT
    needs, DRAM addressing); raises IllegalSchedule naming the first. :func:`rules` applies
    them too, after the rules that read the schedule."""
    if ctx.widths is None:
        raise IllegalSchedule("field_width", ctx.layout_error)
    pad_error = pad_field_error(ctx)
    if pad_error:
        raise IllegalSchedule("pad_field", pad_error)
    if ctx.p == 0 and any(input_pads(ctx)):
        # the emitter pads the input loads only when the pad before is nonzero: without this
        # rule the rows and columns past the input would be left unloaded (wrong results)
        raise IllegalSchedule(
            "pad_after_only",
            f"conv2d_transpose with pad = kernel - 1 = {ctx.k - 1} and an output_padding: "
            "the input needs a pad after but none before, which vtatune does not lower")
    if ctx.rows:  # a GEMM's rows as pixels: whole BATCH x BLOCK elements, nothing packed
        pass
    elif ctx.in_pack > 1 and (ctx.batch_lanes > 1 or ctx.cib % ctx.in_pack):
        raise IllegalSchedule(
            "load_layout",
            f"BLOCK_OUT {ctx.block_out} > BLOCK_IN {ctx.block_in}: the input is packed by "
            f"BLOCK_OUT (the previous layer's output), which needs BATCH 1 (got "
            f"{ctx.batch_lanes}) and input channels (per group) a multiple of "
            f"{ctx.block_out} (got {ctx.cib} blocks of {ctx.block_in})")
    if ctx.out_pack > 1 and ctx.batch_lanes > 1 and not ctx.rows:
        raise IllegalSchedule(
            "store_layout",
            f"BATCH {ctx.batch_lanes} with BLOCK_IN {ctx.block_in} > BLOCK_OUT "
            f"{ctx.block_out}: an output element's {ctx.batch_lanes} rows of "
            f"{ctx.block_out} channels are not contiguous in the next layer's "
            f"{ctx.batch_lanes} x {ctx.block_in} input element, so no store writes that layout")
    if ctx.fits_all:
        return
    if ctx.dram_elems - 1 >= 1 << ctx.widths.dram:
        raise IllegalSchedule("field_width", field_error(
            "LOAD/STORE", "dram_base", ctx.dram_elems - 1, ctx.widths.dram,
            "the tensors do not fit the DRAM an instruction addresses"))


#: The schedule fields a tile shape is made of: every rule :func:`rules` checks before the
#: micro-op kernels reads only these (and the workload, the hardware and the template's
#: fixed fields); the kernels read the loop orders.
SHAPE_FIELDS = ("tile_b", "tile_h", "tile_w", "tile_ci", "tile_co", "oc_nthread", "h_nthread",
                "store", "rows")


#: The rules :func:`rules` checks before any rule that reads a loop order. A schedule that
#: fails one fails it, with the same message, whatever its loop orders: the verdict belongs
#: to its tile shape (``SHAPE_FIELDS``). Keep in step with the order of the checks below.
SHAPE_RULES = frozenset({
    "row_mode", "tile_divides", "thread_split", "load_layout", "store_layout",
    "tvm_dense_tensorize", "uop_kernel_keys", "group_thread_split", "group_tile",
    "tvm_output_padding", "tvm_split_tail", "inp_capacity", "wgt_capacity", "acc_capacity",
    "tvm_vthread_inplace", "dma_pattern"})


@lru_cache(maxsize=256)
def epilogue_steps(epilogue: Epilogue, bias: bool, clip_order: str
                   ) -> tuple[bool, tuple[tuple[str, int | None, str | None], ...]]:
    """(reads a bias, the ALU instructions in order) of ``epilogue`` run with the ``bias``
    flag (which adds the benchmark epilogue's bias)."""
    effective = epilogue.with_bias(bias)
    return effective.bias, effective.alu_steps(clip_order)


def channel_tensors(steps: tuple[tuple[str, int | None, str | None], ...]
                    ) -> tuple[str, ...]:
    """The per-channel tensors (bias, shift) the ALU instructions ``steps`` read, in the
    order first read: the order of their tiles in a thread's per-channel area of the ACC
    buffer (after every thread's accumulator tile), each ``tile_b x tile_co``."""
    return tuple(dict.fromkeys(t for _, _, t in steps if t in CHANNEL_TENSORS))


def rules(ctx: Context, sch: Any, bias: bool = False) -> Facts:
    """Every legality rule of a schedule, in order; raises IllegalSchedule naming the first
    that fails. ``sch`` is a :class:`Schedule` or any object with its attributes."""
    _row_mode_rule(ctx, sch)
    ctx = schedule_context(ctx, sch)
    shape = _Shape(sch.tile_b, sch.tile_h, sch.tile_w, sch.tile_co, sch.tile_ci,
                   sch.oc_nthread, sch.h_nthread, sch.tvm_strict, sch.store, sch.clip_order)
    # The caches compare keys by value (2.0 == 2 == True): only plain ints use them.
    cached = all(type(v) is int for v in shape[:7])
    (m, group_loop, nch, eh, ew, n, inp_tile, wgt_tile, acc_tile, bias, steps, bias_tile,
     inp_split, store_pattern) = _cache_if(cached, _shape_facts)(ctx, shape, bias)
    gemm_axes, reset_axes, gemm_folds, reset_folds, n_gemm, n_reset = _cache_if(
        cached, _kernel_facts)(ctx, _Nest(sch.tile_h, sch.tile_w, sch.tile_ci, sch.tile_co,
                                          sch.tvm_strict, sch.gemm_order), m)
    alu_flat, alu_bias = _cache_if(cached, _tail_facts)(ctx, shape)
    shape_rules(ctx)
    if not ctx.fits_all:
        field_width_rule(ctx, sch, steps, eh, ew, n, inp_tile, wgt_tile, acc_tile,
                          bias_tile, inp_split, store_pattern, gemm_axes, reset_axes, n_gemm,
                          n_reset, alu_flat, alu_bias if bias_tile else (), nch, gemm_folds,
                          reset_folds)
    return Facts(eh, ew, n, inp_tile, wgt_tile, acc_tile, bias_tile, gemm_axes, reset_axes,
                 gemm_folds, reset_folds, n_gemm, n_reset, nch, group_loop, m, inp_split,
                 store_pattern, alu_flat, alu_bias)


def _row_mode_rule(ctx: Context, sch: Any) -> None:
    """A GEMM's rows are batch blocks (``rows="batch"``: tiled by ``tile_b``) or a 1x1
    conv's pixels (``rows="spatial"``: tiled by ``tile_h``, threaded by ``h_nthread``);
    only a GEMM has the choice, and TVM's dense_packed only the first."""
    spatial = getattr(sch, "rows", "batch") == "spatial"
    if spatial and not ctx.dense:
        raise IllegalSchedule("row_mode", "rows='spatial' applies to a GEMM's rows; a "
                                          "convolution's pixels are tiled by tile_h, tile_w")
    if spatial and sch.tvm_strict:
        raise IllegalSchedule("row_mode", "TVM's dense_packed tiles a GEMM's rows as batch "
                                          "blocks only (rows='batch')")
    if spatial and sch.tile_b != 1:
        raise IllegalSchedule("row_mode", f"tile_b={sch.tile_b} with rows='spatial': the "
                                          "rows are tiled by tile_h (tile_b must be 1)")
    if ctx.dense and not spatial and (sch.tile_h != 1 or sch.h_nthread != 1):
        raise IllegalSchedule("row_mode", f"tile_h={sch.tile_h}, h_nthread={sch.h_nthread} "
                                          "tile a GEMM's rows as pixels: they need "
                                          "rows='spatial' (with rows='batch' tile_b tiles "
                                          "them)")


def _cache_if(cached: bool, fn):
    """``fn`` (an lru_cache) itself, or the function it wraps when ``cached`` is false."""
    return fn if cached else getattr(fn, "__wrapped__", fn)


class _Shape(NamedTuple):
    """What the rules of :func:`_shape_facts` and :func:`_tail_facts` read of a schedule:
    its tile shape (``SHAPE_FIELDS``), strictness and clip order."""

    tile_b: int
    tile_h: int
    tile_w: int
    tile_co: int
    tile_ci: int
    oc_nthread: int
    h_nthread: int
    tvm_strict: bool
    store: str
    clip_order: str


class _Nest(NamedTuple):
    """What the micro-op kernels' rules read of a schedule (:func:`inner_nest`)."""

    tile_h: int
    tile_w: int
    tile_ci: int
    tile_co: int
    tvm_strict: bool
    gemm_order: str


# The rules are cached in three parts, each keyed by what it reads of the schedule (a
# search evaluates many configs of one tile shape): a failing rule raises, which no cache
# keeps, so an illegal schedule is checked again and fails with the same message.
@lru_cache(maxsize=4096)
def _shape_facts(ctx: Context, sch: _Shape, bias: bool):
    """The rules of a tile shape, in order, up to the DMA patterns; returns (groups per
    tile, group loop, input channels, eh, ew, threads, the SRAM tiles (inp, wgt, acc),
    bias, ALU steps, bias tile, input split, strict store pattern)."""
    tile_b, tile_h, tile_w = sch.tile_b, sch.tile_h, sch.tile_w
    tile_co, tile_ci, strict = sch.tile_co, sch.tile_ci, sch.tvm_strict
    oh, ow, k, s, p, cob = ctx.oh, ctx.ow, ctx.k, ctx.s, ctx.p, ctx.cob
    if ctx.nb % tile_b or oh % tile_h or ow % tile_w or cob % tile_co or ctx.cib % tile_ci:
        for knob, tile, extent, what in (
            ("tile_b", tile_b, ctx.nb, "batch blocks"),
            ("tile_h", tile_h, oh, "output rows"),
            ("tile_w", tile_w, ow, "output columns"),
            ("tile_co", tile_co, cob, "output-channel blocks"),
            ("tile_ci", tile_ci, ctx.cib, "input-channel blocks"),
        ):
            if extent % tile:
                raise IllegalSchedule("tile_divides", f"{knob}={tile} does not divide the "
                                                      f"{extent} {what}")
    n_co, n_h = cob // tile_co, oh // tile_h
    if n_co % sch.oc_nthread:
        raise IllegalSchedule("thread_split", f"oc_nthread={sch.oc_nthread} needs an even "
                                              f"number of oc tiles, got {n_co}")
    if n_h % sch.h_nthread:
        raise IllegalSchedule("thread_split", f"h_nthread={sch.h_nthread} needs an even "
                                              f"number of row tiles, got {n_h}")
    if tile_ci % ctx.in_pack and not ctx.rows:
        raise IllegalSchedule(
            "load_layout",
            f"tile_ci={tile_ci}: the input is packed by BLOCK_OUT ({ctx.in_pack} x BLOCK_IN "
            f"{ctx.block_in} channels, the previous layer's output layout), so a load step "
            f"must take whole BLOCK_OUT blocks: tile_ci a multiple of {ctx.in_pack}")
    if tile_co % ctx.out_pack and not ctx.rows:
        raise IllegalSchedule(
            "store_layout",
            f"tile_co={tile_co}: the output is packed by BLOCK_IN "
            f"({ctx.out_pack} x BLOCK_OUT {ctx.block_out} channels, the next layer's input "
            f"layout), so an output tile must hold whole BLOCK_IN blocks: tile_co a multiple "
            f"of {ctx.out_pack}")
    if strict and ctx.dense and tile_co * sch.oc_nthread != 1:
        # dense_packed's reorder(x_bo, k_o, x_co) of (b_o, c_o, b_i, c_i, k_o, k_i) permutes
        # only the named positions: b_o, k_o, b_i, c_i, c_o, k_i. The output-channel axis
        # lands inside tensorize(b_i), whose GEMM intrinsic covers one block.
        raise IllegalSchedule(
            "tvm_dense_tensorize",
            f"TVM's dense_packed tensorizes the GEMM at the batch lane with the output-channel "
            f"axis inside it: tile_co={tile_co} x oc_nthread={sch.oc_nthread} blocks where the "
            "intrinsic takes 1 (TVM: 'Tensorize GEMM: Input dimension mismatch'); only "
            "tile_co=1, oc_nthread=1 build",
        )
    if tile_b >= KERNEL_KEYS:
        raise IllegalSchedule(
            "uop_kernel_keys",
            f"tile_b={tile_b}: a tile's GEMM and reset micro-op kernels are chosen by its "
            f"batch row (keys 1..{tile_b} at one call site); VTA's runtime takes keys below "
            f"{KERNEL_KEYS} per call site (UopKernelMap: CHECK_LT(key, {KERNEL_KEYS})), so "
            f"tile_b <= {KERNEL_KEYS - 1}",
        )
    # --- groups: which input channels an oc tile reads -----------------------------------
    m, group_loop = 1, 0
    if ctx.groups > 1:
        cobg = cob // ctx.groups
        if tile_co % cobg == 0:
            m = tile_co // cobg  # the tile covers m whole groups
        elif cobg % tile_co == 0:
            per_group = cobg // tile_co
            if per_group % sch.oc_nthread:
                raise IllegalSchedule(
                    "group_thread_split",
                    f"oc_nthread={sch.oc_nthread} needs an even number of oc tiles per group, "
                    f"got {per_group}: a thread pair would straddle two groups (vtatune "
                    "addresses a group's input per loop iteration, not per thread)")
            group_loop = per_group // sch.oc_nthread
        else:
            raise IllegalSchedule(
                "group_tile",
                f"tile_co={tile_co} neither divides nor is a multiple of the {cobg} "
                "output-channel blocks per group: the input channels of a tile would span a "
                "varying number of groups (TVM's bound inference gives the input tile no "
                "constant extent)")
    if m > 1 and ctx.out_pack > 1:
        raise IllegalSchedule(
            "store_layout",
            f"tile_co={tile_co} spans {m} groups: with the output packed by BLOCK_IN "
            f"({ctx.out_pack} x BLOCK_OUT) vtatune lowers group tiles within one group only")
    # A tile over m groups loads, per load step, the channel range from its first group's
    # blocks to its last's: TVM's bound of c // (CO/G) * CI/G + k over the tile.
    nch = (m - 1) * ctx.cib + tile_ci
    pad_after = (oh - 1) * s + k - ctx.h - p  # rows past the input the last window reads
    if strict and ctx.transpose:
        if pad_after != p:
            raise IllegalSchedule(
                "tvm_output_padding",
                f"output_padding {pad_after - p}: TVM's conv2d_transpose_packed asserts "
                "'VTA does not support output padding for now'; vtatune's own schedules "
                "support it")
        for knob, tile, split, what in (("tile_h", tile_h, 4, "rows"),
                                        ("tile_w", tile_w, 2, "columns")):
            if tile > split and tile % split:
                raise IllegalSchedule(
                    "tvm_split_tail",
                    f"{knob}={tile} is not a multiple of {split}: conv2d_transpose_packed "
                    f"splits a tile's {what} by {split} and unrolls the inner part, and the "
                    "guarded tail keeps TVM from folding the micro-op loops (not modelled)")
    eh, ew = (tile_h - 1) * s + k, (tile_w - 1) * s + k
    n = sch.oc_nthread * sch.h_nthread
    inp_tile = nch * eh * ew
    wgt_tile = tile_co * tile_ci * k * k
    acc_tile = tile_b * tile_co * tile_h * tile_w
    bias, steps = epilogue_steps(ctx.epilogue, bias, sch.clip_order)
    channels = channel_tensors(steps)
    bias_tile = channel_tile(ctx, sch) * len(channels)
    saves = any(tensor == INTO_SAVED for _, _, tensor in steps)

    # --- SRAM capacity (every buffer is replicated per virtual thread) -------------------
    if n * inp_tile > ctx.inp_depth or n * wgt_tile > ctx.wgt_depth:
        for name, buf, tile, depth, ebytes in (
            ("input", "inp", inp_tile, ctx.inp_depth, ctx.inp_elem_bytes),
            ("weight", "wgt", wgt_tile, ctx.wgt_depth, ctx.wgt_elem_bytes),
        ):
            if n * tile > depth:
                raise IllegalSchedule(
                    f"{buf}_capacity",
                    f"{name} tile needs {tile * ebytes} B per thread x {n} thread(s) = "
                    f"{n * tile * ebytes} B, {buf.upper()} buffer has {depth * ebytes} B",
                )
    acc_need = acc_tile * (1 + saves) + bias_tile
    if strict and saves:
        raise IllegalSchedule(
            "tvm_saved_copy",
            "a fixed-point requantization keeps a copy of the accumulator tile (a save "
            "step), which no TVM VTA schedule does; vtatune's own schedules support it")
    if strict and n == 4:
        # TVM's storage planner cannot make the epilogue in-place under two nested
        # cthreads: every ALU stage keeps its own accumulator tile.
        acc_need = acc_tile * (1 + len(steps)) + bias_tile
    if n * acc_need > ctx.acc_depth:
        raise IllegalSchedule(
            "acc_capacity",
            f"accumulator tile needs {acc_need * ctx.acc_elem_bytes} B per thread x {n} "
            f"thread(s) = {n * acc_need * ctx.acc_elem_bytes} B, ACC buffer has "
            f"{ctx.acc_buff_bytes} B"
            + (f" (with the {' and '.join(channels)} tiles: {len(channels)} x "
               f"{tile_b * tile_co * ctx.acc_elem_bytes} B)" if len(channels) > 1 else "")
            + (" (with the copy of the tile a fixed-point requantization keeps)"
               if saves else "")
            + (" (TVM keeps one accumulator tile per epilogue stage under 4 threads)"
               if strict and n == 4 else ""),
        )
    if strict and n == 4:
        raise IllegalSchedule(
            "tvm_vthread_inplace",
            "TVM's conv2d_packed lowering fails with oc_nthread=2 and h_nthread=2 (the ALU "
            "epilogue is not in place: AssertionError in InjectALUIntrin); vtatune's own "
            "schedules support 4 threads",
        )

    # --- DMA patterns ---------------------------------------------------------------------
    pk = ctx.in_pack
    if p > 0:
        inp_split = nch > pk
        if inp_split and strict:
            raise IllegalSchedule(
                "dma_pattern",
                f"a padded input load cannot fold {nch} channel blocks into one 2D "
                "DMA (TVM: 'Do not support pad on the innermost block'); use tile_ci=1"
                + (" and one group per oc tile" if m > 1 else ""),
            )
    else:
        inp_split = pattern_2d(inp_dims(ctx, nch, eh, ew)) is None
        if inp_split and strict:
            raise IllegalSchedule(
                "dma_pattern",
                f"input tile of {nch} channel blocks x {eh} rows x {ew} columns has no "
                f"2D DMA pattern (TVM: 'cannot detect 2d pattern'; shape=[{nch}, {eh}, "
                f"{ew}, {ctx.batch_lanes * ctx.block_in}])",
            )
    store_pattern = None
    if strict and sch.store != "element":
        store_pattern = pattern_2d([(size, dram) for size, dram, _ in store_dims(ctx, sch)[1:]])
        if store_pattern is None:
            raise IllegalSchedule(
                "dma_pattern",
                f"output tile of {tile_co} channel blocks x {tile_h} rows x "
                f"{tile_w} columns has no 2D store pattern (TVM: 'cannot detect 2d "
                "pattern' for local.acc_buffer)",
            )

    return (m, group_loop, nch, eh, ew, n, inp_tile, wgt_tile, acc_tile, bias, steps, bias_tile,
            inp_split, store_pattern)


@lru_cache(maxsize=4096)
def _kernel_facts(ctx: Context, sch: _Nest, m: int):
    """The micro-op kernels' rules (thread 0's GEMM and reset over the loops inside a load
    step); returns their axes, folds and uop counts."""
    tile_h, tile_w, tile_ci = sch.tile_h, sch.tile_w, sch.tile_ci
    k, s, cob, strict = ctx.k, ctx.s, ctx.cob, sch.tvm_strict
    eh, ew = (tile_h - 1) * s + k, (tile_w - 1) * s + k
    kk = k * k
    nest = inner_nest(ctx, sch)
    # group_conv2d, a tile over m > 1 groups: output block c reads the input blocks of group
    # c // cobg, so the co loop splits into (group, block in group), each affine. TVM keeps
    # one co loop whose input index has a floordiv: FoldUopLoop cannot fold it.
    split_co = ()
    if m > 1:
        cobg = cob // ctx.groups
        split_co = (("co", m, (cobg * tile_h * tile_w, ctx.cib * eh * ew, cobg * tile_ci * kk),
                     not strict),
                    ("co", cobg, (tile_h * tile_w, 0, tile_ci * kk), not strict))
    gemm_nest = [x for a in nest for x in (split_co if a[0] == "co" and split_co else (a,))
                 if x[1] != 1]
    reset_nest = [a for a in nest if a[1] != 1 and a[0] in _RESET_AXES]
    gemm_axes = tuple(a[:3] for a in gemm_nest)
    reset_axes = tuple(a[:3] for a in reset_nest)
    gemm_folds, reset_folds = folds(gemm_nest), folds(reset_nest)
    n_gemm = kernel_rules("GEMM", gemm_axes, gemm_folds, ctx)
    n_reset = kernel_rules("reset", reset_axes, reset_folds, ctx)
    return gemm_axes, reset_axes, gemm_folds, reset_folds, n_gemm, n_reset


@lru_cache(maxsize=4096)
def _tail_facts(ctx: Context, sch: _Shape):
    """The ALU loops' and the input windows' rules of a tile shape; returns the ALU loops
    (flat, with the bias)."""
    tile_b, tile_h, tile_w, tile_co = sch.tile_b, sch.tile_h, sch.tile_w, sch.tile_co
    oh, ow, k, s, p = ctx.oh, ctx.ow, ctx.k, ctx.s, ctx.p
    acc_dims = acc_coefficients(tile_pack(ctx, sch.tile_ci, tile_co)[1], tile_co, tile_h,
                                tile_w)
    # the bias is (b, co); a GEMM's with its rows as pixels, one per row: the ACC tile's
    bias_src = {a: c for a, _, c in acc_dims} if ctx.rows else \
        {"co": ctx.out_pack, "h": 0, "w": 0, "co%k": 1}
    alu_ext = (tile_b, *(e for _, e, _ in acc_dims))
    alu_dst = (tile_co * tile_h * tile_w, *(c for _, _, c in acc_dims))
    alu_flat = alu_loops(alu_ext, alu_dst, alu_dst)
    alu_bias = alu_loops(alu_ext, alu_dst, (tile_co, *(bias_src[a] for a, _, _ in acc_dims)))
    for e, _, _ in (*alu_flat, *alu_bias):
        if e > ctx.loop_limit:
            raise IllegalSchedule("loop_extent", f"ALU loop extent {e} exceeds the "
                                                 f"{ctx.loop_limit} an instruction encodes")
    for knob, tile, out, extent, what in (("tile_h", tile_h, oh, ctx.h, "row"),
                                          ("tile_w", tile_w, ow, ctx.w, "column")):
        for t in (0, out // tile - 1):
            if window(p, s, k, t, tile, extent)[1] < 1:
                raise IllegalSchedule(
                    "pad_window",
                    f"{knob}={tile}: {what} tile {t}'s input window lies entirely in the "
                    "padding; a LOAD with no input element (x_size 0) is a NOP on VTA and "
                    "writes no zeros")
    return alu_flat, alu_bias


def legality(workload: Workload, schedule: Schedule, hw: HardwareConfig,
             bias: bool = False) -> Facts:
    """All legality rules of ``schedule`` (cheap: no kernel is built); raises
    IllegalSchedule naming the rule and numbers, WorkloadError for a bad shape."""
    return rules(context(workload, hw), schedule, bias)
