"""A deployed model's offloaded programs as one chain (vtatune.deploy._chain): each lowered
with the tokens and pending pops the program run before it leaves, across layers, passes,
heads and regions, in the steady state of repeated inferences; timed so (the VTA cycles are
the chain's sum); kept so in a bundle; run so by the simulated device and VTA's driver with
no token NOPs after the first program a fresh device meets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tvm")
pytest.importorskip("onnxruntime")

from simulator.errors import DeadlockError  # noqa: E402
from simulator.functional import decode  # noqa: E402
from simulator.image import decode as decode_image  # noqa: E402
from simulator.image import encode  # noqa: E402
from simulator.program import NO_TOKENS, Program  # noqa: E402
from simulator.timing import time_program  # noqa: E402
from tests._stock import stock_schedules  # noqa: E402
from vtatune.deploy import (  # noqa: E402
    SimulatedDevice,
    compile_model,
    models,
    output_step,
    quantize,
    reference,
)
from vtatune.lowering import FRESH, Carry, lower  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = os.environ.get("VTATUNE_LIBVTA")


def _quantized(float_model, seed=0):
    shape = [d.dim_value for d in float_model.graph.input[0].type.tensor_type.shape.dim]
    rng = np.random.default_rng(seed)
    calibration = rng.standard_normal((4, *shape)).astype(np.float32)
    return quantize(float_model, calibration), rng.standard_normal(shape).astype(np.float32)


def _compiled(float_model, device=None, **kw):
    model, x = _quantized(float_model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return compile_model(model, device=device, **kw), model, x


@pytest.fixture(scope="module")
def attention():
    """Two heads of attention on ``sim``, requantized on the CPU: six regions (softmax on
    the CPU between them), dense layers of three passes, batch_matmuls of two heads x two
    passes; with the stock default schedules every GEMM stream leaves a store->compute
    token and a pending pop."""
    return _stock_compiled(models.attention(), hw="sim", exact=True)


def _stock_compiled(float_model, **kw):
    """:func:`_compiled` with the stock default schedules (:func:`tests._stock.stock_default`)."""
    with stock_schedules():
        return _compiled(float_model, **kw)


@pytest.fixture(scope="module")
def residual():
    """Convs and the ALU-only residual add on ``sim`` (the add leaves a token)."""
    return _compiled(models.conv_residual(channels=32), hw="sim")


def _run_order(compiled):
    """Each call's lowered program in the order one inference runs them, built layer by
    built layer (a batch_matmul: its heads' passes, head by head)."""
    return [low for symbol, op in compiled.main_ops if op is None
            for built in compiled.regions[symbol].built for low in built.programs.passes]


def _direct_chain(compiled):
    """The chain computed here, from the builder's programs: every call's workload,
    schedule and bias lowered with what the call before left, timed with its tokens in;
    walked from an idle VTA, then again from what that walk left (the steady state).
    Returns the programs and their cycles."""
    hw = compiled.hw
    bases = _run_order(compiled)

    def walk(carry):
        programs, cycles = [], []
        for base in bases:
            low = lower(base.workload, base.schedule, hw, bias=base.bias, carry=carry)
            timing = time_program(low.program, hw)
            programs.append(low.program)
            cycles.append(timing.cycles)
            carry = Carry(timing.tokens_out, low.pending_out)
        return programs, cycles, carry

    _, _, left = walk(FRESH)
    programs, cycles, end = walk(left)
    assert end == left  # a steady state: the chain ends as it starts
    return programs, cycles


@pytest.mark.parametrize("which", ["attention", "residual"])
def test_each_program_starts_from_what_the_one_before_left(which, request):
    compiled, _, _ = request.getfixturevalue(which)
    hw = compiled.hw
    chain = _run_order(compiled)
    runner = [p for symbol, op in compiled.main_ops if op is None
              for layer in compiled.regions[symbol].layers for p in layer.passes]
    assert [low.program for low in chain] == runner  # what the regions run
    programs, _ = _direct_chain(compiled)
    assert [low.program for low in chain] == programs
    left = [Carry(time_program(low.program, hw).tokens_out, low.pending_out) for low in chain]
    # the first takes what the last leaves (the inference before), each next what the one
    # before left
    starts = [low.program.tokens_in for low in chain]
    assert starts == [c.tokens for c in left[-1:] + left[:-1]]
    assert any(t != NO_TOKENS for t in starts)  # tokens are carried: not a vacuous check
    if which == "attention":
        assert len(compiled.regions) == 6
        per_head = [(len(b.programs.passes), len(b.requant.epilogues(bias=True)))
                    for s, op in compiled.main_ops if op is None
                    for b in compiled.regions[s].built if b.layer.spec.kind == "batch_matmul"]
        assert [n for n, _ in per_head] == [2 * p for _, p in per_head]  # two heads


@pytest.mark.parametrize("which", ["attention", "residual"])
def test_the_vta_cycles_are_the_chains_sum_and_the_outputs_unchanged(which, request):
    compiled, model, x = request.getfixturevalue(which)
    result = compiled.run(x)
    _, cycles = _direct_chain(compiled)
    assert result.vta_cycles == sum(cycles)
    assert sum(c.cycles for c in result.offloaded) == sum(cycles)
    assert sum(c.passes for c in result.offloaded) == len(cycles)
    # each program timed from an idle VTA counts otherwise (attention's pending pops: a
    # few cycles each; the residual's one token changes none): the carry is in the figure
    idle = sum(time_program(lower(low.workload, low.schedule, compiled.hw,
                                  bias=low.bias).program, compiled.hw).cycles
               for low in _run_order(compiled))
    assert (idle != sum(cycles)) == (which == "attention")
    step = output_step(model)
    exact = which == "attention"  # requantized on the CPU: equal to TVM's CPU build
    for engine in ("tvm", "onnxruntime"):
        diff = np.abs(result.output.astype(np.float64) - reference(model, x, engine)) / step
        assert diff.max() <= (0 if exact and engine == "tvm" else 1)


def test_a_fresh_device_adjusts_once_then_never(attention):
    compiled, model, x = attention
    device = SimulatedDevice(compiled.hw)
    again, _, _ = _stock_compiled(models.attention(), device=device, hw="sim", exact=True)
    first = _run_order(again)[0].program
    assert first.tokens_in != NO_TOKENS  # the steady state's start is not an idle VTA
    a = again.run(x).output
    assert device.token_adjustments == 1  # the first program of the first inference
    b = again.run(x).output
    assert device.token_adjustments == 1
    assert np.array_equal(a, b)
    # a program lowered for another place (from an idle VTA) still counts
    base = _run_order(again)[0]
    idle = lower(base.workload, base.schedule, again.hw, bias=base.bias).program
    device.run(idle, {t.name: device.alloc(t.shape, t.dtype) for t in idle.tensors})
    assert device.token_adjustments == 2


def test_the_functional_model_takes_the_tokens_a_program_starts_from(attention):
    compiled, _, _ = attention
    first = _run_order(compiled)[0].program
    assert first.tokens_in != NO_TOKENS
    decode(first, compiled.hw)  # its first pop takes the carried token
    idle = Program(first.instructions, first.uops, first.tensors, first.dram_bytes)
    with pytest.raises(DeadlockError, match="waits on FIFO"):
        decode(idle, compiled.hw)


def test_a_program_image_keeps_its_starting_tokens(attention):
    compiled, _, _ = attention
    hw = compiled.hw
    carried = _run_order(compiled)[0].program
    idle = Program(carried.instructions, carried.uops, carried.tensors, carried.dram_bytes)
    meta = {"hw": {"config": hw.to_dict()}, "tensors": []}
    back = decode_image(encode(carried, hw, meta)).program
    assert back.tokens_in == carried.tokens_in != NO_TOKENS
    assert "tokens_in" not in decode_image(encode(idle, hw, meta)).meta  # images as before
    assert decode_image(encode(idle, hw, meta)).program.tokens_in == NO_TOKENS


_LOADED = '''
import json, sys
import numpy as np
from vtatune.deploy.runtime import load
model = load(sys.argv[1], device=sys.argv[2])
x = np.load(sys.argv[3])
first = model.run(x)
adjusted = model.device.token_adjustments
second = model.run(x)
np.save(sys.argv[4], second.output)
print(json.dumps({"adjusted": [adjusted, model.device.token_adjustments],
                  "same": bool(np.array_equal(first.output, second.output)),
                  "cycles": second.vta_cycles}))
'''


def _loaded(bundle: Path, device: str, x: np.ndarray, tmp: Path) -> tuple[dict, np.ndarray]:
    """The bundle run twice in a fresh process on ``device``."""
    np.save(tmp / "x.npy", x)
    (tmp / "run.py").write_text(_LOADED)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, str(tmp / "run.py"), str(bundle), device,
                           str(tmp / "x.npy"), str(tmp / "y.npy")], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), np.load(tmp / "y.npy")


