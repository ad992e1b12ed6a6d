"""The constants every legality rule reads: one workload on one hardware config, as TVM's
VTA compute lays it out (:class:`OperatorShape`), with the instruction fields' bit widths.

Example:
    >>> from simulator.hardware import DEFAULT
    >>> from vtatune.workloads import WORKLOADS
    >>> ctx = context(WORKLOADS["conv2d"]["resnet18.C8"], DEFAULT)
    >>> ctx.cib, ctx.cob, ctx.oh, ctx.fits_all
    (16, 16, 14, True)
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import NamedTuple

from simulator.errors import EncodingError
from simulator.hardware import HardwareConfig
from simulator.isa import Opcode, field_widths, loop_limit, uop_widths
from vtatune.lowering._layouts import input_pack, output_pack
from vtatune.workloads import (
    Conv2dTransposeWorkload,
    Conv2dWorkload,
    Epilogue,
    GemmWorkload,
    GroupConv2dWorkload,
    Workload,
)


@dataclass(frozen=True)
class Context:
    """The constants of the legality rules for one workload on one hardware config."""

    nb: int  # batch blocks
    cib: int  # input-channel blocks each output channel reduces over (one group's)
    cob: int
    oh: int
    ow: int
    h: int  # the input as VTA loads it from DRAM (conv2d_transpose: the dilated input)
    w: int
    k: int
    s: int
    p: int  # pad before (top, left); the pad after follows from oh / ow
    groups: int  # 1 except for group_conv2d
    in_blocks: int  # channel blocks of the DRAM input tensor (groups x cib)
    transpose: bool  # conv2d_transpose: TVM's template has its own inner loop nest
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
    out_width: int
    widths: Widths | None  # None: the hardware's instruction layout does not fit 128 bits
    layout_error: str
    fits_all: bool  # no schedule that passes the other rules can overflow a field
    dram_elems: int  # DRAM size in its smallest elements: bounds every dram_base
    dense: bool  # a GEMM: TVM-strict schedules are dense_packed points, not conv2d_packed
    block_out: int
    out_pack: int  # BLOCK_OUT blocks per channel block of the output in DRAM (output_pack)
    in_pack: int  # BLOCK_IN blocks per channel block of the input in DRAM (input_pack)
    epilogue: Epilogue  # the workload's (the bias flag of a run may add the benchmark's bias)
    #: a GEMM lowered with its rows as a 1x1 conv's pixels (``Schedule.rows="spatial"``:
    #: :func:`rows_context`); the packs are then the GEMM's DRAM rows, not the hardware's
    rows: bool


@dataclass(frozen=True)
class Geometry(Context):
    """The workload's constants plus what the schedule decides about its tiles."""

    eh: int  # input window rows of a tile (padded coordinates)
    ew: int
    counts: dict[str, int]  # outer loop extents per axis (after thread split)

    @classmethod
    def of(cls, ctx: Context, eh: int, ew: int, counts: dict[str, int]) -> Geometry:
        """``ctx``'s constants with a schedule's tiles, its fields copied at once: the
        dataclass ``__init__`` would set its 38 fields one by one for every schedule."""
        geo = object.__new__(cls)
        geo.__dict__.update(vars(ctx), eh=eh, ew=ew, counts=counts)
        return geo


#: A LOAD's zero-padding fields (rows before and after, elements before and after a row).
PAD_FIELDS = ("y_pad_0", "y_pad_1", "x_pad_0", "x_pad_1")


class Widths(NamedTuple):
    """Bit widths of the instruction and micro-op fields (simulator.isa's layout)."""

    sram: int
    dram: int
    y: int
    x: int
    stride: int
    pads: tuple[int, int, int, int]  # the DMA pad fields, in PAD_FIELDS' order
    uop_bgn: int
    uop_end: int
    dst_factor: int
    src_factor: int
    wgt_factor: int
    imm: int  # signed
    uop_dst: int
    uop_src: int
    uop_wgt: int


def _widths(hw: HardwareConfig) -> tuple[Widths | None, str]:
    try:
        mem, gemm = field_widths(hw, Opcode.LOAD), field_widths(hw, Opcode.GEMM)
        alu = field_widths(hw, Opcode.ALU)
    except EncodingError as exc:
        return None, str(exc)
    return Widths(mem["sram_base"], mem["dram_base"], mem["y_size"], mem["x_size"],
                  mem["x_stride"], tuple(mem[f] for f in PAD_FIELDS), gemm["uop_bgn"],
                  gemm["uop_end"], gemm["dst_factor_out"], gemm["src_factor_out"],
                  gemm["wgt_factor_out"], alu["imm"], *uop_widths(hw)), ""


