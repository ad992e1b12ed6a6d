"""The int8 forms onnxruntime's quantizer writes besides QDQ, on VTA: QOperator models
(QLinearConv, QLinearMatMul, QGemm, QLinearAdd, ...) rewritten to their QDQ form; a fused
kernel with no such form refused in one line; dynamically quantized models
(DynamicQuantizeLinear + MatMulInteger / ConvInteger) with their integer GEMMs on VTA; an
import TVM fails retried after the standard preparation. Each model is built with
onnx.helper and quantized by onnxruntime."""

from __future__ import annotations

import collections
import warnings

import numpy as np
import pytest

pytest.importorskip("tvm")
pytest.importorskip("onnxruntime")

from tests._bundles import bundle_round_trip  # noqa: E402
from tests._calibration import seeded_reader  # noqa: E402
from vtatune.deploy import (  # noqa: E402
    QOPERATOR_OPS,
    DeployError,
    deploy,
    models,
    reference,
    to_accumulators,
    to_qdq,
)

pytestmark = pytest.mark.filterwarnings("ignore::vtatune.builds.FallbackWarning")


def quantized(float_model, tmp_path, fmt, **options):
    """``float_model`` quantized by ``quantize_static`` in format ``fmt`` (``QDQ`` or
    ``QOperator``), and a seeded input."""
    import onnx
    from onnxruntime.quantization import QuantFormat, quantize_static

    inp = float_model.graph.input[0]
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    src, dst = tmp_path / "float.onnx", tmp_path / f"{fmt}.onnx"
    onnx.save(float_model, src)
    quantize_static(src, dst, seeded_reader(inp.name, shape),
                    quant_format=QuantFormat.from_string(fmt), **options)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    return onnx.load(dst), x


def ort(model, x):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return session.run(None, {model.graph.input[0].name: x})[0]


def _deploy(model, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return deploy(model, input=x)


CASES = {"conv_residual": (models.conv_residual, {}),
         "classifier": (models.classifier, {}),
         "mlp_per_channel": (models.mlp, {"per_channel": True}),
         "encoder": (lambda: models.encoder_block(seq=16), {})}


@pytest.mark.parametrize("name", list(CASES))
def test_the_qdq_form_of_a_qoperator_model_computes_what_onnxruntime_does(tmp_path, name):
    """quantize_static's QOperator model rewritten to QDQ: onnxruntime's QLinear* kernels
    on the one and its float QDQ semantics on the other give the same output, bit for
    bit (convs with zero points, Gemm with per-channel weights, attention's QLinearMatMul,
    QLinearSoftmax, QLinearAdd and QLinearMul)."""
    build, options = CASES[name]
    qop, x = quantized(build(), tmp_path, "QOperator", **options)
    ops = collections.Counter(n.op_type for n in qop.graph.node)
    assert set(ops) & set(QOPERATOR_OPS), ops
    rewritten = to_qdq(qop)
    assert not {n.op_type for n in rewritten.graph.node} & set(QOPERATOR_OPS)
    np.testing.assert_array_equal(ort(rewritten, x), ort(qop, x))


def test_a_qdq_model_is_left_as_it_is(tmp_path):
    qdq, _ = quantized(models.conv_residual(), tmp_path, "QDQ")
    assert to_qdq(qdq) is qdq


@pytest.mark.parametrize("name", ["conv_residual", "classifier"])
def test_a_qoperator_model_deploys_as_its_qdq_model(tmp_path, name):
    """The same layers on VTA and the same output, bit for bit, as the QDQ model."""
    build, options = CASES[name]
    qop, x = quantized(build(), tmp_path, "QOperator", **options)
    qdq, _ = quantized(build(), tmp_path, "QDQ", **options)
    a, b = _deploy(qop, x), _deploy(qdq, x)
    assert [c.op for c in a.offloaded] == [c.op for c in b.offloaded]
    assert len(a.offloaded) >= 2
    np.testing.assert_array_equal(a.output, b.output)


def test_a_fused_kernel_with_no_qdq_form_is_refused_naming_the_node(tmp_path):
    from onnx import TensorProto, helper

    qop, x = quantized(models.conv_residual(), tmp_path, "QOperator")
    qop.graph.node.append(helper.make_node(
        "QAttention", ["x"], ["unused"], name="attention_0", domain="com.microsoft"))
    qop.graph.value_info.append(helper.make_tensor_value_info("unused", TensorProto.FLOAT,
                                                              None))
    with pytest.raises(DeployError) as err:
        _deploy(qop, x)
    text = str(err.value)
    assert text == ("node attention_0 (QAttention) is one of onnxruntime's fused quantized "
                    "kernels and has no QDQ form: quantize the float model in QDQ format "
                    "(onnxruntime.quantization.quantize_static, quant_format=QuantFormat.QDQ, "
                    "its default)")


def test_a_qgemm_whose_bias_is_not_int32_is_refused(tmp_path):
    """onnxruntime's quantizer sometimes quantizes a bias shared with a LayerNorm as int8
    for a QGemm (onnxruntime then cannot load the model): refused, naming node and bias."""
    from onnx import numpy_helper

    qop, _ = quantized(models.mlp(), tmp_path, "QOperator")
    gemm = next(n for n in qop.graph.node if n.op_type == "QGemm")
    bias = next(i for i in qop.graph.initializer if i.name == gemm.input[6])
    bias.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(bias).astype(np.int8),
                                          bias.name))
    name = gemm.name or gemm.output[0]
    with pytest.raises(DeployError, match=f"^node {name} \\(QGemm\\): its bias "
                       f"{bias.name} is int8, the operator takes int32 \\(onnxruntime cannot "
                       "run the model either\\): quantize the float model in QDQ format"):
        to_qdq(qop)


