"""Deploying QDQ models with the real apache-tvm: small models built with onnx.helper and
quantized by onnxruntime, each checked against TVM's CPU build of the same model and
onnxruntime's float QDQ run: exactly equal where TVM's float arithmetic is exact (power-of-two
scales) and VTA's rounding cannot differ (--exact), within one quantization step otherwise."""

from __future__ import annotations

import json
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tvm")
pytest.importorskip("onnxruntime")

from simulator.hardware import DEFAULT, PRESETS, HardwareConfig  # noqa: E402
from tests._calibration import seeded_reader  # noqa: E402
from vtatune.builds import FallbackWarning  # noqa: E402
from vtatune.deploy import (  # noqa: E402
    DeployError,
    LayerBuilder,
    SimulatedDevice,
    agreement,
    deploy,
    models,
    output_step,
    quantize,
    reference,
    same_memory,
)
from vtatune.errors import VtatuneError  # noqa: E402
from vtatune.networks import Layer, place  # noqa: E402
from vtatune.schedule import Schedule  # noqa: E402
from vtatune.tuning import tune  # noqa: E402
from vtatune.workloads import Conv2dWorkload, GemmWorkload  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::vtatune.builds.FallbackWarning")

ROOT = Path(__file__).resolve().parents[2]

#: BLOCK_IN = 2 x BLOCK_OUT and the reverse (vtatune simulates both; TVM's stock VTA neither)
IN32 = HardwareConfig(target="ultra96", log_block_in=5, log_block_out=4, log_inp_buff_size=16,
                      log_wgt_buff_size=19)
OUT32 = HardwareConfig(target="ultra96", log_block_in=4, log_block_out=5)


def _quantized(float_model, seed=0, power_of_two=True):
    shape = [d.dim_value for d in float_model.graph.input[0].type.tensor_type.shape.dim]
    rng = np.random.default_rng(seed)
    calibration = rng.standard_normal((4, *shape)).astype(np.float32)
    x = rng.standard_normal(shape).astype(np.float32)
    return quantize(float_model, calibration, power_of_two=power_of_two), x


@pytest.fixture(scope="module")
def residual():
    return _quantized(models.conv_residual(channels=32))


@pytest.fixture(scope="module")
def references():
    """TVM's CPU build's and onnxruntime's output per (model, input), computed once."""
    cache = {}

    def get(model, x):
        key = (id(model), x.tobytes())
        if key not in cache:
            cache[key] = (reference(model, x, "tvm"), reference(model, x, "onnxruntime"))
        return cache[key]

    return get


def _check(result, model, x, references, exact):
    """Against TVM (CPU) and onnxruntime: equal everywhere, or within one step."""
    step = output_step(model)
    for ref in references(model, x):
        a = agreement(result.output, ref, step)
        if exact:
            assert a.exact == a.elements, a.describe()
        assert a.max_steps <= 1, a.describe()


def _quiet(**kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FallbackWarning)
        return deploy(**kwargs)


def test_conv_chain_with_a_residual_add(residual, references):
    model, x = residual
    r = _quiet(model=model, input=x)  # pynq: the add stays on the CPU, as network places it
    assert [(c.layer, c.op, c.passes) for c in r.offloaded] == [
        ("conv2d_1", "conv2d", 1), ("conv2d_2", "conv2d", 1)]
    assert all(c.requantization.startswith("on VTA: shift") and c.requantization.endswith(
        "ReLU") for c in r.offloaded)
    add_reason = place(Layer("", "add", 1, 32, 32, 8, 8), DEFAULT)
    assert [(c.op, c.reason) for c in r.cpu_ops if c.op == "add"] == [("add", add_reason)]
    # one region: the input packed once, the second conv reads the first's output on VTA
    assert [c.op for c in r.cpu_ops if c.by == "vtatune"] == ["pack", "unpack"]
    assert r.vta_cycles == sum(c.cycles for c in r.offloaded) > 0
    assert r.vta_ms == pytest.approx(r.vta_cycles / 1e5)
    _check(r, model, x, references, exact=False)
    # on sim the residual add runs on VTA too (an ALU-only kernel), its ReLU fused
    s = _quiet(model=model, input=x, hw="sim")
    assert [c.op for c in s.offloaded] == ["conv2d", "conv2d", "add"]
    assert s.offloaded[2].workload.startswith("add 1x32x8x8") and "clip(0,127)" in \
        s.offloaded[2].workload
    assert [c.op for c in s.cpu_ops if c.by == "tvm"] == ["quantize", "dequantize"]
    _check(s, model, x, references, exact=False)
    e = _quiet(model=model, input=x, hw="sim", exact=True)  # ties to even, one pass each
    assert [c.passes for c in e.offloaded] == [1, 1, 1]  # the add's multiplier is 1
    assert [c.requantization.split(",")[1] for c in e.offloaded[:2]] == [
        " ties to even as exact arithmetic rounds (two floors)"] * 2
    _check(e, model, x, references, exact=True)


