"""ALU-only kernels: an elementwise add or product of two packed tensors, the way TVM's
``add.vta`` / ``multiply.vta`` schedule lowers it (``vta/python/vta/top/op.py``).

The output's (co, h, w) blocks are split into tiles of ``tile_co`` x ``tile_h`` x
``tile_w`` (AutoTVM's knobs; no virtual threads), walked in TVM's order b, h, co, w. Per
tile, on the compute stage: the two operands loaded into the accumulators (an int8 operand
with the DMA's sign-extending int8 mode, ``MEM_ID_ACC_8BIT``; an int32 one as a plain ACC
load), one ALU instruction for the add (or product), one per epilogue step (ReLU, clip),
each its own one-uop kernel over the tile's elements; then the store. TVM's dependency
insertion gives the tile loop a priming store->compute push and a draining pop, which for a
kernel whose body is its tile loop lands after the synchronize (see
:class:`~vtatune.lowering.Carry`): the stream ends with one token unpopped. With T tiles the
stream has 7 T + 9 instructions (the fallback config, one 16-lane vector a tile, gives
87,817 for a 56x56x64 add).

Legality (TVM's): a tile divides the tensor; each operand's tile and the output tile fold
into one 2D DMA (``cannot detect 2d pattern`` otherwise); both operand tiles fit the
accumulator buffer; the tile's elements fit an ALU loop.

Example:
    >>> from simulator.hardware import PRESETS
    >>> from vtatune.schedule import Schedule
    >>> from vtatune.workloads import AddWorkload
    >>> add = AddWorkload(1, 64, 56, 56)
    >>> len(lower_alu(add, Schedule(tile_h=1, tile_w=1, tile_co=1), PRESETS["sim"])[0])
    87817
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from simulator.hardware import HardwareConfig
from simulator.isa import AluOp, MemId, loop_limit
from simulator.program import Program, layout_tensors
from vtatune.errors import IllegalSchedule
from vtatune.lowering._carry import FRESH, Carry
from vtatune.lowering._context import max_imm_magnitude
from vtatune.lowering._dma import pattern_2d
from vtatune.lowering._ir import Dep, For, Stage, Threaded, expand_threads, insert_deps, loop
from vtatune.lowering._layouts import input_pack, output_pack
from vtatune.lowering._runtime import COMPUTE, STORE, CommandQueue, Kernel, KernelLoop
from vtatune.workloads import ElementwiseWorkload

_ALU = {"add": AluOp.ADD, "max": AluOp.MAX, "min": AluOp.MIN, "shr": AluOp.SHR,
        "mul": AluOp.MUL}
#: Loop slots of the tile loops (TVM's order: b, h, co, w).
_SLOTS = {"b": 0, "h": 1, "c": 2, "w": 3}


@dataclass(frozen=True)
class AluContext:
    """The rule constants of an ALU-only workload on one hardware config."""

    workload: ElementwiseWorkload
    nb: int  # batch blocks
    cob: int  # channel blocks (of BLOCK_OUT lanes)
    h: int
    w: int
    acc_depth: int
    uop_depth: int
    loop_limit: int
    acc_elem_bytes: int
    lanes: int  # BATCH x BLOCK_OUT int8 lanes a block, the int8 DMA's element
    layout_error: str  # why the hardware's layout refuses ALU-only kernels ("" if it does not)
    imm_ok: bool  # every immediate of the epilogue fits the ALU's imm field


def alu_context(workload: ElementwiseWorkload, hw: HardwareConfig) -> AluContext:
    workload.check(hw)
    from vtatune.lowering._context import _widths  # the instruction fields' bit widths

    widths, _ = _widths(hw)
    layout = ""
    if output_pack(hw) > 1 or input_pack(hw) > 1:
        layout = (f"BLOCK_IN {hw.block_in} != BLOCK_OUT {hw.block_out}: a conv's output is "
                  "packed by the larger block, which ALU-only kernels do not read (TVM's "
                  "add.vta assumes one block size)")
    imm_ok = widths is not None and max_imm_magnitude(workload.epilogue) < 1 << (widths.imm - 1)
    return AluContext(workload, workload.batch // hw.batch, workload.channels // hw.block_out,
                      workload.height, workload.width, hw.acc_depth, hw.uop_depth,
                      loop_limit(), hw.acc_elem_bytes, hw.batch * hw.block_out, layout,
                      imm_ok)


@dataclass(frozen=True)
class AluFacts:
    """What the rules computed: the tile's elements and its 2D DMA pattern."""

    n: int  # blocks of a tile (its ALU loop's extent)
    pattern: tuple[int, int, int]  # (y_size, x_size, x_stride) of every load and store