# --- dynamic quantization --------------------------------------------------------------------
def dynamic(float_model, tmp_path):
    """``float_model`` quantized by ``quantize_dynamic`` (its defaults), and a seeded input."""
    import onnx
    from onnxruntime.quantization import quantize_dynamic

    inp = float_model.graph.input[0]
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    src, dst = tmp_path / "float.onnx", tmp_path / "dynamic.onnx"
    onnx.save(float_model, src)
    quantize_dynamic(src, dst)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    return onnx.load(dst), x


@pytest.mark.parametrize("name", ["conv_residual", "classifier", "encoder"])
def test_the_accumulator_form_of_a_dynamic_model_computes_what_onnxruntime_does(
        tmp_path, name):
    """MatMulInteger / ConvInteger at a per-call zero point, split into a GEMM at the
    fixed zero point 128 and the CPU's correction: onnxruntime gives both models the same
    output, bit for bit (padded convs included: the correction per output position)."""
    model, x = dynamic(CASES[name][0](), tmp_path)
    ops = {n.op_type for n in model.graph.node}
    assert ops & {"MatMulInteger", "ConvInteger"}, ops
    rewritten = to_accumulators(model)
    assert not {n.op_type for n in rewritten.graph.node} & {"MatMulInteger", "ConvInteger"}
    np.testing.assert_array_equal(ort(rewritten, x), ort(model, x))


@pytest.mark.parametrize("name", ["conv_residual", "mlp_per_channel"])
def test_a_dynamic_model_runs_its_integer_gemms_on_vta_exactly(tmp_path, name):
    """Every ConvInteger / MatMulInteger on VTA, its int32 accumulators handed to the CPU
    byte by byte (3 passes: the weights bound them below 2^23); the output TVM's CPU
    build's and onnxruntime's, bit for bit."""
    model, x = dynamic(CASES[name][0](), tmp_path)
    r = _deploy(model, x)
    gemms = sum(n.op_type in ("MatMulInteger", "ConvInteger") for n in model.graph.node)
    assert len(r.offloaded) == gemms == 2
    assert all(c.passes == 3 and c.requantization.startswith(
        "on the CPU: the int32 accumulators as float32") for c in r.offloaded)
    assert r.vta_mac_share == 1.0
    np.testing.assert_array_equal(r.output, reference(model, x, "tvm"))
    np.testing.assert_array_equal(r.output, ort(model, x))


