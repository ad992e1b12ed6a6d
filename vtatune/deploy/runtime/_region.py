"""An offloaded region as it runs: its VTA layers' programs, constants on the device and
requantizations, run each time TVM's VM calls the region's function.

Activations stay on the device, packed as VTA lays them out, from one VTA layer to the next
(a producer's output buffer is the consumer's input when their layouts are the same memory:
:func:`same_memory`). The CPU ops of a region are vtatune's host code around the calls:
``pack`` (a region input, NCHW, into VTA's layout), ``unpack`` (a region output back),
``dilate`` (zeros between pixels before a transposed conv, on the packed tensor),
``repack`` (between layouts that differ: a conv's output read as a dense input on a core
with BATCH > 1, say), ``pack_weight`` (a batch_matmul's second operand, an activation,
packed as its weight at run time, head by head), ``border`` (the zero-point border around a
conv's input whose zero point VTA's zero-padding DMA cannot read:
:meth:`vtatune.deploy.LayerSpec.border`) and ``requantize`` (the CPU's part of a
requantization VTA cannot do: ``vtatune.deploy.runtime._requantize``).

Channel counts that are not whole blocks run padded with zeros (the workload has the padded
counts: :func:`vtatune.networks.place` with ``pad_channels``): zero weights for the padded
input channels, zero weights and bias for the padded outputs, which are cut off where the
tensor leaves VTA. uint8 tensors cross the region's boundary as int8 (``u - 128``).

The compiler builds the layers (:mod:`vtatune.deploy._region`); a bundle brings them back
(:mod:`vtatune.deploy.runtime._bundle`); either way this module runs them, with numpy and a
:class:`~vtatune.deploy.runtime.Device` only.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from simulator.program import Program
from vtatune.deploy.runtime._device import Buffer, Device
from vtatune.deploy.runtime._errors import DeployError
from vtatune.deploy.runtime._requantize import Requantization
from vtatune.workloads import (
    AddWorkload,
    Conv2dTransposeWorkload,
    GemmWorkload,
    Workload,
    operand_shapes,
    pack_data,
    pack_matrix,
    pack_weight,
    unpack_output,
)


@dataclass(frozen=True)
class OffloadedCall:
    """One VTA layer as it ran: ``layer`` (its name in the deployed model), ``op``, the
    ``workload`` (its epilogue included), its ``schedule`` (the knobs), where that came from
    (``source``: ``log``, ``fallback`` or ``tuned``; ``provenance``: the log line, or why it
    fell back), how it was requantized, its VTA passes and their cycles in all; ``macs``:
    the layer's multiply-accumulates as the model has it; ``padding_cycles``: the share of
    its cycles spent on channels padded to whole blocks (cycles x (1 - MACs / padded
    MACs)); ``notes``: what else VTA runs differently (a zero-point border, a rescaled
    bias's rounding)."""

    layer: str
    op: str
    workload: str
    schedule: str
    source: str
    provenance: str
    requantization: str
    passes: int
    cycles: int
    macs: int = 0
    padding_cycles: int = 0
    notes: tuple[str, ...] = ()
    model_cycles: int | None = None
    #: the same passes' cycles with the default schedule (timed from an idle VTA; 0: not
    #: known, a bundle saved before they were recorded)
    default_cycles: int = 0

    def as_dict(self) -> dict[str, Any]:
        d = dict(vars(self))
        d["notes"] = list(self.notes)
        if self.model_cycles is None:
            del d["model_cycles"]
        return d


@dataclass(frozen=True)
class Border:
    """How a conv's input is laid out in VTA's DRAM when the padding must read as its zero
    point (VTA's DMA pads with 0): ``stride - 1`` zero-point rows and columns between the
    pixels (a transposed conv's dilation), then ``before`` rows and columns of the zero
    point above and left, ``after`` below and right. The conv then runs unpadded on it."""

    before: int
    after: int
    zero_point: int
    stride: int = 1

    def apply(self, x: np.ndarray) -> np.ndarray:
        """A packed conv-layout tensor (N/B, C/c, H, W, B, c) laid out so."""
        if self.stride > 1:
            x = dilate_packed(x, self.stride, self.zero_point)
        widths = [(0, 0), (0, 0), (self.before, self.after), (self.before, self.after),
                  (0, 0), (0, 0)]
        return np.pad(x, widths, constant_values=np.int8(self.zero_point))

    def describe(self) -> str:
        dilated = (f"dilated by {self.stride} with the zero point between its pixels, and "
                   if self.stride > 1 else "")
        size = f"{self.before}" if self.before == self.after else \
            f"{self.before} (then {self.after})"
        return (f"runs unpadded on its input {dilated}with a {size}-pixel border of the zero "
                f"point {self.zero_point}")

    def to_list(self) -> list[int]:
        return [self.before, self.after, self.zero_point, self.stride]


@dataclass(frozen=True)
class CpuOp:
    """An op the CPU runs: ``by`` ``tvm`` (an op of the Relax graph, compiled by TVM for the
    host) or ``vtatune`` (host code around the VTA calls); its output ``shape``; for a
    layer VTA could have run, ``reason`` says why it did not."""

    op: str
    shape: str
    by: str = "tvm"
    reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if v != "" or k != "reason"}


