"""ONNX models built with onnx.helper (no downloads) for the ONNX import tests, and
onnxruntime's quantize_static over them; the reader as TVM v0.14 places a model."""

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tests._calibration import CalibrationReader  # noqa: E402
from vtatune.networks import load_network as _load_network  # noqa: E402


def load_network(network, hw=None, **kwargs):
    """The ONNX import tests check the reader as TVM v0.14 deploys a model (its graph
    packing's placement: channel counts in whole blocks), as the catalogue has it; an ONNX
    model's default placement, vtatune deploy's, is checked in test_deploy_placement."""
    return _load_network(network, hw, placement="tvm014", **kwargs)



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
    feeds = [np.random.RandomState(i).randn(*shape).astype(np.float32) for i in range(samples)]
    ort_q.quantize_static(str(src), str(dst), CalibrationReader(x.name, feeds),
                          quant_format=getattr(ort_q.QuantFormat, fmt),
                          activation_type=getattr(ort_q.QuantType, activations),
                          weight_type=ort_q.QuantType.QInt8, nodes_to_exclude=list(exclude),
                          extra_options={"ActivationSymmetric": symmetric})
    if strip_value_info:  # as a model written without the float model's shapes
        model = onnx.load(str(dst))
        del model.graph.value_info[:]
        onnx.save(model, str(dst))
    return dst
