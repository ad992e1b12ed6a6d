"""An offloaded region: the VTA layers of one external function, built into programs, and
run on a :class:`~vtatune.deploy.Device` each time TVM's VM calls the function.

Activations stay on the device, packed as VTA lays them out, from one VTA layer to the next
(a producer's output buffer is the consumer's input when their layouts are the same memory:
:func:`same_memory`). The CPU ops of a region are vtatune's host code around the calls:
``pack`` (a region input, NCHW, into VTA's layout), ``unpack`` (a region output back),
``dilate`` (zeros between pixels before a transposed conv, on the packed tensor),
``repack`` (between layouts that differ: a conv's output read as a dense input on a core
with BATCH > 1, say), ``pack_weight`` (a batch_matmul's second operand, an activation,
packed as its weight at run time, head by head) and ``requantize`` (the CPU's part of a
requantization VTA cannot do: ``_requantize``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from vtatune.deploy._device import Buffer, Device
from vtatune.deploy._errors import DeployError
from vtatune.deploy._match import LayerSpec, workload_of
from vtatune.deploy._requantize import Requantization
from vtatune.deploy._schedules import LayerBuilder, LayerPrograms
from vtatune.lowering import pack_bias, pack_data, pack_matrix, pack_weight, unpack_output
from vtatune.workloads import AddWorkload, Conv2dTransposeWorkload, GemmWorkload, Workload


@dataclass(frozen=True)
class OffloadedCall:
    """One VTA layer as it ran: ``layer`` (its name in the deployed model), ``op``, the
    ``workload`` (its epilogue included), its ``schedule`` (the knobs), where that came from
    (``source``: ``log``, ``fallback`` or ``tuned``; ``provenance``: the log line, or why it
    fell back), how it was requantized, its VTA passes and their cycles in all."""

    layer: str
    op: str
    workload: str
    schedule: str
    source: str
    provenance: str
    requantization: str
    passes: int
    cycles: int

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))


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
class VtaLayer:
    """One layer of a region: its spec, the region values it reads (a conv or dense: its
    input; an add: both operands) and the value it writes."""

    name: str
    spec: LayerSpec
    inputs: tuple[int, ...]
    output: int


@dataclass(frozen=True, eq=False)
class RegionPlan:
    """An external function as layers: its parameters (value ids and NCHW shapes), its
    layers in order, and the values it returns."""

    symbol: str
    params: tuple[tuple[int, tuple[int, ...]], ...]
    layers: tuple[VtaLayer, ...]
    outputs: tuple[int, ...]


@dataclass(frozen=True, eq=False)
class BuiltLayer:
    """A layer built for the device: its workload and programs, its requantization, and its
    weight and bias already on the device (packed once, when the model is built)."""

    layer: VtaLayer
    workload: Workload
    requant: Requantization
    programs: LayerPrograms
    weight: Buffer | None
    bias: Buffer | None


@dataclass
class _Packed:
    """A value in VTA's layout: on the device (``buffer``) or, after a CPU requantization,
    on the host (``host``); ``workload`` produced it (and unpacks it)."""

    shape: tuple[int, ...]
    workload: Workload
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


def dilate_packed(x: np.ndarray, stride: int) -> np.ndarray:
    """A packed conv-layout tensor (N/B, C/c, H, W, B, c) with ``stride - 1`` zero rows and
    columns between pixels (what conv2d_transpose_packed reads)."""
    nb, cb, h, w, b, c = x.shape
    out = np.zeros((nb, cb, (h - 1) * stride + 1, (w - 1) * stride + 1, b, c), x.dtype)
    out[:, :, ::stride, ::stride] = x
    return out


def build_layer(layer: VtaLayer, device: Device, builder: LayerBuilder,
                exact: bool = False) -> BuiltLayer:
    """``layer``'s programs (schedules from the builder's log) and its constants on the
    device; ``exact``: requantized on the CPU wherever VTA's rounding could differ."""
    hw = device.hw
    spec = layer.spec
    requant = spec.requantization(exact)
    workload = workload_of(spec, hw, layer.name, exact)
    if isinstance(workload, AddWorkload):
        programs = builder.programs(workload, requant.epilogues(bias=False), bias=False)
        return BuiltLayer(layer, workload, requant, programs, None, None)
    if spec.kind == "batch_matmul":  # weight and bias packed at run time, per head
        has_bias = requant.needs_bias(spec.has_bias)
        programs = builder.programs(workload, requant.epilogues(bias=has_bias), bias=has_bias)
        return BuiltLayer(layer, workload, requant, programs, None, None)
    acc_bias = spec.accumulator_bias()
    has_bias = requant.needs_bias(acc_bias is not None)
    programs = builder.programs(workload, requant.epilogues(bias=has_bias), bias=has_bias)
    weight = device.upload(pack_weight(workload, spec.weight, hw))
    bias = None
    if has_bias:
        raw = np.zeros(spec.channels, np.int32) if acc_bias is None else acc_bias
        values = requant.fused_bias(raw) if requant.on_vta else raw
        bias = device.upload(pack_bias(values, workload.batch, hw))
    return BuiltLayer(layer, workload, requant, programs, weight, bias)


