"""What a model read from ONNX runs once deployed as TVM v0.14's VTA flow deploys it
(``relay.quantize``, ``graph_pack``): its layers with the ReLU each one fuses, its residual
adds, and every other node that computes, in execution order (:func:`deployed_steps`).

Read from the graph, node by node in its (topological) order:

- **Fused after a layer** (a conv or dense layer's kernel does it, no node of its own):
  ``BatchNormalization`` and a per-channel constant ``Add``/``Sub``/``Mul``/``Div`` (they
  fold into the weights and the bias), then one ReLU: ``Relu``, ``Clip`` with a lower
  bound of 0 (ReLU6 and friends), or a ``QuantizeLinear`` whose zero point is its type's
  minimum (onnxruntime drops a ReLU that way when the activations are asymmetric);
  ``QuantizeLinear``/``DequantizeLinear`` on the way are read through. A node joins only
  when it is its input's only reader.
- **Residual adds**: an ``Add`` (or ``Sum``, or onnxruntime's ``QLinearAdd``) of two
  activations of one NCHW shape, at least one from a layer VTA's packing can take, is an
  ``add`` layer (:func:`~vtatune.networks.place` runs it on VTA as TVM's ``add.vta`` where
  TVM does), with ``relu`` when a ReLU follows it. An add of a broadcast operand (a bias
  vector, a squeeze-excitation scale) is not one.
- **The CPU's nodes**: every other node that computes is a :class:`CpuOp` with its shapes
  and the bytes it reads and writes (``ops`` is the ONNX operator). A view (``Flatten``,
  ``Reshape``, ``Squeeze``, ``Unsqueeze`` of an unpacked tensor), ``Identity``,
  ``Dropout``, shape arithmetic and the nodes that only prepare weights compute nothing.
  QDQ pairs (a ``QuantizeLinear`` read by ``DequantizeLinear`` nodes) are the simulated
  quantization of the float graph and are read through; a quantize or dequantize of the
  model's own (at a graph input or output, or around a float operator of a QOperator
  model) is a CpuOp.

And what TVM's flow adds at the edges of the packed int8 region, which no graph shows:

- A layer is in the region when some VTA configuration can pack it: its input channels
  per group are a multiple of :data:`MIN_BLOCK` (the smallest BLOCK_IN). So the RGB stem
  (3 channels) stays in float on the CPU, as the deploy tutorial's ``skip_conv_layers=[0]``
  keeps it, and its max pool with it. The max pools, average pools, ReLUs, clips and
  concatenations between packed layers run on the packed data.
- Entering the region: ``pack`` (``reshape+transpose`` into NCHW{BATCH}n{BLOCK}c),
  ``quantize`` (``multiply+round+clip``) and ``cast`` to int8, once per tensor; a tensor
  the model already holds in int8 is only packed. A residual add's operand that comes from
  outside the region is cast to int32 instead, and the add reads it as such
  (``rhs_bits=32``): ``relay.quantize`` realizes an add's unquantized operand in int32,
  which is why the first block of TVM's ResNet adds the max pool's output in int32.
- Leaving it: ``unpack`` (``cast+transpose+reshape`` to int32 NCHW) then ``dequantize``
  (``cast+multiply`` to float32). A global pool runs on the int32 data between the two
  and ends the region (``graph_pack``'s stop at ``nn.global_avg_pool2d``): the layers after
  it, such as the classifier, are not packed. A consumer the model runs in int8 (a QLinear
  operator) takes the unpacked int8 data.

What a graph cannot tell: the deploy flow's own choices (which layers ``skip_conv_layers``
keeps in float, where ``graph_pack`` starts and stops) are taken as the tutorial's; which
operand TVM's Relay puts on the add's right is taken as the one from outside the region.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from vtatune.networks._layers import CpuLayer, CpuOp, Layer
from vtatune.networks._onnx_graph import OnnxGraph, format_dims
from vtatune.networks._onnx_shapes import INT8_TYPES, STANDARD

__all__ = ["MIN_BLOCK", "ReadLayer", "deployed_steps", "execution_order"]

#: The smallest BLOCK_IN a VTA configuration has (``LOG_BLOCK_IN`` >= 2): a layer whose
#: input channels per group are not a multiple of it is never packed, on any configuration.
MIN_BLOCK = 4

_QMIN = dict(zip(INT8_TYPES, (0, -128), strict=True))  # the lowest value of each
_FLOAT = 1  # TensorProto.FLOAT
# The input index of the output's zero point of the operators that write int8.
_OUTPUT_ZERO_POINT = {"QuantizeLinear": 2, "QLinearConv": 7, "QLinearMatMul": 7,
                      "QLinearAdd": 7, "QGemm": 8}

_PASS = ("Identity", "Dropout")  # their output is their input
_VIEWS = ("Flatten", "Reshape", "Squeeze", "Unsqueeze")  # move no data in NCHW
_QDQ = ("QuantizeLinear", "DequantizeLinear")
# What TVM runs on the packed data without leaving the region.
_PACKED = {("", "MaxPool"), ("", "AveragePool"), ("", "Relu"), ("", "Clip"), ("", "Concat"),
           ("com.microsoft", "QLinearAveragePool"), ("com.microsoft", "QLinearConcat")}
_GLOBAL_POOLS = {("", "GlobalAveragePool"), ("", "GlobalMaxPool"),
                 ("com.microsoft", "QLinearGlobalAveragePool")}
_FOLDED = ("Add", "Sub", "Mul", "Div")  # with a per-channel constant: into weights and bias

# Where data is: unpacked on the CPU, packed in the int8 region, or unpacked after the
# region's stop (nothing after it is packed again).
CPU, VTA, DONE = "cpu", "vta", "done"


@dataclass(frozen=True)
class ReadLayer:
    """A conv or dense node as the reader read it: the layer and the input index of its
    activation."""

    layer: Layer | CpuLayer
    data: int


def _op(node: Any) -> tuple[str, str]:
    return ("" if node.domain in STANDARD else node.domain, node.op_type)


def _op_name(node: Any) -> str:
    """The operator as a CpuOp names it (with the domain of a contrib operator)."""
    domain, op = _op(node)
    return f"{domain}.{op}" if domain else op


def _int8_op(node: Any) -> bool:
    """The node computes on int8 tensors in the model (a QOperator or integer operator)."""
    return node.op_type.startswith("QLinear") or node.op_type in (
        "QGemm", "ConvInteger", "MatMulInteger", "DequantizeLinear")


def deployed_steps(graph: OnnxGraph, read: dict[int, ReadLayer]
                   ) -> list[Layer | CpuLayer | CpuOp]:
    """The deployed model of ``graph`` in execution order (see the module docstring):
    ``read`` maps the index of each conv or dense node to what was read from it. Fills
    ``graph.layer_nodes`` with each layer's node (the add layers' included)."""
    return _Walk(graph, read).run()


def execution_order(graph: OnnxGraph) -> list[int]:
    """The indices of the nodes in the order TVM's graph executor runs them: Relay's
    post-order walk from the graph's ends, each node's inputs in order (so a residual block
    runs its main path, then its shortcut, then the add, whatever order the file lists the
    nodes in: onnxruntime's quantizer reorders them). The ends are the nodes nothing reads,
    in file order (a branch that reaches no output, which TVM would drop, is kept)."""
    index = {id(node): i for i, node in enumerate(graph.nodes)}
    ends = [node for node in graph.nodes
            if not any(graph.consumers(out) for out in node.output if out)]
    order: list[int] = []
    seen: set[int] = set()
    for end in ends:
        stack = [(end, False)]
        while stack:
            node, expanded = stack.pop()
            if expanded:
                order.append(index[id(node)])
                continue
            if node is None or index[id(node)] in seen:
                continue
            seen.add(index[id(node)])
            stack.append((node, True))
            stack.extend((graph.producer.get(x), False) for x in reversed(node.input) if x)
    return order


class _Walk:
    """One pass over the nodes, tracking where each tensor is (CPU, VTA, DONE)."""

    def __init__(self, graph: OnnxGraph, read: dict[int, ReadLayer]) -> None:
        self.g, self.read = graph, read
        self.items: list[Layer | CpuLayer | CpuOp] = []
        self.where: dict[str, str] = {}
        self.canon: dict[str, str] = {}  # a tensor read through to the one it carries
        self.static = set(graph.constants)
        self.fused: set[int] = set()
        self.done: set[tuple[str, str]] = set()  # (tensor, edge op) already emitted

    def run(self) -> list[Layer | CpuLayer | CpuOp]:
        for i in execution_order(self.g):
            node = self.g.nodes[i]
            if id(node) in self.fused:
                continue
            name = node.name or f"{node.op_type.lower()}{i}"
            inputs = [x for x in node.input if x and x not in self.static]
            if not inputs or (_op(node) in (("", "Shape"), ("", "Size"))):
                self.static.update(node.output)  # shape arithmetic, weight preparation
            elif i in self.read:
                self._layer(node, name, self.read[i])
            elif (operands := self._residual(node)) is not None:
                self._add(node, name, operands)
            else:
                self._other(node, name, inputs)
        for out in self.g.outputs:
            if self._where(out) == VTA:
                self._leave(out, out, int8=False)
        return self.items

    # --- where tensors are -------------------------------------------------------------
    def _where(self, tensor: str) -> str:
        return self.where.get(tensor, CPU)

    def _canon(self, tensor: str) -> str:
        return self.canon.get(tensor, tensor)

    def _alias(self, out: str, tensor: str) -> None:
        self.where[out], self.canon[out] = self._where(tensor), self._canon(tensor)

    def _elems(self, tensor: str) -> int | None:
        shape = self.g.shape(tensor)
        return None if shape is None else math.prod(shape)

    def _type(self, tensor: str) -> int:
        return self.g.elem_types.get(self._canon(tensor)) or self.g.elem_types.get(tensor) \
            or _FLOAT

    # --- layers ------------------------------------------------------------------------
    def _layer(self, node: Any, name: str, read: ReadLayer) -> None:
        layer = read.layer
        x = node.input[read.data]
        out, relu, chain = self._follow(node.output[0], bias=True,
                                        relu=self._clamps_at_zero(node))
        if isinstance(layer, Layer):
            layer = replace(layer, relu=relu)
        packs = isinstance(layer, Layer) and self._where(x) != DONE and \
            (layer.in_channels // layer.groups) % MIN_BLOCK == 0
        if packs:
            if self._where(x) == CPU:
                self._enter(x, name, int32=False)
            side = VTA
        else:
            if self._where(x) == VTA:
                self._leave(x, name, int8=_int8_op(node))
            side = DONE if self._where(x) == DONE else CPU
        self.items.append(layer)
        self.g.layer_nodes[layer.name] = node
        for t in (*node.output, *chain):
            self.where[t], self.canon[t] = side, out

    def _follow(self, tensor: str, bias: bool, relu: bool = False
                ) -> tuple[str, bool, list[str]]:
        """Follow ``tensor`` through the nodes its kernel fuses (BN and bias when ``bias``,
        before any ReLU; ``relu``: the layer's output already clamps at zero): the last
        tensor, whether a ReLU was among them, and the tensors on the way (the nodes are
        marked fused)."""
        on_the_way = []
        while tensor not in self.g.outputs:
            users = self.g.consumers(tensor)
            if len(users) != 1 or users[0].input[0] != tensor and \
                    users[0].op_type not in ("Add", "Mul"):
                break
            node = users[0]
            op = _op(node)
            if op in (("", "QuantizeLinear"), ("", "DequantizeLinear")):
                if op[1] == "DequantizeLinear" and node.output[0] in self.g.outputs:
                    break  # the model's own dequantize at its output
                relu = relu or self._clamps_at_zero(node)
            elif op in (("", "Relu"), ("", "Clip")) and not relu:
                if op[1] == "Clip" and not self._clip_at_zero(node):
                    break
                relu = True
            elif bias and not relu and (op == ("", "BatchNormalization") and
                                        node.input[0] == tensor or self._folds(node, tensor)):
                pass
            else:
                break
            self.fused.add(id(node))
            tensor = node.output[0]
            on_the_way.append(tensor)
        return tensor, relu, on_the_way

    def _folds(self, node: Any, tensor: str) -> bool:
        """``node`` applies a per-channel constant to ``tensor`` (a bias, a scale)."""
        if _op(node) not in {("", op) for op in _FOLDED} or len(node.input) != 2:
            return False
        a, b = node.input
        other = b if a == tensor else a
        if other not in self.static or (node.op_type in ("Sub", "Div") and a != tensor):
            return False
        shape, const = self.g.shape(tensor), self.g.shape(other)
        if shape is None or const is None or len(const) > len(shape):
            return False
        channel = 1 if len(shape) == 4 else len(shape) - 1
        aligned = (1,) * (len(shape) - len(const)) + const
        return all(d == 1 for i, d in enumerate(aligned) if i != channel)

    def _clip_at_zero(self, node: Any) -> bool:
        from onnx import helper

        if len(node.input) > 1 and node.input[1]:
            low = self.g.value(node.input[1])
            return low is not None and low.size == 1 and float(low.reshape(-1)[0]) == 0.0
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        return attrs.get("min") == 0.0  # opset < 11

    def _clamps_at_zero(self, node: Any) -> bool:
        """``node`` writes int8 whose zero point is its type's minimum, so every negative
        value becomes the zero point: a ReLU (a QuantizeLinear or QLinear operator after
        which onnxruntime dropped the Relu node, the activations being asymmetric)."""
        k = _OUTPUT_ZERO_POINT.get(node.op_type)
        if k is None or node.domain not in (*STANDARD, "com.microsoft"):
            return False
        zero_point = node.input[k] if len(node.input) > k else ""
        elem = self.g.elem_types.get(node.output[0]) or self.g.elem_types.get(zero_point)
        if elem not in _QMIN:
            return False
        if not zero_point:
            return node.op_type == "QuantizeLinear" and elem == 2  # its default: uint8 0
        zero = self.g.value(zero_point)
        return zero is not None and zero.size > 0 and bool((zero == _QMIN[elem]).all())

    # --- residual adds -----------------------------------------------------------------
    def _residual(self, node: Any) -> tuple[str, str] | None:
        op = _op(node)
        if op in (("", "Add"), ("", "Sum")) and len(node.input) == 2:
            a, b = node.input
        elif op == ("com.microsoft", "QLinearAdd"):
            a, b = node.input[0], node.input[3]
        else:
            return None
        if a in self.static or b in self.static:
            return None
        shape = self.g.shape(a)
        if shape is None or len(shape) != 4 or self.g.shape(b) != shape:
            return None
        sides = {self._where(a), self._where(b)}
        return (a, b) if VTA in sides and DONE not in sides else None

    def _add(self, node: Any, name: str, operands: tuple[str, str]) -> None:
        out, relu, chain = self._follow(node.output[0], bias=False,
                                        relu=self._clamps_at_zero(node))
        outside = [t for t in operands if self._where(t) == CPU]
        for t in outside:  # relay.quantize realizes it in int32
            self._enter(t, name, int32=True)
        n, c, h, w = self.g.shape(operands[0])
        quantized = node.op_type == "QLinearAdd" or all(
            self.g.dequantized_int8(t) for t in operands)
        layer = Layer(name, "add", n, c, c, h, w, relu=relu, rhs_bits=32 if outside else 8,
                      quantized=quantized)
        self.items.append(layer)
        self.g.layer_nodes[name] = node
        for t in (*node.output, *chain):
            self.where[t], self.canon[t] = VTA, out

    # --- everything else ---------------------------------------------------------------
    def _other(self, node: Any, name: str, inputs: list[str]) -> None:
        op = _op(node)
        sides = {self._where(x) for x in inputs}
        x = inputs[0]
        if op[0] == "" and op[1] in _PASS:
            self._alias(node.output[0], x)
            return
        if op[0] == "" and op[1] in _QDQ and self._read_through(node, x):
            self._alias(node.output[0], x)
            return
        if op[0] == "" and op[1] in _VIEWS:
            if sides != {VTA}:
                self.where[node.output[0]] = DONE if DONE in sides else CPU
                return
            self._leave(x, name, int8=False)  # the unpack does the reshape
            self.where[node.output[0]] = CPU
            return
        if op in _PACKED and VTA in sides and DONE not in sides:
            for t in inputs:
                if self._where(t) == CPU:
                    self._enter(t, name, int32=False)
            self._cpu_op(name, _op_name(node), inputs, node.output, "int8 packed", packed=True)
            for t in node.output:
                self.where[t] = VTA
            return
        if op in _GLOBAL_POOLS and sides == {VTA}:
            int8 = _int8_op(node)
            self._unpack(x, name, int8)
            self._cpu_op(name, _op_name(node), inputs, node.output,
                         "int8" if int8 else "int32", elem=1 if int8 else 4)
            if not int8:
                self._dequantize(node.output[0], name)
            for t in node.output:
                self.where[t] = DONE
            return
        for t in inputs:
            if self._where(t) == VTA:
                self._leave(t, name, int8=_int8_op(node))
        self._cpu_op(name, _op_name(node), inputs, node.output)
        for t in node.output:
            self.where[t] = DONE if DONE in sides else CPU

    def _read_through(self, node: Any, x: str) -> bool:
        """A QuantizeLinear or DequantizeLinear that does not run: in the packed region,
        or one of a QDQ pair; not the model's own at a graph input or output."""
        if x in self.g.inputs or node.output[0] in self.g.outputs:
            return False
        if self._where(x) == VTA:
            return True
        if node.op_type == "QuantizeLinear":
            users = self.g.consumers(node.output[0])
            return bool(users) and all(u.op_type == "DequantizeLinear" for u in users)
        producer = self.g.producer.get(x)
        return producer is not None and producer.op_type == "QuantizeLinear"

    # --- the edges of the packed region ------------------------------------------------
    def _once(self, tensor: str, what: str) -> bool:
        key = (self._canon(tensor), what)
        if key in self.done:
            return False
        self.done.add(key)
        return True

    def _enter(self, tensor: str, who: str, int32: bool) -> None:
        """Pack ``tensor`` into the region (quantizing a float one), for ``who``."""
        floating = self._type(tensor) not in INT8_TYPES
        if self._once(tensor, "pack"):
            self._edge(f"{who}.pack", "reshape+transpose", tensor,
                       f"{'float32' if floating else 'int8'} packed", 8 if floating else 2)
            if floating:
                self._edge(f"{who}.quantize", "multiply+round+clip", tensor, "float32", 8)
        if int32 and self._once(tensor, "int32"):
            self._edge(f"{who}.cast", "cast", tensor,
                       f"{'float32' if floating else 'int8'} -> int32", 8 if floating else 5)
        elif not int32 and floating and self._once(tensor, "int8"):
            self._edge(f"{who}.cast", "cast", tensor, "float32 -> int8", 5)

    def _leave(self, tensor: str, who: str, int8: bool) -> None:
        """Unpack ``tensor`` out of the region for ``who``, and dequantize it unless
        ``int8`` (``who`` computes in int8)."""
        self._unpack(tensor, who, int8)
        if not int8:
            self._dequantize(tensor, who)

    def _unpack(self, tensor: str, who: str, int8: bool) -> None:
        if not self._once(tensor, "unpack-int8" if int8 else "unpack"):
            return
        if int8:
            self._edge(f"{who}.unpack", "transpose+reshape", tensor, "int8 packed -> int8", 2)
        else:
            self._edge(f"{who}.unpack", "cast+transpose+reshape", tensor,
                       "int8 packed -> int32", 5)

    def _dequantize(self, tensor: str, who: str) -> None:
        if self._once(tensor, "dequantize"):
            self._edge(f"{who}.dequantize", "cast+multiply", tensor, "int32 -> float32", 8)

    def _edge(self, name: str, ops: str, tensor: str, dtype: str, per_elem: int) -> None:
        elems = self._elems(tensor)
        self.items.append(CpuOp(name, ops, f"{format_dims(self.g.shape(tensor))} {dtype}",
                                bytes=per_elem * elems if elems else 0,
                                reason="TVM's deploy flow (relay.quantize, graph_pack)"))

    def _cpu_op(self, name: str, ops: str, inputs: list[str], outputs: Any,
                dtype: str | None = None, packed: bool = False, elem: int | None = None
                ) -> None:
        """A node the CPU runs: its shapes, and the bytes it reads and writes (1 a packed
        element, ``elem`` if given, else the model's type)."""
        total, known = 0, True
        for t in (*inputs, *outputs):
            n = self._elems(t)
            if n is None:
                known = False
                continue
            total += n * (1 if packed else elem if elem else _bytes(self._type(t)))
        dtype = dtype or _type_name(self._type(outputs[0]))
        shape = f"{', '.join(format_dims(self.g.shape(t)) for t in inputs)} -> " \
                f"{', '.join(format_dims(self.g.shape(t)) for t in outputs)} {dtype}"
        self.items.append(CpuOp(name, ops, shape, bytes=total if known else 0))


def _bytes(elem_type: int) -> int:
    from onnx import helper

    try:
        return helper.tensor_dtype_to_np_dtype(elem_type).itemsize
    except (KeyError, TypeError, ValueError):
        return 4


def _type_name(elem_type: int) -> str:
    from onnx import helper

    try:
        return str(helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, TypeError, ValueError):
        return "?"