def alu_shape_rules(ctx: AluContext) -> None:
    """What fails whatever the tiles."""
    if ctx.layout_error:
        raise IllegalSchedule("alu_layout", ctx.layout_error)
    if not ctx.imm_ok:
        raise IllegalSchedule("field_width", "ALU: an epilogue immediate does not fit the "
                                             "instruction's imm field")


def alu_rules(ctx: AluContext, sch: Any, bias: bool = False) -> AluFacts:
    """Every legality rule of an ALU-only schedule, in order (TVM's ``add.vta``)."""
    if bias:
        raise IllegalSchedule("alu_bias", "an ALU-only kernel reads no bias")
    tc, th, tw = sch.tile_co, sch.tile_h, sch.tile_w
    for knob, tile, extent, what in (("tile_co", tc, ctx.cob, "channel blocks"),
                                     ("tile_h", th, ctx.h, "rows"),
                                     ("tile_w", tw, ctx.w, "columns")):
        if extent % tile:
            raise IllegalSchedule("tile_divides", f"{knob}={tile} does not divide the "
                                                  f"{extent} {what}")
    if sch.tile_b != 1 or sch.tile_ci != 1 or sch.oc_nthread != 1 or sch.h_nthread != 1:
        raise IllegalSchedule("alu_knobs", "add.vta has the knobs tile_co, tile_h and tile_w "
                                           "only (no batch tile, no threads)")
    alu_shape_rules(ctx)
    pattern = pattern_2d([(tc, ctx.h * ctx.w), (th, ctx.w), (tw, 1)])
    if pattern is None:
        raise IllegalSchedule(
            "dma_pattern", f"a tile of {tc} channel blocks x {th} rows x {tw} columns has no "
                           "2D DMA pattern (TVM: 'cannot detect 2d pattern')")
    n = tc * th * tw
    if 2 * n > ctx.acc_depth:
        raise IllegalSchedule(
            "acc_capacity", f"two operand tiles need {2 * n * ctx.acc_elem_bytes} B, ACC "
                            f"buffer has {ctx.acc_depth * ctx.acc_elem_bytes} B")
    if n > ctx.loop_limit:
        raise IllegalSchedule("loop_extent", f"ALU loop extent {n} exceeds the "
                                             f"{ctx.loop_limit} an instruction encodes")
    return AluFacts(n, pattern)


@lru_cache(maxsize=256)
def _tensors(workload: ElementwiseWorkload, hw: HardwareConfig):
    shape = (workload.batch // hw.batch, workload.channels // hw.block_out, workload.height,
             workload.width, hw.batch, hw.block_out)
    specs = [("data", shape, "int8", "input"),
             ("weight", shape, "int32" if workload.rhs_bits == 32 else "int8", "input"),
             ("output", shape, "int8", "output")]
    align = max(hw.acc_elem_bytes, hw.out_elem_bytes)
    return layout_tensors(specs, align)