@dataclass(frozen=True, eq=False)
class RegionLayer:
    """One VTA layer of a region, as the device runs it: the region values it reads (a conv
    or dense: its input; an add: both operands) and writes, its op (``kind``) and NCHW
    output shape, its workload, requantization, one program per VTA pass (a
    ``batch_matmul``: each head's passes, head by head; each program lowered with what the
    one run before it leaves: ``vtatune.deploy._chain``), its weight and bias already on
    the device, and what :class:`OffloadedCall` reports of its schedule
    (``schedule``: the short form; ``source``, ``provenance``). ``runs``: the workload VTA
    runs when it is not ``workload`` (a conv unpadded on a zero-point border); ``border``:
    that :class:`Border`; ``macs``, ``padded_macs``: the layer's
    multiply-accumulates as the model has it and as VTA runs it (channels padded to whole
    blocks); ``notes``: what the report says of it; ``description``: how the report names
    its workload (a GEMM's padding rows said); ``operands``: a batch_matmul's two
    activations' model shapes and zero points (both packed at run time)."""

    name: str
    kind: str
    inputs: tuple[int, ...]
    output: int
    out_shape: tuple[int, ...]
    workload: Workload
    requant: Requantization
    passes: tuple[Program, ...]
    schedule: str
    source: str
    provenance: str
    weight: Buffer | None
    bias: Buffer | None
    runs: Workload | None = None
    border: Border | None = None
    macs: int = 0
    padded_macs: int = 0
    notes: tuple[str, ...] = ()
    description: str = ""
    operands: tuple[tuple[tuple[int, ...], int], ...] = ()
    #: The timing model's cycles of each pass (data-independent; recorded when built),
    #: what a device that counts no cycles (VTA's driver) reports.
    cycles: tuple[int, ...] = ()
    #: The ``shift`` input on the device: per-channel shifts, a fixed point's planes or the
    #: exact fixed point's clamp bounds (``Requantization.shift_input``).
    shift: Buffer | None = None
    #: The cycles of one inference's passes with the default schedule (what tuning gained).
    default_cycles: int = 0

    @property
    def executed(self) -> Workload:
        """The workload VTA runs."""
        return self.runs if self.runs is not None else self.workload


@dataclass
class _Packed:
    """A value in VTA's layout: on the device (``buffer``) or, after a CPU requantization,
    on the host (``host``); ``workload`` produced it (and unpacks it); ``model_shape``: its
    shape in the model (padded channels and rows cut off, a dense's folded rows unfolded
    back to [..., S, N])."""

    shape: tuple[int, ...]
    workload: Workload
    model_shape: tuple[int, ...]
    buffer: Buffer | None = None
    host: np.ndarray | None = None


