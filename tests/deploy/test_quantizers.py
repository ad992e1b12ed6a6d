"""Models as onnxruntime's quantizer leaves them, on VTA: asymmetric activations (zero points)
with padding, uint8 activations, per-channel weight scales, biases shared between layers,
channel counts that are not whole blocks, adds of one scale with zero points, and the share
of the model's multiply-accumulates VTA runs. Each model is built with onnx.helper,
quantized by ``quantize_static`` (QDQ) with the option that makes the case, and checked
against TVM's CPU build of the same model and onnxruntime."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("tvm")
pytest.importorskip("onnxruntime")

from simulator.hardware import HardwareConfig  # noqa: E402
from tests._bundles import bundle_round_trip  # noqa: E402
from tests._calibration import seeded_reader  # noqa: E402
from vtatune.deploy import (  # noqa: E402
    Requantization,
    agreement,
    deploy,
    model_macs,
    models,
    output_step,
    reference,
)
from vtatune.deploy._match import Unsupported, _shape  # noqa: E402
from vtatune.networks import load_network  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::vtatune.builds.FallbackWarning")

#: BLOCK_IN = 2 x BLOCK_OUT and the reverse
IN32 = HardwareConfig(target="ultra96", log_block_in=5, log_block_out=4, log_inp_buff_size=16,
                      log_wgt_buff_size=19)
OUT32 = HardwareConfig(target="ultra96", log_block_in=4, log_block_out=5)


def ort_quantized(float_model, tmp_path, **options):
    """``float_model`` quantized by onnxruntime's quantize_static (QDQ) with ``options``,
    and a seeded input."""
    import onnx
    from onnxruntime.quantization import QuantFormat, quantize_static

    inp = float_model.graph.input[0]
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    src, dst = tmp_path / "float.onnx", tmp_path / "int8.onnx"
    onnx.save(float_model, src)
    quantize_static(src, dst, seeded_reader(inp.name, shape), quant_format=QuantFormat.QDQ,
                    **options)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    return onnx.load(dst), x


def _deploy(model, x, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return deploy(model, input=x, **kwargs)


def _agree(result, model, x):
    """Agreement with TVM's CPU build and with onnxruntime."""
    step = output_step(model)
    return [agreement(result.output, reference(model, x, e), step) for e in
            ("tvm", "onnxruntime")]


def _exact(result, model, x):
    """Bit-exact with TVM and onnxruntime where the CPU requantizes (power-of-two scales
    aside); within one step where VTA's fixed point requantizes (one pass a layer, each
    within one step of the exact rounding: ``test_fixed_point.py``)."""
    fixed = any(c.requantization.startswith("on VTA: x") for c in result.offloaded)
    for a in _agree(result, model, x):
        assert a.max_steps <= fixed, a.describe()


@pytest.mark.parametrize("hw", ["pynq", IN32, OUT32])
def test_a_zero_point_with_padding_reads_the_zero_point_on_every_core(tmp_path, hw):
    model, x = ort_quantized(models.conv_residual(channels=32), tmp_path)
    r = _deploy(model, x, hw=hw)
    assert [c.op for c in r.offloaded] == ["conv2d", "conv2d"]
    assert all("border of the zero point" in c.notes[0] for c in r.offloaded)
    _exact(r, model, x)


@pytest.mark.parametrize(("channels", "groups", "k"), [(32, 4, 2), (40, 10, 4)])
def test_merged_groups_read_the_zero_point_of_their_border(tmp_path, channels, groups, k):
    """onnxruntime's asymmetric activations on a grouped conv of 8 or 4 channels per group:
    its groups merged k by k (the last padded), run unpadded on the zero-point border;
    bit-exact to TVM and onnxruntime where the CPU requantizes (``exact``)."""
    model, x = ort_quantized(models.grouped_conv(channels=channels, groups=groups), tmp_path)
    r = _deploy(model, x, exact=True)
    (call,) = r.offloaded
    assert "border of the zero point" in call.notes[0]
    assert call.notes[1] == (f"{k} groups of {channels // groups} input channels merged into "
                             "one (block-diagonal weight)")
    _exact(r, model, x)


def test_a_transposed_conv_reads_its_zero_point_between_and_around_its_pixels(tmp_path):
    """A transposed conv of an input with a zero point: dilated with the zero point and
    bordered by it on the CPU, run as the conv it is (stride 1, its kernel flipped)."""
    model, x = ort_quantized(models.transposed_conv(32, 32, size=4, conv_first=True), tmp_path)
    r = _deploy(model, x)
    conv, transposed = r.offloaded
    assert transposed.op == "conv2d_transpose"
    assert transposed.notes[0] == ("runs unpadded on its input dilated by 2 with the zero "
                                   "point between its pixels, and with a 2-pixel border of "
                                   "the zero point -128")
    _exact(r, model, x)


