"""Float ONNX models built with ``onnx.helper`` and seeded random weights, to deploy and to
test deploying (quantize them with :func:`vtatune.deploy.quantize`): a conv chain with a
residual add, a grouped conv, a transposed conv, a two-layer MLP, and ResNet-18 (v1, as
torchvision builds it, batch norm folded into the convs).

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

__all__ = ["classifier", "conv_residual", "grouped_conv", "mlp", "resnet18", "transposed_conv"]

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
