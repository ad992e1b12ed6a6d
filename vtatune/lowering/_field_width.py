"""The ``field_width`` rule: every instruction and micro-op field of a legal schedule's
program fits its bit width (see :mod:`._rules`, which applies it)."""
from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

from vtatune.errors import IllegalSchedule
from vtatune.lowering._context import PAD_FIELDS, Context, channel_tile
from vtatune.lowering._dma import inp_dims, input_pads, pattern_2d, store_plan, window
from vtatune.lowering._nest import Axes
from vtatune.workloads import CHANNEL_TENSORS, INTO_SAVED, SAVED


def field_width_rule(ctx: Context, sch: Any, steps: tuple, eh: int, ew: int, n: int,
                      inp_tile: int, wgt_tile: int, acc_tile: int, bias_tile: int,
                      inp_split: bool, strict_store, gemm_axes: Axes, reset_axes: Axes,
                      n_gemm: int, n_reset: int, alu_flat, alu_bias, nch: int,
                      gemm_folds: int, reset_folds: int) -> None:
    """Every instruction and micro-op field fits its bit width (so a legal schedule always
    encodes): the largest value the program puts in each field, known from the plan, one
    line per fact; raises IllegalSchedule("field_width") naming the first that does not."""
    w = ctx.widths  # not None: shape_rules ran first
    tile_b, tile_h, tile_w = sch.tile_b, sch.tile_h, sch.tile_w
    tile_co, tile_ci = sch.tile_co, sch.tile_ci
    h, wd, k, p, s, cib, cob = ctx.h, ctx.w, ctx.k, ctx.p, ctx.s, ctx.cib, ctx.cob
    kk = k * k
    # input DMA shape: padded windows are clipped per tile; unpadded ones are all alike
    split = p > 0 or inp_split
    pk = ctx.in_pack
    if p > 0:
        ny = max(window(p, s, k, t, tile_h, h)[1] for t in range(ctx.oh // tile_h))
        nx = max(window(p, s, k, t, tile_w, wd)[1] for t in range(ctx.ow // tile_w))
        inp_shape = (ny, nx * pk, wd * pk)
    elif split:
        inp_shape = pattern_2d(inp_dims(ctx, pk, eh, ew))
    else:
        inp_shape = pattern_2d(inp_dims(ctx, nch, eh, ew))
    wgt_shape = pattern_2d([(tile_co, cib * kk), (tile_ci, kk), (kk, 1)])
    per_tensor = channel_tile(ctx, sch)  # one per-channel tensor's tile
    bias_shape = pattern_2d([(per_tensor // tile_co, cob), (tile_co, 1)])
    store_loops, store_shape = store_plan(ctx, sch, strict_store)
    store_sram = (n - 1) * acc_tile + sum((size - 1) * a for size, _, a in store_loops)
    # the uop area holds every kernel once; the uop buffer holds at most all of them
    # ALU loops past the instruction's two unroll into micro-ops (the bias add's co % k)
    alu_uops = [math.prod(e for e, _, _ in loops[2:]) for loops in (alu_flat, alu_bias)]
    per_channel = bias_tile > 0  # loads per-channel tensors (bias, shift)
    # the last thread's last per-channel tensor (each one tile_b x tile_co)
    last_channel = n * acc_tile + n * bias_tile - per_tensor
    n_kernels_uops = n * tile_b * (n_gemm + n_reset) + n * sum(
        alu_uops[1] if tensor in CHANNEL_TENSORS else 1 for _, _, tensor in steps)
    uop_top = min(n_kernels_uops, ctx.uop_depth)  # an upper bound of uop_end

    def unrolled_max(axes: Axes, j: int) -> int:
        folds = gemm_folds if axes is gemm_axes else reset_folds
        return sum((e - 1) * c[j] for _, e, c in axes[folds:])

    def folded_max(axes: Axes, j: int) -> int:
        folds = gemm_folds if axes is gemm_axes else reset_folds
        return max((c[j] for _, _, c in axes[:folds]), default=0)

    acc_row = acc_tile // tile_b
    alu_src_max = (n - 1) * acc_tile
    if per_channel:
        alu_src_max = last_channel
    # the copy of the tiles a save step keeps: after the per-channel areas, one per thread
    alu_dst_max = (n - 1) * acc_tile
    if any(tensor in (SAVED, INTO_SAVED) for _, _, tensor in steps):
        alu_dst_max = alu_src_max = n * (acc_tile + bias_tile) + (n - 1) * acc_tile
    imm_max = max((imm if imm >= 0 else -imm - 1 for _, imm, _ in steps if imm is not None),
                  default=0)
    facts = (
        # (instruction, field, largest value, width)
        ("LOAD INP", "sram_base",
         (n - 1) * inp_tile + (nch - pk if split else 0) * eh * ew,
         w.sram),
        ("LOAD INP", "y_size", inp_shape[0], w.y),
        ("LOAD INP", "x_size", inp_shape[1], w.x),
        ("LOAD INP", "x_stride", inp_shape[2], w.stride),
        ("LOAD WGT", "sram_base", (n - 1) * wgt_tile, w.sram),
        ("LOAD WGT", "y_size", wgt_shape[0], w.y),
        ("LOAD WGT", "x_size", wgt_shape[1], w.x),
        ("LOAD WGT", "x_stride", wgt_shape[2], w.stride),
        ("LOAD ACC", "sram_base", last_channel if per_channel else 0, w.sram),
        ("LOAD ACC", "y_size", bias_shape[0] if per_channel else 0, w.y),
        ("LOAD ACC", "x_size", bias_shape[1] if per_channel else 0, w.x),
        ("LOAD ACC", "x_stride", bias_shape[2] if per_channel else 0, w.stride),
        ("LOAD UOP", "sram_base", uop_top - 1, w.sram),
        ("LOAD UOP", "x_size", max(n_gemm, n_reset), w.x),
        ("LOAD UOP", "x_stride", max(n_gemm, n_reset), w.stride),
        ("LOAD UOP", "dram_base", n_kernels_uops - 1, w.dram),
        ("STORE OUT", "sram_base", store_sram, w.sram),
        ("STORE OUT", "y_size", store_shape[0], w.y),
        ("STORE OUT", "x_size", store_shape[1], w.x),
        ("STORE OUT", "x_stride", store_shape[2], w.stride),
        ("GEMM", "uop_bgn", uop_top - 1, w.uop_bgn),
        ("GEMM", "uop_end", uop_top, w.uop_end),
        ("GEMM", "dst_factor", max(folded_max(gemm_axes, 0), folded_max(reset_axes, 0)),
         w.dst_factor),
        ("GEMM", "src_factor", folded_max(gemm_axes, 1), w.src_factor),
        ("GEMM", "wgt_factor", folded_max(gemm_axes, 2), w.wgt_factor),
        ("ALU", "dst_factor", max((d for _, d, _ in (*alu_flat, *alu_bias)), default=0),
         w.dst_factor),
        ("ALU", "src_factor", max((c for _, _, c in (*alu_flat, *alu_bias)), default=0),
         w.src_factor),
        ("ALU", "imm", imm_max, w.imm - 1),  # signed
        ("GEMM micro-op", "dst", (n - 1) * acc_tile + (tile_b - 1) * acc_row
         + max(unrolled_max(gemm_axes, 0), unrolled_max(reset_axes, 0)), w.uop_dst),
        ("GEMM micro-op", "src", (n - 1) * inp_tile + unrolled_max(gemm_axes, 1), w.uop_src),
        ("GEMM micro-op", "wgt", (n - 1) * wgt_tile + unrolled_max(gemm_axes, 2), w.uop_wgt),
        ("ALU micro-op", "dst", alu_dst_max + max(
            sum((e - 1) * d for e, d, _ in loops[2:]) for loops in (alu_flat, alu_bias)),
         w.uop_dst),
        ("ALU micro-op", "src", alu_src_max + max(
            sum((e - 1) * c for e, _, c in loops[2:]) for loops in (alu_flat, alu_bias)),
         w.uop_src),
    )
    for what, name, value, width in facts:
        if value >= 1 << width:
            raise IllegalSchedule("field_width", field_error(
                what, name, value, width, "the instruction cannot be encoded"))


def field_error(what: str, name: str, value: int, width: int, why: str) -> str:
    """The message of a field that does not fit: the instruction, the field, its value and
    its width, and why the value is what it is."""
    return (f"{what}: field {name}={value} does not fit {width} bits (max "
            f"{(1 << width) - 1}); {why}")


@lru_cache(maxsize=1024)
def pad_field_error(ctx: Context) -> str:
    """Why an input LOAD's pad does not fit its field ("" when all four do): the pads are
    the same whatever the tiles (the emitter writes each tile's from ``window``)."""
    for name, value, width in zip(PAD_FIELDS, input_pads(ctx), ctx.widths.pads, strict=True):
        if value >= 1 << width:
            pixels = value // ctx.in_pack if name.startswith("x") else value
            what = "column" if name.startswith("x") else "row"
            return field_error(
                "LOAD INP", name, value, width,
                f"the input's pad of {pixels} {what}{'s' if pixels > 1 else ''}"
                + (f", {ctx.in_pack} elements a pixel (the input is packed by BLOCK_OUT "
                   f"{ctx.block_out} = {ctx.in_pack} x BLOCK_IN {ctx.block_in})"
                   if what == "column" and ctx.in_pack > 1 else ""))
    return ""