def test_the_border_costs_little_against_symmetric_activations(tmp_path, monkeypatch):
    """The same convs quantized symmetric (VTA's DMA pads) and asymmetric (a border, the
    conv unpadded): the VTA time of a pass within 5 %."""
    asym, x = ort_quantized(models.conv_residual(channels=32), tmp_path)
    sym, _ = ort_quantized(models.conv_residual(channels=32), tmp_path,
                           extra_options={"ActivationSymmetric": True})
    # the byte passes (--exact without VTA's exact fixed point): the same epilogue on both,
    # where the fixed points' digits would differ with the scales
    monkeypatch.setattr(Requantization, "exact_fixed_point", property(lambda self: None))
    a, s = _deploy(asym, x, exact=True), _deploy(sym, x, exact=True)
    per_pass = [[c.cycles / c.passes for c in r.offloaded] for r in (a, s)]
    assert all(abs(pa / ps - 1) < 0.05 for pa, ps in zip(*per_pass, strict=True)), per_pass
    assert [c.notes for c in s.offloaded] == [(), ()]


def test_uint8_activations_fold_into_int8(tmp_path):
    from onnxruntime.quantization import QuantType

    model, x = ort_quantized(models.conv_residual(channels=16), tmp_path,
                             activation_type=QuantType.QUInt8)
    r = _deploy(model, x)
    assert [c.op for c in r.offloaded] == ["conv2d", "conv2d"]
    # the uint8 zero points 139 and 0 read as int8's 11 and -128
    assert [c.notes[0].split()[-1] for c in r.offloaded] == ["11", "-128"]
    _exact(r, model, x)


@pytest.mark.parametrize("float_model", [models.conv_residual(channels=32), models.mlp()],
                         ids=["conv", "dense"])
def test_per_channel_weight_scales_requantize_per_channel(tmp_path, float_model):
    """Per-channel multipliers, no powers of two: VTA requantizes each channel by its own
    sum of powers of two (the shifts per-channel operands), one pass a layer, within one
    step of the CPU's exact requantization (``--exact``: the byte passes, bit-exact)."""
    model, x = ort_quantized(float_model, tmp_path, per_channel=True)
    r = _deploy(model, x)
    assert len(r.offloaded) == 2
    assert all(" per channel as " in c.requantization and c.passes == 1
               and "shr(shift1)" in c.workload for c in r.offloaded)
    _exact(r, model, x)
    exact = _deploy(model, x, exact=True)
    assert all(c.passes == 3 and "on the CPU" in c.requantization for c in exact.offloaded)
    _exact(exact, model, x)
    assert np.abs(r.output.astype(int) - exact.output.astype(int)).max() <= 1
    assert sum(c.cycles for c in r.offloaded) < sum(c.cycles for c in exact.offloaded)


def test_channel_counts_that_are_not_whole_blocks_are_padded(tmp_path):
    """A 3-channel stem and a 10-way classifier run padded to 16 channels: the padding's
    cost in cycles said, every multiply-accumulate of the model on VTA."""
    model, x = ort_quantized(models.classifier(), tmp_path)
    r = _deploy(model, x)
    assert [c.workload.split(",")[0] for c in r.offloaded] == [
        "conv2d 1x16x8x8 -> 16", "conv2d 1x16x8x8 -> 32", "gemm 1x32 * 32x16"]
    stem, _, fc = r.offloaded
    assert 0 < stem.padding_cycles < stem.cycles and 0 < fc.padding_cycles < fc.cycles
    assert stem.notes[-1] == f"channels padded to whole blocks: {16 / 3 - 1:.1%} more MACs"
    assert r.vta_mac_share == 1.0 and r.vta_macs == model_macs(model)
    assert f"padding costs {stem.padding_cycles:,} cycles" in r.report()
    _exact(r, model, x)
    assert r.output.argmax() == reference(model, x, "tvm").argmax()


def test_the_models_multiply_accumulates_as_network_counts_them(tmp_path):
    model, _ = ort_quantized(models.classifier(), tmp_path)
    path = tmp_path / "q.onnx"
    import onnx

    onnx.save(model, path)
    net = load_network(path, "pynq")
    assert model_macs(model) == sum(x.macs for x in net.layers) > 0
    assert net.vta_mac_share == 1.0 and not net.cpu