def test_a_loaded_bundle_runs_the_same_chain(attention, tmp_path):
    compiled, _, x = attention
    want = compiled.run(x)
    bundle = compiled.save(tmp_path / "attention.bundle")
    manifest = json.loads((bundle / "manifest.json").read_text())
    layers = [d for r in manifest["regions"] for d in r["layers"]]
    # the heads' programs repeat: one file each
    assert sum(len(d["programs"]) for d in layers) > len(
        {name for d in layers for name in d["programs"]})
    got, y = _loaded(bundle, "sim", x, tmp_path)
    assert got == {"adjusted": [1, 1], "same": True, "cycles": want.vta_cycles}
    assert np.array_equal(y, want.output)


@pytest.mark.skipif(not LIBRARY, reason="VTATUNE_LIBVTA names no libvta library")
def test_vtas_driver_needs_no_token_nops_on_a_deployed_chain(attention, tmp_path):
    compiled, _, x = attention
    want = compiled.run(x)
    bundle = compiled.save(tmp_path / "attention.bundle")
    got, y = _loaded(bundle, f"libvta:{LIBRARY}", x, tmp_path)
    # the first program a fresh driver meets, never again
    assert got == {"adjusted": [1, 1], "same": True, "cycles": want.vta_cycles}
    assert np.array_equal(y, want.output)