def test_grouped_conv_and_the_placement_of_network(references):
    model, x = _quantized(models.grouped_conv(channels=32, groups=2))
    r = _quiet(model=model, input=x, exact=True)
    assert [c.workload.split(",")[0] for c in r.offloaded] == [
        "group_conv2d 1x32x8x8 -> 32"]
    _check(r, model, x, references, exact=True)
    # depthwise: 16 groups would merge into one block (16x the MACs): the CPU's, with
    # network's reason, word for word
    dw, xdw = _quantized(models.grouped_conv(channels=32, groups=32))
    r1 = _quiet(model=dw, input=xdw)
    assert r1.offloaded == ()
    why = place(Layer("", "conv2d", 1, 32, 32, 8, 8, (3, 3), (1, 1, 1, 1), groups=32),
                DEFAULT, pad_channels=True)
    assert [c.reason for c in r1.cpu_ops if c.op == "nn.conv2d"] == [why] == [
        "depthwise convolution (1 input channel per group): VTA would run 16 groups merged "
        "into one of 16 input channels, 16x its MACs (deploy merges at most 4)"]
    _check(r1, dw, xdw, references, exact=True)


@pytest.mark.parametrize(("channels", "groups", "hw", "runs", "k", "more"), [
    (32, 4, DEFAULT, "group_conv2d 1x32x8x8 -> 32, k3 p1 s1 g2", 2, "100.0%"),  # 8 a group
    (32, 8, DEFAULT, "group_conv2d 1x32x8x8 -> 32, k3 p1 s1 g2", 4, "300.0%"),  # 4 a group
    (40, 5, DEFAULT, "group_conv2d 1x48x8x8 -> 48, k3 p1 s1 g3", 2, "140.0%"),  # 6 groups
    (32, 4, IN32, "conv2d 1x32x8x8 -> 32, k3 p1 s1", 4, "300.0%"),  # BLOCK_IN 32: 1 group
], ids=["8_per_group", "4_per_group", "odd_groups", "block_in_32"])
def test_groups_of_fewer_channels_than_a_block_run_merged_exactly(channels, groups, hw, runs,
                                                                   k, more, references):
    """k neighbouring groups as one group of whole blocks, its weight block-diagonal: the
    model's products exactly (and k - 1 zeros each), bit-exact to TVM's CPU build."""
    model, x = _quantized(models.grouped_conv(channels=channels, groups=groups))
    r = _quiet(model=model, input=x, hw=hw, exact=True)
    assert [c.workload.split(", epilogue")[0] for c in r.offloaded] == [runs]
    (call,) = r.offloaded
    per = channels // groups
    assert call.macs == channels * per * 9 * 64  # the model's MACs (VTA does k x, padded)
    assert call.notes == (
        f"{k} groups of {per} input channels merged into one (block-diagonal weight)",
        f"groups merged and channels padded to whole blocks: {more} more MACs")
    assert r.vta_mac_share == 1.0
    _check(r, model, x, references, exact=True)


@pytest.mark.parametrize("hw", [DEFAULT, IN32, OUT32], ids=["pynq", "block_in_32",
                                                           "block_out_32"])
def test_a_conv_then_a_transposed_conv_dilates_on_the_packed_tensor(hw, references):
    model, x = _quantized(models.transposed_conv(32, 32, size=4, conv_first=True))
    r = _quiet(model=model, input=x, hw=hw, exact=True)  # VTA rounds ties to even
    assert [c.op for c in r.offloaded] == ["conv2d", "conv2d_transpose"]
    assert r.offloaded[1].workload.startswith("conv2d_transpose 1x32x4x4 -> 32, k4 p1 s2")
    # VTA requantizes: the dilation reads the conv's output on the device
    assert [c.op for c in r.cpu_ops if c.by == "vtatune"] == ["pack", "dilate", "unpack"]
    _check(r, model, x, references, exact=True)
    if hw == DEFAULT:  # ties half up, within a step
        d = _quiet(model=model, input=x, hw=hw)
        assert [c.op for c in d.cpu_ops if c.by == "vtatune"] == ["pack", "dilate", "unpack"]
        _check(d, model, x, references, exact=False)


def test_two_layer_mlp_keeps_the_packed_layout_between_layers(references):
    model, x = _quantized(models.mlp())
    r = _quiet(model=model, input=x)
    assert [c.op for c in r.offloaded] == ["dense", "dense"]
    assert [c.op for c in r.cpu_ops if c.by == "vtatune"] == ["pack", "unpack"]
    _check(r, model, x, references, exact=False)


