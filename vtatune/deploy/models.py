"""Float ONNX models built with ``onnx.helper`` and seeded random weights, to deploy and to
test deploying (quantize them with :func:`vtatune.deploy.quantize`): a conv chain with a
residual add, a grouped conv, a transposed conv, a two-layer MLP, ResNet-18 (v1, as
torchvision builds it, batch norm folded into the convs), and transformers' layers as torch
exports them: a projection of [1, S, K] activations (``dense_rows``), multi-head
self-attention and a BERT encoder block. ``dense_rows_qdq`` is the one model already
quantized (QDQ, its bias int32 in the accumulator's scale, as a quantizer that fuses the
bias writes it).

Example:
    >>> m = conv_residual(channels=16, size=8)
    >>> [n.op_type for n in m.graph.node]
    ['Conv', 'Relu', 'Conv', 'Relu', 'Add', 'Relu']
    >>> [d.dim_value for d in resnet18().graph.output[0].type.tensor_type.shape.dim]
    [1, 1000]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vtatune.deploy._tvm import onnx as _onnx

__all__ = ["attention", "classifier", "conv_residual", "convnext_stage", "dense_rows",
           "dense_rows_qdq", "encoder_block", "grouped_conv", "mlp", "resnet18",
           "transposed_conv"]

#: The ONNX opset the models use.
OPSET = 17


class _Graph:
    """Nodes and initializers of a graph under construction, with seeded weights."""

    def __init__(self, seed: int) -> None:
        self.onnx = _onnx()
        self.rng = np.random.default_rng(seed)
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.count = 0

    def _name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def const(self, prefix: str, value: np.ndarray) -> str:
        name = self._name(prefix)
        self.inits.append(self.onnx.numpy_helper.from_array(value.astype(np.float32), name))
        return name

    def node(self, op: str, inputs: list[str], **attrs: Any) -> str:
        out = self._name(op.lower())
        self.nodes.append(self.onnx.helper.make_node(op, inputs, [out], **attrs))
        return out

    def conv(self, x: str, cin: int, cout: int, k: int, stride: int = 1, pad: int = 0,
             groups: int = 1, relu: bool = False) -> str:
        # He initialization over the fan-in keeps activations of unit scale layer after layer
        w = self.rng.normal(0, np.sqrt(2 / (cin // groups * k * k)), (cout, cin // groups, k, k))
        b = self.rng.normal(0, 0.1, cout)
        y = self.node("Conv", [x, self.const("w", w), self.const("b", b)], kernel_shape=[k, k],
                      strides=[stride, stride], pads=[pad] * 4, group=groups)
        return self.node("Relu", [y]) if relu else y

    def model(self, name: str, x: str, in_shape: list[int], y: str, out_shape: list[int]
              ) -> Any:
        h = self.onnx.helper
        graph = h.make_graph(self.nodes, name, [
            h.make_tensor_value_info(x, self.onnx.TensorProto.FLOAT, in_shape)], [
            h.make_tensor_value_info(y, self.onnx.TensorProto.FLOAT, out_shape)], self.inits)
        model = h.make_model(graph, opset_imports=[h.make_opsetid("", OPSET)])
        model.ir_version = 8
        self.onnx.checker.check_model(model)
        return model


def conv_residual(channels: int = 16, size: int = 8, seed: int = 0) -> Any:
    """conv 3x3 + ReLU -> conv 3x3 + ReLU -> add the input -> ReLU (a residual block)."""
    g = _Graph(seed)
    r = g.conv("x", channels, channels, 3, pad=1, relu=True)
    r = g.conv(r, channels, channels, 3, pad=1, relu=True)
    y = g.node("Relu", [g.node("Add", [r, "x"])])
    shape = [1, channels, size, size]
    return g.model("conv_residual", "x", shape, y, shape)


def grouped_conv(channels: int = 32, groups: int = 2, size: int = 8, seed: int = 1) -> Any:
    """A grouped conv 3x3 (``channels / groups`` per group) + ReLU."""
    g = _Graph(seed)
    y = g.conv("x", channels, channels, 3, pad=1, groups=groups, relu=True)
    shape = [1, channels, size, size]
    return g.model("grouped_conv", "x", shape, y, shape)


def transposed_conv(in_channels: int = 16, out_channels: int = 16, size: int = 8,
                    seed: int = 2, conv_first: bool = False) -> Any:
    """A transposed conv 4x4, stride 2, pad 1 (DCGAN's) + ReLU: ``size`` -> ``2 size``;
    ``conv_first``: after a conv 3x3 + ReLU (a decoder stage)."""
    g = _Graph(seed)
    x = g.conv("x", in_channels, in_channels, 3, pad=1, relu=True) if conv_first else "x"
    w = g.rng.normal(0, np.sqrt(2 / (in_channels * 4)), (in_channels, out_channels, 4, 4))
    b = g.rng.normal(0, 0.1, out_channels)
    y = g.node("ConvTranspose", [x, g.const("w", w), g.const("b", b)], kernel_shape=[4, 4],
               strides=[2, 2], pads=[1, 1, 1, 1])
    y = g.node("Relu", [y])
    return g.model("transposed_conv", "x", [1, in_channels, size, size], y,
                   [1, out_channels, 2 * size, 2 * size])


def mlp(batch: int = 1, features: int = 64, hidden: int = 32, classes: int = 16,
        seed: int = 3) -> Any:
    """Two dense layers (Gemm, transB) with a ReLU between."""
    g = _Graph(seed)
    h = features
    x = "x"
    for i, (fan_in, fan_out) in enumerate(((features, hidden), (hidden, classes))):
        w = g.rng.normal(0, np.sqrt(2 / fan_in), (fan_out, fan_in))
        x = g.node("Gemm", [x, g.const("w", w), g.const("b", g.rng.normal(0, 0.1, fan_out))],
                   transB=1)
        if i == 0:
            x = g.node("Relu", [x])
        h = fan_out
    return g.model("mlp", "x", [batch, features], x, [batch, h])


def classifier(in_channels: int = 3, width: int = 16, classes: int = 10, size: int = 8,
               seed: int = 4) -> Any:
    """A small image classifier whose channel counts are not whole blocks at both ends: a
    stem conv 3x3 of ``in_channels`` (3: RGB) + ReLU, a conv 3x3 stride 2 + ReLU, global
    average pooling and a ``classes``-way Gemm."""
    g = _Graph(seed)
    x = g.conv("x", in_channels, width, 3, pad=1, relu=True)
    x = g.conv(x, width, 2 * width, 3, stride=2, pad=1, relu=True)
    x = g.node("Flatten", [g.node("GlobalAveragePool", [x])])
    w = g.rng.normal(0, np.sqrt(1 / (2 * width)), (classes, 2 * width))
    y = g.node("Gemm", [x, g.const("w", w), g.const("b", g.rng.normal(0, 0.1, classes))],
               transB=1)
    return g.model("classifier", "x", [1, in_channels, size, size], y, [1, classes])


def resnet18(classes: int = 1000, size: int = 224, seed: int = 0) -> Any:
    """ResNet-18 v1 as torchvision builds it (identity shortcuts, 1x1 stride-2 projections
    where a stage downsamples; batch norm folded into each conv's weight and bias), random
    weights."""
    g = _Graph(seed)
    x = g.conv("x", 3, 64, 7, stride=2, pad=3, relu=True)
    x = g.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for stage, cout in enumerate((64, 128, 256, 512)):
        for block in range(2):
            stride = 2 if stage and not block else 1
            r = g.conv(x, cin, cout, 3, stride=stride, pad=1, relu=True)
            r = g.conv(r, cout, cout, 3, pad=1)
            short = g.conv(x, cin, cout, 1, stride=stride) if stride != 1 else x
            x = g.node("Relu", [g.node("Add", [r, short])])
            cin = cout
    x = g.node("Flatten", [g.node("GlobalAveragePool", [x])])
    w = g.rng.normal(0, np.sqrt(1 / 512), (classes, 512))
    y = g.node("Gemm", [x, g.const("w", w), g.const("b", g.rng.normal(0, 0.1, classes))],
               transB=1)
    return g.model("resnet18", "x", [1, 3, size, size], y, [1, classes])


# --- transformers' layers -----------------------------------------------------------------
def _matmul(g: _Graph, x: str, fan_in: int, fan_out: int, bias: bool = True) -> str:
    """``x @ W (+ B)``, as torch exports ``nn.Linear`` on [..., S, K] activations."""
    w = g.rng.normal(0, np.sqrt(1 / fan_in), (fan_in, fan_out))
    y = g.node("MatMul", [x, g.const("w", w)])
    return g.node("Add", [y, g.const("b", g.rng.normal(0, 0.1, fan_out))]) if bias else y


def dense_rows(seq: int = 16, features: int = 32, out: int = 64, relu: bool = False,
               seed: int = 4) -> Any:
    """A MatMul of [1, seq, features] activations by a [features, out] weight, its bias
    added (``Add``), [+ ReLU]: a transformer's projection."""
    g = _Graph(seed)
    y = _matmul(g, "x", features, out)
    y = g.node("Relu", [y]) if relu else y
    return g.model("dense_rows", "x", [1, seq, features], y, [1, seq, out])


def dense_rows_qdq(seq: int = 16, features: int = 32, out: int = 64, seed: int = 4) -> Any:
    """:func:`dense_rows` already in QDQ form with its bias int32 in the accumulator's scale
    (``add(matmul(dq(x), dq(W)), dq(B))``, as a quantizer that fuses the bias writes it),
    power-of-two scales, symmetric."""
    onnx = _onnx()
    h, nh = onnx.helper, onnx.numpy_helper
    rng = np.random.default_rng(seed)
    sx, sw, sy = 2.0 ** -5, 2.0 ** -7, 2.0 ** -4
    w = rng.integers(-127, 128, (features, out), dtype=np.int8)
    b = rng.integers(-2000, 2000, out).astype(np.int32)
    inits = [nh.from_array(np.array(v, np.float32), n) for n, v in
             (("sx", sx), ("sw", sw), ("sb", sx * sw), ("sy", sy))]
    inits += [nh.from_array(np.array(0, np.int8), "z8"), nh.from_array(np.array(0, np.int32),
                                                                       "z32"),
              nh.from_array(w, "w"), nh.from_array(b, "b")]
    nodes = [h.make_node("QuantizeLinear", ["x", "sx", "z8"], ["xq"]),
             h.make_node("DequantizeLinear", ["xq", "sx", "z8"], ["xf"]),
             h.make_node("DequantizeLinear", ["w", "sw", "z8"], ["wf"]),
             h.make_node("DequantizeLinear", ["b", "sb", "z32"], ["bf"]),
             h.make_node("MatMul", ["xf", "wf"], ["m"]),
             h.make_node("Add", ["m", "bf"], ["a"]),
             h.make_node("QuantizeLinear", ["a", "sy", "z8"], ["yq"]),
             h.make_node("DequantizeLinear", ["yq", "sy", "z8"], ["y"])]
    graph = h.make_graph(nodes, "dense_rows_qdq", [
        h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, seq, features])], [
        h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, seq, out])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _gelu(g: _Graph, x: str) -> str:
    """``x / 2 (1 + erf(x / sqrt 2))``, as torch exports GELU."""
    e = g.node("Erf", [g.node("Div", [x, g.const("c", np.array(np.sqrt(2)))])])
    return g.node("Mul", [g.node("Mul", [x, g.const("c", np.array(0.5))]),
                          g.node("Add", [e, g.const("c", np.array(1.0))])])


