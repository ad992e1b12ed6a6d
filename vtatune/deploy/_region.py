"""An offloaded region built: the VTA layers of one external function, each built into
programs with its weight and bias packed and uploaded once, for the runtime's
:class:`~vtatune.deploy.runtime.RegionRunner`, which runs them each time TVM's VM calls the
function (the host ops around the calls, what a call reports: :mod:`vtatune.deploy.runtime`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from simulator.timing import time_program
from vtatune.deploy._match import LayerSpec, layer_plan
from vtatune.deploy._schedules import LayerBuilder, LayerPrograms
from vtatune.deploy.runtime import (
    Buffer,
    CpuOp,
    Device,
    OffloadedCall,
    RegionLayer,
    RegionRunner,
    Trace,
    dilate_packed,
    pad_channels,
    same_memory,
)
from vtatune.deploy.runtime._errors import DeployError
from vtatune.deploy.runtime._requantize import Requantization
from vtatune.workloads import (
    GemmWorkload,
    Workload,
    operand_shapes,
    pack_bias,
    pack_weight,
)

# the run-time names too, where the compiler side has always found them
__all__ = ["BuiltLayer", "CpuOp", "OffloadedCall", "Region", "RegionPlan", "Trace",
           "VtaLayer", "build_layer", "dilate_packed", "region_layer",
           "same_memory"]


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
    """A layer built for the device: its workload (as placed: channels padded to whole
    blocks) and the one VTA runs (``runs``: unpadded on a zero-point border, else the
    same), programs, requantization, and its weight and bias already on the device (packed
    once, when the model is built)."""

    layer: VtaLayer
    workload: Workload
    requant: Requantization
    programs: LayerPrograms
    weight: Buffer | None
    bias: Buffer | None
    runs: Workload | None = None
    #: the ``shift`` input (:meth:`Requantization.shift_input`): per-channel shifts, a
    #: fixed point's planes or the exact fixed point's clamp bounds (a batch_matmul's the
    #: same for every head)
    shift: Buffer | None = None
    #: how many times one inference runs the programs (a batch_matmul: once per head)
    calls: int = 1

    @property
    def macs(self) -> tuple[int, int]:
        """The layer's multiply-accumulates as the model has it, and as VTA runs it
        (channels padded to whole blocks)."""
        real = self.layer.spec.layer().macs
        return real, getattr(self.workload, "macs", real)

    @property
    def notes(self) -> tuple[str, ...]:
        spec, notes = self.layer.spec, []
        border = spec.border()
        if border is not None:
            notes.append(border.describe())
        if spec.bias_rounding:
            where = ("rounded by up to" if self.requant.on_vta else
                     "the CPU's requantization adding back a rounding of up to")
            notes.append(f"bias rescaled to the accumulator's scale, {where} "
                         f"{spec.bias_rounding:.3g} accumulator units")
        k = spec.merged_groups(self.workload)
        if k > 1:
            notes.append(f"{k} groups of {spec.weight.shape[1]} input channels merged into "
                         "one (block-diagonal weight)")
        real, padded = self.macs
        if k > 1:
            notes.append(f"groups merged and channels padded to whole blocks: "
                         f"{padded / real - 1:.1%} more MACs")
        elif padded > real:
            notes.append(f"channels padded to whole blocks: {padded / real - 1:.1%} more MACs")
        return tuple(notes)


def build_layer(layer: VtaLayer, device: Device, builder: LayerBuilder,
                exact: bool = False) -> BuiltLayer:
    """``layer``'s programs (schedules from the builder's log) and its constants on the
    device; ``exact``: requantized on the CPU wherever VTA's rounding could differ."""
    hw = device.hw
    spec = layer.spec
    plan = layer_plan(spec, hw, layer.name, exact)
    workload, requant, has_bias = plan.workload, plan.requant, plan.bias
    if spec.kind in ("add", "batch_matmul"):  # a batch_matmul's operands: packed per head
        programs = builder.programs(workload, plan.epilogues, bias=has_bias)
        return BuiltLayer(layer, workload, requant, programs, None, None, workload,
                          _shift_input(requant, spec.channels, workload, device),
                          calls=plan.calls)
    programs = builder.programs(workload, plan.epilogues, bias=has_bias, runs_as=plan.runs)
    acc_bias = spec.accumulator_bias()
    first = programs.passes[0].program
    runs = programs.passes[0].workload
    weight = device.upload(pack_weight(runs, pad_channels(spec.run_weight(runs),
                                                          operand_shapes(runs)["weight"]), hw))
    bias = None
    if has_bias:
        raw = np.zeros(spec.channels, np.int32) if acc_bias is None else acc_bias
        values = requant.fused_bias(raw) if requant.on_vta else raw
        values = pad_channels(values, (runs.out_channels,))
        bias = device.upload(pack_bias(values, runs.batch, hw))
        if tuple(bias.shape) != tuple(first.tensor("bias").shape):
            raise DeployError(f"{layer.name}: bias packed as {list(bias.shape)}, the program "
                              f"reads {list(first.tensor('bias').shape)}")
    return BuiltLayer(layer, workload, requant, programs, weight, bias, runs,
                      _shift_input(requant, spec.channels, runs, device))


def _shift_input(requant: Requantization, channels: int, runs: Workload,
                 device: Device) -> Buffer | None:
    """The layer's ``shift`` input on the device, packed for ``runs`` (per-channel shifts,
    a fixed point's planes, the exact fixed point's clamp bounds), or None."""
    values = requant.shift_input(channels)  # (channels,) or (planes, channels)
    if values is None:
        return None
    shifts = pad_channels(values, (*values.shape[:-1], runs.out_channels))
    return device.upload(pack_bias(shifts, runs.batch, device.hw))


class Region(RegionRunner):
    """An external function built for a device: :meth:`run` is what TVM's VM calls;
    ``built``: its layers as the compiler built them (schedules, packed constants)."""

    def __init__(self, plan: RegionPlan, device: Device, builder: LayerBuilder,
                 trace: Trace, exact: bool = False) -> None:
        self.plan = plan
        self.built = tuple(build_layer(layer, device, builder, exact)
                           for layer in plan.layers)
        super().__init__(plan.symbol, plan.params, tuple(map(region_layer, self.built)),
                         plan.outputs, device, trace)


def described(built: BuiltLayer) -> str:
    """The workload as a report names it, saying how many zero rows pad a GEMM to whole
    BATCH blocks."""
    text = replace(built.workload, name="").describe()
    if isinstance(built.workload, GemmWorkload):
        rows = built.layer.spec.layer().batch
        if rows != built.workload.batch:
            text += f" ({rows} rows padded with zeros to {built.workload.batch})"
    return text


def region_layer(built: BuiltLayer) -> RegionLayer:
    """What the runtime needs of a built layer."""
    layer, programs = built.layer, built.programs
    spec = layer.spec
    runs = None if built.runs in (None, built.workload) else built.runs
    return RegionLayer(layer.name, spec.kind, layer.inputs, layer.output,
                       tuple(spec.out_shape), built.workload, built.requant,
                       tuple(p.program for p in programs.passes),
                       programs.passes[0].schedule.short(), programs.source,
                       programs.describe(), built.weight, built.bias, runs,
                       spec.border(),
                       *built.macs, built.notes, described(built),
                       tuple((tuple(shape), q.zero_point) for shape, q in spec.inputs)
                       if spec.kind == "batch_matmul" else (),
                       tuple(time_program(p.program, p.hw).cycles for p in programs.passes),
                       built.shift, programs.default_cycles * built.calls)
