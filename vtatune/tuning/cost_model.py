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
from collections.abc import Sequence
from typing import Any

import numpy as np

from simulator.timing import TimingProfile
from vtatune.errors import IllegalSchedule
from vtatune.lowering import SHAPE_RULES

__all__ = [
    "ShapeCosts", "WARM_STARTS", "compute_bound", "estimate", "warm_starts",
]

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


def estimate(template: Any, config: dict[str, Any]) -> Any:
    """Estimated cycles of a (legal) config: see the module docstring.

    Elementwise: the knobs may be numpy arrays (one element per shape, as
    :class:`ShapeCosts` passes every tile shape at once); plain values give a float."""
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
    # The bytes loaded; when the reduction fits (one ci step), one operand can stay resident
    # across a loop: the cheaper of keeping the weights or the input.
    operands = np.where(n_ci == 1, np.minimum(n_spatial * inp_step + steps * wgt_step,
                                              steps * inp_step + n_co * wgt_step),
                        steps * inp_step + steps * wgt_step)
    # Instructions share the read channel with the loads: two LOADs and a GEMM per step,
    # a reset, the ALU epilogue and a STORE per tile.
    insns = 3 * steps + (2 + n_alu) * tiles
    load = (operands + insns * template.hw.insn_bytes) / p.bus_bytes \
        + 2 * steps * load_latency
    out_elems = ctx.nb * ctx.oh * ctx.ow * ctx.cob
    store = out_elems * p.store_elem_cycles(template.hw) \
        + tiles * (p.store_insn_cycles + p.write_handshake)
    # One thread: load, compute and store of a tile wait for one another (the sum). Two or
    # four overlap up to the busiest module, and lose the first reduction step's loads
    # (nothing overlaps them) and a fitted number of cycles per tile.
    a = np.select([nthreads == 2, nthreads == 4], [_EXPOSED[2][0], _EXPOSED[4][0]], 0.0)
    b = np.select([nthreads == 2, nthreads == 4], [_EXPOSED[2][1], _EXPOSED[4][1]], 0.0)
    fill = (inp_step + wgt_step) / p.bus_bytes
    cycles = np.where(nthreads == 1, compute + load + store,
                      np.maximum(np.maximum(compute, load), store) + tiles * (a * acc + b)
                      + fill)
    return float(cycles) if np.ndim(cycles) == 0 else cycles


class ShapeCosts:
    """:func:`estimate` of every tile shape of a template (the tile and thread knobs, all it
    reads), computed at once over the grid of their choices.

    ``log_cost(rows, names)`` gives the log of each row's estimate (at least one cycle),
    where ``rows`` hold choice indices of the knobs ``names`` (a tile knob left out has one
    choice): the guided sampler scores its candidates so, by lookup, without building a
    config. A shape found unable to run whatever its loop orders (:meth:`rule_out`) costs
    ``inf`` from then on. ``ranked()`` is every shape, best estimate first (ties in the
    knobs' product order)."""

    def __init__(self, template: Any) -> None:
        self.knobs = tuple(k for k in template.knobs if k.name in _TILE_KNOBS)
        grid = np.meshgrid(*(np.array(k.choices) for k in self.knobs), indexing="ij")
        self.grid = {k.name: g for k, g in zip(self.knobs, grid, strict=True)}
        self.cycles = np.broadcast_to(estimate(template, self.grid),
                                      tuple(len(k.choices) for k in self.knobs))
        self._log = np.log(np.maximum(1.0, self.cycles))
        self._position = [{c: i for i, c in enumerate(k.choices)} for k in self.knobs]
        self._columns: dict[tuple[str, ...], tuple[int | None, ...]] = {}

    def shape(self, index: int) -> dict[str, Any]:
        """The tile shape at flat (product-order) ``index``."""
        at = np.unravel_index(index, self.cycles.shape)
        return {k.name: k.choices[i] for k, i in zip(self.knobs, at, strict=True)}

    def ranked(self) -> np.ndarray:
        """Flat indices of every shape, best estimate first (stable: product order)."""
        return np.argsort(self.cycles, axis=None, kind="stable")

    def log_cost(self, rows: np.ndarray, names: Sequence[str]) -> np.ndarray:
        columns = self._columns.get(tuple(names))
        if columns is None:
            where = {name: j for j, name in enumerate(names)}
            columns = self._columns[tuple(names)] = tuple(where.get(k.name) for k in self.knobs)
        return self._log[tuple(0 if j is None else rows[:, j] for j in columns)]

    def rule_out(self, config: dict[str, Any]) -> None:
        """``config``'s tile shape cannot run (a rule decided by the shape alone failed)."""
        self._log[tuple(p[config[k.name]] for p, k in zip(self._position, self.knobs,
                                                            strict=True))] = np.inf


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
            if exc.rule in SHAPE_RULES:
                return None  # decided before the orders: no order helps
            continue
        return c
    return None


def warm_starts(template: Any, n: int = WARM_STARTS, costs: ShapeCosts | None = None
                ) -> list[dict[str, Any]]:
    """The ``n`` best tile shapes by the estimate, preferring variety: the best of each
    thread layout first (in estimate order), then the next best overall."""
    costs = costs or ShapeCosts(template)
    order = costs.ranked()
    checked: dict[int, dict[str, Any] | None] = {}  # flat index -> legal config or None

    def legal(i: int) -> dict[str, Any] | None:
        if i not in checked:
            checked[i] = _first_legal(template, costs.shape(i))
        return checked[i]

    # Each layout's best, scanning that layout's shapes only: a layout whose shapes all
    # rank low costs no legality check of the better shapes of the others.
    layout = (costs.grid.get("oc_nthread", 1) * 8 + costs.grid.get("h_nthread", 1)
              + np.zeros(costs.cycles.shape, dtype=int)).ravel()[order]
    firsts: list[tuple[int, dict[str, Any]]] = []  # (rank, config)
    for code in np.unique(layout):
        for rank in np.flatnonzero(layout == code).tolist():
            if (c := legal(int(order[rank]))) is not None:
                firsts.append((rank, c))
                break
    picked = [c for _, c in sorted(firsts, key=lambda rc: rc[0])]  # in estimate order
    for i in order.tolist():
        if len(picked) >= n:
            break
        c = legal(i)
        if c is not None and c not in picked:
            picked.append(c)
    return picked[:n]