def _shape(g: _Graph, dims: list[int]) -> str:
    """An int64 initializer (a Reshape's shape)."""
    name = g._name("shape")
    g.inits.append(g.onnx.numpy_helper.from_array(np.array(dims, np.int64), name))
    return name


def _attention(g: _Graph, x: str, seq: int, hidden: int, heads: int) -> str:
    """Multi-head self-attention as torch exports BERT's: Q, K, V projections, heads split
    (Reshape, Transpose), ``softmax(Q K^T / sqrt(d)) V``, heads merged, output projection."""
    d = hidden // heads

    def split(t: str, perm: list[int]) -> str:
        t = g.node("Reshape", [t, _shape(g, [1, seq, heads, d])])
        return g.node("Transpose", [t], perm=perm)

    q = split(_matmul(g, x, hidden, hidden), [0, 2, 1, 3])  # [1, h, S, d]
    k = split(_matmul(g, x, hidden, hidden), [0, 2, 3, 1])  # [1, h, d, S]
    v = split(_matmul(g, x, hidden, hidden), [0, 2, 1, 3])
    scores = g.node("Mul", [g.node("MatMul", [q, k]), g.const("c", np.array(d ** -0.5))])
    p = g.node("Softmax", [scores], axis=-1)
    ctx = g.node("Transpose", [g.node("MatMul", [p, v])], perm=[0, 2, 1, 3])
    ctx = g.node("Reshape", [ctx, _shape(g, [1, seq, hidden])])
    return _matmul(g, ctx, hidden, hidden)