def test_the_float_matmuls_a_dynamic_quantizer_leaves_are_said_so(tmp_path, capsys):
    """``quantize_dynamic`` leaves attention's activation x activation MatMuls (Q.K^T, P.V)
    in float: deploy runs the model as it was quantized, each such MatMul on the CPU
    saying so, with the share VTA runs of the MACs the quantizer quantized; ``network
    --list`` says the same."""
    import json

    from vtatune.cli import main

    model, x = dynamic(models.attention(), tmp_path)  # seq 32, hidden 32, 2 heads of 16
    r = _deploy(model, x)
    why = "float MatMul: the quantizer left it unquantized (VTA runs the layers a quantizer " \
        "quantized)"
    assert [c.reason for c in r.cpu_ops if c.op == "matmul"] == [why, why]
    assert r.float_macs == 2 * (2 * 32 * 32 * 16)  # Q.K^T and P.V: 2 heads each
    assert r.vta_macs == r.model_macs - r.float_macs  # every integer GEMM on VTA
    assert (r.vta_quantized_share, r.vta_mac_share) == (1.0, r.vta_macs / r.model_macs)
    assert f"; 100.0 % of those the quantizer quantized, {r.float_macs:,} left in float" \
        in r.report()
    capsys.readouterr()
    assert main(["network", str(tmp_path / "dynamic.onnx"), "--list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [c["reason"] for c in listed["cpu"] if c["operator"] == "matmul"] == [why, why]
    assert (listed["vta_mac_share"], listed["float_macs"], listed["vta_quantized_share"]) == \
        (r.vta_mac_share, r.float_macs, 1.0)


# --- the import that does not give up first ---------------------------------------------------
def _halved(model, y, by_data=False):
    """``model`` with its output ``y`` [1, C, H, W] reshaped to [1, ceil(C / 2), -1], the
    half computed from ``y``'s shape in float (as torch exports ``math.ceil`` of a size:
    TVM's importer cannot take the float arithmetic on a shape); ``by_data``: divided by
    ``y``'s largest value instead of 2 (nothing to fold: the import still fails)."""
    from onnx import TensorProto, helper, numpy_helper

    g = model.graph
    consts = {"one_i": np.array(1, np.int64), "lead": np.array([1], np.int64),
              "rest": np.array([-1], np.int64), "axes": np.array([0], np.int64)}
    if not by_data:
        consts["two"] = np.array(2.0, np.float32)
    g.initializer.extend(numpy_helper.from_array(v, k) for k, v in consts.items())
    nodes = [("Shape", [y], "s", {}), ("Gather", ["s", "one_i"], "c", {}),
             ("Cast", ["c"], "cf", {"to": TensorProto.FLOAT}),
             ("Div", ["cf", "two"], "half", {}), ("Ceil", ["half"], "hc", {}),
             ("Cast", ["hc"], "hi", {"to": TensorProto.INT64}),
             ("Unsqueeze", ["hi", "axes"], "hu", {}),
             ("Concat", ["lead", "hu", "rest"], "shape", {"axis": 0}),
             ("Reshape", [y, "shape"], "reshaped", {})]
    if by_data:
        nodes.insert(0, ("ReduceMax", [y], "two", {"keepdims": 0}))
    g.node.extend(helper.make_node(op, ins, [out], name=f"{out}_node", **attrs)
                  for op, ins, out, attrs in nodes)
    channels = [d.dim_value for d in g.output[0].type.tensor_type.shape.dim][1]
    del g.output[:]
    g.output.append(helper.make_tensor_value_info("reshaped", TensorProto.FLOAT,
                                                  [1, (channels + 1) // 2, None]))
    return model


def test_an_import_that_fails_is_retried_after_shape_inference_and_constant_folding(
        tmp_path):
    """The reshape's shape folds to a constant (as onnxruntime computes it) and the model
    deploys: its convs on VTA, its output onnxruntime's, exactly (``exact``: requantized on
    the CPU, as onnxruntime does); the steps taken are said."""
    from vtatune.deploy import compile_model

    qdq, x = quantized(models.conv_residual(), tmp_path, "QDQ")
    model = _halved(qdq, qdq.graph.output[0].name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = compile_model(model, exact=True)
    assert compiled.prepared == ("the input's shape fixed and ONNX shape inference",
                                 "onnxruntime's symbolic shape inference",
                                 "the shape computations folded (onnxruntime)")
    r = compiled.run(x)
    assert [c.op for c in r.offloaded] == ["conv2d", "conv2d"]
    np.testing.assert_array_equal(r.output, ort(model, x))


def test_an_import_that_still_fails_names_the_node_and_operator(tmp_path):
    qdq, x = quantized(models.conv_residual(), tmp_path, "QDQ")
    model = _halved(qdq, qdq.graph.output[0].name, by_data=True)
    with pytest.raises(DeployError) as err:
        _deploy(model, x)
    assert str(err.value) == (
        "TVM cannot import the model: node reshaped_node (Reshape): Reshape requires the "
        "input new shape to be Shape. However, the given one is relax.TensorType (also after "
        "the input's shape fixed and ONNX shape inference, onnxruntime's symbolic shape "
        "inference, the shape computations folded (onnxruntime) (skipped: no shape computed "
        "from shapes and constants alone), constant folding (onnxslim))")


def test_constant_folding_folds_constants_and_keeps_the_qdq_form(tmp_path):
    """onnxslim's step (the last): a constant chain folded, every weight's
    DequantizeLinear kept (the patterns read the int8 weights)."""
    from onnx import helper, numpy_helper

    from vtatune.deploy import PREPARATION

    qdq, _ = quantized(models.conv_residual(), tmp_path, "QDQ")
    g = qdq.graph
    g.initializer.extend([numpy_helper.from_array(np.array(2.0, np.float32), "two"),
                          numpy_helper.from_array(np.array(3.0, np.float32), "three")])
    y = g.output[0].name
    g.node[-1].output[0] = "before"
    g.node.extend([helper.make_node("Add", ["two", "three"], ["five"], name="five"),
                   helper.make_node("Mul", ["before", "five"], [y], name="times_five")])
    (what, fold), = [p for p in PREPARATION if "onnxslim" in p[0]]
    folded = fold(qdq, (1, 16, 8, 8), g.input[0].name)
    ops = [n.op_type for n in folded.graph.node]
    assert "Add" not in ops[-2:] and ops[-1] == "Mul"
    assert ops.count("DequantizeLinear") == [n.op_type for n in g.node].count(
        "DequantizeLinear")
    np.testing.assert_array_equal(ort(folded, _x(qdq)), ort(qdq, _x(qdq)))


def _x(model):
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    return np.random.default_rng(1).standard_normal(shape).astype(np.float32)


def test_a_dynamic_model_saved_as_a_bundle_runs_the_same(tmp_path):
    """The float accumulators' requantization (its passes, its bound) goes into the bundle:
    the bundle, run in a fresh process, gives the built model's output and passes."""
    model, x = dynamic(models.mlp(), tmp_path)
    want, got = bundle_round_trip(model, x, tmp_path)
    assert want.output.dtype == np.float32
    assert [c["passes"] for c in got["offloaded"]] == [3, 3]


def test_check_compares_a_float_output_in_its_own_units(tmp_path, capsys):
    """A dynamically quantized model's output is float (no quantization step to count in):
    ``--check`` gives equal elements and the largest absolute difference per reference,
    exit status 0 (before: every reference 'could not run', status 3)."""
    import json

    import onnx

    from vtatune.cli import main

    model, x = dynamic(CASES["conv_residual"][0](), tmp_path)
    path = tmp_path / "dynamic.onnx"
    onnx.save(model, path)
    out = tmp_path / "y.npy"
    args = ["deploy", str(path), "--tune", "0", "--check", "--output", str(out)]
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    for engine in ("TVM (CPU only)", "onnxruntime", "exact arithmetic (float64)"):
        line = next(line for line in lines if line.startswith(f"against {engine}: "))
        assert line.endswith("apart (a float output: no quantization step to count in)"), line
    assert main([*args, "--json"]) == 0
    check = json.loads(capsys.readouterr().out)["check"]
    y = np.load(out)
    for engine in ("tvm", "onnxruntime", "exact"):
        assert check[engine]["max_steps"] is None and check[engine]["elements"] == y.size
    assert check["tvm"]["max_difference"] == check["onnxruntime"]["max_difference"] == 0.0
