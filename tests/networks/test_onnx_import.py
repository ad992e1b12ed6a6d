"""ONNX import: layers and shapes from small models built with onnx.helper (no downloads),
quantized with onnxruntime's quantizer where it is installed; torchvision exports only in
slow tests, when torch is installed."""

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from vtatune.cli import main  # noqa: E402
from vtatune.networks import (  # noqa: E402
    DEPLOYED_SHIFT,
    CpuLayer,
    CpuOp,
    NetworkError,
    default_network_log,
    layers_from_model,
    network_from_logs,
)
from vtatune.networks import load_network as _load_network  # noqa: E402
from vtatune.workloads import AddWorkload, Conv2dWorkload, GemmWorkload, deployed  # noqa: E402


def load_network(network, hw=None, **kwargs):
    """This module checks the reader as TVM v0.14 deploys a model (its graph packing's
    placement: channel counts in whole blocks), as the catalogue has it; an ONNX model's
    default placement, vtatune deploy's, is checked in test_deploy_placement."""
    return _load_network(network, hw, placement="tvm014", **kwargs)

pytestmark = pytest.mark.usefixtures("compiled_engines")  # exact CLI output: no first-run notice


def weight(name, *shape, seed=None):
    data = np.zeros(shape, dtype=np.float32) if seed is None else \
        np.random.RandomState(seed).uniform(-1, 1, shape).astype(np.float32)
    return numpy_helper.from_array(data, name)


def make(nodes, inputs, inits, name="net", opset=13, domains=()):
    outs = [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, None)]
    graph = helper.make_graph(nodes, name, inputs, outs, inits)
    opsets = [helper.make_opsetid("", opset), *(helper.make_opsetid(d, 1) for d in domains)]
    return helper.make_model(graph, opset_imports=opsets)


def save(tmp_path, nodes, inputs, inits, name="net", opset=13, domains=()):
    """Write the model to ``tmp_path/<name>.onnx``; the output's shape is left to shape
    inference (else 4 unknown dimensions)."""
    model = onnx.shape_inference.infer_shapes(make(nodes, inputs, inits, name, opset, domains))
    out = model.graph.output[0].type.tensor_type
    if not out.HasField("shape"):  # the checker wants one: 4 dims, unknown
        out.shape.dim.extend([onnx.TensorShapeProto.Dimension() for _ in range(4)])
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    return path


def small_cnn(tmp_path, batch="N"):
    """conv 3->16 (CPU), two identical conv 16->32 3x3 (one task), depthwise (CPU), grouped
    conv (group 2, 16 channels each), ConvTranspose, flatten + Gemm 32*4*4 -> 64, MatMul."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 16, 16])
    nodes = [
        helper.make_node("Conv", ["x", "w0"], ["a"], pads=[1, 1, 1, 1], name="stem"),
        helper.make_node("Conv", ["a", "w1"], ["b"], pads=[1, 1, 1, 1], strides=[2, 2],
                         name="c1"),
        helper.make_node("Conv", ["b", "w2"], ["c"], pads=[1, 1, 1, 1], name="c2"),
        helper.make_node("Conv", ["c", "w2b"], ["d"], pads=[1, 1, 1, 1], name="c3"),
        helper.make_node("Conv", ["d", "wdw"], ["e"], pads=[1, 1, 1, 1], group=32,
                         name="dw"),
        helper.make_node("Conv", ["e", "wg"], ["f"], pads=[1, 1, 1, 1], group=2, name="g"),
        helper.make_node("ConvTranspose", ["f", "wt"], ["g_"], pads=[1, 1, 1, 1],
                         strides=[2, 2], name="up"),
        helper.make_node("Conv", ["g_", "w5"], ["h"], strides=[4, 4], name="down"),
        helper.make_node("Flatten", ["h"], ["flat"]),
        helper.make_node("Gemm", ["flat", "wfc"], ["fc"], transB=1, name="fc"),
        helper.make_node("MatMul", ["fc", "wmm"], ["out"], name="mm"),
    ]
    inits = [weight("w0", 16, 3, 3, 3), weight("w1", 32, 16, 3, 3),
             weight("w2", 32, 32, 3, 3), weight("w2b", 32, 32, 3, 3),
             weight("wdw", 32, 1, 3, 3), weight("wg", 32, 16, 3, 3),
             weight("wt", 32, 16, 4, 4), weight("w5", 32, 16, 1, 1),
             weight("wfc", 64, 32 * 4 * 4), weight("wmm", 64, 48)]
    return save(tmp_path, nodes, [x], inits, "small_cnn")


def shapes(net):
    """Each task's workload shape (names aside) and layers, in order."""
    return [(t.operator, tuple(t.workload.shape_args().values()), t.layers) for t in net.tasks]


#: What a conv or dense layer with no ReLU after it fuses when deployed.
EPI = deployed(DEPLOYED_SHIFT, relu=False)


def test_layers_shapes_and_packing(tmp_path):
    net = load_network(small_cnn(tmp_path), "pynq")
    assert net.name == "small_cnn"
    assert net.notes == ("input x: dynamic batch (N) set to 1",)
    got = [(t.workload, t.multiplicity, t.layers) for t in net.tasks]
    assert got[0] == (Conv2dWorkload(1, 16, 16, 16, 32, 3, 1, 2, "small_cnn.T1", EPI), 1, ("c1",))
    assert got[1] == (Conv2dWorkload(1, 8, 8, 32, 32, 3, 1, 1, "small_cnn.T2", EPI), 2,
                      ("c2", "c3"))
    ops = [(t.operator, t.layers) for t in net.tasks]
    assert ops[2:] == [("group_conv2d", ("g",)), ("conv2d_transpose", ("up",)),
                       ("conv2d", ("down",)), ("gemm", ("fc",)), ("gemm", ("mm",))]
    assert net.tasks[2].workload.groups == 2
    assert net.tasks[3].workload.out_channels == 16 and net.tasks[3].workload.height == 8
    assert net.tasks[5].workload == GemmWorkload(1, 512, 64, "small_cnn.T6", EPI)
    assert net.tasks[6].workload == GemmWorkload(1, 64, 48, "small_cnn.T7", EPI)
    assert [(c.name, c.reason.split(" (")[0]) for c in net.cpu] == [
        ("stem", "3 input channels are not a multiple of BLOCK_IN 16"),
        ("dw", "depthwise convolution")]
    assert [layer.name for layer in net.layers] == [
        "stem", "c1", "c2", "c3", "dw", "g", "up", "down", "fc", "mm"]
    assert not any(layer.quantized for layer in net.layers)


