"""Planning a schedule: what the emitter needs once the rules pass (:mod:`._rules`): the
geometry, the SRAM allocation per virtual thread, the micro-op kernels and the DMA plans.

Example:
    >>> from simulator.hardware import DEFAULT
    >>> from vtatune.schedule import Schedule
    >>> from vtatune.workloads import WORKLOADS
    >>> p = plan(WORKLOADS["conv2d"]["resnet18.C8"], Schedule(tile_h=7, tile_w=14, tile_co=4),
    ...          DEFAULT)
    >>> p.sram_usage()["acc"]
    {'elements': 392, 'depth': 2048, 'bytes': 25088}
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from simulator.hardware import HardwareConfig
from simulator.isa import AluOp
from vtatune.lowering._context import Geometry, channel_tile, context, schedule_context
from vtatune.lowering._dma import StoreDims, store_plan
from vtatune.lowering._rules import channel_tensors, epilogue_steps, rules
from vtatune.lowering._runtime import Kernel, KernelLoop
from vtatune.schedule import Schedule
from vtatune.workloads import (
    CHANNEL_TENSORS,
    INTO_SAVED,
    SAVED,
    Workload,
)


@dataclass(frozen=True)
class Plan:
    """Everything decided about a schedule before emitting instructions."""

    workload: Workload
    schedule: Schedule
    hw: HardwareConfig
    bias: bool
    geo: Geometry
    inp_tile: int  # elements per thread
    wgt_tile: int
    acc_tile: int
    bias_tile: int  # the per-channel tensors' area (:attr:`channels`, tile_b x tile_co each)
    nthreads: int
    gemm_axes: tuple[tuple[str, int, tuple[int, int, int]], ...]  # (axis, extent, coeffs)
    reset_axes: tuple[tuple[str, int, tuple[int, int, int]], ...]
    gemm_folds: int  # how many of gemm_axes fold into the instruction's loops (0-2)
    reset_folds: int
    inp_channels: int  # input channel blocks per load step (a tile's groups' span)
    group_loop: int  # group_conv2d: oc tile loop iterations per group (0: no group loop)
    groups_per_tile: int  # group_conv2d: whole groups an oc tile covers (else 1)
    inp_split: bool  # one input LOAD per channel block
    store_loops: StoreDims
    store_pattern: tuple[int, int, int]
    alu_flat: tuple[KernelLoop, ...]
    alu_bias: tuple[KernelLoop, ...]
    #: the epilogue's ALU instructions in order: (op, immediate, tensor)
    alu_steps: tuple[tuple[str, int | None, str | None], ...]
    #: the per-channel tensors they read (bias, shift), in the order of their ACC tiles
    channels: tuple[str, ...]

    # SRAM bases per thread -----------------------------------------------------------
    def inp_base(self, t: int) -> int:
        return t * self.inp_tile

    def wgt_base(self, t: int) -> int:
        return t * self.wgt_tile

    def acc_base(self, t: int) -> int:
        return t * self.acc_tile

    def bias_base(self, t: int) -> int:
        """Thread t's per-channel area: its first per-channel tensor's tile."""
        return self.nthreads * self.acc_tile + t * self.bias_tile

    @property
    def saves(self) -> bool:
        """The epilogue keeps a copy of the accumulator tile (a ``save`` step)."""
        return any(tensor == INTO_SAVED for _, _, tensor in self.alu_steps)

    def saved_base(self, t: int) -> int:
        """Thread t's copy of its accumulator tile (a ``save`` step): after every thread's
        per-channel area, so it moves with the thread's tile (``acc_base(t) + ...``)."""
        return self.nthreads * (self.acc_tile + self.bias_tile) + t * self.acc_tile

    def channel_bases(self, t: int) -> tuple[tuple[str, int], ...]:
        """Thread t's per-channel tensors and the SRAM bases of their tiles, in order (and
        its ``saved`` copy's base when the epilogue keeps one)."""
        tile = channel_tile(self.geo, self.schedule)
        saved = ((SAVED, self.saved_base(t)),) if self.saves else ()
        return tuple((name, self.bias_base(t) + j * tile)
                     for j, name in enumerate(self.channels)) + saved

    def sram_usage(self) -> dict[str, dict[str, int]]:
        hw, n = self.hw, self.nthreads
        used = {
            "inp": (n * self.inp_tile, hw.inp_depth, hw.inp_elem_bytes),
            "wgt": (n * self.wgt_tile, hw.wgt_depth, hw.wgt_elem_bytes),
            "acc": (n * (self.acc_tile * (1 + self.saves) + self.bias_tile), hw.acc_depth,
                    hw.acc_elem_bytes),
        }
        return {k: {"elements": u, "depth": d, "bytes": u * b} for k, (u, d, b) in used.items()}

    # Kernels ----------------------------------------------------------------------------
    def gemm_kernel(self, t: int, bi: int) -> Kernel:
        base = (self.acc_base(t) + bi * self.acc_tile // self.schedule.tile_b,
                self.inp_base(t), self.wgt_base(t))
        return _fold_kernel(self.gemm_axes, self.gemm_folds, base, reset=False)

    def reset_kernel(self, t: int, bi: int) -> Kernel:
        base = (self.acc_base(t) + bi * self.acc_tile // self.schedule.tile_b, 0, 0)
        return _fold_kernel(self.reset_axes, self.reset_folds, base, reset=True)

    def alu_kernels(self, t: int) -> tuple[Kernel, ...]:
        """Thread t's epilogue kernels, one per ALU instruction of :attr:`alu_steps`."""
        return _alu_kernels(self.acc_base(t), self.channel_bases(t), self.alu_flat,
                            self.alu_bias, self.alu_steps)


_ALU_OPS = {"add": AluOp.ADD, "max": AluOp.MAX, "min": AluOp.MIN, "shr": AluOp.SHR,
            "mul": AluOp.MUL}


@lru_cache(maxsize=1024)
def _alu_kernels(a: int, channel_at: tuple[tuple[str, int], ...], flat, bias_loops,
                 steps: tuple[tuple[str, int | None, str | None], ...]) -> tuple[Kernel, ...]:
    """The ALU kernels of ``steps`` on the ACC tile at ``a``, a per-channel tensor read from
    its tile in ``channel_at`` ((name, SRAM base) each; ``saved``: the copy of the tile, laid
    out as it is)."""
    on_acc = np.array([[a, a, 0]], np.int64)  # one uop: acc[a] op= imm
    at = dict(channel_at)
    kernels = []
    for op, imm, tensor in steps:
        if tensor is None:
            kernels.append(Kernel(on_acc, flat, alu_op=_ALU_OPS[op], use_imm=True, imm=imm))
            continue
        if tensor not in CHANNEL_TENSORS:  # the copy: the tile's own loops, moved
            copy = at[SAVED]
            if tensor == SAVED:  # acc op= copy
                uops = np.array([[a, copy, 0]], np.int64)
            elif imm is not None:  # copy op= imm
                uops = np.array([[copy, copy, 0]], np.int64)
            else:  # copy += acc
                uops = np.array([[copy, a, 0]], np.int64)
            kernels.append(Kernel(uops, flat, alu_op=_ALU_OPS[op], use_imm=imm is not None,
                                  imm=imm if imm is not None else 0))
            continue
        # acc op= bias (or shift): an ALU instruction has two loops; the inner ones (co % k
        # when the output is packed by BLOCK_IN) unroll into micro-ops.
        inner = tuple((lp.extent, (lp.dst, lp.src, 0)) for lp in bias_loops[2:])
        uops = _unrolled(inner) + np.array([a, at[tensor], 0], np.int64)
        kernels.append(Kernel(uops, bias_loops[:2], alu_op=_ALU_OPS[op]))
    return tuple(kernels)


@lru_cache(maxsize=4096)
def _fold_kernel(axes, folds: int, base: tuple[int, int, int], reset: bool) -> Kernel:
    """The ``folds`` (at most two) outermost loops fold into the instruction; the rest
    unroll into uops. (Cached: a kernel is an immutable value, shared by every schedule
    that builds it.)"""
    folded, offs = _kernel_shape(axes, folds, reset)
    if reset:  # a reset uop only names its ACC row
        base = (base[0], 0, 0)
    return Kernel(offs + np.array(base, np.int64), folded, reset=reset)


@lru_cache(maxsize=1024)
def _kernel_shape(axes, folds: int, reset: bool) -> tuple[tuple[KernelLoop, ...], np.ndarray]:
    """(folded loops, uop offsets) of the kernel over ``axes``: every thread and batch row
    shares them, only the base differs."""
    folded = tuple(KernelLoop(e, *c) if not reset else KernelLoop(e, c[0], 0, 0)
                   for _, e, c in axes[:folds])
    if reset:
        return folded, _unrolled(tuple((e, (c[0], 0, 0)) for _, e, c in axes[folds:]))
    return folded, _unrolled(tuple((e, c) for _, e, c in axes[folds:]))


@lru_cache(maxsize=256)
def _unrolled(dims: tuple[tuple[int, tuple[int, int, int]], ...]) -> np.ndarray:
    """(dst, src, wgt) offsets of the unrolled uops in order (innermost axis fastest):
    ``dims`` holds (extent, (dst, src, wgt) coefficients) per axis, outermost first."""
    offs = np.zeros((1, 3), np.int64)
    for e, coef in dims:
        offs = (offs[:, None, :] + np.arange(e)[None, :, None] * np.array(coef)).reshape(-1, 3)
    offs.flags.writeable = False
    return offs


def plan(workload: Workload, schedule: Schedule, hw: HardwareConfig, bias: bool = False) -> Plan:
    """Validate ``schedule`` for ``workload`` on ``hw``; raises IllegalSchedule."""
    ctx = context(workload, hw)
    f = rules(ctx, schedule, bias)
    ctx = schedule_context(ctx, schedule)  # what the rules read: a GEMM's rows as pixels
    sch = schedule
    bias, steps = epilogue_steps(ctx.epilogue, bias, sch.clip_order)
    geo = Geometry.of(ctx, f.eh, f.ew,
                      {"b": ctx.nb // sch.tile_b, "h": ctx.oh // sch.tile_h // sch.h_nthread,
                       "c": ctx.cob // sch.tile_co // sch.oc_nthread, "w": ctx.ow // sch.tile_w})
    store_loops, store_pattern = store_plan(ctx, sch, f.strict_store_pattern)
    return Plan(workload, sch, hw, bias, geo, f.inp_tile, f.wgt_tile,
                f.acc_tile, f.bias_tile, f.nthreads, f.gemm_axes, f.reset_axes, f.gemm_folds,
                f.reset_folds, f.inp_channels, f.group_loop, f.groups_per_tile, f.inp_split,
                store_loops, store_pattern, tuple(KernelLoop(*lp) for lp in f.alu_flat),
                tuple(KernelLoop(*lp) for lp in f.alu_bias), steps, channel_tensors(steps))
