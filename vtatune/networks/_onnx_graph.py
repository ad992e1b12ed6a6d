"""The ONNX graph as the reader saw it (:class:`OnnxGraph`): the nodes, each tensor's
producer, consumers, dims and element type, the constants. What the layer reader
(:mod:`._onnx`) and the step reader (:mod:`._onnx_steps`) both ask of a graph; neither of
them is needed to understand it.

Example:
    >>> format_dims((1, 64, None, "n"))
    '1x64x?xn'
    >>> format_dims(None)
    '?'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vtatune.networks._onnx_shapes import INT8_TYPES, STANDARD, Dims, tensor_dims

__all__ = ["OnnxGraph", "describe_node", "format_dims"]

# Nodes a weight passes through unchanged in kind on its way from its initializer.
_WEIGHT_PATH = ("DequantizeLinear", "QuantizeLinear", "Transpose", "Reshape", "Identity",
                "Cast", "Squeeze", "Unsqueeze", "Flatten")


@dataclass(frozen=True, eq=False)
class OnnxGraph:
    """The graph as the reader saw it: its nodes (weights stripped, shape arithmetic
    folded), each tensor's producer, consumers, dims and element type, which tensors are
    constants and the small ones' values (:meth:`value`). Each layer names its node
    (:meth:`node_of`), so what follows a layer (bias, activation, requantization,
    residual add) can be read from :meth:`consumers`."""

    nodes: tuple[Any, ...]
    producer: dict[str, Any] = field(repr=False)
    consumer_map: dict[str, tuple[Any, ...]] = field(repr=False)
    dims: dict[str, Dims | None] = field(repr=False)
    elem_types: dict[str, int] = field(repr=False)
    constants: frozenset[str] = field(repr=False)
    layer_nodes: dict[str, Any] = field(repr=False)  # filled by the reader, layer by layer
    inputs: tuple[str, ...] = ()  # the graph's inputs (its weights not among them)
    outputs: tuple[str, ...] = ()
    small: dict[str, Any] = field(default_factory=dict, repr=False)  # name -> TensorProto

    @classmethod
    def of(cls, model: Any, weights: frozenset[str]) -> OnnxGraph:
        g = model.graph
        dims: dict[str, Dims | None] = {}
        types: dict[str, int] = {}
        for vi in (*g.input, *g.value_info, *g.output):
            dims[vi.name] = tensor_dims(vi)
            types[vi.name] = vi.type.tensor_type.elem_type
        for init in g.initializer:
            dims[init.name], types[init.name] = tuple(init.dims), init.data_type
        producer, consumers = {}, {}
        constants = set(weights) | {i.name for i in g.initializer}
        for node in g.node:
            for out in node.output:
                producer[out] = node
            for name in node.input:
                consumers.setdefault(name, []).append(node)
            if node.op_type == "Constant" and node.domain in STANDARD:
                constants.update(node.output)
        return cls(tuple(g.node), producer, {k: tuple(v) for k, v in consumers.items()}, dims,
                   types, frozenset(constants), {},
                   tuple(i.name for i in g.input if i.name not in constants),
                   tuple(o.name for o in g.output), {i.name: i for i in g.initializer})

    def value(self, tensor: str) -> Any:
        """A small constant's value (a numpy array: a scale, a zero point, a clip bound),
        or None (a weight, an activation)."""
        from onnx import numpy_helper

        init = self.small.get(tensor)
        try:
            return None if init is None else numpy_helper.to_array(init)
        except Exception:  # noqa: BLE001 - an external file that is not there
            return None

    def shape(self, tensor: str) -> tuple[int, ...] | None:
        """The tensor's shape when every dimension is known, else None."""
        dims = self.dims.get(tensor)
        return dims if dims is not None and all(isinstance(d, int) for d in dims) else None

    def consumers(self, tensor: str) -> tuple[Any, ...]:
        return self.consumer_map.get(tensor, ())

    def node_of(self, layer: str) -> Any:
        """The node a layer was read from (by the layer's name)."""
        return self.layer_nodes[layer]

    def weight(self, tensor: str) -> tuple[str, bool] | None:
        """The constant ``tensor`` comes from, through :data:`_WEIGHT_PATH` nodes, and
        whether it is dequantized from int8 on the way; None for an activation."""
        int8, name, seen = False, tensor, set()
        while name and name not in seen:
            seen.add(name)
            if name in self.constants:
                return name, int8
            node = self.producer.get(name)
            if node is None or node.domain not in STANDARD or node.op_type not in _WEIGHT_PATH:
                return None
            if node.op_type == "DequantizeLinear":
                int8 = int8 or self.elem_types.get(node.input[0]) in INT8_TYPES
            name = node.input[0]
        return None

    def dequantized_int8(self, tensor: str) -> bool:
        """``tensor`` is an int8 tensor dequantized (QDQ)."""
        node = self.producer.get(tensor)
        return node is not None and node.op_type == "DequantizeLinear" and \
            self.elem_types.get(node.input[0]) in INT8_TYPES

    def unknown_shape(self, tensor: str) -> str:
        """Why ``tensor``'s shape is unknown: the graph input or node it comes from."""
        name, seen = tensor, set()
        while name not in seen:
            seen.add(name)
            node = self.producer.get(name)
            if node is None:
                dims = self.dims.get(name)
                what = "no shape" if dims is None else f"dynamic dimensions {format_dims(dims)}"
                return f"the shape of input {tensor} is unknown: graph input {name} has {what}"
            unknown = [i for i in node.input if i and self.shape(i) is None]
            if not unknown:
                break
            name = unknown[0]
        return (f"the shape of input {tensor} is unknown: shape inference stops at "
                f"{describe_node(node)}")


def describe_node(node: Any) -> str:
    """``op_type name`` (with the domain of a non-standard operator)."""
    domain = "" if node.domain in STANDARD else f" (domain {node.domain})"
    return f"{node.op_type} {node.name or '(unnamed, output ' + node.output[0] + ')'}{domain}"


def format_dims(dims: Dims | None) -> str:
    """Dims as ``1x64x56x56``, an unknown dimension (or all of them) as ``?``."""
    return "?" if dims is None else "x".join("?" if d is None else str(d) for d in dims)