@dataclass
class Trace:
    """What the calls of one inference did, in order; ``error``: what stopped one (an
    exception raised in a function TVM calls reaches its caller as a RuntimeError, so the
    original is kept here to be raised again)."""

    calls: list[OffloadedCall] = field(default_factory=list)
    host_ops: list[tuple[str, CpuOp]] = field(default_factory=list)  # (region symbol, op)
    error: BaseException | None = None


def same_memory(a: tuple[int, ...], b: tuple[int, ...]) -> bool:
    """Whether two packed shapes lay the same tensor out alike in memory: conv layouts
    (N/B, C/c, H, W, B, c) and matrix layouts (N/B, C/c, B, c) (= H = W = 1) with equal
    BATCH and channel blocks, or any channel block when BATCH and H, W are 1 (then both are
    row-major N x C)."""
    def canon(s: tuple[int, ...]) -> tuple[int, ...]:
        return s if len(s) == 6 else (s[0], s[1], 1, 1, s[2], s[3])

    ca, cb = canon(a), canon(b)
    if ca == cb:
        return True
    return (ca[4] == cb[4] == 1 and ca[2:4] == cb[2:4] == (1, 1) and ca[0] == cb[0]
            and ca[1] * ca[5] == cb[1] * cb[5])


def pad_channels(array: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``array`` zero-padded at the end of each axis to ``shape`` (channels padded to whole
    blocks: weights, biases, a region input)."""
    if tuple(array.shape) == tuple(shape):
        return array
    return np.pad(array, [(0, want - have) for have, want in zip(array.shape, shape,
                                                                  strict=True)])


def to_int8(x: np.ndarray) -> np.ndarray:
    """A uint8 tensor as the int8 one of the same real values (``u - 128``; its zero point
    moves alike); int8 as it is."""
    return (x ^ np.uint8(0x80)).view(np.int8) if x.dtype == np.uint8 else x


def from_int8(y: np.ndarray, dtype: Any) -> np.ndarray:
    """An int8 tensor back as ``dtype`` (uint8: ``q + 128``); a float one (a layer's
    accumulators as float32) as it is."""
    if np.asarray(y).dtype.kind == "f":
        return np.ascontiguousarray(y, dtype=dtype)
    y = np.ascontiguousarray(y, dtype=np.int8)
    return (y.view(np.uint8) ^ np.uint8(0x80)) if np.dtype(dtype) == np.uint8 else y


def dilate_packed(x: np.ndarray, stride: int, fill: int = 0) -> np.ndarray:
    """A packed conv-layout tensor (N/B, C/c, H, W, B, c) with ``stride - 1`` rows and
    columns of ``fill`` between pixels (what conv2d_transpose_packed reads: zeros)."""
    nb, cb, h, w, b, c = x.shape
    out = np.full((nb, cb, (h - 1) * stride + 1, (w - 1) * stride + 1, b, c), fill, x.dtype)
    out[:, :, ::stride, ::stride] = x
    return out


class RegionRunner:
    """An external function's layers on a device: :meth:`run` is what TVM's VM calls.
    ``params``: the function's parameters (value ids and NCHW shapes); ``outputs``: the
    values it returns."""

    def __init__(self, symbol: str, params: tuple[tuple[int, tuple[int, ...]], ...],
                 layers: tuple[RegionLayer, ...], outputs: tuple[int, ...], device: Device,
                 trace: Trace) -> None:
        self.symbol = symbol
        self.params = params
        self.layers = layers
        self.outputs = outputs
        self.device = device
        self.trace = trace
        self._packed: dict[tuple[int, tuple[int, ...]], Buffer] = {}  # one run's packed inputs

    def _host_op(self, op: str, shape: tuple[int, ...]) -> None:
        self.trace.host_ops.append((self.symbol, CpuOp(op, _shape(shape), "vtatune")))

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """The region's outputs (NCHW, or N x C for a dense; int8, uint8 ones as their
        int8 equivalent: :func:`from_int8`) for its inputs (int8 or uint8)."""
        if len(inputs) != len(self.params):
            raise DeployError(f"{self.symbol}: {len(inputs)} inputs for "
                              f"{len(self.params)} parameters")
        values: dict[int, np.ndarray | _Packed] = {}
        self._packed = {}
        for (vid, shape), x in zip(self.params, inputs, strict=True):
            if tuple(x.shape) != shape:
                raise DeployError(f"{self.symbol}: input of shape {list(x.shape)}, "
                                  f"expected {list(shape)}")
            values[vid] = to_int8(x)
        for layer in self.layers:
            values[layer.output] = self._run_layer(layer, values)
        outputs = []
        for vid in self.outputs:
            value = values[vid]
            if not isinstance(value, _Packed):
                outputs.append(value)
                continue
            outputs.append(self._unpacked(value))
            self._host_op("unpack", outputs[-1].shape)
        return outputs

    def _unpacked(self, value: _Packed) -> np.ndarray:
        """A packed value back in its model shape (NCHW, N x C, a dense's [..., S, N]),
        its padded channels and rows cut off."""
        packed = value.host if value.host is not None else self.device.download(value.buffer)
        out = unpack_output(value.workload, packed.reshape(value.shape))
        shape = value.model_shape
        if isinstance(value.workload, GemmWorkload):
            out = out[:int(np.prod(shape[:-1])), :shape[-1]]
        else:
            out = out[:, :shape[1]]
        return np.ascontiguousarray(out).reshape(shape)

    def _run_layer(self, layer: RegionLayer, values: dict[int, np.ndarray | _Packed]
                   ) -> _Packed | np.ndarray:
        if layer.kind == "batch_matmul":
            return self._run_batch_matmul(layer, values)
        device = self.device
        first = layer.passes[0]
        names = ("data", "weight") if isinstance(layer.workload, AddWorkload) else ("data",)
        tensors = {name: self._operand(vid, values[vid], layer.executed,
                                       first.tensor(name).shape, name, layer.border)
                   for name, vid in zip(names, layer.inputs, strict=True)}
        if layer.weight is not None:
            tensors["weight"] = layer.weight
        if layer.bias is not None:
            tensors["bias"] = layer.bias
        if layer.shift is not None:
            tensors["shift"] = layer.shift
        out_shape = tuple(first.tensor("output").shape)
        outs, cycles = [], 0
        for j, program in enumerate(layer.passes):
            out = device.alloc(out_shape, np.int8)
            cycles += _cycles(device.run(program, {**tensors, "output": out}), layer, j)
            outs.append(out)
        model = _model_cycles(device, layer, range(len(layer.passes)))
        padding = round(cycles * (1 - layer.macs / layer.padded_macs)) \
            if layer.padded_macs > layer.macs else 0
        self.trace.calls.append(OffloadedCall(
            layer.name, layer.kind, self._described(layer), layer.schedule, layer.source,
            layer.provenance, layer.requant.describe(), len(outs), cycles, layer.macs,
            padding, layer.notes, model, layer.default_cycles))
        packed = _Packed(out_shape, layer.executed, layer.out_shape)
        if layer.requant.on_vta:
            packed.buffer = outs[0]
            return packed
        packed.host = layer.requant.finish([device.download(o) for o in outs], out_shape)
        self._host_op("requantize", layer.out_shape)
        return packed

    def _operand(self, vid: int, value: np.ndarray | _Packed, consumer: Workload,
                 want: tuple[int, ...], name: str, border: Border | None = None) -> Buffer:
        """Value ``vid`` as the consumer's ``name`` tensor of shape ``want``, on the device
        (a region input is packed once per layout); ``border``: how a conv's input is laid
        out around its zero point (:class:`Border`)."""
        device, hw = self.device, self.device.hw
        want = tuple(want)
        pack = pack_weight if name == "weight" else pack_data
        operand = operand_shapes(consumer)[name]

        def laid_out(packed: np.ndarray) -> np.ndarray:
            if border is None:
                return packed
            self._host_op("border", want)
            return border.apply(packed)

        def packed_from(x: np.ndarray) -> np.ndarray:
            if isinstance(consumer, GemmWorkload) and x.ndim > 2:
                x = x.reshape(-1, x.shape[-1])  # [..., S, K]: the leading axes fold into rows
            # rows and channels padded to whole blocks; the pixels as they are
            return laid_out(pack(consumer, pad_channels(x, (*operand[:2], *x.shape[2:])), hw))

        if not isinstance(value, _Packed):
            key = (vid, want)  # the packed shape tells the layouts apart (dilated or not)
            if key not in self._packed:
                self._host_op("pack", value.shape)
                self._packed[key] = device.upload(packed_from(value))
            return self._packed[key]
        stride = consumer.stride if isinstance(consumer, Conv2dTransposeWorkload) else 1
        if stride == 1 and border is None and same_memory(value.shape, want):
            if value.buffer is None:  # after a CPU requantization: back to the device
                value.buffer = device.upload(value.host)
            return value.buffer.view(want)
        packed = value.host if value.host is not None else device.download(value.buffer)
        packed = packed.reshape(value.shape)
        if border is not None and len(value.shape) == 6:
            bordered = border.apply(packed)
            if same_memory(bordered.shape, want):
                self._host_op("border", want)
                return device.upload(bordered.reshape(want))
        if stride > 1 and len(value.shape) == 6:
            dilated = dilate_packed(packed, stride)
            if same_memory(dilated.shape, want):
                self._host_op("dilate", dilated.shape)
                return device.upload(dilated.reshape(want))
        self._host_op("repack", want)
        return device.upload(packed_from(self._unpacked(value)))

    @staticmethod
    def _described(layer: RegionLayer) -> str:
        return layer.description or replace(layer.workload, name="").describe()

    def _host_value(self, value: np.ndarray | _Packed, shape: tuple[int, ...]) -> np.ndarray:
        """A region value as an int8 array of its model ``shape`` on the host."""
        if not isinstance(value, _Packed):
            return value
        self._host_op("unpack", shape)
        return self._unpacked(value)

    def _run_batch_matmul(self, layer: RegionLayer,
                          values: dict[int, np.ndarray | _Packed]) -> np.ndarray:
        """[..., M, K] x [..., K, N]: one GEMM per leading index, the second operand packed
        as its weight by the CPU at run time (VTA's loads move whole tiles of contiguous
        elements, so they cannot transpose a row-major matrix into its weight tiles), with
        the zero points' corrections as its bias (``sum (x - zx)(w - zw) = sum x w
        - zw sum_k x - zx sum_k w + K zx zw``: per row and per column, exact)."""
        device, hw = self.device, self.device.hw
        (xs, zx), (ws, zw) = layer.operands
        x, w = (self._host_value(values[vid], shape)
                for vid, shape in zip(layer.inputs, (xs, ws), strict=True))
        m, k, n = xs[-2], xs[-1], ws[-1]
        wl, requant = layer.workload, layer.requant
        first = layer.passes[0]
        n_heads = int(np.prod(xs[:-2]))
        if len(layer.passes) % n_heads:
            raise DeployError(f"{layer.name}: {len(layer.passes)} programs for {n_heads} heads")
        per_head = len(layer.passes) // n_heads  # each head's passes, lowered in turn
        has_bias = "bias" in {t.name for t in first.tensors}
        out_shape = tuple(first.tensor("output").shape)
        ys, cycles = [], 0
        # a workload larger than the matrices (rows to whole BATCH blocks, channels to whole
        # blocks) reads zeros beyond them: zero products, outputs dropped
        rows, cols = (wl.batch, wl.in_channels), (wl.out_channels, wl.in_channels)
        for h, (xg, wg) in enumerate(zip(x.reshape(-1, m, k), w.reshape(-1, k, n),
                                         strict=True)):
            tensors = {"data": device.upload(pack_data(wl, pad_channels(xg, rows), hw)),
                       "weight": device.upload(pack_weight(wl, pad_channels(wg.T, cols), hw))}
            if has_bias:
                acc = np.zeros((m, n), np.int64)
                acc -= zw * xg.sum(1, dtype=np.int64)[:, None]
                acc -= zx * wg.sum(0, dtype=np.int64)[None, :]
                acc += k * zx * zw
                acc = pad_channels(acc, (wl.batch, wl.out_channels))
                bias = requant.fused_bias(acc) if requant.on_vta else acc.astype(np.int32)
                tensors["bias"] = device.upload(pack_matrix(bias, hw.batch, hw.block_out))
            if layer.shift is not None:  # the same for every head: uploaded when built
                tensors["shift"] = layer.shift
            outs = []
            for j in range(h * per_head, (h + 1) * per_head):
                out = device.alloc(out_shape, np.int8)
                cycles += _cycles(device.run(layer.passes[j], {**tensors, "output": out}),
                                  layer, j)
                outs.append(out)
            y = device.download(outs[0]) if requant.on_vta else \
                requant.finish([device.download(o) for o in outs])
            ys.append(unpack_output(wl, y.reshape(out_shape))[:m, :n])
        self._host_op("pack", xs)
        self._host_op("pack_weight", ws)
        if not requant.on_vta:
            self._host_op("requantize", layer.out_shape)
        self._host_op("unpack", layer.out_shape)
        self.trace.calls.append(OffloadedCall(
            layer.name, layer.kind, f"{n_heads}x " + self._described(layer), layer.schedule,
            layer.source, layer.provenance, requant.describe(), len(layer.passes), cycles,
            layer.macs, 0, layer.notes, _model_cycles(device, layer, range(len(layer.passes))),
            layer.default_cycles))
        return np.stack(ys).reshape(layer.out_shape)


def _model_cycles(device: Device, layer: RegionLayer, passes: range) -> int | None:
    """The timing model's cycles of ``passes`` (recorded when the model was built), beside a
    device that counts its own (:attr:`Device.cycle_counter`); None otherwise."""
    if device.cycle_counter is None or len(layer.cycles) < len(passes):
        return None
    return sum(layer.cycles[j] for j in passes)


def _cycles(counted: int | None, layer: RegionLayer, j: int) -> int:
    """A pass's cycles: as the device counted them, else the timing model's."""
    if counted is not None:
        return counted
    if j >= len(layer.cycles):
        raise DeployError(f"{layer.name}: the device counts no cycles and none were recorded")
    return layer.cycles[j]


def packed_function(region: RegionRunner) -> Any:
    """What TVM's VM calls, destination-passing style: ``f(*inputs, *outputs)``."""
    n_in = len(region.params)

    def call(*args: Any) -> None:
        try:
            inputs = [np.from_dlpack(a) for a in args[:n_in]]
            outputs = region.run(inputs)
            dests = args[n_in:]
            if len(dests) != len(outputs):
                raise DeployError(f"{region.symbol}: {len(dests)} outputs given, "
                                  f"{len(outputs)} computed")
            for dest, y in zip(dests, outputs, strict=True):  # TVM's or tvm_ffi's tensors
                out = np.from_dlpack(dest)
                out[...] = from_int8(y, out.dtype)
        except Exception as exc:  # kept: TVM hands its caller a RuntimeError
            region.trace.error = exc
            raise

    return call


def _shape(shape: tuple[int, ...]) -> str:
    return "x".join(str(int(s)) for s in shape)
