"""The cost model (vtatune.tuning.cost_model) against the timing model it stands in for: its
estimates follow the simulated cycles on every board, it knows which loop order keeps a
tile resident, and its warm starts reach the exhaustive optimum of a small space."""

from __future__ import annotations

import random
import statistics

import numpy as np
import pytest

from search_spaces import get_template
from simulator.hardware import HardwareConfig
from tests._configs import random_legal
from vtatune.scoring import score
from vtatune.tuning.cost_model import ShapeCosts, estimate, warm_starts
from vtatune.workloads import (
    Conv2dTransposeWorkload,
    Conv2dWorkload,
    GemmWorkload,
    GroupConv2dWorkload,
)

#: Layers no catalogue holds, on boards with other buses, bursts, store units and blocks.
CASES = [
    ("5x5 stride 2, pynq", Conv2dWorkload(1, 20, 20, 32, 96, 5, 2, 2), "pynq"),
    ("dense 16x512x1024, pynq", GemmWorkload(16, 512, 1024), "pynq"),
    ("grouped, batch 3, pynq", GroupConv2dWorkload(3, 21, 21, 64, 128, 3, 1, 2, 4), "pynq"),
    ("transposed, ultra96", Conv2dTransposeWorkload(1, 5, 6, 48, 144, 5, 2, 2, 1), "ultra96"),
    ("5x5 stride 2, de10nano", Conv2dWorkload(1, 9, 9, 96, 48, 5, 2, 2), "de10nano"),
    ("dense, 4x8 core", GemmWorkload(16, 144, 64), "4x8"),
    ("1x1, 1x32 core", Conv2dWorkload(1, 19, 17, 96, 128, 1, 0, 1), "1x32"),
]


def _cycles(wl, tpl, hw, config) -> int:
    return score(wl, tpl.to_schedule(config), hw).cycles


@pytest.mark.parametrize("name,wl,hw_name", CASES, ids=[c[0] for c in CASES])
def test_estimate_follows_the_simulated_cycles(name, wl, hw_name):
    """Warm starts and random legal configs: within 6% each, 2% at the median."""
    hw = HardwareConfig.resolve(hw_name)
    tpl = get_template(wl, hw)
    configs = warm_starts(tpl) + random_legal(tpl, random.Random(0), 8)
    errors = [abs(estimate(tpl, c) / _cycles(wl, tpl, hw, c) - 1) for c in configs]
    assert max(errors) < 0.06, errors
    assert statistics.median(errors) < 0.02, errors


def test_estimate_knows_which_outer_order_keeps_the_weights():
    """Dense 16x512x1024 with a whole-reduction tile: with the co loop outermost each weight
    tile (128 KB) is loaded once; with it innermost, for every batch row. The estimate of
    each order follows its simulation; the warm starts take the fast one."""
    wl, hw = GemmWorkload(16, 512, 1024), HardwareConfig.resolve("pynq")
    tpl = get_template(wl, hw)
    shape = {"tile_b": 1, "tile_h": 1, "tile_ci": 32, "tile_co": 16, "oc_nthread": 2,
             "h_nthread": 1, "rows": "batch", "gemm_order": "ci,w,kw,kh,co,h"}
    kept, reloaded = {**shape, "outer_order": "hcbw"}, {**shape, "outer_order": "bhcw"}
    fast, slow = _cycles(wl, tpl, hw, kept), _cycles(wl, tpl, hw, reloaded)
    assert slow > 5 * fast
    for c, cycles in ((kept, fast), (reloaded, slow)):
        assert abs(estimate(tpl, c) / cycles - 1) < 0.02
    # the warm starts take the fast order: the same shape with its rows as pixels
    # (rows="spatial", which they prefer) keeps the weights in the same order
    spatial = {**kept, "tile_b": 1, "tile_h": 1, "rows": "spatial"}
    starts = warm_starts(tpl)
    assert reloaded not in starts
    assert min(estimate(tpl, c) for c in starts) <= estimate(tpl, kept)
    assert abs(estimate(tpl, spatial) / _cycles(wl, tpl, hw, spatial) - 1) < 0.02


def test_estimate_follows_spatial_rows():
    """A GEMM's rows as pixels (rows="spatial"): the estimate follows the simulation, and a
    shape that mixes the two row modes' knobs costs inf."""
    wl, hw = GemmWorkload(3136, 96, 384), HardwareConfig.resolve("pynq")
    tpl = get_template(wl, hw)
    for config in ({"tile_b": 1, "tile_h": 32, "tile_ci": 6, "tile_co": 12, "oc_nthread": 2,
                    "h_nthread": 2, "rows": "spatial", "gemm_order": "h,ci,co,w,kh,kw",
                    "outer_order": "bhcw"},
                   {"tile_b": 1, "tile_h": 196, "tile_ci": 2, "tile_co": 4, "oc_nthread": 2,
                    "h_nthread": 1, "rows": "spatial", "gemm_order": "ci,h,co,w,kh,kw",
                    "outer_order": "bchw"}):
        assert abs(estimate(tpl, config) / _cycles(wl, tpl, hw, config) - 1) < 0.02
    mixed = {"tile_b": 2, "tile_h": 2, "tile_ci": 6, "tile_co": 12, "oc_nthread": 2,
             "h_nthread": 1, "rows": "batch", "outer_order": "bhcw"}
    assert estimate(tpl, mixed) == float("inf")