def attention(seq: int = 32, hidden: int = 32, heads: int = 2, seed: int = 5) -> Any:
    """Multi-head self-attention over [1, seq, hidden] (:func:`encoder_block`'s first half,
    without its residual and LayerNorm)."""
    g = _Graph(seed)
    y = _attention(g, "x", seq, hidden, heads)
    return g.model("attention", "x", [1, seq, hidden], y, [1, seq, hidden])


def encoder_block(seq: int = 32, hidden: int = 32, heads: int = 2, intermediate: int = 64,
                  seed: int = 6) -> Any:
    """A BERT encoder layer: attention, residual, LayerNorm, MLP (MatMul, GELU, MatMul),
    residual, LayerNorm."""
    g = _Graph(seed)

    def norm(t: str) -> str:
        return g.node("LayerNormalization", [t, g.const("gamma", np.ones(hidden)),
                                             g.const("beta", np.zeros(hidden))], axis=-1)

    a = norm(g.node("Add", [_attention(g, "x", seq, hidden, heads), "x"]))
    m = _gelu(g, _matmul(g, a, hidden, intermediate))
    m = _matmul(g, m, intermediate, hidden)
    y = norm(g.node("Add", [m, a]))
    return g.model("encoder_block", "x", [1, seq, hidden], y, [1, seq, hidden])


