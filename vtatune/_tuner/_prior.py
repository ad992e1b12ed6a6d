"""A cheap analytic cost model of a config, and the warm starts it picks.

The model is the timing model's first-order behaviour, in arithmetic only (~20 µs a
config, no lowering):

- compute: :func:`compute_bound`, the compute module's own work (the GEMM micro-ops of
  the MACs, a reset and the ALU epilogue per output element, the pipeline cycles of every
  GEMM / ALU instruction); a proven lower bound on the cycles;
- load: the input window (halo included) and the weight tile of every reduction step,
  over the bus, plus a latency per LOAD, plus the instruction stream (fetch shares the
  read channel); a tile that stays resident across the output-channel (or spatial) loop
  is loaded once when the reduction is not split;
- store: per output element the STORE's beats and SRAM read, per tile a STORE;
- one virtual thread serializes load, compute and store (each tile waits for the last:
  the sum); two or four overlap them up to the busiest module, plus what they cannot
  hide: the first reduction step's loads (the pipeline fill) and a fitted number of cycles
  per output tile (``_EXPOSED``: four threads lose less than two).

Against the exhaustive optima of ResNet-50's 22 tasks (``scripts/network_optima.py``),
the six warm starts this model picks (the best of each thread layout, then the next best)
hold a config within 1% of the optimum for every task; the earlier model (no per-thread
loss, no fill, no store in the one-thread sum) did for 14 (``scripts/bench_network.py``).

It is only used to rank: the warm starts of the ``guided`` sampler and to break near-ties
between the sampler's candidates. Every score the study sees still comes from the
simulator.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterator
from typing import Any

from simulator.timing import TimingProfile
from vtatune.errors import IllegalSchedule

#: How many warm starts the guided sampler queues (after the default schedule).
WARM_STARTS = 6
_TILE_KNOBS = ("tile_b", "tile_h", "tile_w", "tile_ci", "tile_co", "oc_nthread", "h_nthread")


@functools.lru_cache(maxsize=16)
def _profile(hw: Any) -> TimingProfile:
    return TimingProfile.for_hw(hw)  # built and validated once per board, not per estimate


def compute_bound(template: Any, config: dict[str, Any]) -> int:
    """A lower bound on the simulated cycles of a legal config of a conv2d / dense template:
    the compute module's own work, which it runs in order, one instruction at a time, and
    which ends with FINISH (the end of the run).

    - GEMM micro-op iterations: the MACs (``gemm_floor``, the same for every schedule) and
      one reset iteration per output element; ALU: at least one cycle per iteration of each
      of the ``n_alu`` element-wise ops (shift, clip min, clip max; + bias) per output
      element;
    - per instruction its fixed pipeline cycles: at least one GEMM per reduction step of
      each (thread's) output tile, one reset GEMM and ``n_alu`` ALU instructions per tile.

    UOP / ACC loads (also the compute module's) are left out, so the bound never exceeds
    the compute module's busy time, hence the cycles. ``scripts/network_optima.py`` skips
    configs whose bound exceeds the best cycles found (tests check bound <= cycles)."""
    ctx = template.context
    p = _profile(template.hw)
    tb = config.get("tile_b", 1)
    th, tw = config.get("tile_h", 1), config.get("tile_w", 1)
    tiles = (ctx.nb // tb) * (ctx.oh // th) * (ctx.ow // tw) * (ctx.cob // config["tile_co"])
    steps = tiles * (ctx.cib // config["tile_ci"])
    out_elems = ctx.nb * ctx.oh * ctx.ow * ctx.cob
    n_alu = 4 if template.bias else 3
    gemm_floor = out_elems * ctx.cib * ctx.k * ctx.k
    return gemm_floor + out_elems * (1 + n_alu) + p.gemm_pipeline * (steps + tiles) \
        + p.alu_pipeline * n_alu * tiles


#: Cycles a run with two (resp. four) virtual threads loses per output tile beyond its
#: busiest module, as ``a`` × accumulator elements of the tile + ``b``: the tile's reset and
#: epilogue, which the other threads cannot always cover. Least-squares fits of simulated
#: cycles (configs within 1.3x of the best of 400 random legal configs per task, on the
#: conv2d tasks of ResNet-18, MobileNet-v1 and YOLOv3-tiny on pynq; not ResNet-50, the
#: network benchmark's): more threads hide more of it.
_EXPOSED = {2: (1.55, 40.0), 4: (0.53, 12.0)}


def estimate(template: Any, config: dict[str, Any]) -> float:
    """Estimated cycles of a (legal) config: see the module docstring."""
    ctx = template.context
    p = _profile(template.hw)  # the constants are the timing model's own
    load_latency = p.request_cycles + p.read_latency + p.load_done_cycles
    tb = config.get("tile_b", 1)
    th, tw = config.get("tile_h", 1), config.get("tile_w", 1)
    tci, tco = config["tile_ci"], config["tile_co"]
    nthreads = config.get("oc_nthread", 1) * config.get("h_nthread", 1)
    k, s = ctx.k, ctx.s
    eh, ew = (th - 1) * s + k, (tw - 1) * s + k
    n_spatial = (ctx.nb // tb) * (ctx.oh // th) * (ctx.ow // tw)
    n_co = ctx.cob // tco
    n_ci = ctx.cib // tci
    tiles = n_spatial * n_co  # thread tiles: each thread's tile is its own instructions
    steps = tiles * n_ci
    acc = tb * tco * th * tw
    n_alu = 4 if template.bias else 3
    compute = compute_bound(template, config)
    inp_step = tb * tci * eh * ew * ctx.batch_lanes * ctx.block_in
    wgt_step = tco * tci * k * k * ctx.block_out * ctx.block_in
    inp_bytes, wgt_bytes = steps * inp_step, steps * wgt_step
    if n_ci == 1:  # the reduction fits: one operand can stay resident across a loop
        inp_bytes, wgt_bytes = min((n_spatial * inp_step, wgt_bytes),
                                   (inp_bytes, n_co * wgt_step), key=sum)
    # Instructions share the read channel with the loads: two LOADs and a GEMM per step,
    # a reset, the ALU epilogue and a STORE per tile.
    insns = 3 * steps + (2 + n_alu) * tiles
    load = (inp_bytes + wgt_bytes + insns * template.hw.insn_bytes) / p.bus_bytes \
        + 2 * steps * load_latency
    out_elems = ctx.nb * ctx.oh * ctx.ow * ctx.cob
    store = out_elems * p.store_elem_cycles(template.hw) \
        + tiles * (p.store_insn_cycles + p.write_handshake)
    if nthreads == 1:  # load, compute and store of a tile wait for one another
        return compute + load + store
    a, b = _EXPOSED[nthreads]
    # The first reduction step's loads precede any GEMM: nothing overlaps them.
    fill = (inp_step + wgt_step) / p.bus_bytes
    return max(compute, load, store) + tiles * (a * acc + b) + fill


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


def _scored_bases(template: Any, limit: int) -> list[tuple[float, int, dict[str, Any]]]:
    """Every tile shape (tile and thread knobs only), as (estimate, product index, shape),
    best estimate first: no legality check yet (the estimate reads only these knobs)."""
    tile = [k for k in template.knobs if k.name in _TILE_KNOBS]
    names = [k.name for k in tile]
    bases = (dict(zip(names, values, strict=True)) for values in
             itertools.islice(itertools.product(*(k.choices for k in tile)), limit))
    return sorted(((estimate(template, b), i, b) for i, b in enumerate(bases)),
                  key=lambda eib: eib[:2])


def ranked_tiles(template: Any, limit: int = 20000) -> Iterator[tuple[float, dict[str, Any]]]:
    """Legal tile shapes (each with its first legal loop orders), best estimate first,
    lazily: the shapes are ranked before any legality check, and only those taken are
    checked.

    Only the tile and thread knobs are enumerated (a few hundred to a few thousand shapes);
    ``limit`` caps the enumeration for very large spaces."""
    for e, _, b in _scored_bases(template, limit):
        c = _first_legal(template, b)
        if c is not None:
            yield e, c


def _layout(config: dict[str, Any]) -> tuple[int, int]:
    return config.get("oc_nthread", 1), config.get("h_nthread", 1)


def warm_starts(template: Any, n: int = WARM_STARTS, limit: int = 20000
                ) -> list[dict[str, Any]]:
    """The ``n`` best tile shapes by the estimate, preferring variety: the best of each
    thread layout first (in estimate order), then the next best overall."""
    scored = _scored_bases(template, limit)
    checked: dict[int, dict[str, Any] | None] = {}  # product index -> legal config or None

    def legal(i: int, b: dict[str, Any]) -> dict[str, Any] | None:
        if i not in checked:
            checked[i] = _first_legal(template, b)
        return checked[i]

    # Each layout's best, scanning that layout's shapes only: a layout whose shapes all
    # rank low costs no legality check of the better shapes of the others.
    firsts: list[dict[str, Any]] = []
    done: set[tuple[int, int]] = set()
    for _, i, b in scored:
        if _layout(b) not in done and (c := legal(i, b)) is not None:
            firsts.append(c)  # in estimate order
            done.add(_layout(b))
    picked = firsts
    for _, i, b in scored:
        if len(picked) >= n:
            break
        c = legal(i, b)
        if c is not None and c not in picked:
            picked.append(c)
    return picked[:n]