class OperatorShape(NamedTuple):
    """An operator as TVM's VTA compute lays it out: a stride-``s`` correlation of a
    ``k`` x ``k`` kernel over an ``h`` x ``w`` input (as VTA loads it from DRAM), padded by
    ``p`` before (top, left) and as much as the ``oh`` x ``ow`` output needs after, each
    output channel reducing over ``group_in`` input channels of its group.

    * conv2d / gemm (a 1x1 conv of a 1x1 image): as given.
    * group_conv2d (``group_conv2d_packed``): output channel ``c`` reads input channels
      ``c // (out / groups) * group_in + [0, group_in)``.
    * conv2d_transpose (``conv2d_transpose_packed``): TVM's compute dilates the input by the
      stride (``topi.nn.dilate``, a host stage written to DRAM), pads it by ``k - 1 - pad``
      before and ``k - 1 - pad + output_padding`` after, and correlates at stride 1 with
      the packed kernel (which holds the spatially flipped, in/out-swapped weights).
    """

    batch: int
    in_channels: int  # of the DRAM input tensor
    out_channels: int
    group_in: int
    groups: int
    h: int
    w: int
    k: int
    s: int
    p: int
    oh: int
    ow: int
    transpose: bool


def operator_shape(workload: Workload) -> OperatorShape:
    """The :class:`OperatorShape` of ``workload``.

    Example:
        >>> from vtatune.workloads import WORKLOADS
        >>> operator_shape(WORKLOADS["conv2d_transpose"]["dcgan.CT1"])[5:]
        (7, 7, 4, 1, 2, 8, 8, True)
    """
    wl = workload
    if isinstance(wl, GemmWorkload):
        wl = wl.as_conv()
    if isinstance(wl, Conv2dWorkload):
        return OperatorShape(wl.batch, wl.in_channels, wl.out_channels, wl.in_channels, 1,
                             wl.height, wl.width, wl.kernel, wl.stride, wl.pad,
                             wl.out_height, wl.out_width, False)
    if isinstance(wl, GroupConv2dWorkload):
        return OperatorShape(wl.batch, wl.in_channels, wl.out_channels, wl.group_in_channels,
                             wl.groups, wl.height, wl.width, wl.kernel, wl.stride, wl.pad,
                             wl.out_height, wl.out_width, False)
    if isinstance(wl, Conv2dTransposeWorkload):
        s = wl.stride
        return OperatorShape(wl.batch, wl.in_channels, wl.out_channels, wl.in_channels, 1,
                             (wl.height - 1) * s + 1, (wl.width - 1) * s + 1, wl.kernel, 1,
                             wl.kernel - 1 - wl.pad, wl.out_height, wl.out_width, True)
    raise TypeError(f"not a workload: {workload!r}")  # pragma: no cover


def _fits_all(op: OperatorShape, hw: HardwareConfig, w: Widths | None,
              dram_elems: int, epilogue: Epilogue) -> bool:
    """True when no schedule passing the other rules can overflow a field: every SRAM
    index and DMA size is below a buffer depth (the capacity rules), so depths below 2^16
    and 2^(index widths), DMA strides (a row, an image, a kernel row of channel blocks, an
    output channel) below 2^16 and DRAM below 2^32 elements leave nothing to check."""
    if w is None:
        return False
    cib, cob = op.group_in // hw.block_in, op.out_channels // hw.block_out
    size_limit = 1 << min(w.sram, w.y, w.x, w.stride)
    return (max(hw.inp_depth, hw.wgt_depth, hw.acc_depth, hw.uop_depth) < size_limit
            and max(op.h * op.w * input_pack(hw), cib * op.k * op.k, cob * op.oh * op.ow)
            < size_limit
            and hw.acc_depth <= min(1 << w.uop_dst, 1 << w.dst_factor)
            and hw.acc_depth <= min(1 << w.uop_src, 1 << w.src_factor)  # ALU src is ACC
            and hw.inp_depth <= min(1 << w.uop_src, 1 << w.src_factor)
            and hw.wgt_depth <= min(1 << w.uop_wgt, 1 << w.wgt_factor)
            and hw.uop_depth <= (1 << w.uop_bgn)  # uop_bgn < depth
            and hw.uop_depth < (1 << w.uop_end)  # uop_end <= depth
            and dram_elems < (1 << w.dram)
            and (op.batch // hw.batch) * 8 * hw.uop_depth + 16 < (1 << w.dram)
            and max_imm_magnitude(epilogue) < (1 << (w.imm - 1)))


@lru_cache(maxsize=1024)
def context(workload: Workload, hw: HardwareConfig) -> Context:
    """The rule constants of ``workload`` on ``hw`` (raises WorkloadError for bad shapes)."""
    workload.check(hw)
    op = operator_shape(workload)
    widths, layout_error = _widths(hw)
    # All tensors (bias included, and a per-channel shift the epilogue reads) with
    # alignment slack, in the smallest element.
    shift = workload.epilogue.shift_planes  # the shift input's planes
    dram_bytes = (op.batch * op.in_channels * op.h * op.w * hw.inp_width // 8
                  + op.out_channels * op.group_in * op.k ** 2 * hw.wgt_width // 8
                  + (1 + shift) * op.batch * op.out_channels * hw.acc_width // 8
                  + op.batch * op.out_channels * op.oh * op.ow * hw.out_width // 8
                  + (4 + shift) * max(hw.inp_elem_bytes, hw.wgt_elem_bytes, hw.acc_elem_bytes,
                                      hw.out_elem_bytes))
    dram_elems = -(-dram_bytes // min(hw.inp_elem_bytes, hw.wgt_elem_bytes, hw.acc_elem_bytes,
                                      hw.out_elem_bytes))
    return Context(
        op.batch // hw.batch, op.group_in // hw.block_in, op.out_channels // hw.block_out,
        op.oh, op.ow, op.h, op.w, op.k, op.s, op.p, op.groups, op.in_channels // hw.block_in,
        op.transpose, hw.batch, hw.block_in, hw.inp_depth,
        hw.wgt_depth, hw.acc_depth, hw.uop_depth, hw.inp_elem_bytes, hw.wgt_elem_bytes,
        hw.acc_elem_bytes, hw.acc_buff_bytes, loop_limit(), hw.out_width, widths,
        layout_error,
        _fits_all(op, hw, widths, dram_elems, workload.epilogue), dram_elems,
        isinstance(workload, GemmWorkload), hw.block_out, output_pack(hw), input_pack(hw),
        workload.epilogue, False)


