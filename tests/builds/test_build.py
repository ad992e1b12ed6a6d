"""Builds from logs: record choice, provenance, fallback, simulate and run."""

import warnings

import numpy as np
import pytest

import vtatune
from simulator.hardware import DEFAULT, PRESETS
from tests._logs import record, write_log
from vtatune.builds import Build, FallbackWarning, apply_history_best, build
from vtatune.errors import BuildError
from vtatune.schedule import Schedule
from vtatune.workloads import WORKLOADS, GemmWorkload, random_operands, reference_output

pytestmark = pytest.mark.usefixtures("compiled_engines")  # exact CLI output: no first-run notice

WL = GemmWorkload(16, 64, 64)
SCHEDULES = [Schedule(tile_b=1, tile_co=4, tile_ci=1),        # 13667 cycles
             Schedule(tile_b=4, tile_ci=4, tile_co=4),        # 10923 (best)
             Schedule(tile_b=2, tile_co=2, tile_ci=2, oc_nthread=2)]


@pytest.fixture
def log(tmp_path):
    recs = [record(WL, s, DEFAULT, i) for i, s in enumerate(SCHEDULES)]
    # a faster record for other hardware and one with bias must never be picked for pynq
    recs.append(record(WL, SCHEDULES[0], PRESETS["ultra96"], 3))
    recs.append(record(WL, SCHEDULES[2], DEFAULT, 4, bias=True))
    return write_log(tmp_path / "gemm.jsonl", recs), recs


def test_build_uses_best_ok_record_of_this_hardware(log):
    path, recs = log
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        b = build(WL, "pynq", log=path)
    assert b.schedule == SCHEDULES[1]
    assert (b.provenance.source, b.provenance.log, b.provenance.line) == ("log", str(path), 2)
    assert b.provenance.describe() == f"{path}:2"
    sim = vtatune.simulate(b)
    assert sim.cycles == recs[1]["cycles"]
    assert sim.counters == recs[1]["counters"]


def test_apply_history_best_is_the_autotvm_habit(log):
    path, recs = log
    with apply_history_best(path):
        b = vtatune.build(WL, hw="ultra96")
        bb = vtatune.build(WL, hw=DEFAULT, bias=True)
    assert b.provenance.line == 4 and b.hw == PRESETS["ultra96"]
    assert vtatune.simulate(b).cycles == recs[3]["cycles"]
    assert bb.provenance.line == 5 and bb.bias
    assert vtatune.simulate(bb).counters == recs[4]["counters"]


def test_fallback_warns_once_and_says_why(log, tmp_path):
    path, _ = log
    with pytest.warns(FallbackWarning) as caught:
        b = build(WL, PRESETS["de10nano"], log=path)
    assert len(caught) == 1
    assert "default schedule" in str(caught[0].message)
    assert "de10nano" in str(caught[0].message) and "ultra96" in str(caught[0].message)
    assert b.provenance.source == "fallback" and b.provenance.line is None
    assert b.provenance.describe().startswith("fallback")
    with pytest.warns(FallbackWarning) as caught:
        build(WORKLOADS["conv2d"]["resnet18.C11"], log=path)
    assert len(caught) == 1


def test_package_exposes_the_build_api_even_after_importing_its_module(log):
    import vtatune.builds  # noqa: F401 - importing the submodule must not shadow build()

    path, _ = log
    assert isinstance(vtatune.build(WL, log=path), Build)
    assert vtatune.apply_history_best is apply_history_best
    assert vtatune.read_log.__name__ == "read_log"


@pytest.mark.parametrize("wl, bias", [(WL, False), (WL, True),
                                      (WORKLOADS["conv2d"]["resnet18.C11"], True)])
def test_run_matches_numpy(wl, bias):
    with pytest.warns(FallbackWarning):
        b = build(wl, bias=bias)
    ops = random_operands(wl, bias, seed=3)
    out = b.run(ops.data, ops.weight, ops.bias)
    assert out.dtype == np.int8
    np.testing.assert_array_equal(out, reference_output(wl, ops))


def test_run_rejects_bad_operands():
    b = build(WL, schedule=SCHEDULES[1])
    ops = random_operands(WL, False)
    with pytest.raises(BuildError, match="shape"):
        b.run(ops.data.T, ops.weight)
    with pytest.raises(BuildError, match="int8"):
        b.run(ops.data.astype(np.int32) * 1000, ops.weight)
    with pytest.raises(BuildError, match="no bias"):
        b.run(ops.data, ops.weight, np.zeros(64, np.int32))
    assert b.provenance.source == "schedule"