class Region:
    """An external function built for a device: :meth:`run` is what TVM's VM calls."""

    def __init__(self, plan: RegionPlan, device: Device, builder: LayerBuilder,
                 trace: Trace, exact: bool = False) -> None:
        self.plan = plan
        self.device = device
        self.trace = trace
        self.layers = tuple(build_layer(layer, device, builder, exact)
                            for layer in plan.layers)
        self._packed: dict[tuple[int, tuple[int, ...]], Buffer] = {}  # one run's packed inputs

    def _host_op(self, op: str, shape: tuple[int, ...]) -> None:
        self.trace.host_ops.append((self.plan.symbol, CpuOp(op, _shape(shape), "vtatune")))

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        """The region's outputs (NCHW, or N x C for a dense) for its inputs."""
        if len(inputs) != len(self.plan.params):
            raise DeployError(f"{self.plan.symbol}: {len(inputs)} inputs for "
                              f"{len(self.plan.params)} parameters")
        values: dict[int, np.ndarray | _Packed] = {}
        self._packed = {}
        for (vid, shape), x in zip(self.plan.params, inputs, strict=True):
            if tuple(x.shape) != shape:
                raise DeployError(f"{self.plan.symbol}: input of shape {list(x.shape)}, "
                                  f"expected {list(shape)}")
            values[vid] = x
        model_shapes = {}  # value id -> its shape in the model (a dense's [..., S, N])
        for built in self.layers:
            values[built.layer.output] = self._run_layer(built, values)
            model_shapes[built.layer.output] = built.layer.spec.out_shape
        outputs = []
        for vid in self.plan.outputs:
            value = values[vid]
            if not isinstance(value, _Packed):
                outputs.append(value)
                continue
            packed = value.host if value.host is not None else self.device.download(value.buffer)
            out = unpack_output(value.workload, packed.reshape(value.shape))
            self._host_op("unpack", out.shape)
            shape = model_shapes.get(vid, out.shape)
            if isinstance(value.workload, GemmWorkload):  # padding rows dropped
                out = out[:int(np.prod(shape[:-1]))]
            outputs.append(out.reshape(shape))
        return outputs

    def _run_layer(self, built: BuiltLayer, values: dict[int, np.ndarray | _Packed]
                   ) -> _Packed | np.ndarray:
        device, spec = self.device, built.layer.spec
        if spec.kind == "batch_matmul":
            return self._run_batch_matmul(built, values)
        first = built.programs.passes[0].program
        names = ("data", "weight") if isinstance(built.workload, AddWorkload) else ("data",)
        tensors = {name: self._operand(vid, values[vid], built.workload,
                                       first.tensor(name).shape, name)
                   for name, vid in zip(names, built.layer.inputs, strict=True)}
        if built.weight is not None:
            tensors["weight"] = built.weight
        if built.bias is not None:
            tensors["bias"] = built.bias
        out_shape = tuple(first.tensor("output").shape)
        outs, cycles = [], 0
        for lowered in built.programs.passes:
            out = device.alloc(out_shape, np.int8)
            cycles += device.run(lowered.program, {**tensors, "output": out})
            outs.append(out)
        self.trace.calls.append(OffloadedCall(
            built.layer.name, spec.kind, _described(built),
            built.programs.passes[0].schedule.short(), built.programs.source,
            built.programs.describe(), built.requant.describe(), len(outs), cycles))
        if built.requant.on_vta:
            return _Packed(out_shape, built.workload, buffer=outs[0])
        y = built.requant.finish([device.download(o) for o in outs])
        self._host_op("requantize", spec.out_shape)
        return _Packed(out_shape, built.workload, host=y)

    def _host_value(self, value: np.ndarray | _Packed, shape: tuple[int, ...]) -> np.ndarray:
        """A region value as an int8 array of its model ``shape`` on the host."""
        if not isinstance(value, _Packed):
            return value
        packed = value.host if value.host is not None else self.device.download(value.buffer)
        self._host_op("unpack", shape)
        out = unpack_output(value.workload, packed.reshape(value.shape))
        if isinstance(value.workload, GemmWorkload):  # padding rows dropped
            out = out[:int(np.prod(shape[:-1]))]
        return out.reshape(shape)

    def _run_batch_matmul(self, built: BuiltLayer,
                          values: dict[int, np.ndarray | _Packed]) -> np.ndarray:
        """[..., M, K] x [..., K, N]: one GEMM per leading index, the second operand packed
        as its weight by the CPU at run time (VTA's loads move whole tiles of contiguous
        elements, so they cannot transpose a row-major matrix into its weight tiles), with
        the zero points' corrections as its bias (``sum (x - zx)(w - zw) = sum x w
        - zw sum_k x - zx sum_k w + K zx zw``: per row and per column, exact)."""
        device, hw, spec = self.device, self.device.hw, built.layer.spec
        (xs, xq), (ws, wq) = spec.inputs
        x, w = (self._host_value(values[vid], shape)
                for vid, shape in zip(built.layer.inputs, (xs, ws), strict=True))
        m, k, n = xs[-2], xs[-1], ws[-1]
        wl, requant, passes = built.workload, built.requant, built.programs.passes
        first = passes[0].program
        has_bias = "bias" in {t.name for t in first.tensors}
        out_shape = tuple(first.tensor("output").shape)
        ys, cycles = [], 0
        # a workload larger than the matrices (rows to whole BATCH blocks, channels to whole
        # blocks) reads zeros beyond them: zero products, outputs dropped
        rows, cols = (wl.batch, wl.in_channels), (wl.out_channels, wl.in_channels)
        for xg, wg in zip(x.reshape(-1, m, k), w.reshape(-1, k, n), strict=True):
            tensors = {"data": device.upload(pack_data(wl, _pad_to(xg, rows), hw)),
                       "weight": device.upload(pack_weight(wl, _pad_to(wg.T, cols), hw))}
            if has_bias:
                acc = np.zeros((m, n), np.int64)
                acc -= wq.zero_point * xg.sum(1, dtype=np.int64)[:, None]
                acc -= xq.zero_point * wg.sum(0, dtype=np.int64)[None, :]
                acc += k * xq.zero_point * wq.zero_point
                acc = _pad_to(acc, (wl.batch, wl.out_channels))
                bias = requant.fused_bias(acc) if requant.on_vta else acc.astype(np.int32)
                tensors["bias"] = device.upload(pack_matrix(bias, hw.batch, hw.block_out))
            outs = []
            for lowered in passes:
                out = device.alloc(out_shape, np.int8)
                cycles += device.run(lowered.program, {**tensors, "output": out})
                outs.append(out)
            y = device.download(outs[0]) if requant.on_vta else \
                requant.finish([device.download(o) for o in outs])
            ys.append(unpack_output(wl, y.reshape(out_shape))[:m, :n])
        heads = len(ys)
        self._host_op("pack", xs)
        self._host_op("pack_weight", ws)
        if not requant.on_vta:
            self._host_op("requantize", spec.out_shape)
        self._host_op("unpack", spec.out_shape)
        self.trace.calls.append(OffloadedCall(
            built.layer.name, spec.kind, f"{heads}x " + _described(built),
            passes[0].schedule.short(), built.programs.source, built.programs.describe(),
            requant.describe(), len(passes) * heads, cycles))
        return np.stack(ys).reshape(spec.out_shape)

    def _operand(self, vid: int, value: np.ndarray | _Packed, consumer: Workload,
                 want: tuple[int, ...], name: str) -> Buffer:
        """Value ``vid`` as the consumer's ``name`` tensor of shape ``want``, on the device
        (a region input is packed once per layout)."""
        device, hw = self.device, self.device.hw
        want = tuple(want)
        pack = pack_weight if name == "weight" else pack_data
        if not isinstance(value, _Packed):
            key = (vid, want)  # the packed shape tells the layouts apart (dilated or not)
            if key not in self._packed:
                self._host_op("pack", value.shape)
                if isinstance(consumer, GemmWorkload):
                    if value.ndim > 2:
                        value = value.reshape(-1, value.shape[-1])  # [..., S, K]: rows folded
                    value = _pad_rows(value, consumer.batch)  # to whole BATCH blocks
                self._packed[key] = device.upload(pack(consumer, value, hw))
            return self._packed[key]
        stride = consumer.stride if isinstance(consumer, Conv2dTransposeWorkload) else 1
        if stride == 1 and same_memory(value.shape, want):
            if value.buffer is None:  # after a CPU requantization: back to the device
                value.buffer = device.upload(value.host)
            return value.buffer.view(want)
        packed = value.host if value.host is not None else device.download(value.buffer)
        packed = packed.reshape(value.shape)
        if stride > 1 and len(value.shape) == 6:
            dilated = dilate_packed(packed, stride)
            if same_memory(dilated.shape, want):
                self._host_op("dilate", dilated.shape)
                return device.upload(dilated.reshape(want))
        self._host_op("repack", want)
        return device.upload(pack(consumer, unpack_output(value.workload, packed), hw))


def _model_rows(spec: LayerSpec) -> int:
    """The rows of a dense or batch_matmul layer's GEMM in the model (before padding)."""
    return spec.layer().batch


def _described(built: BuiltLayer) -> str:
    """The workload as a report names it, saying how many zero rows pad a GEMM to whole
    BATCH blocks."""
    text = replace(built.workload, name="").describe()
    if isinstance(built.workload, GemmWorkload):
        rows = _model_rows(built.layer.spec)
        if rows != built.workload.batch:
            text += f" ({rows} rows padded with zeros to {built.workload.batch})"
    return text


def _pad_rows(x: np.ndarray, rows: int) -> np.ndarray:
    """``x`` (rows first) with zero rows up to ``rows``."""
    if x.shape[0] == rows:
        return x
    return np.concatenate([x, np.zeros((rows - x.shape[0], *x.shape[1:]), x.dtype)])


def _pad_to(x: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """A matrix with zero rows and columns up to ``shape`` (contiguous, as packing wants)."""
    out = np.zeros(shape, x.dtype)
    out[:x.shape[0], :x.shape[1]] = x
    return out


def _shape(shape: tuple[int, ...]) -> str:
    return "x".join(str(int(s)) for s in shape)