def convnext_stage(channels: int = 32, size: int = 8, blocks: int = 2, seed: int = 7) -> Any:
    """ConvNeXt's blocks as torchvision builds them, ``blocks`` of them after a 2x2 stride-2
    downsampling conv: a depthwise 7x7 conv, LayerNorm over the channels (NHWC, as torch
    permutes for it), a 4x MLP of 1x1 convs with GELU, a per-channel layer scale (``Mul``),
    and the residual add."""
    g = _Graph(seed)
    x = g.conv("x", channels, channels, 2, stride=2)
    for _ in range(blocks):
        y = g.conv(x, channels, channels, 7, pad=3, groups=channels)
        y = g.node("Transpose", [y], perm=[0, 2, 3, 1])
        y = g.node("LayerNormalization", [y, g.const("gamma", np.ones(channels)),
                                          g.const("beta", np.zeros(channels))], axis=-1)
        y = g.node("Transpose", [y], perm=[0, 3, 1, 2])
        y = g.conv(_gelu(g, g.conv(y, channels, 4 * channels, 1)), 4 * channels, channels, 1)
        scale = g.const("gamma", np.full((channels, 1, 1), 0.5))
        x = g.node("Add", [g.node("Mul", [y, scale]), x])
    return g.model("convnext_stage", "x", [1, channels, 2 * size, 2 * size], x,
                   [1, channels, size, size])
