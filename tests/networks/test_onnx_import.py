"""ONNX import: layers and shapes from small models built with onnx.helper (no downloads),
quantized with onnxruntime's quantizer where it is installed; torchvision exports only in
slow tests, when torch is installed."""

import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from vtatune.cli import main  # noqa: E402
from vtatune.networks import (  # noqa: E402
    CpuLayer,
    NetworkError,
    default_network_log,
    layers_from_model,
    load_network,
)
from vtatune.workloads import Conv2dWorkload, GemmWorkload  # noqa: E402

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


def test_layers_shapes_and_packing(tmp_path):
    net = load_network(small_cnn(tmp_path), "pynq")
    assert net.name == "small_cnn"
    assert net.notes == ("input x: dynamic batch (N) set to 1",)
    got = [(t.workload, t.multiplicity, t.layers) for t in net.tasks]
    assert got[0] == (Conv2dWorkload(1, 16, 16, 16, 32, 3, 1, 2, "small_cnn.T1"), 1, ("c1",))
    assert got[1] == (Conv2dWorkload(1, 8, 8, 32, 32, 3, 1, 1, "small_cnn.T2"), 2,
                      ("c2", "c3"))
    ops = [(t.operator, t.layers) for t in net.tasks]
    assert ops[2:] == [("group_conv2d", ("g",)), ("conv2d_transpose", ("up",)),
                       ("conv2d", ("down",)), ("gemm", ("fc",)), ("gemm", ("mm",))]
    assert net.tasks[2].workload.groups == 2
    assert net.tasks[3].workload.out_channels == 16 and net.tasks[3].workload.height == 8
    assert net.tasks[5].workload == GemmWorkload(1, 512, 64, "small_cnn.T6")
    assert net.tasks[6].workload == GemmWorkload(1, 64, 48, "small_cnn.T7")
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
    assert net.tasks[0].workload == Conv2dWorkload(2, 14, 14, 32, 64, 3, 1, 1, "same.T1")
    assert net.notes == ()


def test_cli_lists_an_onnx_model(tmp_path, capsys):
    path = small_cnn(tmp_path)
    assert main(["network", str(path), "--list", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["network"] == "small_cnn" and len(d["tasks"]) == 7
    assert [c["name"] for c in d["cpu"]] == ["stem", "dw"]
    assert [c["quantized"] for c in d["cpu"]] == [False, False]
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


def quantize(src, dst, fmt, strip_value_info=False, exclude=()):
    """``src`` quantized by onnxruntime's quantize_static (int8, two calibration inputs)."""
    ort_q = pytest.importorskip("onnxruntime.quantization")
    model = onnx.load(str(src))
    x = model.graph.input[0]
    shape = [d.dim_value for d in x.type.tensor_type.shape.dim]

    class Reader(ort_q.CalibrationDataReader):
        def __init__(self):
            self.feeds = iter([{x.name: np.random.RandomState(i).randn(*shape)
                                .astype(np.float32)} for i in range(2)])

        def get_next(self):
            return next(self.feeds, None)

    ort_q.quantize_static(str(src), str(dst), Reader(),
                          quant_format=getattr(ort_q.QuantFormat, fmt),
                          activation_type=ort_q.QuantType.QInt8,
                          weight_type=ort_q.QuantType.QInt8, nodes_to_exclude=list(exclude))
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
    assert [(layer.name, layer.quantized) for layer in q.layers] == [
        ("c1_quant", True), ("c2_quant", True), ("fc_quant", True), ("mm_quant", True)]
    assert q.notes == ("int8: 4 of 4 layers are quantized in the model (QLinearConv, QGemm, "
                       "QLinearMatMul)",)
    assert q.cpu == ()


def test_partly_quantized_model_keeps_every_layer(tmp_path):
    f = load_network(float_cnn(tmp_path), "pynq")
    path = quantize(tmp_path / "float_cnn.onnx", tmp_path / "part.onnx", "QOperator",
                    exclude=["c2"])
    q = load_network(path, "pynq")
    assert [(layer.name, layer.quantized) for layer in q.layers] == [
        ("c1_quant", True), ("c2", False), ("fc_quant", True), ("mm_quant", True)]
    assert [shape for _, shape, _ in shapes(q)] == [shape for _, shape, _ in shapes(f)]
    assert q.notes == ("int8: 3 of 4 layers are quantized in the model (QLinearConv, QGemm, "
                       "QLinearMatMul)",)


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
        ("c1", True), ("c2", True), ("fc", True), ("mm", True)]
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


def test_matmul_of_two_activations_is_a_note(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 16])
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["x", "xt"], ["att"], name="att"),
             helper.make_node("MatMul", ["att", "w"], ["y"], name="proj")]
    net = load_network(save(tmp_path, nodes, [x], [weight("w", 64, 32)], "attn"), "pynq")
    assert net.notes == ("att: MatMul of two activations (not a dense layer) left to the CPU",)
    assert shapes(net) == [("gemm", (64, 64, 32), ("proj",))]


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
    assert main(["network", str(path), "--list", "--json", "--hw", "4x8", "--batch", "4"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["tasks"][0]["shape"]["batch"] == 4 and d["notes"] == ["input x: dynamic batch (N) set "
                                                             "to 4"]
    # Batch 1 does not fill BATCH 4: the same model keeps no layer on VTA.
    assert load_network(path, "4x8").tasks == ()
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
    assert net.vta_layers == 20 and [c.name for c in net.cpu] == ["/conv1/Conv"]

