"""DMA patterns: TVM's folding of a tensor region into one 2D transfer (``y_size`` rows of
``x_size`` elements, ``x_stride`` apart), input windows with their pads, and the output
tile's stores.

Example:
    >>> pattern_2d([(4, 56), (56, 1)])  # 4 whole rows of a 56-wide plane: one run
    (1, 224, 224)
    >>> pattern_2d([(4, 56), (14, 1)])  # 14 columns of 4 rows
    (4, 14, 56)
"""
from __future__ import annotations

from typing import Any

from vtatune.lowering._context import Context, tile_pack
from vtatune.lowering._layouts import acc_coefficients

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


def window(p: int, s: int, k: int, tile: int, size: int, extent: int
           ) -> tuple[int, int, int, int]:
    """A tile's input window in one dimension: (first row, rows, pad before, pad after)."""
    a = tile * size * s
    e = (size - 1) * s + k
    before = max(p - a, 0)
    after = max(a + e - (extent + p), 0)
    return a - p + before, e - before - after, before, after


def input_pads(ctx: Context) -> tuple[int, int, int, int]:
    """The largest value each pad field of an input LOAD takes (``PAD_FIELDS``' order:
    rows before and after, elements before and after a row), whatever the tiles: the first
    tile's window is padded by ``p`` before and the last one's by what the output reads past
    the input after, as the one window over the whole output is (:func:`window`). A row
    counts ``in_pack`` elements a pixel (the input is packed by BLOCK_OUT), so its pads do.

    Example (a 3x3 pad-1 conv; ``in_pack`` 16: BLOCK_IN 4, BLOCK_OUT 64):
        >>> from simulator.hardware import DEFAULT, HardwareConfig
        >>> from vtatune.lowering._context import context
        >>> from vtatune.workloads import WORKLOADS
        >>> wl = WORKLOADS["conv2d"]["resnet18.C2"]
        >>> input_pads(context(wl, DEFAULT))
        (1, 1, 1, 1)
        >>> hw = HardwareConfig.from_target_model("pynq_1x4x64_i8w8a32_10_15_17_18")
        >>> input_pads(context(wl, hw))
        (1, 1, 16, 16)
    """
    _, _, y0, y1 = window(ctx.p, ctx.s, ctx.k, 0, ctx.oh, ctx.h)
    _, _, x0, x1 = window(ctx.p, ctx.s, ctx.k, 0, ctx.ow, ctx.w)
    return y0, y1, x0 * ctx.in_pack, x1 * ctx.in_pack


StoreDims = list[tuple[int, int, int]]  # (size, DRAM stride, ACC SRAM stride), outer first


def store_dims(ctx: Context, sch: Any) -> StoreDims:
    """The output tile's dims in ACC order (:func:`acc_coefficients`) after the batch
    block, with their DRAM strides (the output is packed as :func:`output_pack` says)."""
    k, oh, ow = ctx.out_pack, ctx.oh, ctx.ow
    tile_co, tile_h, tile_w = sch.tile_co, sch.tile_h, sch.tile_w
    dram = {"co": oh * ow * k, "h": ow * k, "w": k, "co%k": 1}
    acc = acc_coefficients(tile_pack(ctx, sch.tile_ci, tile_co)[1], tile_co, tile_h, tile_w)
    return [(sch.tile_b, ctx.cob * oh * ow, tile_co * tile_h * tile_w),
            *((e, dram[a], stride) for a, e, stride in acc)]


def inp_dims(ctx: Context, nch: int, eh: int, ew: int) -> Dims:
    """DRAM dims of an unpadded input window of ``nch`` channel blocks (a multiple of the
    input packing k): (nch / k planes, eh rows, ew x k elements of the interleaved rows)."""
    k = ctx.in_pack
    if ctx.rows:  # a GEMM's rows (rows_context): nch blocks of each of eh x ew rows
        return [(eh, ctx.w * k), (ew, k), (nch, 1)]
    return [(nch // k, ctx.h * ctx.w * k), (eh, ctx.w * k), (ew * k, 1)]


def store_plan(ctx: Context, sch: Any, strict_pattern) -> tuple[StoreDims, Any]:
    """(looped dims, 2D pattern) of the output tile's stores: the fewest leading dims
    looped so that the rest is one 2D DMA (its SRAM side is contiguous: any trailing dims
    of the dense ACC tile are)."""
    dims = store_dims(ctx, sch)
    if sch.store == "element":
        return dims, (1, 1, 1)
    if sch.tvm_strict:
        return dims[:1], strict_pattern
    looped, pattern = split_2d([(size, dram) for size, dram, _ in dims])
    return dims[:len(looped)], pattern
