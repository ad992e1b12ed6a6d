"""Planning a schedule: geometry, SRAM allocation, micro-op kernels, DMA patterns, legality.

Everything that can make a schedule illegal is decided here, before a single instruction is
emitted, and each failure raises :class:`IllegalSchedule` naming the rule and the numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

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


def flatten_alu_loops(extents, dst, src) -> list[KernelLoop]:
    """TVM's InjectALUIntrin loop flattening (innermost first, merge when contiguous)."""
    loops = [(e, d, s) for e, d, s in zip(extents, dst, src, strict=True) if e != 1]
    if not loops:
        return []
    merged = [list(loops[-1])]
    for e, d, s in reversed(loops[:-1]):
        ve, vd, vs = merged[-1]
        if s == vs * ve and d == vd * ve:
            merged[-1][0] = ve * e
        else:
            merged.append([e, d, s])
    return [KernelLoop(e, d, s) for e, d, s in reversed(merged)]


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


def _check_dst_distinct(kernel: Kernel, what: str) -> None:
    u = kernel.uops
    for i in range(1, len(u)):
        for back in (1, 2):
            if i - back >= 0 and u[i].dst == u[i - back].dst:
                raise IllegalSchedule(
                    "dst_dependency",
                    f"{what} micro-ops #{i - back} and #{i} both write ACC[{u[i].dst}] within "
                    "two micro-ops (the GEMM pipeline has no forwarding; TVM rejects it: "
                    "'seq_[i].dst_idx != dst_index')",
                )