@lru_cache(maxsize=1024)
def rows_context(ctx: Context) -> Context:
    """A GEMM's constants with its rows as the pixels of a 1x1 conv (``rows="spatial"``):
    one batch block, ``nb`` rows of one column, in and out "packed" by all their channel
    blocks, which is how a GEMM lies in DRAM: row ``m``'s input block ``c`` is element
    ``m * cib + c`` (``(nb, cib, BATCH, BLOCK_IN)``), its output block ``c`` element
    ``m * cob + c``. A tile of ``tile_h`` rows and ``tile_ci`` (``tile_co``) blocks is one
    2D DMA of ``tile_h`` rows ``cib`` (``cob``) apart; its INP and ACC tiles are row-major
    (rows, blocks): ``tile_pack`` says so. Every element is one BATCH x BLOCK block, so
    BATCH and the hardware's BLOCK_IN / BLOCK_OUT packing play no part."""
    w = ctx.widths
    fits = ctx.fits_all and w is not None and \
        max(ctx.nb * ctx.cib, ctx.nb * ctx.cob) < 1 << min(w.sram, w.y, w.x, w.stride)
    return replace(ctx, nb=1, oh=ctx.nb, ow=1, h=ctx.nb, w=1, in_blocks=ctx.cib,
                   in_pack=ctx.cib, out_pack=ctx.cob, fits_all=fits, rows=True)


def schedule_context(ctx: Context, sch) -> Context:
    """The constants the rules and the emitter read for schedule ``sch``: ``ctx``, or its
    :func:`rows_context` for a GEMM's ``rows="spatial"`` (the rules refuse it elsewhere)."""
    if getattr(sch, "rows", "batch") == "spatial" and ctx.dense and not ctx.rows:
        return rows_context(ctx)
    return ctx


def tile_pack(ctx: Context, tile_ci: int, tile_co: int) -> tuple[int, int]:
    """(input, output) channel blocks that lie side by side per pixel in the INP and ACC
    tiles: the hardware's packing (:func:`input_pack`, :func:`output_pack`), or with a
    GEMM's rows as pixels (:func:`rows_context`) the tile's own blocks (row-major tiles)."""
    if ctx.rows:
        return tile_ci, tile_co
    return ctx.in_pack, ctx.out_pack


def max_imm_magnitude(epilogue: Epilogue) -> int:
    """The largest magnitude an ALU immediate of ``epilogue`` takes, as a signed field must
    hold it (-x needs x - 1 bits of magnitude): the ALU ``imm`` field's width bounds it."""
    return max((imm if imm >= 0 else -imm - 1 for _, imm, _ in epilogue.alu_steps()
                if imm is not None), default=0)


def channel_tile(ctx: Context, sch) -> int:
    """The ACC elements of one per-channel tensor's tile (bias, shift): ``tile_b`` x
    ``tile_co``; a GEMM's with its rows as pixels (``ctx.rows``) holds them per row, as its
    DRAM tensor does, ``tile_h`` x ``tile_w`` x ``tile_co`` (one batch block)."""
    rows = sch.tile_h * sch.tile_w if ctx.rows else sch.tile_b
    return rows * sch.tile_co