def test_a_grouped_convs_input_changes_with_its_group():
    """A tile of one group's output channels reads that group's input: the input is not
    kept across the co tiles (another group each), the weights are across the batch."""
    wl, hw = GroupConv2dWorkload(3, 21, 21, 64, 128, 3, 1, 2, 4), HardwareConfig.resolve("pynq")
    tpl = get_template(wl, hw)
    shape = {"tile_b": 1, "tile_h": 11, "tile_w": 11, "tile_ci": 1, "tile_co": 2,
             "oc_nthread": 2, "h_nthread": 1, "gemm_order": "ci,w,kw,kh,co,h"}
    co_inner, co_outer = {**shape, "outer_order": "bhcw"}, {**shape, "outer_order": "hcbw"}
    simulated = [_cycles(wl, tpl, hw, c) for c in (co_inner, co_outer)]
    estimated = [estimate(tpl, c) for c in (co_inner, co_outer)]
    assert simulated[0] > 1.04 * simulated[1] and estimated[0] > 1.04 * estimated[1]
    assert warm_starts(tpl)[0]["outer_order"] in ("hcbw", "cbhw")  # co outside the batch


def test_the_warm_starts_take_the_inner_order_of_fewest_micro_ops():
    """The two outermost loops that iterate fold into the GEMM, the rest unroll into the
    micro-op kernel loaded before the first GEMM: (h, w) folded leaves 75 uops of a
    co3 h10 w10 5x5 tile, (co, kh) 500; the first costs fewer cycles."""
    wl, hw = Conv2dWorkload(1, 20, 20, 32, 96, 5, 2, 2), HardwareConfig.resolve("pynq")
    tpl = get_template(wl, hw)
    first = warm_starts(tpl)[0]
    assert first["gemm_order"].split(",")[:2] in (["h", "w"], ["w", "h"])
    folded_co_kh = {**first, "gemm_order": "co,kh,ci,kw,h,w"}
    assert tpl.legal(folded_co_kh)
    assert _cycles(wl, tpl, hw, first) < _cycles(wl, tpl, hw, folded_co_kh)


def test_warm_starts_reach_the_exhaustive_optimum_of_a_small_space():
    """Every legal config of dense 16x144x64 on the 4x8 core (504), simulated."""
    wl, hw = GemmWorkload(16, 144, 64), HardwareConfig.resolve("4x8")
    tpl = get_template(wl, hw)
    optimum = min(_cycles(wl, tpl, hw, c) for c in tpl.legal_configs())
    assert min(_cycles(wl, tpl, hw, c) for c in warm_starts(tpl)) == optimum


def test_the_table_covers_the_outer_order_and_rules_out_whole_shapes():
    wl, hw = Conv2dWorkload(2, 8, 8, 48, 48, 3, 1, 1), HardwareConfig.resolve("pynq")
    tpl = get_template(wl, hw)
    costs = ShapeCosts(tpl)
    names = [k.name for k in costs.knobs]
    assert "outer_order" in names and "gemm_order" not in names
    # a shape whose row tiles cannot split between two threads cannot run: inf
    assert costs.cycles[tuple(k.choices.index(v) for k, v in zip(costs.knobs, (
        1, 8, 8, 1, 1, 1, 2, tpl.knob("outer_order").choices[0]), strict=True))] == np.inf
    c = next(iter(tpl.legal_configs()))
    row = np.array([[k.choices.index(c[k.name]) for k in costs.knobs]])
    assert np.isfinite(costs.log_cost(row, names))
    costs.rule_out(c)
    for order in range(len(tpl.knob("outer_order").choices)):
        row[0, names.index("outer_order")] = order
        assert costs.log_cost(row, names)[0] == np.inf


def test_the_vectorized_dma_folding_is_the_lowerings():
    """cost_model's elementwise fold and split give what vtatune.lowering's fold_2d /
    split_2d give, dim list by dim list (the STOREs and input LOADs it prices)."""
    from vtatune.lowering import pattern_2d, split_2d
    from vtatune.tuning.cost_model import _fold, _split

    rng = random.Random(1)
    cases = []
    for _ in range(2000):
        dims, stride = [], 1
        for _ in range(rng.randint(1, 5)):
            size = rng.choice([1, 1, 2, 3, 4, 7])
            dims.append((size, rng.choice([stride, stride, 2 * stride, rng.randint(1, 50)])))
            stride = size * dims[-1][1]
        cases.append(dims[::-1])  # outer first
    for dims in cases:
        sizes, strides = [np.array([s]) for s, _ in dims], [c for _, c in dims]
        looped, (rows, x, _) = split_2d(dims)
        got = [int(np.asarray(v).ravel()[0]) for v in _split(sizes, strides)]
        assert got == [int(np.prod([s for s, _ in looped])), rows, x], dims
        assert (int(_fold(sizes, strides)[0][0]) <= 2) == (pattern_2d(dims) is not None), dims
