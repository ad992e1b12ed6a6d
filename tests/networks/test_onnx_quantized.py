"""ONNX import of quantized models: onnxruntime's quantizer (QOperator, QDQ, dynamic, a
partly quantized model) read as the float model's layers marked int8; weights followed
through Transpose, Reshape and DequantizeLinear; MatMuls of two activations."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tests.networks._onnx_models import (  # noqa: E402
    float_cnn,
    float_mlp,
    load_network,
    quantize,
    save,
    shapes,
    weight,
)


@pytest.mark.parametrize("strip", [False, True], ids=["value-info", "bare"])
def test_qoperator_layers_are_read_and_marked_int8(tmp_path, strip):
    f = load_network(float_cnn(tmp_path), "pynq")
    path = quantize(tmp_path / "float_cnn.onnx", tmp_path / "q.onnx", "QOperator", strip)
    ops = [(n.domain, n.op_type) for n in onnx.load(str(path)).graph.node]
    assert {("", "QLinearConv"), ("com.microsoft", "QLinearAdd"), ("com.microsoft", "QGemm"),
            ("", "QLinearMatMul")} <= set(ops) and ("", "Conv") not in ops
    q = load_network(path, "pynq")
    assert [(op, shape) for op, shape, _ in shapes(q)] == \
        [(op, shape) for op, shape, _ in shapes(f)] and len(q.tasks) == 4
    assert [(layer.name, layer.operator, layer.quantized) for layer in q.layers] == [
        ("c1_quant", "conv2d", True), ("c2_quant", "conv2d", True),
        ("add_quant", "add", True), ("fc_quant", "dense", True), ("mm_quant", "dense", True)]
    assert q.notes == ("int8: 5 of 5 layers are quantized in the model (QLinearConv, "
                       "QLinearAdd, QGemm, QLinearMatMul)",)
    # the residual add (QLinearAdd) is VTA's on sim, the CPU's on pynq
    assert [(c.name, c.reason.split(":")[0]) for c in q.cpu] == [("add_quant", "residual add")]
    assert [t.operator for t in load_network(path, "sim").tasks] == [
        "conv2d", "conv2d", "add", "gemm", "gemm"]


def test_partly_quantized_model_keeps_every_layer(tmp_path):
    f = load_network(float_cnn(tmp_path), "pynq")
    path = quantize(tmp_path / "float_cnn.onnx", tmp_path / "part.onnx", "QOperator",
                    exclude=["c2"])
    q = load_network(path, "pynq")
    assert [(layer.name, layer.quantized) for layer in q.layers] == [
        ("c1_quant", True), ("c2", False), ("add_quant", True), ("fc_quant", True),
        ("mm_quant", True)]
    assert [shape for _, shape, _ in shapes(q)] == [shape for _, shape, _ in shapes(f)]
    assert q.notes == ("int8: 4 of 5 layers are quantized in the model (QLinearConv, "
                       "QLinearAdd, QGemm, QLinearMatMul)",)


def test_dynamically_quantized_layers(tmp_path):
    """quantize_dynamic: ConvInteger and MatMulInteger (the Gemm becomes one too)."""
    ort_q = pytest.importorskip("onnxruntime.quantization")
    f = load_network(float_cnn(tmp_path), "pynq")
    path = tmp_path / "dyn.onnx"
    ort_q.quantize_dynamic(str(tmp_path / "float_cnn.onnx"), str(path),
                           weight_type=ort_q.QuantType.QUInt8,
                           op_types_to_quantize=["Conv", "MatMul", "Gemm"])
    q = load_network(path, "pynq")
    assert [shape for _, shape, _ in shapes(q)] == [shape for _, shape, _ in shapes(f)]
    assert all(layer.quantized for layer in q.layers) and len(q.layers) == 4
    assert q.notes == ("int8: 4 of 4 layers are quantized in the model (ConvInteger, "
                       "MatMulInteger)",)


def test_qdq_weights_are_followed_to_their_initializers(tmp_path):
    f = load_network(float_mlp(tmp_path), "pynq")
    assert shapes(f) == [("gemm", (1, 64, 128), ("mm1",)), ("gemm", (1, 128, 32), ("mm2",))]
    q = load_network(quantize(tmp_path / "float_mlp.onnx", tmp_path / "q_mlp.onnx", "QDQ"),
                     "pynq")
    assert shapes(q) == shapes(f)
    assert [layer.quantized for layer in q.layers] == [True, True]
    assert q.notes == ("int8: 2 of 2 layers are quantized in the model (QDQ MatMul)",)
    c = load_network(quantize(float_cnn(tmp_path), tmp_path / "q_cnn.onnx", "QDQ"), "pynq")
    assert [(layer.name, layer.quantized) for layer in c.layers] == [
        ("c1", True), ("c2", True), ("add", True), ("fc", True), ("mm", True)]
    assert shapes(c) == shapes(load_network(tmp_path / "float_cnn.onnx", "pynq"))


@pytest.mark.parametrize("path_nodes, stored", [
    ([helper.make_node("Transpose", ["wt"], ["w"], perm=[1, 0])], (32, 64)),
    ([helper.make_node("Reshape", ["wt", "shape"], ["w"])], (64 * 32,)),
    ([helper.make_node("DequantizeLinear", ["wt", "scale", "zero"], ["wd"]),
      helper.make_node("Transpose", ["wd"], ["w"], perm=[1, 0])], (32, 64)),
], ids=["transpose", "reshape", "dequantize-transpose"])
def test_matmul_weight_through_transpose_or_reshape(tmp_path, path_nodes, stored):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])
    int8 = path_nodes[0].op_type == "DequantizeLinear"
    wt = numpy_helper.from_array(np.zeros(stored, np.int8 if int8 else np.float32), "wt")
    inits = [wt, numpy_helper.from_array(np.array([64, 32], np.int64), "shape"),
             numpy_helper.from_array(np.array(0.5, np.float32), "scale"),
             numpy_helper.from_array(np.array(0, np.int8), "zero")]
    nodes = [*path_nodes, helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")]
    net = load_network(save(tmp_path, nodes, [x], inits, "mlp"), "pynq")
    assert shapes(net) == [("gemm", (1, 64, 32), ("mm",))] and net.notes == ()
    # the activation is float: a weight-only dequantized layer is not an int8 layer
    assert net.layers[0].quantized is False


def test_matmul_of_two_activations_is_a_batch_matmul(tmp_path):
    """Attention's Q.K^T: one GEMM per leading index (2 here), the second operand its
    weight; the projection after it a dense layer of the folded rows."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64, 16])
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["x", "xt"], ["att"], name="att"),
             helper.make_node("MatMul", ["att", "w"], ["y"], name="proj")]
    net = load_network(save(tmp_path, nodes, [x], [weight("w", 64, 32)], "attn"),
                       "pynq")
    assert net.notes == ()
    att = net.layers[0]
    assert (att.operator, att.heads, att.describe(), att.macs) == (
        "batch_matmul", 2, "batch_matmul 2x 64x16 * 16x64", 2 * 64 * 16 * 64)
    # two GEMMs of one task; the projection's rows are both heads' 2 x 64
    assert shapes(net) == [("gemm", (64, 16, 64), ("att",)), ("gemm", (128, 64, 32), ("proj",))]
    assert [t.multiplicity for t in net.tasks] == [2, 1]
    # the deployed model runs each head's GEMM as a step of its own
    assert [s.name for s in net.steps if s.task is not None] == ["att#0", "att#1", "proj"]


def test_matmul_of_activations_that_broadcast_stays_on_the_cpu(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [16, 64])
    nodes = [helper.make_node("MatMul", ["x", "y"], ["att"], name="att"),
             helper.make_node("MatMul", ["att", "w"], ["z"], name="proj")]
    net = load_network(save(tmp_path, nodes, [x, y], [weight("w", 64, 32)], "bcast"), "pynq")
    assert [(c.name, c.operator, c.reason) for c in net.cpu] == [
        ("att", "batch_matmul", "matmul of activations whose leading axes differ (VTA "
                                "multiplies matrices of equal leading axes, one GEMM each)")]
