"""VTA's own driver as the judge (scripts/fsim_judge.py).

Without the library: every call recorded from TVM v0.14's ``libvta_fsim.so``
(tests/deploy/data/fsim_driver/cases.jsonl, its README says how it was made) is rebuilt,
the same program on the same inputs, and vtatune's functional VTA must give the output the
library gave (sha256) and the counters fsim's profiler printed.

With the library (``VTATUNE_LIBVTA=/path/to/libvta_fsim.so``): the calls run live through
:class:`DriverDevice` against :class:`SimulatedDevice`, and the device's own errors."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import fsim_judge  # noqa: E402

from simulator.hardware import DEFAULT  # noqa: E402
from vtatune.deploy import DeployError, DriverDevice, SimulatedDevice  # noqa: E402

RECORDED = {r["case"]: r for r in map(json.loads, fsim_judge.RECORD.read_text().splitlines())}
LIBRARY = os.environ.get("VTATUNE_LIBVTA")
live = pytest.mark.skipif(not LIBRARY, reason="VTATUNE_LIBVTA names no libvta library")


def _sha(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def _check_recorded(cases) -> int:
    n = 0
    for case in cases:
        rec = RECORDED[case.name]
        assert (rec["hw"], rec["program"], rec["inputs"]) == (
            case.hw.bitstream, fsim_judge.program_sha256(case.program),
            fsim_judge.inputs_sha256(case.inputs)), \
            f"{case.name}: not the program or inputs the library ran: re-record " \
            "(scripts/fsim_judge.py LIBVTA --record ...)"
        out, counters = fsim_judge.simulate(case)
        assert (_sha(out), counters) == (rec["output"], rec["counters"]), case.name
        n += 1
    return n


@pytest.fixture(scope="module")
def kernels():
    return list(fsim_judge.kernel_cases())


def test_the_recording_covers_the_cases(kernels):
    kernel_names = {c.name for c in kernels}
    assert kernel_names <= RECORDED.keys()
    families = {name.split("/")[0] for name in RECORDED}
    assert {"gemm", "conv3x3_pad1_stride2_bias", "group_conv", "conv_transpose", "add",
            "conv_shift_clip", "mlp", "residual32_sim_exact"} <= families
    threaded = [n for n in kernel_names if "_vt2x" in n or "_vt1x2" in n]
    assert len(threaded) >= 10
    runs = {m.name for m in fsim_judge.MODELS + fsim_judge.RESNET18}
    models = {n for n in RECORDED if n.split("/")[0] in runs}
    assert models | kernel_names == RECORDED.keys()  # nothing stale


def test_vtatune_gives_what_the_library_gave_on_the_kernels(kernels):
    assert _check_recorded(kernels) == len(kernels)


@pytest.mark.slow
@pytest.mark.parametrize("runs", ["MODELS", "RESNET18"])
def test_vtatune_gives_what_the_library_gave_on_the_deploy_models(runs):
    pytest.importorskip("tvm")
    pytest.importorskip("onnxruntime")
    runs = getattr(fsim_judge, runs)
    cases = list(fsim_judge.model_cases(runs))
    assert {c.name for c in cases} == {n for n in RECORDED
                                       if n.split("/")[0] in {m.name for m in runs}}
    assert _check_recorded(cases) == len(cases)


# --- the live library ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def device():
    return DriverDevice(LIBRARY, DEFAULT)


@live
def test_the_library_agrees_with_vtatune_and_with_its_recording(device, kernels):
    assert device.isolated  # in a linker namespace of its own (glibc)
    adjusted = device.token_adjustments
    for case in kernels:
        got, counters = fsim_judge.replay(device, case)
        want, want_counters = fsim_judge.simulate(case)
        assert np.array_equal(got, want), case.name
        assert counters == want_counters, case.name
        assert (_sha(got), counters) == (RECORDED[case.name]["output"],
                                         RECORDED[case.name]["counters"]), case.name
    # some kernels end with tokens the next one does not start from: the device evened them
    assert device.token_adjustments > adjusted


@live
@pytest.mark.slow
def test_the_library_agrees_with_vtatune_on_the_deploy_models(device):
    pytest.importorskip("tvm")
    pytest.importorskip("onnxruntime")
    for case in fsim_judge.model_cases():
        got, counters = fsim_judge.replay(device, case)
        want, want_counters = fsim_judge.simulate(case)
        assert np.array_equal(got, want) and counters == want_counters, case.name
    # and deployed whole on the driver: activations stay in its buffers between layers
    assert dict(fsim_judge.whole_models(LIBRARY)) == {m.name: True for m in fsim_judge.MODELS}


@live
def test_buffers_views_and_reuse(device):
    a = np.arange(-64, 64, dtype=np.int8).reshape(8, 16)
    buf = device.upload(a)
    assert np.array_equal(device.download(buf), a)
    assert np.array_equal(device.download(buf.view((128,))), a.reshape(-1))
    z = device.alloc((3, 5), np.int32)
    assert device.download(z).tolist() == np.zeros((3, 5), np.int32).tolist()
    for _ in range(50):  # freed and reallocated: the driver's memory is not exhausted
        device.upload(np.ones(1 << 16, np.int8))


@live
def test_run_refuses_unbound_and_foreign_buffers(device, kernels):
    case = kernels[0]
    tensors = {k: device.upload(v) for k, v in case.inputs.items()}
    out = case.program.tensor("output")
    with pytest.raises(DeployError, match="program tensor 'output' is bound to no buffer"):
        device.run(case.program, tensors)
    sim_out = SimulatedDevice(DEFAULT).alloc(out.shape, out.dtype)
    with pytest.raises(DeployError, match="'output' is bound to a buffer of another device"):
        device.run(case.program, {**tensors, "output": sim_out})
    with pytest.raises(DeployError, match=r"'output' is int8\[.*\], its buffer int32"):
        device.run(case.program, {**tensors, "output": device.alloc(out.shape, np.int32)})


@live
def test_device_counters_follow_each_run(device, kernels):
    small, big = kernels[0], kernels[-1]
    fsim_judge.replay(device, big)
    _, first = fsim_judge.replay(device, small)
    _, again = fsim_judge.replay(device, small)
    assert first == again == fsim_judge.simulate(small)[1]  # cleared before each run