def test_same_auto_pad_and_batch(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 32, 14, 14])
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], auto_pad="SAME_UPPER", name="c")]
    path = save(tmp_path, nodes, [x], [weight("w", 64, 32, 3, 3)], "same")
    net = load_network(path, "pynq")
    assert net.tasks[0].workload == Conv2dWorkload(2, 14, 14, 32, 64, 3, 1, 1, "same.T1", EPI)
    assert net.notes == ()


def test_cli_lists_an_onnx_model(tmp_path, capsys):
    path = small_cnn(tmp_path)
    assert main(["network", str(path), "--list", "--json", "--placement", "tvm014"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["network"] == "small_cnn" and len(d["tasks"]) == 7
    assert [c["name"] for c in d["cpu"]] == ["stem", "dw"]
    assert main(["network", str(path), "--list", "--json"]) == 0  # as vtatune deploy runs it
    d = json.loads(capsys.readouterr().out)
    assert d["placement"] == "deploy" and [c["name"] for c in d["cpu"]] == ["dw"]
    assert [c["quantized"] for c in d["cpu"]] == [False]
    assert d["int8_layers"] == []


@pytest.mark.parametrize("content, message", [
    (b"not a protobuf at all \xff\xfe", "not an ONNX model"),
    (None, "no such file"),
])
def test_unreadable_model_is_one_line_exit_2(tmp_path, capsys, content, message):
    path = tmp_path / "bad.onnx"
    if content is not None:
        path.write_bytes(content)
    assert main(["network", str(path), "--list"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and message in err
    assert err.startswith("vtatune: error: ")


def test_model_without_compute_layers(tmp_path, capsys):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    path = save(tmp_path, [helper.make_node("Relu", ["x"], ["y"])], [x], [], "relu")
    message = "no Conv, ConvTranspose, Gemm or MatMul layer (float or quantized) to place"
    with pytest.raises(NetworkError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_network(path)
    assert main(["network", str(path)]) == 2
    assert "no Conv, ConvTranspose" in capsys.readouterr().err


def test_invalid_graph_is_rejected(tmp_path):
    # A node reading a tensor nothing defines: the checker refuses the graph.
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 4, 4])
    graph = helper.make_graph([helper.make_node("Conv", ["x", "nowhere"], ["y"])], "g", [x],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    path = tmp_path / "g.onnx"
    onnx.save(helper.make_model(graph), str(path))
    with pytest.raises(NetworkError, match="invalid ONNX model"):
        load_network(path)


# --- quantized models (onnxruntime's quantizer) ----------------------------------------------
def float_cnn(tmp_path, batch=1):
    """conv 16->32 (+bias, ReLU), conv 32->32, residual add, flatten, Gemm 2048->64,
    MatMul 64->32: what onnxruntime quantizes into QLinearConv, QLinearAdd, QGemm,
    QLinearMatMul (QOperator) or DequantizeLinear pairs (QDQ)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 16, 8, 8])
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["a"], pads=[1, 1, 1, 1], name="c1"),
             helper.make_node("Relu", ["a"], ["r"], name="relu"),
             helper.make_node("Conv", ["r", "w2"], ["b"], pads=[1, 1, 1, 1], name="c2"),
             helper.make_node("Add", ["b", "r"], ["s"], name="add"),
             helper.make_node("Flatten", ["s"], ["f"], name="flat"),
             helper.make_node("Gemm", ["f", "wg", "bg"], ["g"], transB=1, name="fc"),
             helper.make_node("MatMul", ["g", "wm"], ["y"], name="mm")]
    inits = [weight("w1", 32, 16, 3, 3, seed=1), weight("b1", 32, seed=2),
             weight("w2", 32, 32, 3, 3, seed=3), weight("wg", 64, 32 * 64, seed=4),
             weight("bg", 64, seed=5), weight("wm", 64, 32, seed=6)]
    return save(tmp_path, nodes, [x], inits, "float_cnn", opset=17)


def float_mlp(tmp_path):
    """MatMul 64->128, bias, ReLU, MatMul 128->32: two dense layers."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"),
             helper.make_node("Add", ["h", "b1"], ["hb"], name="bias"),
             helper.make_node("Relu", ["hb"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "w2"], ["y"], name="mm2")]
    inits = [weight("w1", 64, 128, seed=1), weight("b1", 128, seed=2),
             weight("w2", 128, 32, seed=3)]
    return save(tmp_path, nodes, [x], inits, "float_mlp", opset=17)


def quantize(src, dst, fmt, strip_value_info=False, exclude=(), samples=2, symmetric=False,
             activations="QInt8"):
    """``src`` quantized by onnxruntime's quantize_static (int8 weights, ``samples`` seeded
    calibration inputs; ``symmetric`` activations keep the Relu nodes)."""
    ort_q = pytest.importorskip("onnxruntime.quantization")
    model = onnx.load(str(src), load_external_data=False)
    x = model.graph.input[0]
    shape = [d.dim_value for d in x.type.tensor_type.shape.dim]

    class Reader(ort_q.CalibrationDataReader):
        def __init__(self):
            self.feeds = iter([{x.name: np.random.RandomState(i).randn(*shape)
                                .astype(np.float32)} for i in range(samples)])

        def get_next(self):
            return next(self.feeds, None)

    ort_q.quantize_static(str(src), str(dst), Reader(),
                          quant_format=getattr(ort_q.QuantFormat, fmt),
                          activation_type=getattr(ort_q.QuantType, activations),
                          weight_type=ort_q.QuantType.QInt8, nodes_to_exclude=list(exclude),
                          extra_options={"ActivationSymmetric": symmetric})
    if strip_value_info:  # as a model written without the float model's shapes
        model = onnx.load(str(dst))
        del model.graph.value_info[:]
        onnx.save(model, str(dst))
    return dst


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


# --- shapes that ONNX inference alone cannot find ---------------------------------------------
def chunk_nodes(split_op):
    """torch's ``x.chunk(2, dim=1)`` as its exporter writes it: the halves' bounds computed
    from Shape -> Gather -> Add -> Div -> Mul (Slice), or a computed ``split`` (Split); a
    conv on the second half."""
    c = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
         (("one", [1]), ("two", [2]), ("zero", [0]))]
    nodes = [helper.make_node("Constant", [], [t.name], value=t) for t in c]
    nodes += [helper.make_node("Conv", ["x", "w0"], ["a"], name="c0"),
              helper.make_node("Shape", ["a"], ["shape"]),
              helper.make_node("Gather", ["shape", "one"], ["channels"]),
              helper.make_node("Add", ["channels", "one"], ["plus"]),
              helper.make_node("Div", ["plus", "two"], ["half"]),
              helper.make_node("Mul", ["half", "one"], ["end1"]),
              helper.make_node("Mul", ["half", "two"], ["end2"])]
    if split_op == "Slice":
        nodes.append(helper.make_node("Slice", ["a", "end1", "end2", "one"], ["second"]))
    else:
        nodes += [helper.make_node("Concat", ["end1", "end1"], ["split"], axis=0),
                  helper.make_node("Split", ["a", "split"], ["first", "second"], axis=1)]
    return nodes + [helper.make_node("Conv", ["second", "w1"], ["y"], name="c1")]


@pytest.mark.parametrize("split_op", ["Slice", "Split"])
def test_shape_arithmetic_is_folded(tmp_path, split_op):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16, 8, 8])
    path = save(tmp_path, chunk_nodes(split_op), [x],
                [weight("w0", 32, 16, 1, 1), weight("w1", 16, 16, 1, 1)], "chunk")
    net = load_network(path, "pynq", batch=2)
    assert shapes(net) == [("conv2d", (2, 8, 8, 16, 32, 1, 0, 1), ("c0",)),
                           ("conv2d", (2, 8, 8, 16, 16, 1, 0, 1), ("c1",))]
    assert net.cpu == ()