def _shared_bias_model(bias_value: float, identity: bool = True):
    """Two convs 3x3 of 16 channels reading one bias initializer, through Identity nodes as
    torch's exporter leaves a bias shared between layers (untrained BatchNorm: zeros), or
    directly."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(5)
    c = 16
    inits = [numpy_helper.from_array(np.full(c, bias_value, np.float32), "b")]
    nodes = [helper.make_node("Identity", ["b"], ["b1"]),
             helper.make_node("Identity", ["b"], ["b2"])] if identity else []
    x = "x"
    for i in (1, 2):
        w = rng.normal(0, np.sqrt(2 / (9 * c)), (c, c, 3, 3)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("Conv", [x, f"w{i}", f"b{i}" if identity else "b"],
                                      [f"c{i}"],
                                      kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"]))
        x = f"r{i}"
    shape = [1, c, 8, 8]
    graph = helper.make_graph(nodes, "shared_bias", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)], [
        helper.make_tensor_value_info(x, TensorProto.FLOAT, shape)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


@pytest.mark.parametrize("identity", [True, False], ids=["identity", "direct"])
def test_a_zero_bias_shared_between_layers_is_exact(tmp_path, identity):
    model, x = ort_quantized(_shared_bias_model(0.0, identity), tmp_path)
    r = _deploy(model, x)
    assert [c.op for c in r.offloaded] == ["conv2d", "conv2d"]
    assert not any("bias" in n for c in r.offloaded for n in c.notes)
    _exact(r, model, x)


@pytest.mark.parametrize("identity", [True, False], ids=["identity", "direct"])
def test_a_bias_at_another_scale_is_rescaled_to_the_accumulators(tmp_path, identity):
    """A shared bias: left in float behind Identity nodes, or quantized once at one conv's
    scale. Rescaled to each accumulator's scale to the nearest unit, the largest
    rounding said; the CPU's requantization (--exact) adds the rounding back: exact."""
    model, x = ort_quantized(_shared_bias_model(0.1, identity), tmp_path)
    r = _deploy(model, x, exact=True)
    assert [c.op for c in r.offloaded] == ["conv2d", "conv2d"]
    rescaled = [[n for n in c.notes if "bias" in n] for c in r.offloaded]
    # behind Identity both convs read a float bias; quantized once, at one conv's scale,
    # the other conv's is rescaled
    assert sorted(len(n) for n in rescaled) == ([1, 1] if identity else [0, 1])
    prefix = ("bias rescaled to the accumulator's scale, the CPU's requantization adding "
              "back a rounding of up to ")
    assert all(n[0].startswith(prefix) and 0 < float(n[0].split()[-3]) <= 0.5
               for n in rescaled if n)
    _exact(r, model, x)


