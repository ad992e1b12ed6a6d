"""A cheap analytic cost model of a config, and the warm starts it picks.

The model is the timing model's first-order behaviour, in arithmetic only (~5 µs a
config, no lowering):

- compute: the GEMM micro-ops (fixed per workload: the compute floor), plus per output
  tile one reset and the ALU epilogue over the accumulator tile, plus a few cycles of
  pipeline fill per GEMM / ALU instruction;
- load: the input window (halo included) and the weight tile of every reduction step,
  over the bus, plus a latency per LOAD; a tile that stays resident across the
  output-channel (or spatial) loop is loaded once when the reduction is not split;
- one virtual thread serializes load and compute; two or more overlap them.

It is only used to rank: the warm starts of the ``guided`` sampler (the best few legal
tile shapes by this estimate, one per thread layout) and to break near-ties between the
sampler's candidates. Every score the study sees still comes from the simulator.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

from simulator.timing import TimingProfile
from vtatune.errors import IllegalSchedule

_TILE_KNOBS = ("tile_b", "tile_h", "tile_w", "tile_ci", "tile_co", "oc_nthread", "h_nthread")


@functools.lru_cache(maxsize=16)
def _profile(hw: Any) -> TimingProfile:
    return TimingProfile.for_hw(hw)  # built and validated once per board, not per estimate


def estimate(template: Any, config: dict[str, Any]) -> float:
    """Estimated cycles of a (legal) config: see the module docstring."""
    ctx = template.context
    p = _profile(template.hw)  # the constants are the timing model's own
    gemm_insn = p.gemm_pipeline  # fill/drain + control of one GEMM
    alu_insn = p.alu_pipeline
    load_latency = p.request_cycles + p.read_latency + p.load_done_cycles
    store_tile = p.store_insn_cycles + p.store_elem_cycles(template.hw) + p.write_handshake
    tb = config.get("tile_b", 1)
    th, tw = config.get("tile_h", 1), config.get("tile_w", 1)
    tci, tco = config["tile_ci"], config["tile_co"]
    nthreads = config.get("oc_nthread", 1) * config.get("h_nthread", 1)
    k, s = ctx.k, ctx.s
    eh, ew = (th - 1) * s + k, (tw - 1) * s + k
    n_spatial = (ctx.nb // tb) * (ctx.oh // th) * (ctx.ow // tw)
    n_co = ctx.cob // tco
    n_ci = ctx.cib // tci
    tiles = n_spatial * n_co
    steps = tiles * n_ci
    acc = tb * tco * th * tw
    n_alu = 4 if template.bias else 3
    gemm_floor = ctx.nb * ctx.oh * ctx.ow * ctx.cob * ctx.cib * k * k
    compute = gemm_floor + tiles * acc * (1 + n_alu) + steps * gemm_insn \
        + tiles * n_alu * alu_insn
    inp_step = tb * tci * eh * ew * ctx.batch_lanes * ctx.block_in
    wgt_step = tco * tci * k * k * ctx.block_out * ctx.block_in
    inp_bytes, wgt_bytes = steps * inp_step, steps * wgt_step
    if n_ci == 1:  # the reduction fits: one operand can stay resident across a loop
        inp_bytes, wgt_bytes = min((n_spatial * inp_step, wgt_bytes),
                                   (inp_bytes, n_co * wgt_step), key=sum)
    out_bytes = ctx.nb * ctx.oh * ctx.ow * ctx.cob * ctx.batch_lanes * ctx.block_out
    load = (inp_bytes + wgt_bytes) / p.bus_bytes + 2 * steps * load_latency
    store = out_bytes / p.bus_bytes + tiles * store_tile
    if nthreads > 1:
        return max(compute, load, store) + 0.02 * min(compute, load)
    return compute + load + store * 0.1


def _first_legal(template: Any, base: dict[str, Any]) -> dict[str, Any] | None:
    """``base`` completed with the first legal loop orders, or None."""
    names = template.knob_names
    rest = [template.knob(n).choices for n in names if n not in base]
    free = [n for n in names if n not in base]
    for values in itertools.product(*rest):
        c = {n: base[n] if n in base else values[free.index(n)] for n in names}
        try:
            template.check(c)
        except IllegalSchedule as exc:
            if exc.rule in ("tile_divides", "thread_split", "inp_capacity", "wgt_capacity",
                            "acc_capacity", "tvm_vthread_inplace", "dma_pattern"):
                return None  # decided before the orders: no order helps
            continue
        return c
    return None


def ranked_tiles(template: Any, limit: int = 20000) -> list[tuple[float, dict[str, Any]]]:
    """Legal tile shapes (each with its first legal loop orders), best estimate first.

    Only the tile and thread knobs are enumerated (a few hundred to a few thousand shapes);
    ``limit`` caps the enumeration for very large spaces."""
    tile = [k for k in template.knobs if k.name in _TILE_KNOBS]
    out = []
    for i, values in enumerate(itertools.product(*(k.choices for k in tile))):
        if i >= limit:
            break
        base = dict(zip((k.name for k in tile), values, strict=True))
        c = _first_legal(template, base)
        if c is not None:
            out.append((estimate(template, c), c))
    out.sort(key=lambda ec: ec[0])
    return out


def warm_starts(template: Any, n: int = 6) -> list[dict[str, Any]]:
    """The ``n`` best tile shapes by the estimate, preferring variety: the best of each
    thread layout first, then the next best overall."""
    ranked = ranked_tiles(template)
    picked: list[dict[str, Any]] = []
    layouts: set[tuple[int, int]] = set()
    for _, c in ranked:
        lay = (c.get("oc_nthread", 1), c.get("h_nthread", 1))
        if lay not in layouts:
            layouts.add(lay)
            picked.append(c)
    picked.sort(key=lambda c: estimate(template, c))
    for _, c in ranked:
        if len(picked) >= n:
            break
        if c not in picked:
            picked.append(c)
    return picked[:n]