def test_unknown_shapes_send_the_layer_to_the_cpu_naming_the_node(tmp_path, capsys):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 8, 8])
    sizes = helper.make_tensor_value_info("sizes", TensorProto.INT64, [4])
    nodes = [helper.make_node("Conv", ["x", "w"], ["a"], name="c1"),
             helper.make_node("Mystery", ["a"], ["m"], name="m1", domain="com.example"),
             helper.make_node("Conv", ["m", "w"], ["b"], name="c2"),
             helper.make_node("Resize", ["a", "", "", "sizes"], ["up"], name="up"),
             helper.make_node("Conv", ["up", "w"], ["y"], name="c3")]
    path = save(tmp_path, nodes, [x, sizes], [weight("w", 16, 16, 1, 1)], "custom",
                domains=["com.example"])
    net = load_network(path, "pynq")
    assert shapes(net) == [("conv2d", (1, 8, 8, 16, 16, 1, 0, 1), ("c1",))]
    assert [(c.name, c.shape, c.reason) for c in net.cpu] == [
        ("c2", "Conv ?, weight 16x16x1x1", "the shape of input m is unknown: shape inference "
         "stops at Mystery m1 (domain com.example)"),
        ("c3", "Conv ?x?x?x?, weight 16x16x1x1", "the shape of input up is unknown: shape "
         "inference stops at Resize up")]
    assert main(["network", str(path), "--list"]) == 0
    assert "c2  Conv ?, weight 16x16x1x1: the shape of input m is unknown" in \
        capsys.readouterr().out


def test_dynamic_height_names_the_graph_input(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, "H", 4])
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="c")]
    path = save(tmp_path, nodes, [x], [weight("w", 16, 16, 1, 1)], "dyn")
    net = load_network(path)
    assert net.tasks == () and net.cpu == (CpuLayer(
        "c", "conv2d", "Conv 1x16xHx4, weight 16x16x1x1",
        "the shape of input x is unknown: graph input x has dynamic dimensions 1x16xHx4"),)


def test_conv1d_and_conv3d_go_to_the_cpu(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 100])
    v = helper.make_tensor_value_info("v", TensorProto.FLOAT, [1, 16, 4, 8, 8])
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1], name="c1d"),
             helper.make_node("Conv", ["v", "w3"], ["b"], name="c3d"),
             helper.make_node("Flatten", ["b"], ["f"]),
             helper.make_node("Gemm", ["f", "wfc"], ["y"], name="fc")]
    inits = [weight("w1", 32, 16, 3), weight("w3", 16, 16, 1, 1, 1), weight("wfc", 4096, 64)]
    net = load_network(save(tmp_path, nodes, [x, v], inits, "nd"), "pynq")
    assert [(c.name, c.operator, c.reason) for c in net.cpu] == [
        ("c1d", "conv1d", "1-D convolution (VTA's templates take 2-D NCHW convolutions)"),
        ("c3d", "conv3d", "3-D convolution (VTA's templates take 2-D NCHW convolutions)")]
    assert shapes(net) == [("gemm", (1, 4096, 64), ("fc",))]


def conv_transpose(tmp_path, size, k, s, name, **attrs):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, size, size])
    nodes = [helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[s, s], name="up",
                              **attrs)]
    return save(tmp_path, nodes, [x], [weight("w", 16, 16, k, k, seed=0)], name)


# (input size, kernel, stride, attributes) -> the pads ONNX's formula gives.
CONV_TRANSPOSE_CASES = [
    (7, 4, 2, {"auto_pad": "SAME_UPPER"}, (1, 1, 1, 1)),
    (7, 4, 2, {"auto_pad": "SAME_LOWER"}, (1, 1, 1, 1)),
    (7, 3, 2, {"auto_pad": "SAME_UPPER"}, (0, 0, 1, 1)),
    (7, 3, 2, {"auto_pad": "SAME_LOWER"}, (1, 1, 0, 0)),
    (7, 4, 2, {"output_shape": [14, 14]}, (1, 1, 1, 1)),
    (7, 4, 2, {"output_shape": [15, 15]}, (1, 1, 0, 0)),
    (7, 3, 2, {"output_shape": [14, 14], "output_padding": [1, 1]}, (1, 1, 1, 1)),
]


