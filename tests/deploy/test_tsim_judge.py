"""VTA's RTL as the judge (scripts/tsim_judge.py).

Without the libraries: every kernel case recorded from TVM v0.14's tsim driver on the stock
RTL (tests/deploy/data/tsim_driver/cases.jsonl; its README says how it was made) is rebuilt
- the same program, the same inputs -, vtatune's functional VTA must give the output the RTL
gave (sha256), and today's timing model the cycles recorded beside the RTL's (a change of
the timing model shows here, with the RTL's figure to judge it by).

With the libraries (``VTATUNE_LIBVTA_TSIM=DRIVER[:HARDWARE]``): the judge runs live, in
child processes (a process that started tsim ends through ``os._exit``), on kernels and on a
small model's bundle run by ``python -m vtatune run``."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import fsim_judge  # noqa: E402
import tsim_judge  # noqa: E402

from simulator.hardware import DEFAULT  # noqa: E402
from vtatune.deploy import SimulatedDevice  # noqa: E402

RECORDED = [json.loads(line) for line in tsim_judge.RECORD.read_text().splitlines()]
SPEC = os.environ.get("VTATUNE_LIBVTA_TSIM")
live = pytest.mark.skipif(not SPEC, reason="VTATUNE_LIBVTA_TSIM names no tsim driver")
#: The random schedules per kernel the record was made with (its README).
SCHEDULES = 4


def test_the_record_is_every_kernel_case():
    """Each ran with its output identical to vtatune's, or was refused before it ran: the
    ALU-only adds, whose LOAD of ACC_8BIT (TVM's ALU-only kernels on fsim) the RTL does not
    have."""
    names = [c.name for c in fsim_judge.kernel_cases(SCHEDULES, DEFAULT)]
    assert [r["case"] for r in RECORDED] == names
    refused = {r["case"].split("/")[0] for r in RECORDED if "refused" in r}
    assert refused == {"add", "add_shift_clip"}
    assert all(r["equal"] for r in RECORDED if "refused" not in r)
    assert all("LOAD ACC_8BIT" in r["refused"] for r in RECORDED if "refused" in r)


def test_vtatune_gives_the_rtls_outputs_and_the_recorded_model_cycles():
    recorded = {r["case"]: r for r in RECORDED}
    for case in fsim_judge.kernel_cases(SCHEDULES, DEFAULT):
        r = recorded[case.name]
        assert fsim_judge.program_sha256(case.program) == r["program"], case.name
        assert fsim_judge.inputs_sha256(case.inputs) == r["inputs"], case.name
        assert SimulatedDevice(DEFAULT).cycles(case.program) == r["model_cycles"], case.name
        if "refused" in r:
            continue
        out, _ = fsim_judge.simulate(case)
        assert hashlib.sha256(np.ascontiguousarray(out).tobytes()).hexdigest() == r["output"]


def _judge(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "tsim_judge.py"), *args],
                          capture_output=True, text=True, check=False)


@live
def test_the_rtl_agrees_live_on_the_kernels():
    done = _judge(SPEC, "--schedules", "0")
    assert done.returncode == 0, done.stderr
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("11 kernel cases on the RTL")
    assert "9 ran, 9 outputs identical, 2 refused" in last


@live
@pytest.mark.slow
def test_a_bundle_on_the_rtl_is_sims_output_with_the_rtls_cycles(tmp_path):
    pytest.importorskip("tvm")
    pytest.importorskip("onnxruntime")
    from vtatune.deploy import compile_model, models, quantize

    float_model = models.conv_residual()
    shape = [d.dim_value for d in float_model.graph.input[0].type.tensor_type.shape.dim]
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = compile_model(quantize(float_model, rng.standard_normal((4, *shape)).astype(
            np.float32)))
    bundle = compiled.save(tmp_path / "conv.bundle")
    result = tsim_judge.bundle_judge(SPEC, bundle, None)
    assert result["identical"]
    assert result["sim_cycles"] == result["model_cycles"]
    assert [r["model_cycles"] for r in result["layers"]] == [
        r["sim_cycles"] for r in result["layers"]]
    assert result["rtl_cycles"] == sum(r["rtl_cycles"] for r in result["layers"]) > 0