@lru_cache(maxsize=256)
def _steps(looped: tuple[str, ...], nalu: int) -> tuple[tuple[tuple, ...], tuple]:
    """The tile loop nest with TVM's dependencies, flattened; and the pops after the
    synchronize (a body that is its tile loop: no virtual threads here)."""
    body = [Stage(COMPUTE, ["load_lhs", "load_rhs", *(f"alu{i}" for i in range(nalu))]),
            Stage(STORE, ["store"])]
    for axis in reversed(looped):
        body = loop(axis, 2, body)
    synced = insert_deps(body)
    after: list[Dep] = []
    if len(body) == 1 and isinstance(body[0], For):
        while synced and isinstance(synced[-1], Dep) and not synced[-1].push:
            after.insert(0, synced.pop())
    out: list[tuple] = []

    def flatten(items: list[Any]) -> None:
        for item in items:
            if isinstance(item, For):
                out.append(("loop", item.var))
                flatten(item.body)
                out.append(("end", item.var))
            elif isinstance(item, Threaded):
                out.extend(("leaf", op) if isinstance(op, str) else
                           ("push" if op.push else "pop", op.src, op.dst)
                           for op in item.node.ops)
            elif isinstance(item, Dep):
                out.append(("push" if item.push else "pop", item.src, item.dst))

    flatten(expand_threads(synced, 1))
    return tuple(out), tuple((d.src, d.dst) for d in after)


def lower_alu(workload: ElementwiseWorkload, schedule: Any, hw: HardwareConfig,
              carry: Carry = FRESH) -> tuple[Program, tuple[tuple[int, int], ...], AluFacts]:
    """The program of an ALU-only schedule after a stream that left ``carry``; the pops it
    leaves pending; the rules' facts. Raises IllegalSchedule."""
    ctx = alu_context(workload, hw)
    facts = alu_rules(ctx, schedule)
    tc, th, tw, n = schedule.tile_co, schedule.tile_h, schedule.tile_w, facts.n
    counts = {"b": ctx.nb, "h": ctx.h // th, "c": ctx.cob // tc, "w": ctx.w // tw}
    looped = tuple(a for a in ("b", "h", "c", "w") if counts[a] > 1)
    steps = (("add" if workload.alu_op == "add" else "mul", None, "rhs"),
             *workload.epilogue.alu_steps(schedule.clip_order))
    tensors, dram_bytes = _tensors(workload, hw)
    base = {t.name: t.address for t in tensors}
    lane_bytes = ctx.lanes  # an int8 block: the int8 DMA's and the store's element
    rhs_mem = MemId.ACC if workload.rhs_bits == 32 else MemId.ACC_8BIT
    rhs_bytes = hw.acc_elem_bytes if workload.rhs_bits == 32 else lane_bytes
    # a tile's first block, linear in the tile loop variables
    coefs = {_SLOTS["b"]: ctx.cob * ctx.h * ctx.w, _SLOTS["h"]: th * ctx.w,
             _SLOTS["c"]: tc * ctx.h * ctx.w, _SLOTS["w"]: tw}
    y, x, stride = facts.pattern
    q = CommandQueue(hw, carry.pending)
    flat = tuple(KernelLoop(*lp) for lp in ((n, 1, 1),) if n > 1)
    kernels = []
    for op, imm, tensor in steps:
        uop = np.array([[0, n if tensor else 0, 0]], np.int64)  # dst lhs; src rhs or itself
        kernels.append(Kernel(uop, flat, alu_op=_ALU[op], use_imm=tensor is None,
                              imm=imm or 0))
    makers = {
        "load_lhs": lambda: q.load_2d(MemId.ACC_8BIT, 0, base["data"] // lane_bytes, y, x,
                                      stride, coefs=coefs),
        "load_rhs": lambda: q.load_2d(rhs_mem, n, base["weight"] // rhs_bytes, y, x, stride,
                                      coefs=coefs),
        "store": lambda: q.store_2d(0, base["output"] // hw.out_elem_bytes, y, x, stride,
                                    coefs=coefs),
        **{f"alu{i}": (lambda k=k, i=i: q.push_alu(("alu", i), k))
           for i, k in enumerate(kernels)},
    }
    program_steps, after_sync = _steps(looped, len(steps))
    for step in program_steps:
        kind = step[0]
        if kind == "leaf":
            makers[step[1]]()
        elif kind == "loop":
            q.begin_loop(_SLOTS[step[1]], counts[step[1]])
        elif kind == "end":
            q.end_loop()
        elif kind == "push":
            q.dep_push(step[1], step[2])
        else:
            q.dep_pop(step[1], step[2])
    q.synchronize()
    table, uops = q.run()
    return Program(table, uops, tensors, dram_bytes, carry.tokens), after_sync, facts