@pytest.mark.parametrize("size, k, s, attrs, pads", CONV_TRANSPOSE_CASES)
def test_conv_transpose_padding_follows_onnx(tmp_path, size, k, s, attrs, pads):
    net = load_network(conv_transpose(tmp_path, size, k, s, "ct", **attrs), "pynq")
    layer = net.layers[0]
    assert layer.pad == pads
    if len(set(pads)) == 1:
        assert net.tasks[0].operator == "conv2d_transpose"
        assert net.tasks[0].workload.out_height == \
            attrs.get("output_shape", [size * s])[0]
    else:
        assert net.cpu[0].reason.startswith("asymmetric padding")


@pytest.mark.parametrize("size, k, s, attrs", [case[:4] for case in CONV_TRANSPOSE_CASES])
def test_conv_transpose_pads_match_onnxruntime(tmp_path, size, k, s, attrs):
    """onnxruntime computes the same output from the model as from the pads vtatune reads."""
    ort = pytest.importorskip("onnxruntime")
    a = conv_transpose(tmp_path, size, k, s, "implicit", **attrs)
    pads = load_network(a, "pynq").layers[0].pad
    explicit = {"output_padding": attrs["output_padding"]} if "output_padding" in attrs \
        else {}
    b = conv_transpose(tmp_path, size, k, s, "explicit", pads=list(pads), **explicit)
    feed = {"x": np.random.RandomState(1).randn(1, 16, size, size).astype(np.float32)}
    ya, yb = (ort.InferenceSession(str(p), providers=["CPUExecutionProvider"])
              .run(None, feed)[0] for p in (a, b))
    assert ya.shape == yb.shape and np.allclose(ya, yb, atol=1e-5)


def test_conv_transpose_output_shape_too_large(tmp_path):
    net = load_network(conv_transpose(tmp_path, 7, 4, 2, "big", output_shape=[20, 20]),
                       "pynq")
    assert net.cpu[0].reason == "output size 20x20 needs negative padding (-4x-4 in all)"


# --- batch ------------------------------------------------------------------------------------
def test_dynamic_batch_takes_the_batch_asked(tmp_path, capsys):
    path = small_cnn(tmp_path)
    model = onnx.load(str(path))
    net = layers_from_model(model, str(path), batch=4)
    assert net.notes == ("input x: dynamic batch (N) set to 4",)
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "N"  # unchanged
    assert main(["network", str(path), "--list", "--json", "--hw", "4x8", "--batch", "4",
                 "--placement", "tvm014"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["tasks"][0]["shape"]["batch"] == 4 and d["notes"] == ["input x: dynamic batch (N) set "
                                                             "to 4"]
    # Batch 1 does not fill BATCH 4: as TVM v0.14 places it, the same model keeps no layer on
    # VTA; as deploy runs it, its dense layers' single row is padded with zero rows to 4.
    assert load_network(path, "4x8").tasks == ()
    assert [(t.operator, t.workload.batch, t.layers) for t in _load_network(path, "4x8").tasks
            if t.operator == "gemm"] == [("gemm", 4, ("fc",)), ("gemm", 4, ("mm",))]
    assert len(load_network(path, "4x8", batch=4).tasks) == 7


def test_fixed_batch_other_than_asked_is_refused(tmp_path, capsys):
    path = float_cnn(tmp_path, batch=2)
    assert load_network(path, "pynq", batch=2).tasks[0].workload.batch == 2
    assert load_network(path, "pynq").tasks[0].workload.batch == 2
    with pytest.raises(NetworkError, match=r"input x has a fixed batch of 2, not 4 \(export "
                                           "the model with a dynamic batch axis"):
        load_network(path, "pynq", batch=4)
    assert main(["network", str(path), "--list", "--batch", "4"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "input x has a fixed batch of 2, not 4" in err


# --- files ------------------------------------------------------------------------------------
def test_weights_are_not_read(tmp_path):
    """A missing external-data file does not matter: only shapes are read."""
    model = onnx.load(str(float_cnn(tmp_path)))
    path = tmp_path / "external.onnx"
    onnx.save(model, str(path), save_as_external_data=True, location="external.bin")
    (tmp_path / "external.bin").unlink()
    net = load_network(path, "pynq")
    assert shapes(net) == shapes(load_network(tmp_path / "float_cnn.onnx", "pynq"))


def test_small_external_constants_are_read_when_there(tmp_path):
    """Saved with size_threshold=0, a Reshape's target is external too: read from its file
    when it is there; when it is not, the layer after it goes to the CPU saying where."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 4, 4])
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "w"], ["y"], name="fc")]
    inits = [numpy_helper.from_array(np.array([1, 128], np.int64), "shape"),
             weight("w", 128, 64)]
    model = make(nodes, [x], inits, "ext")
    model.graph.output[0].type.tensor_type.shape.SetInParent()
    path = tmp_path / "ext.onnx"
    onnx.save(model, str(path), save_as_external_data=True, location="ext.bin",
              size_threshold=0)
    assert shapes(load_network(path, "pynq")) == [("gemm", (1, 128, 64), ("fc",))]
    (tmp_path / "ext.bin").unlink()
    assert load_network(path, "pynq").cpu[0].reason == \
        "the shape of input f is unknown: shape inference stops at Reshape flatten"


def two_exports(tmp_path):
    """Two models whose graphs have torch's name, main_graph, and different shapes."""
    paths = []
    for stem, channels in (("first", 16), ("second", 32)):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 8, 8])
        nodes = [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], name="c")]
        paths.append(save(tmp_path, nodes, [x], [weight("w", channels, 16, 3, 3)],
                          "main_graph"))
        paths[-1] = paths[-1].rename(tmp_path / f"{stem}.onnx")
    return paths


def test_networks_are_named_after_their_files(tmp_path):
    first, second = (load_network(p, "pynq") for p in two_exports(tmp_path))
    assert (first.name, second.name) == ("first", "second")
    assert first.tasks[0].name == "first.T1"
    assert default_network_log(first) != default_network_log(second)
    assert load_network(small_cnn(tmp_path).rename(tmp_path / "my model.v2.onnx")).name == \
        "my_model_v2"


