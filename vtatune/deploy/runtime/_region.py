"""An offloaded region as it runs: its VTA layers' programs, constants on the device and
requantizations, run each time TVM's VM calls the region's function.

Activations stay on the device, packed as VTA lays them out, from one VTA layer to the next
(a producer's output buffer is the consumer's input when their layouts are the same memory:
:func:`same_memory`). The CPU ops of a region are vtatune's host code around the calls:
``pack`` (a region input, NCHW, into VTA's layout), ``unpack`` (a region output back),
``dilate`` (zeros between pixels before a transposed conv, on the packed tensor),
``repack`` (between layouts that differ: a conv's output read as a dense input on a core
with BATCH > 1, say) and ``requantize`` (the CPU's part of a requantization VTA cannot do:
``vtatune.deploy._requantize``).

The compiler builds the layers (:mod:`vtatune.deploy._region`); a bundle brings them back
(:mod:`vtatune.deploy.runtime._bundle`); either way this module runs them, with numpy and a
:class:`~vtatune.deploy.runtime.Device` only.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from simulator.program import Program
from vtatune.deploy._errors import DeployError
from vtatune.deploy._requantize import Requantization
from vtatune.deploy.runtime._device import Buffer, Device
from vtatune.workloads import (
    AddWorkload,
    Conv2dTransposeWorkload,
    Workload,
    pack_data,
    pack_weight,
    unpack_output,
)


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
class RegionLayer:
    """One VTA layer of a region, as the device runs it: the region values it reads (a conv
    or dense: its input; an add: both operands) and writes, its op (``kind``) and NCHW
    output shape, its workload, requantization, one program per VTA pass, its weight and
    bias already on the device, and what :class:`OffloadedCall` reports of its schedule
    (``schedule``: the short form; ``source``, ``provenance``)."""

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
        """The region's outputs (NCHW, or N x C for a dense) for its inputs."""
        if len(inputs) != len(self.params):
            raise DeployError(f"{self.symbol}: {len(inputs)} inputs for "
                              f"{len(self.params)} parameters")
        values: dict[int, np.ndarray | _Packed] = {}
        self._packed = {}
        for (vid, shape), x in zip(self.params, inputs, strict=True):
            if tuple(x.shape) != shape:
                raise DeployError(f"{self.symbol}: input of shape {list(x.shape)}, "
                                  f"expected {list(shape)}")
            values[vid] = x
        for layer in self.layers:
            values[layer.output] = self._run_layer(layer, values)
        outputs = []
        for vid in self.outputs:
            value = values[vid]
            if not isinstance(value, _Packed):
                outputs.append(value)
                continue
            packed = value.host if value.host is not None else self.device.download(value.buffer)
            out = unpack_output(value.workload, packed.reshape(value.shape))
            self._host_op("unpack", out.shape)
            outputs.append(out)
        return outputs

    def _run_layer(self, layer: RegionLayer, values: dict[int, np.ndarray | _Packed]) -> _Packed:
        device = self.device
        first = layer.passes[0]
        names = ("data", "weight") if isinstance(layer.workload, AddWorkload) else ("data",)
        tensors = {name: self._operand(vid, values[vid], layer.workload,
                                       first.tensor(name).shape, name)
                   for name, vid in zip(names, layer.inputs, strict=True)}
        if layer.weight is not None:
            tensors["weight"] = layer.weight
        if layer.bias is not None:
            tensors["bias"] = layer.bias
        out_shape = tuple(first.tensor("output").shape)
        outs, cycles = [], 0
        for program in layer.passes:
            out = device.alloc(out_shape, np.int8)
            cycles += device.run(program, {**tensors, "output": out})
            outs.append(out)
        self.trace.calls.append(OffloadedCall(
            layer.name, layer.kind, replace(layer.workload, name="").describe(),
            layer.schedule, layer.source, layer.provenance, layer.requant.describe(),
            len(outs), cycles))
        if layer.requant.on_vta:
            return _Packed(out_shape, layer.workload, buffer=outs[0])
        y = layer.requant.finish([device.download(o) for o in outs])
        self._host_op("requantize", layer.out_shape)
        return _Packed(out_shape, layer.workload, host=y)

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
                np.from_dlpack(dest)[...] = np.asarray(y, dtype=np.int8)
        except Exception as exc:  # kept: TVM hands its caller a RuntimeError
            region.trace.error = exc
            raise

    return call


def _shape(shape: tuple[int, ...]) -> str:
    return "x".join(str(int(s)) for s in shape)
