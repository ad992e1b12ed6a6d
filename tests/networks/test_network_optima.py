"""The exhaustive optima of ResNet-50's tasks (scripts/network_optima.py) and the compute
lower bound that lets it skip configs, and the cost model's warm starts."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from search_spaces import get_template
from simulator.hardware import DEFAULT
from tests._configs import random_legal
from vtatune.networks import load_network
from vtatune.scoring import score
from vtatune.tuning.cost_model import compute_bound, estimate, warm_starts
from vtatune.workloads import WORKLOADS, Conv2dWorkload

OPTIMA = Path(__file__).resolve().parents[2] / "scripts" / "results" / "resnet50_optima.json"

BOUND_CASES = [
    ("resnet18.C4 (1x1, stride 2)", WORKLOADS["conv2d"]["resnet18.C4"], False),
    ("resnet18.C8 (3x3)", WORKLOADS["conv2d"]["resnet18.C8"], False),
    ("resnet18.C11 (7x7 output)", WORKLOADS["conv2d"]["resnet18.C11"], False),
    ("conv with bias", WORKLOADS["conv2d"]["resnet18.C5"], True),
    ("gemm", WORKLOADS["gemm"]["dense128"], False),
]


@pytest.mark.parametrize("name,wl,bias", BOUND_CASES, ids=[c[0] for c in BOUND_CASES])
def test_compute_bound_never_exceeds_the_simulated_cycles(name, wl, bias):
    tpl = get_template(wl, DEFAULT, bias=bias)
    tight = 0
    for c in random_legal(tpl, random.Random(7), 12):
        ev = score(wl, tpl.to_schedule(c), DEFAULT, bias=bias)
        assert ev.status == "ok"
        b = compute_bound(tpl, c)
        assert 0 < b <= ev.cycles, (c, b, ev.cycles)
        tight += b > ev.cycles / 2
    assert tight  # and it is not a trivial bound


def test_optima_file_configs_are_legal_and_resimulate_to_their_cycles():
    data = json.loads(OPTIMA.read_text())
    net = load_network(data["network"], "pynq")
    assert data["hw"] == net.hw.target_model
    assert sorted(data["tasks"]) == sorted(t.name for t in net.tunable)
    for task in net.tunable:
        rec = data["tasks"][task.name]
        tpl = get_template(task.workload, net.hw)
        assert tpl.name == data["template"]
        assert rec["exact"] and rec["not_ok"] == 0
        assert rec["simulated"] + rec["skipped_by_bound"] == rec["legal"]
        assert tpl.legal(rec["config"])
        ev = score(task.workload, tpl.to_schedule(rec["config"]), net.hw)
        assert ev.cycles == rec["optimum_cycles"]
        # the skipped configs provably lose: their bound exceeds the optimum (with margin)
        assert compute_bound(tpl, rec["config"]) <= rec["optimum_cycles"]
        assert 1 <= rec["optima"] <= rec["within_margin"] <= rec["simulated"]


@pytest.mark.slow
def test_optima_file_counts_every_legal_config():
    """The file's legal counts are the spaces' (counting them walks every task's whole
    space: about 10 s of CPU, apart from the fast checks above)."""
    data = json.loads(OPTIMA.read_text())
    net = load_network(data["network"], "pynq")
    for task in net.tunable:
        assert data["tasks"][task.name]["legal"] == \
            get_template(task.workload, net.hw).count_legal(), task.name


def test_warm_starts_are_legal_distinct_and_cover_every_thread_layout():
    tpl = get_template(WORKLOADS["conv2d"]["resnet18.C5"], DEFAULT)
    ws = warm_starts(tpl, 8)
    assert len(ws) == 8 and all(tpl.legal(c) for c in ws)
    assert len({tuple(sorted(c.items())) for c in ws}) == 8
    layouts = {(c["oc_nthread"], c["h_nthread"]) for c in ws}
    assert layouts == {(1, 1), (1, 2), (2, 1), (2, 2)}
    # within a layout, the estimate decides: the best of each layout comes first
    firsts = {}
    for c in ws:
        firsts.setdefault((c["oc_nthread"], c["h_nthread"]), c)
    for c in ws:
        assert estimate(tpl, firsts[(c["oc_nthread"], c["h_nthread"])]) <= estimate(tpl, c)


@pytest.mark.slow
def test_bound_pruned_search_finds_the_exhaustive_optimum():
    """A small conv's whole legal space, simulated, against the pruned search of
    scripts/network_optima.py: same optimum; every skipped config is slower."""
    wl = Conv2dWorkload(1, 7, 7, 32, 32, 3, 1, 1)  # 2,940 legal configs
    tpl = get_template(wl, DEFAULT)
    cycles = {}
    for c in tpl.legal_configs():
        cycles[tpl.index_of(c)] = score(wl, tpl.to_schedule(c), DEFAULT).cycles
    best = min(cycles.values())
    skipped = [i for i in cycles if compute_bound(tpl, tpl.config_at(i)) > best]
    assert skipped  # the bound prunes something
    assert all(cycles[i] > best for i in skipped)
    assert all(compute_bound(tpl, tpl.config_at(i)) <= cycles[i] for i in cycles)
