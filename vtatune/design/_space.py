"""The hardware space of a design search: which VTA configurations exist for a board.

Knobs: LOG_BATCH, LOG_BLOCK_IN, LOG_BLOCK_OUT (VTA's hardware has the two separately; TVM's
stock toolchain ties them, so a design with BLOCK_IN != BLOCK_OUT needs a toolchain change:
:func:`toolchain`) and the four buffer sizes; the widths stay int8/int8/int32 and the clock
is the board's. A configuration is *feasible* for a network when its instructions and
micro-ops encode (:func:`simulator.isa.check_encodable`), one layer's output can be stored
in the next layer's input layout (:func:`layout_reason`), it fits the board
(:func:`simulator.resources.estimate`), every task's shape is whole blocks of it and every
task passes the lowering's shape rules (:func:`task_reason`: the rules no schedule can
change, e.g. an input pad that does not fit its LOAD field), all decided before any tuning.

Latency never grows with a bigger buffer (it only admits more schedules) and resources never
shrink, so for the latency objective only the *maximal* feasible buffer sizes of each
(BATCH, BLOCK) matter: :func:`maximal_configs`.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from itertools import product

from simulator.errors import VTAError
from simulator.hardware import HardwareConfig
from simulator.isa import check_encodable
from simulator.resources import Device, estimate
from vtatune.design._inner import placed, placement_difference
from vtatune.errors import IllegalSchedule
from vtatune.lowering import context, shape_rules
from vtatune.networks import Network

BUFFERS = ("log_uop_buff_size", "log_inp_buff_size", "log_wgt_buff_size", "log_acc_buff_size")
SHAPE_KNOBS = ("log_batch", "log_block_in", "log_block_out")
#: The range every knob is searched over (inclusive).
KNOB_RANGES = {"log_batch": (0, 4), "log_block_in": (2, 6), "log_block_out": (2, 6),
               "log_uop_buff_size": (10, 15), "log_inp_buff_size": (10, 22),
               "log_wgt_buff_size": (10, 22), "log_acc_buff_size": (10, 22)}

Shape = tuple[int, int, int]  # (LOG_BATCH, LOG_BLOCK_IN, LOG_BLOCK_OUT)

TVM_STOCK = "TVM stock"


#: Fewest elements an INP, WGT or ACC buffer may hold: smaller ones starve every tile (the
#: inner search would look for legal schedules that hardly exist).
MIN_DEPTH = 256


def stock(board: str) -> HardwareConfig:
    """The released configuration on ``board`` (1x16, buffers 15/15/18/17)."""
    return HardwareConfig(target=board)


def with_shape(hw: HardwareConfig, shape: Shape, **buffers: int) -> HardwareConfig:
    lb, lbi, lbo = shape
    return replace(hw, log_batch=lb, log_block_in=lbi, log_block_out=lbo, **buffers)


def shape_label(shape: Shape) -> str:
    """``1x16`` or ``1x32x16`` (BATCH x BLOCK_IN x BLOCK_OUT), as bitstreams name it."""
    lb, lbi, lbo = shape
    return f"{1 << lb}x{1 << lbi}" + ("" if lbi == lbo else f"x{1 << lbo}")


def toolchain(hw: HardwareConfig) -> str:
    """What building and compiling for ``hw`` takes: TVM's stock VTA flow, or which change."""
    if hw.tvm_stock_blocks:
        return TVM_STOCK
    return (f"needs a toolchain change: BLOCK_IN {hw.block_in} != BLOCK_OUT {hw.block_out} "
            "(TVM's pkg_config.py sets both from LOG_BLOCK; the HLS and Chisel designs take "
            "them apart), and one layer's output reaches the next in its layout: "
            + ("stored packed by BLOCK_IN (an interleaved ACC tile)" if hw.block_in > hw.block_out
               else "loaded packed by BLOCK_OUT (an interleaved INP tile)")
            + ", lowered, executed and timed here; TVM's schedules pack by BLOCK_IN in and "
            "BLOCK_OUT out")


