"""The hardware space of a design search: which VTA configurations exist for a board.

Knobs: LOG_BATCH, LOG_BLOCK (BLOCK_IN = BLOCK_OUT: the hardware model has one block size)
and the four buffer sizes; the widths stay int8/int8/int32 and the clock is the board's.
A configuration is *feasible* for a network when its instructions and micro-ops encode
(:func:`simulator.isa.check_encodable`), it fits the board
(:func:`simulator.resources.estimate`) and every task's shape is whole blocks of it.

Latency never grows with a bigger buffer (it only admits more schedules) and resources never
shrink, so for the latency objective only the *maximal* feasible buffer sizes of each
(BATCH, BLOCK) matter: :func:`maximal_configs`.
"""

from __future__ import annotations

from dataclasses import replace

from simulator.errors import VTAError
from simulator.hardware import HardwareConfig
from simulator.isa import check_encodable
from simulator.resources import Device, estimate

from ..networks import Network
from ._inner import placed, placement_difference

BUFFERS = ("log_uop_buff_size", "log_inp_buff_size", "log_wgt_buff_size", "log_acc_buff_size")
#: The range every knob is searched over (inclusive).
KNOB_RANGES = {"log_batch": (0, 4), "log_block": (2, 6), "log_uop_buff_size": (10, 15),
               "log_inp_buff_size": (10, 22), "log_wgt_buff_size": (10, 22),
               "log_acc_buff_size": (10, 22)}


#: Fewest elements an INP, WGT or ACC buffer may hold: smaller ones starve every tile (the
#: inner search would look for legal schedules that hardly exist).
MIN_DEPTH = 256


def stock(board: str) -> HardwareConfig:
    """The released configuration on ``board`` (1x16, buffers 15/15/18/17)."""
    return HardwareConfig(target=board)


def infeasibility(hw: HardwareConfig, device: Device, network: str,
                  reference: frozenset[str]) -> str | None:
    """Why ``hw`` cannot run ``network``'s ``reference`` VTA layers on ``device`` (one
    line), or None."""
    return _hardware_reason(hw, device) or placement_difference(placed(network, hw), reference)


def _hardware_reason(hw: HardwareConfig, device: Device) -> str | None:
    """Encoding, buffer depth and budget rules (independent of the network)."""
    try:
        check_encodable(hw)
    except VTAError as exc:
        return f"encoding: {exc}"
    for name in ("inp", "wgt", "acc"):
        depth = getattr(hw, f"{name}_depth")
        if depth < MIN_DEPTH:
            return f"buffers: {name} holds {depth} elements, fewer than {MIN_DEPTH}"
    over = estimate(hw, device).over_budget
    if over:
        return "resources: " + "; ".join(over)
    return None


def shapes(network: str, board: str, reference: frozenset[str]) -> list[tuple[int, int]]:
    """(LOG_BATCH, LOG_BLOCK) pairs that run the reference's VTA layers, most MACs per
    cycle first."""
    out = []
    lo_b, hi_b = KNOB_RANGES["log_batch"]
    lo_k, hi_k = KNOB_RANGES["log_block"]
    for lb in range(lo_b, hi_b + 1):
        for lk in range(lo_k, hi_k + 1):
            hw = replace(stock(board), log_batch=lb, log_block=lk,
                         log_inp_buff_size=22, log_wgt_buff_size=22, log_acc_buff_size=22)
            if placement_difference(placed(network, hw), reference) is None:
                out.append((lb, lk))
    return sorted(out, key=lambda s: (-(s[0] + 2 * s[1]), s))


def compute_floor(net: Network) -> int:
    """No schedule beats one GEMM micro-op (BATCH*BLOCK^2 MACs) per cycle."""
    per = net.hw.macs_per_cycle
    return sum(t.multiplicity * -(-t.workload.macs // per) for t in net.tasks if not t.skip)


def maximal_configs(board: str, device: Device, log_batch: int, log_block: int
                    ) -> list[HardwareConfig]:
    """The feasible buffer sizes of one (BATCH, BLOCK) that no other feasible one
    dominates (every buffer at least as big)."""
    base = replace(stock(board), log_batch=log_batch, log_block=log_block)
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
    return [replace(base, **dict(zip(BUFFERS, p, strict=True))) for p in maximal]


def smallest(board: str, log_batch: int, log_block: int) -> HardwareConfig:
    """The shape with every buffer one element (or the 1 KiB minimum): its logic alone."""
    hw = replace(stock(board), log_batch=log_batch, log_block=log_block)
    sizes = {"log_uop_buff_size": 10,
             "log_inp_buff_size": max(10, hw.inp_elem_bytes.bit_length() - 1),
             "log_wgt_buff_size": max(10, hw.wgt_elem_bytes.bit_length() - 1),
             "log_acc_buff_size": max(10, hw.acc_elem_bytes.bit_length() - 1)}
    return replace(hw, **sizes)


def _span(knob: str) -> tuple[int, int]:
    lo, hi = KNOB_RANGES[knob]
    return lo, hi + 1