def test_tuning_two_exports_in_one_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for path in two_exports(tmp_path):
        assert main(["network", str(path), "--trials", "2", "--seed", "0", "--quiet"]) == 0
    assert sorted(p.name for p in (tmp_path / "runs").glob("*.jsonl")) == [
        "first-pynq_1x16_i8w8a32_15_15_18_17.jsonl",
        "second-pynq_1x16_i8w8a32_15_15_18_17.jsonl"]


# --- the deployed model: fused ReLUs, residual adds, the CPU's nodes -------------------------
def resnet18_model(batch=1, seed=0):
    """torchvision's resnet18 as its ONNX export has it before BN folding: conv + BN (+ ReLU),
    max pool, basic blocks (main path, then the downsample shortcut, then add + ReLU),
    global average pool, flatten, Gemm. Seeded random weights."""
    rng = np.random.RandomState(seed)
    nodes, inits = [], []

    def init(name, array):
        inits.append(numpy_helper.from_array(array.astype(np.float32), name))
        return name

    def conv_bn(x, conv, bn, ci, co, k, stride, relu):
        w = init(f"{conv}.weight", rng.randn(co, ci, k, k) * np.sqrt(2 / (ci * k * k)))
        nodes.append(helper.make_node("Conv", [x, w], [f"{conv}.out"], kernel_shape=[k, k],
                                      pads=[k // 2] * 4, strides=[stride] * 2, name=conv))
        params = [init(f"{bn}.{p}", v) for p, v in (
            ("weight", 1 + 0.1 * rng.rand(co)), ("bias", 0.1 * rng.randn(co)),
            ("running_mean", 0.1 * rng.randn(co)), ("running_var", 1 + 0.1 * rng.rand(co)))]
        nodes.append(helper.make_node("BatchNormalization", [f"{conv}.out", *params],
                                      [f"{bn}.out"], name=bn))
        if not relu:
            return f"{bn}.out"
        nodes.append(helper.make_node("Relu", [f"{bn}.out"], [f"{conv}.relu"]))
        return f"{conv}.relu"

    x = conv_bn("input", "conv1", "bn1", 3, 64, 7, 2, True)
    nodes.append(helper.make_node("MaxPool", [x], ["pool"], kernel_shape=[3, 3], pads=[1] * 4,
                                  strides=[2, 2], name="maxpool"))
    x, ci = "pool", 64
    for stage, width in enumerate((64, 128, 256, 512)):
        for b in range(2):
            stride, pre = (2 if stage and not b else 1), f"layer{stage + 1}.{b}"
            y = conv_bn(x, f"{pre}.conv1", f"{pre}.bn1", ci, width, 3, stride, True)
            y = conv_bn(y, f"{pre}.conv2", f"{pre}.bn2", width, width, 3, 1, False)
            shortcut = x if stride == 1 and ci == width else conv_bn(
                x, f"{pre}.downsample.0", f"{pre}.downsample.1", ci, width, 1, stride, False)
            nodes += [helper.make_node("Add", [y, shortcut], [f"{pre}.sum"], name=f"{pre}.add"),
                      helper.make_node("Relu", [f"{pre}.sum"], [f"{pre}.out"])]
            x, ci = f"{pre}.out", width
    nodes += [helper.make_node("GlobalAveragePool", [x], ["gap"], name="avgpool"),
              helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"),
              helper.make_node("Gemm", ["flat", init("fc.weight", 0.05 * rng.randn(1000, 512)),
                                        init("fc.bias", 0.01 * rng.randn(1000))],
                               ["logits"], transB=1, name="fc")]
    graph = helper.make_graph(
        nodes, "main_graph",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, 224, 224])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 1000])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def resnet18_onnx(tmp_path_factory):
    path = tmp_path_factory.mktemp("resnet18") / "resnet18_onnx.onnx"
    onnx.save(resnet18_model(), str(path))
    return path


def anonymous(workload):
    return replace(workload, name="")


def deployed_vta(net):
    """The network's tasks (workload with its epilogue, multiplicity) and the VTA steps in
    order, the names aside."""
    return ([(anonymous(t.workload), t.multiplicity) for t in net.tasks],
            [anonymous(s.workload) for s in net.steps if s.workload is not None])


def cpu_gaps(net):
    """How many CPU steps come before each VTA step, and after the last."""
    gaps = [0]
    for step in net.steps:
        if step.workload is None:
            gaps[-1] += 1
        else:
            gaps.append(0)
    return gaps


@pytest.mark.parametrize("hw", ["sim", "pynq"])
def test_resnet18_onnx_deploys_as_the_catalogue(resnet18_onnx, hw):
    ref, net = load_network("resnet18", hw), load_network(resnet18_onnx, hw)
    assert deployed_vta(net) == deployed_vta(ref)
    assert len(net.tasks) == (14 if hw == "sim" else 10)  # the residual adds' 4 on sim
    assert cpu_gaps(net) == cpu_gaps(ref)
    # the stem and max pool in float, then pack, quantize, cast to int8: as TVM's deploy flow
    head = [(s.name, s.cpu.ops if isinstance(s.cpu, CpuOp) else s.cpu.operator, s.cpu.shape)
            for s in net.steps[:5]]
    assert head == [
        ("conv1", "conv2d", "conv2d 1x3x224x224 -> 64, k7 p3 s2"),
        ("maxpool", "MaxPool", "1x64x112x112 -> 1x64x56x56 float32"),
        ("layer1.0.conv1.pack", "reshape+transpose", "1x64x56x56 float32 packed"),
        ("layer1.0.conv1.quantize", "multiply+round+clip", "1x64x56x56 float32"),
        ("layer1.0.conv1.cast", "cast", "1x64x56x56 float32 -> int8")]
    # layer1.0's shortcut is the quantized max pool output: cast from float32 to int32 for
    # the add (TVM v0.14: a CPU cast float32 -> int32, then the add reads int32)
    cast, add = net.steps[7:9]
    assert (cast.name, cast.cpu.shape, cast.cpu.bytes) == (
        "layer1.0.add.cast", "1x64x56x56 float32 -> int32", 64 * 56 * 56 * 8)
    assert add.name == "layer1.0.add"
    assert [(layer.name, layer.rhs_bits) for layer in net.layers if layer.operator == "add"
            ][:2] == [("layer1.0.add", 32), ("layer1.1.add", 8)]
    assert [(s.name, s.cpu.ops, s.cpu.bytes) for s in net.steps[-4:-1]] == [
        ("avgpool.unpack", "cast+transpose+reshape", 512 * 49 * 5),
        ("avgpool", "GlobalAveragePool", 512 * 50 * 4),
        ("avgpool.dequantize", "cast+multiply", 512 * 8)]
    assert net.steps[-1].name == "fc" and net.notes == ()