def _add_of_one_scale(zero_points: tuple[int, int], scales: tuple[float, float]):
    """``add(dq(q(x)), dq(q(relu(x))))`` requantized: a residual add's QDQ form with the
    inputs' scales and zero points given."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    inits = []
    for i, (zp, s) in enumerate(zip(zero_points, scales, strict=True)):
        inits += [numpy_helper.from_array(np.array(s, np.float32), f"s{i}"),
                  numpy_helper.from_array(np.array(zp, np.int8), f"z{i}")]
    inits += [numpy_helper.from_array(np.array(0.05, np.float32), "so"),
              numpy_helper.from_array(np.array(-7, np.int8), "zo")]
    nodes = [helper.make_node("Relu", ["x"], ["rx"]),
             helper.make_node("QuantizeLinear", ["x", "s0", "z0"], ["qa"]),
             helper.make_node("DequantizeLinear", ["qa", "s0", "z0"], ["a"]),
             helper.make_node("QuantizeLinear", ["rx", "s1", "z1"], ["qr"]),
             helper.make_node("DequantizeLinear", ["qr", "s1", "z1"], ["r"]),
             helper.make_node("Add", ["a", "r"], ["y"]),
             helper.make_node("QuantizeLinear", ["y", "so", "zo"], ["qy"]),
             helper.make_node("DequantizeLinear", ["qy", "so", "zo"], ["out"])]
    shape = [1, 16, 4, 4]
    graph = helper.make_graph(nodes, "add", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)], [
        helper.make_tensor_value_info("out", TensorProto.FLOAT, shape)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def test_an_add_of_one_scale_folds_its_zero_points_into_an_immediate():
    model = _add_of_one_scale((5, -3), (0.025, 0.025))
    x = np.random.default_rng(2).standard_normal((1, 16, 4, 4)).astype(np.float32)
    r = _deploy(model, x, hw="sim")  # TVM v0.14 runs ALU-only kernels on sim
    (add,) = r.offloaded
    # the shift by 1 rounds ties up on VTA (TVM: to even), so within one step, exact with
    # the requantization on the CPU (--exact), the zero points folded alike
    assert add.op == "add" and add.workload.startswith("add 1x16x4x4, epilogue add(-2) add(1)")
    assert all(a.max_steps == 1 for a in _agree(r, model, x))
    r = _deploy(model, x, hw="sim", exact=True)
    assert r.offloaded[0].workload.startswith("add 1x16x4x4, epilogue add(-2)")
    _exact(r, model, x)
    r = _deploy(_add_of_one_scale((5, -3), (0.025, 0.02)), x, hw="sim")
    assert not r.offloaded
    assert [c.reason for c in r.cpu_ops if c.reason] == [
        "an add of inputs at two scales (0.025, 0.02): VTA's ALU adds the int8 values as "
        "they are"]


def test_a_tensor_of_no_static_shape_is_a_reason_not_a_crash():
    class NoShape:
        ty = None

    with pytest.raises(Unsupported, match="a tensor of no static shape"):
        _shape(NoShape())


def test_a_layer_no_pattern_matches_says_what_it_lacks(tmp_path):
    """Only the convs quantized: the Gemm runs on the CPU with the reason no pattern of
    VTA's table matched it (left in float by the quantizer); the share of the
    model's multiply-accumulates says so, and VTA runs all that the quantizer quantized."""
    import onnx
    from onnxruntime.quantization import QuantFormat, quantize_static

    onnx.save(models.classifier(), tmp_path / "f.onnx")
    quantize_static(tmp_path / "f.onnx", tmp_path / "q.onnx", seeded_reader("x", [1, 3, 8, 8]),
                    quant_format=QuantFormat.QDQ, op_types_to_quantize=["Conv"])
    model = onnx.load(tmp_path / "q.onnx")
    r = _deploy(model, np.zeros((1, 3, 8, 8), np.float32))
    assert [c.op for c in r.offloaded] == ["conv2d", "conv2d"]
    (matmul,) = [c for c in r.cpu_ops if c.op == "matmul"]
    assert matmul.reason == ("float MatMul: the quantizer left it unquantized (VTA runs the "
                             "layers a quantizer quantized)")
    # the Gemm 32 -> 10 on the CPU
    assert r.vta_mac_share == r.vta_macs / model_macs(model) == (model_macs(model) - 32 * 10) / \
        model_macs(model)
    assert (r.float_macs, r.vta_quantized_share) == (32 * 10, 1.0)
    assert f"{100 * r.vta_mac_share:.1f} % of the model's multiply-accumulates (" \
        f"{r.vta_macs:,} of {model_macs(model):,}); 100.0 % of those the quantizer " \
        "quantized, 320 left in float" in r.report()
    d = r.as_dict()
    assert (d["vta_mac_share"], d["float_macs"], d["vta_quantized_share"]) == (
        r.vta_mac_share, 320, 1.0)


def test_a_model_tvm_cannot_build_is_one_deploy_error():
    """What TVM's own build raises (a concat of tensors of unknown shape, as the ONNX
    frontend leaves ShuffleNet's) is a DeployError naming it and the usual fix, never
    TVM's traceback."""
    import tvm
    from tvm.script import relax as R

    from vtatune.deploy import DeployError, build_cpu, resolve_cpu_target

    @R.function
    def main(x: R.Tensor(dtype="float32", ndim=2)):
        return R.concat((x, x), axis=1)

    with pytest.raises(DeployError, match=r"^TVM cannot build the model for the CPU: .*"
                       r"run onnxruntime's quant_pre_process") as info:
        build_cpu(tvm.IRModule({"main": main}), resolve_cpu_target())
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("options", [{}, {"per_channel": True}], ids=["default", "per_channel"])
def test_a_bundle_keeps_borders_padded_channels_and_per_channel_scales(tmp_path, options):
    """Saved and run by `vtatune run` in a fresh process: the same output, calls and
    notes as where the model was built."""
    model, x = ort_quantized(models.classifier(), tmp_path, **options)
    want, got = bundle_round_trip(model, x, tmp_path, hw="pynq")
    assert got["offloaded"] == [c.as_dict() for c in want.offloaded]
    assert got["vta_mac_share"] == want.vta_mac_share == 1.0
    assert any(c["notes"] for c in got["offloaded"])


