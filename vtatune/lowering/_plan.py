"""Planning a schedule: geometry, SRAM allocation, micro-op kernels, DMA patterns, legality.

Everything that can make a schedule illegal is decided here, before a single instruction is
emitted, and each failure raises :class:`IllegalSchedule` naming the rule and the numbers.

All legality rules live in ONE function, :func:`rules`: arithmetic only (no micro-op kernel
is built), so it costs microseconds and search spaces can call it on every candidate.
:func:`plan` calls it and then assembles what the emitter needs. The micro-op kernel rules
are decided analytically from the inner loop order and extents:

* a kernel's uop count is the product of its unrolled (non-folded) extents;
* its folded loops are the two outermost non-unit axes (their extents are the loop fields);
* dst-distinct: a uop's ACC index is injective in the (co, h, w) indices and independent of
  (ci, kh, kw). Uops are generated in mixed-radix order (innermost axis fastest), so two
  uops one apart write the same ACC row iff the innermost unrolled axis has no dst stride,
  and (otherwise) two apart iff the innermost has extent 2 and the next one out has no dst
  stride; the first clash is then uops #0/#1 resp. #0/#2, both writing the kernel's base.

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

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, NamedTuple

from simulator.hardware import HardwareConfig
from simulator.isa import AluOp, Uop, loop_limit

from ..errors import IllegalSchedule
from ..schedule import Schedule
from ..workloads import Conv2dWorkload, Workload
from ._runtime import Kernel, KernelLoop

Dims = list[tuple[int, int]]  # (size, stride) from outer to inner, in elements


def fold_2d(dims: Dims) -> Dims:
    """TVM's DMA dimension folding: drop unit dims, merge contiguous ones, and make the
    innermost dim unit-stride (adding a size-1 one if needed). Returns outer→inner dims."""
    out: Dims = []
    for size, stride in reversed([d for d in dims if d[0] != 1]):
        if out and stride == out[-1][0] * out[-1][1]:
            out[-1] = (out[-1][0] * size, out[-1][1])
        else:
            out.append((size, stride))
    if not out or out[0][1] != 1:
        out.insert(0, (1, 1))
    return list(reversed(out))


def pattern_2d(dims: Dims) -> tuple[int, int, int] | None:
    """(y_size, x_size, x_stride) when ``dims`` fold to a 2D DMA, else None."""
    f = fold_2d(dims)
    if len(f) == 1:
        return 1, f[0][0], f[0][0]
    if len(f) == 2:
        return f[0][0], f[1][0], f[0][1]
    return None


def split_2d(dims: Dims) -> tuple[Dims, tuple[int, int, int]]:
    """Loop over the fewest leading dims so that the rest is one 2D DMA."""
    for k in range(len(dims) + 1):
        p = pattern_2d(dims[k:])
        if p is not None:
            return dims[:k], p
    raise AssertionError("a single dim always folds")  # pragma: no cover


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


def flatten_alu_loops(extents, dst, src) -> list[KernelLoop]:
    """:func:`alu_loops` as kernel loops."""
    return [KernelLoop(*lp) for lp in alu_loops(extents, dst, src)]


@dataclass(frozen=True)
class Geometry:
    nb: int  # batch blocks
    cib: int
    cob: int
    oh: int
    ow: int
    h: int
    w: int
    k: int
    s: int
    p: int
    eh: int  # input window rows of a tile (padded coordinates)
    ew: int
    counts: dict[str, int]  # outer loop extents per axis (after thread split)


@dataclass(frozen=True)
class Plan:
    """Everything decided about a schedule before emitting instructions."""

    workload: Workload
    conv: Conv2dWorkload
    schedule: Schedule
    hw: HardwareConfig
    bias: bool
    geo: Geometry
    inp_tile: int  # elements per thread
    wgt_tile: int
    acc_tile: int
    bias_tile: int
    nthreads: int
    gemm_axes: tuple[tuple[str, int, tuple[int, int, int]], ...]  # (axis, extent, coeffs)
    reset_axes: tuple[tuple[str, int, tuple[int, int, int]], ...]
    inp_split: bool  # one input LOAD per channel block
    store_loops: Dims
    store_pattern: tuple[int, int, int]
    alu_flat: tuple[KernelLoop, ...]
    alu_bias: tuple[KernelLoop, ...]

    # SRAM bases per thread -----------------------------------------------------------
    def inp_base(self, t: int) -> int:
        return t * self.inp_tile

    def wgt_base(self, t: int) -> int:
        return t * self.wgt_tile

    def acc_base(self, t: int) -> int:
        return t * self.acc_tile

    def bias_base(self, t: int) -> int:
        return self.nthreads * self.acc_tile + t * self.bias_tile

    def sram_usage(self) -> dict[str, dict[str, int]]:
        hw, n = self.hw, self.nthreads
        used = {
            "inp": (n * self.inp_tile, hw.inp_depth, hw.inp_elem_bytes),
            "wgt": (n * self.wgt_tile, hw.wgt_depth, hw.wgt_elem_bytes),
            "acc": (n * (self.acc_tile + self.bias_tile), hw.acc_depth, hw.acc_elem_bytes),
        }
        return {k: {"elements": u, "depth": d, "bytes": u * b} for k, (u, d, b) in used.items()}

    # Kernels ----------------------------------------------------------------------------
    def gemm_kernel(self, t: int, bi: int) -> Kernel:
        base = (self.acc_base(t) + bi * self.acc_tile // self.schedule.tile_b,
                self.inp_base(t), self.wgt_base(t))
        return _fold_kernel(self.gemm_axes, base, reset=False)

    def reset_kernel(self, t: int, bi: int) -> Kernel:
        base = (self.acc_base(t) + bi * self.acc_tile // self.schedule.tile_b, 0, 0)
        return _fold_kernel(self.reset_axes, base, reset=True)

    def alu_kernels(self, t: int) -> list[tuple[str, Kernel]]:
        a = self.acc_base(t)
        shr = Kernel((Uop(a, a),), self.alu_flat, alu_op=AluOp.SHR, use_imm=True, imm=8)
        clip_max = (1 << (self.hw.out_width - 1)) - 1
        mn = Kernel((Uop(a, a),), self.alu_flat, alu_op=AluOp.MIN, use_imm=True, imm=clip_max)
        mx = Kernel((Uop(a, a),), self.alu_flat, alu_op=AluOp.MAX, use_imm=True, imm=0)
        ops = [("shr", shr)]
        if self.bias:
            add = Kernel((Uop(a, self.bias_base(t)),), self.alu_bias, alu_op=AluOp.ADD)
            ops.append(("add", add))
        ops += [("min", mn), ("max", mx)] if self.schedule.clip_order == "min_max" else \
            [("max", mx), ("min", mn)]
        return ops


def _fold_kernel(axes, base: tuple[int, int, int], reset: bool) -> Kernel:
    """The two outermost loops fold into the instruction; the rest unroll into uops."""
    folded = [KernelLoop(e, *c) if not reset else KernelLoop(e, c[0], 0, 0)
              for _, e, c in axes[:2]]
    uops = [base]
    for _, e, (cd, cs, cw) in axes[2:]:
        uops = [(d + i * cd, s + i * cs, w + i * cw) for d, s, w in uops for i in range(e)]
    if reset:
        return Kernel(tuple(Uop(d, 0, 0) for d, _, _ in uops), tuple(folded), reset=True)
    return Kernel(tuple(Uop(d, s, w) for d, s, w in uops), tuple(folded))


# --- legality: every rule, arithmetic only -------------------------------------------------


@dataclass(frozen=True)
class Context:
    """The constants of the legality rules for one workload on one hardware config."""

    nb: int  # batch blocks
    cib: int
    cob: int
    oh: int
    ow: int
    h: int
    w: int
    k: int
    s: int
    p: int
    batch_lanes: int
    block_in: int
    inp_depth: int
    wgt_depth: int
    acc_depth: int
    uop_depth: int
    inp_elem_bytes: int
    wgt_elem_bytes: int
    acc_elem_bytes: int
    acc_buff_bytes: int
    loop_limit: int


@lru_cache(maxsize=1024)
def context(workload: Workload, hw: HardwareConfig) -> Context:
    """The rule constants of ``workload`` on ``hw`` (raises WorkloadError for bad shapes)."""
    workload.check(hw)
    conv = workload.as_conv()
    return Context(
        conv.batch // hw.batch, conv.in_channels // hw.block_in,
        conv.out_channels // hw.block_out, conv.out_height, conv.out_width, conv.height,
        conv.width, conv.kernel, conv.stride, conv.pad, hw.batch, hw.block_in, hw.inp_depth,
        hw.wgt_depth, hw.acc_depth, hw.uop_depth, hw.inp_elem_bytes, hw.wgt_elem_bytes,
        hw.acc_elem_bytes, hw.acc_buff_bytes, loop_limit())


Axes = tuple[tuple[str, int, tuple[int, int, int]], ...]
_RESET_AXES = frozenset(("co", "h", "w"))  # the reset kernel's axes (those with a dst stride)


class Facts(NamedTuple):
    """What the rules computed on the way (``plan`` builds on it)."""

    eh: int  # input window rows of a tile (padded coordinates)
    ew: int
    nthreads: int
    inp_tile: int  # elements per thread
    wgt_tile: int
    acc_tile: int
    bias_tile: int
    gemm_axes: Axes  # non-unit inner axes in order: (axis, extent, (dst, src, wgt) coeffs)
    reset_axes: Axes
    n_gemm_uops: int
    n_reset_uops: int
    inp_split: bool  # one input LOAD per channel block
    strict_store_pattern: tuple[int, int, int] | None  # tvm_strict tile store only
    alu_flat: tuple[tuple[int, int, int], ...]  # (extent, dst, src) per loop
    alu_bias: tuple[tuple[int, int, int], ...]


def _kernel_rules(what: str, axes: Axes, ctx: Context) -> int:
    """uop capacity, loop extents and dst-distinct of a kernel over ``axes`` (the two
    outermost fold into the instruction, the rest unroll); returns the uop count."""
    unrolled = axes[2:]
    nuops = 1
    for _, e, _ in unrolled:
        nuops *= e
    if nuops > ctx.uop_depth:
        raise IllegalSchedule(
            "uop_capacity",
            f"{what} micro-op kernel has {nuops} uops, the uop buffer holds {ctx.uop_depth}",
        )
    for _, e, _ in axes[:2]:
        if e > ctx.loop_limit:
            raise IllegalSchedule("loop_extent", f"{what} loop extent {e} exceeds "
                                                 f"the {ctx.loop_limit} an instruction encodes")
    clash = 0
    if unrolled:
        if unrolled[-1][2][0] == 0:
            clash = 1  # innermost unrolled axis has no dst stride: uops #0, #1
        elif len(unrolled) > 1 and unrolled[-1][1] == 2 and unrolled[-2][2][0] == 0:
            clash = 2  # uops #0, #2 differ only in a dst-free axis
    if clash:
        raise IllegalSchedule(
            "dst_dependency",
            f"{what} micro-ops #0 and #{clash} both write ACC[0] within two micro-ops (the GEMM "
            "pipeline has no forwarding; TVM rejects it: 'seq_[i].dst_idx != dst_index')",
        )
    return nuops


def rules(ctx: Context, sch: Any, bias: bool = False) -> Facts:
    """Every legality rule of a schedule, in order; raises IllegalSchedule naming the first
    that fails. ``sch`` is a :class:`Schedule` or any object with its attributes."""
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
    eh, ew = (tile_h - 1) * s + k, (tile_w - 1) * s + k
    n = sch.oc_nthread * sch.h_nthread
    inp_tile = tile_ci * eh * ew
    wgt_tile = tile_co * tile_ci * k * k
    acc_tile = tile_b * tile_co * tile_h * tile_w
    bias_tile = tile_b * tile_co if bias else 0

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
    acc_need = acc_tile + bias_tile
    if strict and n == 4:
        # TVM's storage planner cannot make the epilogue in-place under two nested
        # cthreads: every ALU stage keeps its own accumulator tile.
        n_alu = 4 if bias else 3
        acc_need = acc_tile * (1 + n_alu) + bias_tile
    if n * acc_need > ctx.acc_depth:
        raise IllegalSchedule(
            "acc_capacity",
            f"accumulator tile needs {acc_need * ctx.acc_elem_bytes} B per thread x {n} "
            f"thread(s) = {n * acc_need * ctx.acc_elem_bytes} B, ACC buffer has "
            f"{ctx.acc_buff_bytes} B"
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
    if p > 0:
        inp_split = tile_ci > 1
        if inp_split and strict:
            raise IllegalSchedule(
                "dma_pattern",
                f"a padded input load cannot fold {tile_ci} channel blocks into one 2D "
                "DMA (TVM: 'Do not support pad on the innermost block'); use tile_ci=1",
            )
    else:
        inp_split = pattern_2d([(tile_ci, ctx.h * ctx.w), (eh, ctx.w), (ew, 1)]) is None
        if inp_split and strict:
            raise IllegalSchedule(
                "dma_pattern",
                f"input tile of {tile_ci} channel blocks x {eh} rows x {ew} columns has no "
                f"2D DMA pattern (TVM: 'cannot detect 2d pattern'; shape=[{tile_ci}, {eh}, "
                f"{ew}, {ctx.batch_lanes * ctx.block_in}])",
            )
    store_pattern = None
    if strict and sch.store != "element":
        store_pattern = pattern_2d([(tile_co, oh * ow), (tile_h, ow), (tile_w, 1)])
        if store_pattern is None:
            raise IllegalSchedule(
                "dma_pattern",
                f"output tile of {tile_co} channel blocks x {tile_h} rows x "
                f"{tile_w} columns has no 2D store pattern (TVM: 'cannot detect 2d "
                "pattern' for local.acc_buffer)",
            )

    # --- micro-op kernels (thread 0; other threads differ by an offset) -------------------
    kk = k * k
    coeffs = {
        "ci": (tile_ci, (0, eh * ew, kk)),
        "co": (tile_co, (tile_h * tile_w, 0, tile_ci * kk)),
        "h": (tile_h, (tile_w, s * ew, 0)),
        "w": (tile_w, (1, s, 0)),
        "kh": (k, (0, ew, k)),
        "kw": (k, (0, 1, 1)),
    }
    gemm_axes = tuple((a, *coeffs[a]) for a in sch.gemm_order.split(",") if coeffs[a][0] != 1)
    reset_axes = tuple(x for x in gemm_axes if x[0] in _RESET_AXES)
    n_gemm = _kernel_rules("GEMM", gemm_axes, ctx)
    n_reset = _kernel_rules("reset", reset_axes, ctx)
    alu_ext = (tile_b, tile_co, tile_h, tile_w)
    alu_dst = (tile_co * tile_h * tile_w, tile_h * tile_w, tile_w, 1)
    alu_flat = alu_loops(alu_ext, alu_dst, alu_dst)
    alu_bias = alu_loops(alu_ext, alu_dst, (tile_co, 1, 0, 0))
    for e, _, _ in (*alu_flat, *alu_bias):
        if e > ctx.loop_limit:
            raise IllegalSchedule("loop_extent", f"ALU loop extent {e} exceeds the "
                                                 f"{ctx.loop_limit} an instruction encodes")
    if p > 15:
        raise IllegalSchedule("pad_field", f"pad {p} exceeds the 4-bit DMA pad field (max 15)")
    return Facts(eh, ew, n, inp_tile, wgt_tile, acc_tile, bias_tile, gemm_axes, reset_axes,
                 n_gemm, n_reset, inp_split, store_pattern, alu_flat, alu_bias)


def legality(workload: Workload, schedule: Schedule, hw: HardwareConfig,
             bias: bool = False) -> Facts:
    """All legality rules of ``schedule`` (cheap: no kernel is built); raises
    IllegalSchedule naming the rule and numbers, WorkloadError for a bad shape."""
    return rules(context(workload, hw), schedule, bias)


def plan(workload: Workload, schedule: Schedule, hw: HardwareConfig, bias: bool = False) -> Plan:
    """Validate ``schedule`` for ``workload`` on ``hw``; raises IllegalSchedule."""
    ctx = context(workload, hw)
    f = rules(ctx, schedule, bias)
    sch = schedule
    geo = Geometry(ctx.nb, ctx.cib, ctx.cob, ctx.oh, ctx.ow, ctx.h, ctx.w, ctx.k, ctx.s, ctx.p,
                   f.eh, f.ew,
                   {"b": ctx.nb // sch.tile_b, "h": ctx.oh // sch.tile_h // sch.h_nthread,
                    "c": ctx.cob // sch.tile_co // sch.oc_nthread, "w": ctx.ow // sch.tile_w})
    out_dims = [(sch.tile_b, ctx.cob * ctx.oh * ctx.ow), (sch.tile_co, ctx.oh * ctx.ow),
                (sch.tile_h, ctx.ow), (sch.tile_w, 1)]
    if sch.store == "element":
        store_loops, store_pattern = out_dims, (1, 1, 1)
    elif sch.tvm_strict:
        store_loops, store_pattern = out_dims[:1], f.strict_store_pattern
    else:
        store_loops, store_pattern = split_2d(out_dims)
    return Plan(workload, workload.as_conv(), sch, hw, bias, geo, f.inp_tile, f.wgt_tile,
                f.acc_tile, f.bias_tile, f.nthreads, f.gemm_axes, f.reset_axes, f.inp_split,
                store_loops, store_pattern, tuple(KernelLoop(*lp) for lp in f.alu_flat),
                tuple(KernelLoop(*lp) for lp in f.alu_bias))