@pytest.mark.parametrize("fmt, kinds", [("QDQ", "QDQ Conv, QDQ Add, QDQ Gemm"),
                                        ("QOperator", "QLinearConv, QLinearAdd, QGemm")])
def test_quantized_resnet18_deploys_the_same(resnet18_onnx, tmp_path, fmt, kinds):
    """onnxruntime's quantize_static (int8, symmetric activations: its Relu nodes stay)
    lists the nodes in its own order: the deployed model is the float one's."""
    path = quantize(resnet18_onnx, tmp_path / f"resnet18_{fmt}.onnx", fmt, samples=1,
                    symmetric=True)
    for hw in ("sim", "pynq"):
        ref, net = load_network("resnet18", hw), load_network(path, hw)
        assert deployed_vta(net) == deployed_vta(ref)
        assert all(mine >= 1 for mine, theirs in zip(cpu_gaps(net), cpu_gaps(ref), strict=True)
                   if theirs)
        assert net.notes == (f"int8: 29 of 29 layers are quantized in the model ({kinds})",)
    # the model's own quantize of its input and dequantize of its output run on the CPU
    assert [(s.cpu.ops, s.cpu.shape) for s in (net.steps[0], net.steps[-1])] == [
        ("QuantizeLinear", "1x3x224x224 -> 1x3x224x224 int8"),
        ("DequantizeLinear", "1x1000 -> 1x1000 float32")]


DATA = Path(__file__).resolve().parent / "data"


@pytest.mark.slow
@pytest.mark.parametrize("case", ["sim-fallback", "pynq-fallback", "pynq-vtatunelog"])
def test_resnet18_onnx_counts_as_tvms_fsim(resnet18_onnx, case):
    """Read from ONNX, ResNet-18 runs on VTA what TVM v0.14 ran deploying it (fsim's
    counters over the whole model; tests/networks/test_deployed.py for the data)."""
    ref = json.loads((DATA / "tvm014_resnet18.json").read_text())["cases"][case]
    target, schedules = case.split("-")
    logs = [DATA / "resnet18-f4385aa.autotvm.log"] if schedules == "vtatunelog" else []
    assert network_from_logs(resnet18_onnx, logs, target).deployed.counters == \
        ref["whole_network_fsim"]