def _per_channel_pow2(model):
    """``model`` (quantized with power-of-two scales per tensor) with each conv's weight
    scale made per channel, alternately the scale and twice it (the int8 weights as they
    are, the bias's scale following): every channel's multiplier still a power of two."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.ModelProto.FromString(model.SerializeToString())
    inits = {i.name: i for i in model.graph.initializer}
    produced = {o: n for n in model.graph.node for o in n.output}
    for conv in (n for n in model.graph.node if n.op_type == "Conv"):
        weight_dq = produced[conv.input[1]]
        bias_dq = produced[conv.input[2]] if len(conv.input) > 2 else None
        w = numpy_helper.to_array(inits[weight_dq.input[0]])
        scale = float(numpy_helper.to_array(inits[weight_dq.input[1]]))
        per = (scale * 2.0 ** (np.arange(w.shape[0]) % 2)).astype(np.float32)
        for dq, values in ((weight_dq, per), (bias_dq, None)):
            if dq is None:
                continue
            if values is None:  # the bias: input scale x each channel's weight scale
                x_scale = float(numpy_helper.to_array(inits[produced[conv.input[0]].input[1]]))
                values = (np.float32(x_scale) * per).astype(np.float32)
            n = len(values)
            scale_name, zp_name = f"{dq.input[1]}_pc", f"{dq.input[2]}_pc"
            zp_dtype = numpy_helper.to_array(inits[dq.input[2]]).dtype
            model.graph.initializer.extend([
                numpy_helper.from_array(values, scale_name),
                numpy_helper.from_array(np.zeros(n, zp_dtype), zp_name)])
            dq.input[1], dq.input[2] = scale_name, zp_name
            dq.attribute.extend([helper.make_attribute("axis", 0)])
    onnx.checker.check_model(model)
    return model


def test_per_channel_power_of_two_scales_requantize_on_vta_by_a_shift_per_channel():
    """Every channel's multiplier a power of two: VTA requantizes each channel by its own
    shift (``shr(shift)``, a per-channel operand), its rounding in the bias; within one
    step of TVM (ties round up), and bit-exact with --exact (the CPU requantizes)."""
    from vtatune.deploy import quantize

    rng = np.random.default_rng(0)
    model = _per_channel_pow2(quantize(models.conv_residual(channels=32),
                                       rng.standard_normal((4, 1, 32, 8, 8), np.float32)))
    x = rng.standard_normal((1, 32, 8, 8)).astype(np.float32)
    r = _deploy(model, x)
    convs = [c for c in r.offloaded if c.op == "conv2d"]
    assert len(convs) == 2 and all(c.passes == 1 for c in convs)
    assert all("shr(shift)" in c.workload and "per channel (a per-channel operand)" in
               c.requantization for c in convs)
    assert all(a.max_steps <= 1 for a in _agree(r, model, x))
    exact = _deploy(model, x, exact=True)
    assert all(c.passes > 1 for c in exact.offloaded if c.op == "conv2d")
    _exact(exact, model, x)


def test_a_bundle_keeps_the_per_channel_shifts(tmp_path):
    from vtatune.deploy import quantize

    rng = np.random.default_rng(0)
    model = _per_channel_pow2(quantize(models.conv_residual(channels=32),
                                       rng.standard_normal((4, 1, 32, 8, 8), np.float32)))
    x = rng.standard_normal((1, 32, 8, 8)).astype(np.float32)
    want, got = bundle_round_trip(model, x, tmp_path, hw="pynq")
    assert got["offloaded"] == [c.as_dict() for c in want.offloaded]
    assert "shift" in {p.name.split(".")[1] for p in (tmp_path / "bundle" / "constants").iterdir()}


def test_a_random_index_input_stays_within_a_small_table():
    """A model's int64 input is an index (BERT's token ids): a random one drawn over int64's
    range gathers out of the embedding table (TVM's gather then reads out of bounds)."""
    from vtatune.deploy import random_input
    from vtatune.deploy.runtime import INDEX_VALUES

    ids = random_input((4, 32), np.dtype(np.int64), seed=3)
    assert ids.dtype == np.int64 and ids.min() >= 0 and ids.max() < INDEX_VALUES
    assert len(np.unique(ids)) > 1
    q = random_input((4, 32), np.dtype(np.int8), seed=3)
    assert q.min() < -64 and q.max() > 64  # 8-bit inputs still span their range