def layout_reason(hw: HardwareConfig) -> str | None:
    """Why one layer's output cannot be stored as the next layer's input (one line), or
    None. With BLOCK_IN = k x BLOCK_OUT each layer stores its output packed by BLOCK_IN
    (:func:`vtatune.lowering.output_pack`: an interleaved ACC tile, contiguous stores); with
    BLOCK_OUT = k x BLOCK_IN it loads its input packed by BLOCK_OUT
    (:func:`vtatune.lowering.input_pack`: an interleaved INP tile, contiguous loads). Both
    need BATCH 1: a BATCH x BLOCK element's rows are not contiguous in the other packing."""
    if hw.block_in != hw.block_out and hw.batch > 1:
        return (f"layout: BATCH {hw.batch} with BLOCK_IN {hw.block_in} != BLOCK_OUT "
                f"{hw.block_out}: an element's {hw.batch} rows are not contiguous in the "
                "other layer's packing")
    return None


def infeasibility(hw: HardwareConfig, device: Device, network: str,
                  reference: frozenset[str]) -> str | None:
    """Why ``hw`` cannot run ``network``'s ``reference`` VTA layers on ``device`` (one
    line), or None: every rule here is decided without tuning, so a design refused by one
    costs no trial."""
    if reason := _hardware_reason(hw, device):
        return reason
    net = placed(network, hw)
    return placement_difference(net, reference) or task_reason(net)


def task_reason(net: Network) -> str | None:
    """Why a task of ``net`` has no legal schedule on its hardware whatever the schedule
    (``task NAME: RULE: why``, the first such task), or None.

    The lowering's shape rules (:func:`vtatune.lowering.shape_rules`: the instruction
    layout, the input LOAD's pad fields, the layouts BLOCK_IN != BLOCK_OUT needs): exact,
    a task failing one has no legal schedule, and arithmetic only, so checking every task
    of a design costs far less than one trial. The tuner would find the same (its template's
    ``no_legal_config`` starts with them) only after tuning the tasks before it."""
    for task in net.tasks:
        if task.skip:
            continue
        try:
            shape_rules(context(task.workload, net.hw))
        except IllegalSchedule as exc:
            return f"task {task.name}: {exc.rule}: {exc}"
    return None


def _hardware_reason(hw: HardwareConfig, device: Device) -> str | None:
    """Encoding, layout, buffer depth and budget rules (independent of the network)."""
    try:
        check_encodable(hw)
    except VTAError as exc:
        return f"encoding: {exc}"
    layout = layout_reason(hw)
    if layout:
        return layout
    for name in ("inp", "wgt", "acc"):
        depth = getattr(hw, f"{name}_depth")
        if depth < MIN_DEPTH:
            return f"buffers: {name} holds {depth} elements, fewer than {MIN_DEPTH}"
    over = estimate(hw, device).over_budget
    if over:
        return "resources: " + "; ".join(over)
    return None


def shapes(network: str, board: str, reference: frozenset[str]) -> list[Shape]:
    """(LOG_BATCH, LOG_BLOCK_IN, LOG_BLOCK_OUT) that run the reference's VTA layers with
    each layer's output stored in the next one's layout, most MACs per cycle first."""
    out = []
    for shape in product(*(range(KNOB_RANGES[k][0], KNOB_RANGES[k][1] + 1)
                           for k in SHAPE_KNOBS)):
        hw = with_shape(stock(board), shape, log_inp_buff_size=22, log_wgt_buff_size=22,
                        log_acc_buff_size=22)
        if layout_reason(hw) is None and \
                placement_difference(placed(network, hw), reference) is None:
            out.append(shape)
    return sorted(out, key=lambda s: (-sum(s), s[1] != s[2], s))


def runnable_shapes(network: str, board: str, reference: frozenset[str]) -> list[Shape]:
    """The :func:`shapes` none of whose tasks fails the lowering's shape rules
    (:func:`task_reason`), in the same order: the shapes NSGA-II's proposals are mapped
    to. Decided on each shape's :func:`smallest` buffers: the rules that read the shape
    (the input LOAD's pad fields, the packing BLOCK_IN != BLOCK_OUT needs) are the same at
    every buffer size, and the one that reads the buffers (an instruction layout that does
    not fit) is the encoding rule every configuration is checked against anyway."""
    return [shape for shape in shapes(network, board, reference)
            if task_reason(placed(network, smallest(board, shape))) is None]


