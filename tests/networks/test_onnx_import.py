"""ONNX import: layers and shapes read from small models built with onnx.helper (no
downloads): the command line's listing and refusals, shapes that ONNX's inference alone
cannot find, ConvTranspose's padding, the batch, external data and file names. Quantized
models: test_onnx_quantized.py; the deployed model's steps: test_onnx_deployed.py."""

import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tests.networks._onnx_models import (  # noqa: E402
    float_cnn,
    load_network,
    make,
    save,
    shapes,
    small_cnn,
    weight,
)
from vtatune.cli import main  # noqa: E402
from vtatune.networks import (  # noqa: E402
    DEPLOYED_SHIFT,
    CpuLayer,
    NetworkError,
    default_network_log,
    layers_from_model,
)
from vtatune.networks import load_network as _load_network  # noqa: E402
from vtatune.workloads import Conv2dWorkload, GemmWorkload, deployed  # noqa: E402

pytestmark = pytest.mark.usefixtures("compiled_engines")  # exact CLI output: no first-run notice

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
