"""ONNX import: layers and shapes from small models built with onnx.helper (no downloads)."""

import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from vtatune.cli import main  # noqa: E402
from vtatune.networks import NetworkError, load_network  # noqa: E402
from vtatune.workloads import Conv2dWorkload, GemmWorkload  # noqa: E402

pytestmark = pytest.mark.usefixtures("compiled_engines")  # exact CLI output: no first-run notice


def weight(name, *shape):
    return numpy_helper.from_array(np.zeros(shape, dtype=np.float32), name)


def save(tmp_path, nodes, inputs, inits, name="net"):
    # The output's shape is left to shape inference.
    outs = [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, None)]
    graph = helper.make_graph(nodes, name, inputs, outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model = onnx.shape_inference.infer_shapes(model)
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


def test_layers_shapes_and_packing(tmp_path):
    net = load_network(small_cnn(tmp_path), "pynq")
    assert net.name == "small_cnn"
    assert net.notes == ("input x: symbolic batch read as 1",)
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
    with pytest.raises(NetworkError, match="no Conv, ConvTranspose, Gemm or MatMul layer"):
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


def test_unknown_input_shape_names_the_node(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, "H", 4])
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], name="c")]
    path = save(tmp_path, nodes, [x], [weight("w", 16, 16, 1, 1)], "dyn")
    with pytest.raises(NetworkError, match="Conv c: the shape of input x is unknown"):
        load_network(path)