def compute_floor(net: Network) -> int:
    """No schedule beats one GEMM micro-op (BATCH*BLOCK_IN*BLOCK_OUT MACs) per cycle."""
    per = net.hw.macs_per_cycle
    return sum(t.multiplicity * -(-t.workload.macs // per) for t in net.tasks if not t.skip)


@cache
def maximal_configs(board: str, device: Device, shape: Shape) -> tuple[HardwareConfig, ...]:
    """The feasible buffer sizes of one (BATCH, BLOCK_IN, BLOCK_OUT) that no other feasible
    one dominates (every buffer at least as big). Remembered per process: a pure function
    of its arguments that checks about 13,000 configurations (seconds of CPU), asked again
    for the same shapes by a resumed search and by NSGA-II's nearest feasible design."""
    base = with_shape(stock(board), shape)
    lo, hi = KNOB_RANGES["log_acc_buff_size"]
    found: list[tuple[int, int, int, int]] = []
    for u in range(*_span("log_uop_buff_size")):
        for i in range(*_span("log_inp_buff_size")):
            for w in range(*_span("log_wgt_buff_size")):
                best = None
                for a in range(hi, lo - 1, -1):  # feasibility only shrinks as acc grows
                    try:
                        hw = replace(base, log_uop_buff_size=u, log_inp_buff_size=i,
                                     log_wgt_buff_size=w, log_acc_buff_size=a)
                    except VTAError:
                        continue
                    if _hardware_reason(hw, device) is None:
                        best = (u, i, w, a)
                        break
                if best:
                    found.append(best)
    maximal = [p for p in found
               if not any(q != p and all(x >= y for x, y in zip(q, p, strict=True))
                          for q in found)]
    return tuple(replace(base, **dict(zip(BUFFERS, p, strict=True))) for p in maximal)


def smallest(board: str, shape: Shape) -> HardwareConfig:
    """The shape with the smallest buffers a design may have (:data:`MIN_DEPTH` elements
    of INP, WGT and ACC, at least 1 KiB each; a 1 KiB uop buffer): its logic and the
    least block RAM it needs."""
    hw = with_shape(stock(board), shape)
    sizes = {"log_uop_buff_size": 10,
             **{f"log_{name}_buff_size":
                max(10, (getattr(hw, f"{name}_elem_bytes") * MIN_DEPTH).bit_length() - 1)
                for name in ("inp", "wgt", "acc")}}
    return replace(hw, **sizes)


def nearest_feasible(board: str, device: Device, knobs: dict[str, int], found: list[Shape],
                     maximal: dict[Shape, tuple[HardwareConfig, ...]]) -> HardwareConfig | None:
    """The feasible configuration nearest ``knobs`` (an outer search's proposal), or None
    when no shape of ``found`` has one.

    The nearest shape of ``found`` (the shapes that run the network, most MACs first; L1
    distance in log2 steps, ties to the earlier), then its buffers: raised to the smallest a
    design may have (:func:`smallest`) and lowered into the feasible region, which holds
    every configuration below one of the shape's maximal ones (``maximal``, filled on
    demand with :func:`maximal_configs`: smaller buffers need fewer index bits and block
    RAMs): of the proposal clipped under each maximal configuration, the nearest (L1)."""
    shape = tuple(knobs[k] for k in SHAPE_KNOBS)
    for near in sorted(found, key=lambda s: sum(abs(a - b) for a, b in zip(s, shape,
                                                                         strict=True))):
        if near not in maximal:
            maximal[near] = maximal_configs(board, device, near)
        if not maximal[near]:
            continue
        floor = smallest(board, near)
        wanted = [max(knobs[k], getattr(floor, k)) for k in BUFFERS]
        best: tuple[int, HardwareConfig] | None = None
        for top in maximal[near]:
            sizes = [min(w, getattr(top, k)) for w, k in zip(wanted, BUFFERS, strict=True)]
            try:
                hw = replace(top, **dict(zip(BUFFERS, sizes, strict=True)))
            except VTAError:
                continue
            if _hardware_reason(hw, device) is not None:
                continue
            distance = sum(abs(a - b) for a, b in zip(sizes, wanted, strict=True))
            if best is None or distance < best[0]:
                best = (distance, hw)
        if best is not None:
            return best[1]
    return None


def _span(knob: str) -> tuple[int, int]:
    lo, hi = KNOB_RANGES[knob]
    return lo, hi + 1