def plan(workload: Workload, schedule: Schedule, hw: HardwareConfig, bias: bool = False) -> Plan:
    """Validate ``schedule`` for ``workload`` on ``hw``; raises IllegalSchedule."""
    workload.check(hw)
    conv = workload.as_conv()
    sch = schedule
    nb, cib, cob = conv.batch // hw.batch, conv.in_channels // hw.block_in, \
        conv.out_channels // hw.block_out
    oh, ow, k, s, p = conv.out_height, conv.out_width, conv.kernel, conv.stride, conv.pad
    for knob, tile, extent, what in (
        ("tile_b", sch.tile_b, nb, "batch blocks"),
        ("tile_h", sch.tile_h, oh, "output rows"),
        ("tile_w", sch.tile_w, ow, "output columns"),
        ("tile_co", sch.tile_co, cob, "output-channel blocks"),
        ("tile_ci", sch.tile_ci, cib, "input-channel blocks"),
    ):
        if extent % tile:
            raise IllegalSchedule("tile_divides", f"{knob}={tile} does not divide the {extent} "
                                                  f"{what}")
    n_co, n_h = cob // sch.tile_co, oh // sch.tile_h
    if n_co % sch.oc_nthread:
        raise IllegalSchedule("thread_split", f"oc_nthread={sch.oc_nthread} needs an even "
                                              f"number of oc tiles, got {n_co}")
    if n_h % sch.h_nthread:
        raise IllegalSchedule("thread_split", f"h_nthread={sch.h_nthread} needs an even "
                                              f"number of row tiles, got {n_h}")
    eh, ew = (sch.tile_h - 1) * s + k, (sch.tile_w - 1) * s + k
    geo = Geometry(nb, cib, cob, oh, ow, conv.height, conv.width, k, s, p, eh, ew,
                   {"b": nb // sch.tile_b, "h": n_h // sch.h_nthread,
                    "c": n_co // sch.oc_nthread, "w": ow // sch.tile_w})
    n = sch.nthreads
    inp_tile = sch.tile_ci * eh * ew
    wgt_tile = sch.tile_co * sch.tile_ci * k * k
    acc_tile = sch.tile_b * sch.tile_co * sch.tile_h * sch.tile_w
    bias_tile = sch.tile_b * sch.tile_co if bias else 0

    # --- SRAM capacity (every buffer is replicated per virtual thread) -------------------
    for name, buf, tile, depth, ebytes in (
        ("input", "inp", inp_tile, hw.inp_depth, hw.inp_elem_bytes),
        ("weight", "wgt", wgt_tile, hw.wgt_depth, hw.wgt_elem_bytes),
    ):
        if n * tile > depth:
            raise IllegalSchedule(
                f"{buf}_capacity",
                f"{name} tile needs {tile * ebytes} B per thread x {n} thread(s) = "
                f"{n * tile * ebytes} B, {buf.upper()} buffer has {depth * ebytes} B",
            )
    acc_need = acc_tile + bias_tile
    if sch.tvm_strict and n == 4:
        # TVM's storage planner cannot make the epilogue in-place under two nested
        # cthreads: every ALU stage keeps its own accumulator tile.
        n_alu = 4 if bias else 3
        acc_need = acc_tile * (1 + n_alu) + bias_tile
    if n * acc_need > hw.acc_depth:
        raise IllegalSchedule(
            "acc_capacity",
            f"accumulator tile needs {acc_need * hw.acc_elem_bytes} B per thread x {n} "
            f"thread(s) = {n * acc_need * hw.acc_elem_bytes} B, ACC buffer has "
            f"{hw.acc_buff_bytes} B"
            + (" (TVM keeps one accumulator tile per epilogue stage under 4 threads)"
               if sch.tvm_strict and n == 4 else ""),
        )
    if sch.tvm_strict and n == 4:
        raise IllegalSchedule(
            "tvm_vthread_inplace",
            "TVM's conv2d_packed lowering fails with oc_nthread=2 and h_nthread=2 (the ALU "
            "epilogue is not in place: AssertionError in InjectALUIntrin); vtatune's own "
            "schedules support 4 threads",
        )

    # --- micro-op kernels -----------------------------------------------------------------
    kk = k * k
    coeffs = {
        "ci": (sch.tile_ci, (0, eh * ew, kk)),
        "co": (sch.tile_co, (sch.tile_h * sch.tile_w, 0, sch.tile_ci * kk)),
        "h": (sch.tile_h, (sch.tile_w, s * ew, 0)),
        "w": (sch.tile_w, (1, s, 0)),
        "kh": (k, (0, ew, k)),
        "kw": (k, (0, 1, 1)),
    }
    order = sch.gemm_order.split(",")
    gemm_axes = tuple((a, coeffs[a][0], coeffs[a][1]) for a in order if coeffs[a][0] != 1)
    reset_axes = tuple(x for x in gemm_axes if x[0] in ("co", "h", "w"))
    alu_ext = (sch.tile_b, sch.tile_co, sch.tile_h, sch.tile_w)
    alu_dst = (sch.tile_co * sch.tile_h * sch.tile_w, sch.tile_h * sch.tile_w, sch.tile_w, 1)
    alu_flat = flatten_alu_loops(alu_ext, alu_dst, alu_dst)
    alu_bias = flatten_alu_loops(alu_ext, alu_dst, (sch.tile_co, 1, 0, 0))

    # --- DMA patterns ---------------------------------------------------------------------
    if p > 0:
        inp_split = sch.tile_ci > 1
        if inp_split and sch.tvm_strict:
            raise IllegalSchedule(
                "dma_pattern",
                f"a padded input load cannot fold {sch.tile_ci} channel blocks into one 2D "
                "DMA (TVM: 'Do not support pad on the innermost block'); use tile_ci=1",
            )
    else:
        dims = [(sch.tile_ci, conv.height * conv.width), (eh, conv.width), (ew, 1)]
        inp_split = pattern_2d(dims) is None
        if inp_split and sch.tvm_strict:
            raise IllegalSchedule(
                "dma_pattern",
                f"input tile of {sch.tile_ci} channel blocks x {eh} rows x {ew} columns has no "
                f"2D DMA pattern (TVM: 'cannot detect 2d pattern'; shape=[{sch.tile_ci}, {eh}, "
                f"{ew}, {hw.batch * hw.block_in}])",
            )
    out_dims = [(sch.tile_b, cob * oh * ow), (sch.tile_co, oh * ow), (sch.tile_h, ow),
                (sch.tile_w, 1)]
    if sch.store == "element":
        store_loops, store_pattern = out_dims, (1, 1, 1)
    elif sch.tvm_strict:
        store_loops = out_dims[:1]
        pat = pattern_2d(out_dims[1:])
        if pat is None:
            raise IllegalSchedule(
                "dma_pattern",
                f"output tile of {sch.tile_co} channel blocks x {sch.tile_h} rows x "
                f"{sch.tile_w} columns has no 2D store pattern (TVM: 'cannot detect 2d "
                "pattern' for local.acc_buffer)",
            )
        store_pattern = pat
    else:
        store_loops, store_pattern = split_2d(out_dims)

    result = Plan(workload, conv, sch, hw, bias, geo, inp_tile, wgt_tile, acc_tile, bias_tile,
                  n, gemm_axes, reset_axes, inp_split, store_loops, store_pattern,
                  tuple(alu_flat), tuple(alu_bias))

    # --- kernel rules: checked on thread 0 (other threads differ by an offset) -----------
    limit = loop_limit()
    for what, kern in (("GEMM", result.gemm_kernel(0, 0)), ("reset", result.reset_kernel(0, 0))):
        if len(kern.uops) > hw.uop_depth:
            raise IllegalSchedule(
                "uop_capacity",
                f"{what} micro-op kernel has {len(kern.uops)} uops, the uop buffer holds "
                f"{hw.uop_depth}",
            )
        for lp in kern.loops:
            if lp.extent > limit:
                raise IllegalSchedule("loop_extent", f"{what} loop extent {lp.extent} exceeds "
                                                     f"the {limit} an instruction encodes")
        _check_dst_distinct(kern, what)
    for lp in (*alu_flat, *alu_bias):
        if lp.extent > limit:
            raise IllegalSchedule("loop_extent", f"ALU loop extent {lp.extent} exceeds the "
                                                 f"{limit} an instruction encodes")
    if p > 15:
        raise IllegalSchedule("pad_field", f"pad {p} exceeds the 4-bit DMA pad field (max 15)")
    return result