def conv_then(tmp_path, after, inits=(), opset=13, name="fused"):
    """conv 16->32 (3x3) on 1x16x8x8, then the nodes ``after`` (reading ``c``), then a
    conv 32->32 on the last output (so the tail is a layer)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 8, 8])
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c"], pads=[1] * 4, name="c1"), *after]
    nodes.append(helper.make_node("Conv", [nodes[-1].output[0], "w2"], ["y"], pads=[1] * 4,
                                  name="c2"))
    return save(tmp_path, nodes, [x], [weight("w1", 32, 16, 3, 3, seed=1),
                                       weight("w2", 32, 32, 3, 3, seed=2), *inits], name, opset)


def const(name, *values, shape=None):
    data = np.array(values, np.float32)
    return numpy_helper.from_array(data if shape is None else data.reshape(shape), name)


def bn_params():
    return [const(f"bn.{p}", *[v] * 32) for p, v in (("s", 1.5), ("b", 0.1), ("m", 0.0),
                                                      ("v", 1.0))]


@pytest.mark.parametrize("after, inits, opset, relu", [
    ([helper.make_node("Relu", ["c"], ["r"])], [], 13, True),
    ([helper.make_node("Clip", ["c", "lo", "hi"], ["r"])], [const("lo", 0), const("hi", 6)],
     13, True),  # ReLU6
    ([helper.make_node("Clip", ["c", "lo"], ["r"])], [const("lo", 0)], 13, True),
    ([helper.make_node("Clip", ["c"], ["r"], min=0.0, max=6.0)], [], 6, True),  # attributes
    ([helper.make_node("BatchNormalization", ["c", "bn.s", "bn.b", "bn.m", "bn.v"], ["n"]),
      helper.make_node("Relu", ["n"], ["r"])], bn_params(), 13, True),
    ([helper.make_node("Add", ["c", "bias"], ["a"]), helper.make_node("Relu", ["a"], ["r"])],
     [const("bias", *[0.5] * 32, shape=(32, 1, 1))], 13, True),  # a bias the conv fuses
    ([helper.make_node("Clip", ["c", "lo"], ["r"])], [const("lo", -1)], 13, False),
    ([helper.make_node("Sigmoid", ["c"], ["r"])], [], 13, False),
], ids=["relu", "relu6", "clip-min-0", "clip-attrs", "bn-relu", "bias-relu", "clip-min--1",
        "sigmoid"])
def test_a_relu_after_a_layer_is_fused(tmp_path, after, inits, opset, relu):
    net = load_network(conv_then(tmp_path, after, inits, opset), "pynq")
    assert [(layer.name, layer.relu) for layer in net.layers] == [("c1", relu), ("c2", False)]
    assert net.tasks[0].workload.epilogue == deployed(DEPLOYED_SHIFT, relu)
    # what is not fused is a node of the CPU's between the two layers
    names = [s.name for s in net.steps]
    between = net.steps[names.index("c1") + 1:names.index("c2")]
    assert [s.cpu.ops for s in between if s.cpu.reason == ""] == \
        ([] if relu else [after[0].op_type])


def test_a_relu_two_readers_need_is_not_fused(tmp_path):
    """c's pre-ReLU value is read by the add too: c1 cannot fuse the ReLU."""
    after = [helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Add", ["c", "r"], ["s"], name="add")]
    net = load_network(conv_then(tmp_path, after), "sim")
    assert [(layer.name, layer.operator, layer.relu) for layer in net.layers] == [
        ("c1", "conv2d", False), ("add", "add", False), ("c2", "conv2d", False)]
    assert [(s.name, s.cpu.ops) for s in net.steps if s.name == "relu"] == [
        ("relu", "Relu")]  # on the packed data
    # without a ReLU after it the ALU kernel only clips (TVM's cast + add + clip + cast)
    assert net.task("fused.T2").workload.epilogue.describe() == "clip(-127,127)"


@pytest.mark.parametrize("fmt", ["QDQ", "QOperator"])
@pytest.mark.parametrize("symmetric", [True, False], ids=["relu-kept", "relu-dropped"])
def test_a_quantized_relu_is_fused(tmp_path, fmt, symmetric):
    """onnxruntime keeps a Relu between the conv's quantize and dequantize when the
    activations are symmetric, and drops it when they are not: the conv's QuantizeLinear
    (QDQ) or QLinearConv (QOperator) then writes uint8 with the zero point 0, nothing below
    zero."""
    src = conv_then(tmp_path, [helper.make_node("Relu", ["c"], ["r"], name="relu")])
    path = quantize(src, tmp_path / "q.onnx", fmt, symmetric=symmetric,
                    activations="QInt8" if symmetric else "QUInt8")
    ops = [n.op_type for n in onnx.load(str(path)).graph.node]
    assert ("Relu" in ops) == symmetric
    net = load_network(path, "pynq")
    assert [(layer.relu, layer.quantized) for layer in net.layers] == [(True, True),
                                                                     (False, True)]
    assert net.tasks[0].workload.epilogue == deployed(DEPLOYED_SHIFT, relu=True)
    # the model quantizes its input and dequantizes its output: TVM only packs, unpacks
    assert [s.cpu.ops if s.cpu else "VTA" for s in net.steps] == [
        "QuantizeLinear", "reshape+transpose", "VTA", "VTA", "transpose+reshape",
        "DequantizeLinear"]


def residual(tmp_path, shortcut_first=False, relu=True, operand=None, name="res"):
    """conv1 (+ReLU) -> conv2, added to ``operand`` (default the block's input after a
    first conv: x -> c0 -> a), then ReLU and a conv: a residual block."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 8, 8])
    main = [helper.make_node("Conv", ["a", "w1"], ["c"], pads=[1] * 4, name="conv1"),
            helper.make_node("Relu", ["c"], ["r"]),
            helper.make_node("Conv", ["r", "w2"], ["d"], pads=[1] * 4, name="conv2")]
    short = [helper.make_node("Conv", ["a", "wd"], ["e"], name="downsample")]
    nodes = [helper.make_node("Conv", ["x", "w0"], ["a"], pads=[1] * 4, name="c0"),
             *(short + main if shortcut_first else main + short),
             helper.make_node("Add", ["d", operand or "e"], ["s"], name="add"),
             *([helper.make_node("Relu", ["s"], ["t"])] if relu else []),
             helper.make_node("Conv", ["t" if relu else "s", "w3"], ["y"], name="tail")]
    inits = [weight(n, 32, ci, k, k, seed=i) for i, (n, ci, k) in enumerate(
        (("w0", 16, 3), ("w1", 32, 3), ("w2", 32, 3), ("wd", 32, 1), ("w3", 32, 1)))]
    return save(tmp_path, nodes, [x], inits, name)


def test_a_residual_add_is_an_add_layer(tmp_path):
    net = load_network(residual(tmp_path), "sim")
    add = next(layer for layer in net.layers if layer.operator == "add")
    assert (add.name, add.relu, add.rhs_bits, add.describe()) == ("add", True, 8,
                                                                   "add 1x32x8x8")
    assert AddWorkload(1, 32, 8, 8, 8, "res.T4") in [t.workload for t in net.tasks]
    assert net.steps[[s.name for s in net.steps].index("add") - 1].name == "downsample"
    assert [layer.name for layer in load_network(residual(tmp_path), "pynq").cpu] == ["add"]


def test_steps_follow_tvms_execution_order(tmp_path):
    """The file lists the shortcut first; TVM runs the add's first operand's path first."""
    path = residual(tmp_path, shortcut_first=True, name="reordered")
    assert [n.name for n in onnx.load(str(path)).graph.node][1] == "downsample"
    steps = [s.name for s in load_network(path, "sim").steps if s.workload is not None]
    assert steps == ["c0", "conv1", "conv2", "downsample", "add", "tail"]


def test_an_operand_from_outside_the_packed_region_is_added_in_int32(tmp_path):
    """The stem (3 channels) and its max pool stay on the CPU in float, as in TVM's ResNet:
    the first block adds the max pool's output, quantized and cast to int32."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])
    nodes = [helper.make_node("Conv", ["x", "w0"], ["a"], pads=[1] * 4, name="stem"),
             helper.make_node("Relu", ["a"], ["ar"]),
             helper.make_node("MaxPool", ["ar"], ["p"], kernel_shape=[2, 2], strides=[2, 2],
                              name="pool"),
             helper.make_node("Conv", ["p", "w1"], ["c"], pads=[1] * 4, name="conv1"),
             helper.make_node("Add", ["c", "p"], ["s"], name="add"),
             helper.make_node("Relu", ["s"], ["y"])]
    path = save(tmp_path, nodes, [x], [weight("w0", 16, 3, 3, 3), weight("w1", 16, 16, 3, 3)],
                "stem")
    net = load_network(path, "sim")
    elems = 16 * 8 * 8
    assert [(s.name, s.cpu.ops if isinstance(s.cpu, CpuOp) else None, s.cpu.bytes
             if isinstance(s.cpu, CpuOp) else None) for s in net.steps] == [
        ("stem", None, None),
        ("pool", "MaxPool", 4 * (16 * 16 * 16 + elems)),
        ("conv1.pack", "reshape+transpose", 8 * elems),
        ("conv1.quantize", "multiply+round+clip", 8 * elems),
        ("conv1.cast", "cast", 5 * elems),
        ("conv1", None, None),
        ("add.cast", "cast", 8 * elems),  # float32 -> int32
        ("add", None, None),
        ("y.unpack", "cast+transpose+reshape", 5 * elems),
        ("y.dequantize", "cast+multiply", 8 * elems)]
    assert net.steps[7].workload == AddWorkload(1, 16, 8, 8, 32, "stem.T2")


@pytest.mark.parametrize("operand, init, fused", [
    ("bias", const("bias", *[0.5] * 32, shape=(1, 32, 1, 1)), True),
    ("scale", helper.make_tensor_value_info("scale", TensorProto.FLOAT, [1, 32, 1, 1]), False),
], ids=["constant-bias", "broadcast-activation"])
def test_a_broadcast_add_is_not_a_residual_add(tmp_path, operand, init, fused):
    """Adding a per-channel vector: a constant is the conv's bias (fused); an activation (a
    second input, as a squeeze-excitation branch) is an add the CPU runs."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 8, 8])
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c"], pads=[1] * 4, name="c1"),
             helper.make_node("Add", ["c", operand], ["s"], name="add"),
             helper.make_node("Conv", ["s", "w2"], ["y"], pads=[1] * 4, name="c2")]
    inits = [weight("w1", 32, 16, 3, 3), weight("w2", 32, 32, 3, 3)]
    inputs = [x]
    if fused:
        inits.append(init)
    else:
        inputs.append(init)
    net = load_network(save(tmp_path, nodes, inputs, inits, "bcast"), "sim")
    assert [layer.operator for layer in net.layers] == ["conv2d", "conv2d"]
    cpu = [(s.name, s.cpu.ops) for s in net.steps if isinstance(s.cpu, CpuOp)
           and s.cpu.reason == ""]
    assert cpu == ([] if fused else [("add", "Add")])


def test_the_cpus_nodes_in_order(tmp_path):
    """A classifier whose input is normalized first: every node that computes is listed, in
    order, with its bytes; views and weight preparation are not."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])
    nodes = [helper.make_node("Sub", ["x", "mean"], ["xm"], name="sub"),
             helper.make_node("Div", ["xm", "std"], ["xn"], name="div"),
             helper.make_node("Conv", ["xn", "w0"], ["a"], pads=[1] * 4, name="stem"),
             helper.make_node("Relu", ["a"], ["ar"]),
             helper.make_node("Conv", ["ar", "w1"], ["b"], pads=[1] * 4, strides=[2, 2],
                              name="conv"),
             helper.make_node("Relu", ["b"], ["br"]),
             helper.make_node("GlobalAveragePool", ["br"], ["g"], name="gap"),
             helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
             helper.make_node("Transpose", ["wfc"], ["wfct"], perm=[1, 0], name="wt"),
             helper.make_node("MatMul", ["f", "wfct"], ["logits"], name="fc"),
             helper.make_node("Softmax", ["logits"], ["y"], name="softmax")]
    inits = [const("mean", 0.5, 0.5, 0.5, shape=(1, 3, 1, 1)),
             const("std", 0.2, 0.2, 0.2, shape=(1, 3, 1, 1)),
             weight("w0", 16, 3, 3, 3), weight("w1", 32, 16, 3, 3), weight("wfc", 10, 32)]
    net = load_network(save(tmp_path, nodes, [x], inits, "classifier"), "pynq")
    image, act = 3 * 16 * 16, 32 * 8 * 8
    got = [(s.name, s.cpu.ops if isinstance(s.cpu, CpuOp) else "", s.cpu.bytes
            if isinstance(s.cpu, CpuOp) else "") if s.cpu else (s.name, "VTA", "")
           for s in net.steps]
    assert got == [
        ("sub", "Sub", 4 * 2 * image), ("div", "Div", 4 * 2 * image), ("stem", "", ""),
        ("conv.pack", "reshape+transpose", 8 * 16 * 16 * 16),
        ("conv.quantize", "multiply+round+clip", 8 * 16 * 16 * 16),
        ("conv.cast", "cast", 5 * 16 * 16 * 16), ("conv", "VTA", ""),
        ("gap.unpack", "cast+transpose+reshape", 5 * act),
        ("gap", "GlobalAveragePool", 4 * (act + 32)), ("gap.dequantize", "cast+multiply", 8 * 32),
        ("fc", "", ""), ("softmax", "Softmax", 4 * 2 * 10)]
    assert net.steps[0].cpu.shape == "1x3x16x16 -> 1x3x16x16 float32"


# --- torchvision exports (slow; only where torch is installed) --------------------------------
def torchvision_export(tmp_path, name, dynamic_batch=False):
    torch = pytest.importorskip("torch")
    torchvision = pytest.importorskip("torchvision")
    model = getattr(torchvision.models, name)(weights=None).eval()
    path = tmp_path / f"{name}.onnx"
    dynamic = {"input": {0: "batch"}} if dynamic_batch else None
    kwargs = {"dynamo": False} if "dynamo" in torch.onnx.export.__code__.co_varnames else {}
    torch.onnx.export(model, torch.randn(1, 3, 224, 224), str(path), input_names=["input"],
                      opset_version=17, dynamic_axes=dynamic, **kwargs)
    return path


@pytest.mark.slow
def test_torchvision_shufflenet_v2(tmp_path):
    net = load_network(torchvision_export(tmp_path, "shufflenet_v2_x1_0"), "pynq")
    assert net.name == "shufflenet_v2_x1_0" and len(net.layers) == 57
    assert not any("unknown" in c.reason for c in net.cpu)
    assert [shape for _, shape, _ in shapes(net)] == [(1, 7, 7, 464, 1024, 1, 0, 1)]


@pytest.mark.slow
def test_torchvision_resnet18_batch(tmp_path):
    path = torchvision_export(tmp_path, "resnet18", dynamic_batch=True)
    assert load_network(path, "4x8").vta_layers == 0
    net = load_network(path, "4x8", batch=4)
    assert net.vta_layers == 20 and [c.name for c in net.cpu if c.operator != "add"] == [
        "/conv1/Conv"]
    assert sum(c.operator == "add" for c in net.cpu) == 8  # pynq's 4x8: adds on the CPU
    assert deployed_vta(load_network(path, "sim")) == deployed_vta(load_network("resnet18",
                                                                                "sim"))