def test_a_batch_of_four_on_a_batch_4_core(references):
    model, x = _quantized(models.mlp(batch=4))
    r = _quiet(model=model, input=x, hw="4x8", exact=True)
    assert [c.workload.split(",")[0] for c in r.offloaded] == [
        "gemm 4x64 * 64x32", "gemm 4x32 * 32x16"]
    _check(r, model, x, references, exact=True)


def test_which_packed_layouts_are_the_same_memory():
    # a conv's output (N/B, C/c, H, W, B, c) is a dense layer's input (N/B, C/c, B, c) when
    # H = W = 1; with BATCH 1 and H = W = 1 any channel block is row-major N x C
    assert same_memory((1, 4, 1, 1, 1, 16), (1, 4, 1, 16))
    assert same_memory((2, 2, 1, 1, 1, 32), (2, 4, 1, 16))
    assert not same_memory((1, 2, 4, 4, 1, 32), (1, 4, 4, 4, 1, 16))  # pixels interleave
    assert not same_memory((1, 2, 1, 1, 4, 16), (1, 4, 1, 1, 4, 8))  # BATCH rows interleave


@pytest.mark.parametrize("hw", [IN32, OUT32], ids=["block_in_32", "block_out_32"])
def test_blocks_in_and_out_differ(hw, residual, references, tmp_path):
    model, x = residual
    config = tmp_path / "vta_config.json"  # as a user gives such a core: LOG_BLOCK_IN/OUT
    config.write_text(json.dumps(hw.to_dict()))
    r = _quiet(model=model, input=x, hw=str(config), exact=hw == OUT32)
    assert r.hw == hw and [c.op for c in r.offloaded] == ["conv2d", "conv2d"]
    assert [c.op for c in r.cpu_ops if c.by == "vtatune"] == ["pack", "unpack"]
    _check(r, model, x, references, exact=hw == OUT32)


def test_float_qdq_scales_requantize_on_vta_in_one_pass_within_a_step_or_exactly(references):
    """Calibrated float scales: VTA's fixed point, one pass a layer, within one step; with
    --exact VTA's exact fixed point, still one pass a layer, every element as exact
    arithmetic rounds (the quantized graph in float64)."""
    model, x = _quantized(models.conv_residual(channels=16), power_of_two=False)
    r = _quiet(model=model, input=x, exact=True)
    assert [c.passes for c in r.offloaded] == [1, 1]
    assert all(c.requantization.startswith("on VTA: x") and " exactly (" in c.requantization
               for c in r.offloaded)
    assert [c.op for c in r.cpu_ops if c.by == "vtatune"] == ["pack", "unpack"]
    exact = agreement(r.output, reference(model, x, "exact"), output_step(model))
    assert exact.exact == exact.elements, exact.describe()
    _check(r, model, x, references, exact=False)
    d = _quiet(model=model, input=x)  # a CNN: within a step by default
    assert [c.passes for c in d.offloaded] == [1, 1]
    assert all(c.requantization.startswith("on VTA: x") and "within" in c.requantization
               for c in d.offloaded)
    assert [c.op for c in d.cpu_ops if c.by == "vtatune"] == ["pack", "unpack"]
    _check(d, model, x, references, exact=False)


def test_onnxruntimes_default_quantization(references, tmp_path):
    """quantize_static with its defaults: asymmetric activations (zero points), calibrated
    scales. An input zero point folds into the bias; a padded conv with one runs unpadded
    on its input with a border of the zero point, exactly as TVM computes it (--exact: VTA
    rounds as exact arithmetic does, in the layer's one pass)."""
    import onnx
    from onnxruntime.quantization import QuantFormat, quantize_static

    out = {}
    for name, float_model in (("mlp", models.mlp()), ("residual", models.conv_residual(32))):
        shape = [d.dim_value for d in float_model.graph.input[0].type.tensor_type.shape.dim]
        onnx.save(float_model, tmp_path / f"{name}.onnx")
        quantize_static(tmp_path / f"{name}.onnx", tmp_path / f"{name}_int8.onnx",
                        seeded_reader("x", shape), quant_format=QuantFormat.QDQ)
        model = onnx.load(tmp_path / f"{name}_int8.onnx")
        x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
        out[name] = _quiet(model=model, input=x, exact=True)
        _check(out[name], model, x, references, exact=True)
    assert [c.op for c in out["mlp"].offloaded] == ["dense", "dense"]
    # the first dense's ReLU became its output's zero point -128, the second dense's input's
    assert "zero point -128" in out["mlp"].offloaded[0].requantization
    r = out["residual"]
    # the model's input (calibrated zero point 11) and the first conv's ReLU output (-128)
    assert [c.notes for c in r.offloaded] == [
        ("runs unpadded on its input with a 1-pixel border of the zero point 11",),
        ("runs unpadded on its input with a 1-pixel border of the zero point -128",)]
    assert [c.op for c in r.cpu_ops if c.by == "vtatune"] == ["pack", "border", "border",
                                                              "unpack"]
    assert all(" exactly (" in c.requantization for c in (*r.offloaded, *out["mlp"].offloaded))
    # the residual add's inputs have two scales: the CPU adds them, saying every reason
    add = next(c for c in r.cpu_ops if c.op == "add" and c.reason)
    assert add.reason.split("; ") == [
        "residual add: TVM v0.14 runs ALU-only kernels on VTA for the sim and intelfocl "
        "targets only", "an add of inputs at two scales (0.0175563, 0.0280652): VTA's ALU "
        "adds the int8 values as they are"]


def test_schedules_come_from_the_log_else_the_default_with_one_warning(residual, tmp_path):
    model, x = residual
    log = tmp_path / "tuned.jsonl"
    tune(Conv2dWorkload(1, 8, 8, 32, 32, 3, 1, 1), "sim", trials=3, seed=0, log=log)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = deploy(model, input=x, hw="sim", log=log)
    records = [json.loads(t) for t in log.read_text().splitlines()]
    best = min(range(len(records)), key=lambda i: records[i]["cycles"])  # earliest on ties
    want = Schedule.from_dict(records[best]["schedule"]).short()
    # both convs (each with its own epilogue) take the record of their shape
    assert [(c.source, c.provenance, c.schedule) for c in r.offloaded[:2]] == \
        [("log", f"{log}:{best + 1}", want)] * 2
    # the add is not in the log: the cost model's pick, and one warning for it
    assert r.offloaded[2].source == "fallback"
    fallback = [str(w.message) for w in caught if issubclass(w.category, FallbackWarning)]
    # named by its workload's key (operator, shapes, epilogue), not by its layer (add_1)
    assert len(fallback) == 1 and "add_1" not in fallback[0]
    assert fallback[0].startswith("vtatune.build: no ok record for add.") and \
        " on sim_1x16" in fallback[0]


def test_the_layers_of_one_workload_are_built_and_warned_about_once():
    """Issue 35, item 9: one fallback warning per layer, named by layer (30 for
    MobileNet-v2); docs/deploy.md promises one per workload."""
    hw = PRESETS["pynq"]
    wl = GemmWorkload(1, 64, 32)
    builder = LayerBuilder(hw, ROOT / "logs" / "resnet18-pynq.jsonl")  # convs only
    with builder, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = builder.programs(replace(wl, name="dense_1"), (wl.epilogue,), False)
        again = builder.programs(replace(wl, name="dense_7"), (wl.epilogue,), False)
    assert again is first and first.source == "fallback"
    fallback = [str(w.message) for w in caught if issubclass(w.category, FallbackWarning)]
    assert fallback == [f"vtatune.build: no ok record for {wl.key()} on {hw.target_model} in "
                        f"{ROOT / 'logs' / 'resnet18-pynq.jsonl'}; using the cost model's pick"]


def test_a_workload_the_log_lacks_is_tuned_on_the_spot_when_asked(tmp_path):
    model, x = _quantized(models.mlp())
    log = tmp_path / "spot.jsonl"
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)  # nothing falls back
        r = deploy(model, input=x, tune_trials=2, tune_log=log)
    assert [c.source for c in r.offloaded] == ["tuned", "tuned"]
    records = [json.loads(t) for t in log.read_text().splitlines()]
    assert {rec["workload"]["operator"] for rec in records} == {"gemm"}
    assert len({rec["workload"]["key"] for rec in records}) == 2


def test_bad_input_is_a_deploy_error(residual, tmp_path):
    model, _ = residual
    with pytest.raises(DeployError, match=r"input of shape \[1, 3, 8, 8\]: the model takes "
                                          r"\[1, 32, 8, 8\]"):
        deploy(model, input=np.zeros((1, 3, 8, 8), np.float32))
    with pytest.raises(DeployError, match="is a float model: VTA runs 8-bit integers. Quantize it"):
        deploy(models.mlp())
    with pytest.raises(DeployError, match="log .*missing.jsonl not found"):
        deploy(model, log=tmp_path / "missing.jsonl")
    with pytest.raises(DeployError, match="holds records of ultra96_1x16_.*, none of "
                                          "pynq_1x16_"):
        deploy(model, log=ROOT / "logs" / "resnet18-ultra96.jsonl")
    # raised where TVM calls vtatune back (the code generator tuning here): as it was raised
    with pytest.raises(VtatuneError, match="cannot write log .*: it is a directory"):
        deploy(model, tune_trials=2, tune_log=tmp_path)
    with pytest.raises(DeployError, match="the device is ultra96_1x16_.*, the build is for "
                                          "pynq_1x16"):
        deploy(model, hw="pynq", device=SimulatedDevice(PRESETS["ultra96"]))
