"""Where each layer of a quantized ONNX model runs, decided once: TVM's import and VTA's
partitioning (:func:`~vtatune.deploy.partition`: the pattern table's check functions,
:func:`~vtatune.deploy.refusals`), and for each offloaded layer how VTA runs it
(:func:`~vtatune.deploy._match.layer_plan`: the workload, the zero-point border, one
pass per requantization epilogue). ``deploy`` builds what this decides; ``network``
places, tunes and counts an ONNX model with it (:func:`placed_network`), so the two agree
layer for layer, and count the same passes.

No code generation and no build: an import and a partitioning, a second or so for a
ResNet-18.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from simulator.hardware import HardwareConfig
from vtatune.deploy._deploy import _LAYER_OPS, _unmatched
from vtatune.deploy._dynamic import to_accumulators
from vtatune.deploy._exactness import resolve_exact
from vtatune.deploy._import import import_model
from vtatune.deploy._macs import call_macs, float_macs, float_operands, module_macs
from vtatune.deploy._match import LayerPlan, layer_plan
from vtatune.deploy._model import (
    float_model_error,
    is_quantized,
    load_model,
    model_input,
)
from vtatune.deploy._partition import partition
from vtatune.deploy._patterns import PREFIX
from vtatune.deploy._qoperator import to_qdq
from vtatune.deploy._tvm import tvm
from vtatune.deploy.runtime._errors import DeployError
from vtatune.deploy.runtime._model import MacShares
from vtatune.networks import (
    CpuLayer,
    CpuOp,
    Layer,
    Network,
    load_network,
    network_name,
    tasks_of,
)

__all__ = ["Placement", "PlacedLayer", "load_placed", "placed_network", "placement"]

#: How a CPU layer is named by the Relax op at its core (as ``network`` names layers).
_KINDS = {"nn.conv2d": "conv2d", "nn.conv2d_transpose": "conv2d_transpose",
          "matmul": "matmul", "add": "add"}


@dataclass(frozen=True)
class PlacedLayer:
    """One layer of the model: on VTA (``plan``: how it runs) or on the CPU (``layer`` a
    :class:`~vtatune.networks.CpuLayer` with its reason)."""

    layer: Layer | CpuLayer
    plan: LayerPlan | None = None

    @property
    def name(self) -> str:
        return self.layer.name

    @property
    def on_vta(self) -> bool:
        return self.plan is not None


@dataclass(frozen=True)
class Placement(MacShares):
    """A model placed on ``hw``: its layers in the order ``main`` runs them, the other ops
    the CPU runs (``cpu_ops``), and the model's multiply-accumulates from the shapes it is
    built with (:func:`~vtatune.deploy.module_macs`), ``float_macs`` those of its layers
    the quantizer left in float (:func:`~vtatune.deploy.float_macs`)."""

    name: str
    hw: HardwareConfig
    layers: tuple[PlacedLayer, ...]
    model_macs: int
    cpu_ops: tuple[CpuOp, ...] = field(default=(), repr=False)
    steps: tuple[Layer | CpuLayer | CpuOp, ...] = field(default=(), repr=False)
    float_macs: int = 0

    @property
    def vta_macs(self) -> int:
        return sum(p.layer.macs for p in self.layers if p.on_vta)


class _Names:
    """Layer names as the code generator gives them (``conv2d_1``, ``add_2``, ...)."""

    def __init__(self) -> None:
        self._counters: dict[str, Iterator[int]] = {}

    def layer_name(self, kind: str) -> str:
        counter = self._counters.setdefault(kind, itertools.count(1))
        return f"{kind}_{next(counter)}"


def _shape(expr: Any) -> str:
    shape = getattr(getattr(expr, "ty", None), "shape", None)
    try:
        return "x".join(str(int(s)) for s in shape)
    except (TypeError, ValueError):
        return "?"


def placement(model: Any, hw: HardwareConfig | str | None = None, *,
              exact: bool | None = None) -> Placement:
    """Where each layer of ``model`` (an ONNX path or ModelProto, quantized) runs on ``hw``
    (default pynq) as :func:`~vtatune.deploy.compile_model` runs it (``exact`` as there):
    DeployError for a model deploy refuses (a float model, one TVM cannot import)."""
    from vtatune.deploy._codegen import plan_region

    t = tvm()
    from tvm import relax

    hw = hw if isinstance(hw, HardwareConfig) else HardwareConfig.resolve(hw)
    proto, name = load_model(model)
    proto = to_accumulators(to_qdq(proto))  # QOperator: its QDQ form; dynamic: VTA's
    if not is_quantized(proto):
        raise float_model_error(name)
    exact = resolve_exact(exact, proto)
    input_name, shape, _ = model_input(proto)
    mod = import_model(proto, shape, input_name).module
    macs, floats = module_macs(mod), float_macs(mod)
    mod, state = partition(mod, hw)
    names = _Names()
    func = mod["main"]
    values = {b.var: b.value for block in func.body.blocks for b in block.bindings}
    layers: list[PlacedLayer] = []
    steps: list[Layer | CpuLayer | CpuOp] = []
    planned: dict[str, list[PlacedLayer]] = {}
    for block in func.body.blocks:
        for b in block.bindings:
            v = b.value
            if not isinstance(v, relax.Call):
                continue
            if isinstance(v.op, t.ir.GlobalVar):
                callee = mod[v.op]
                if callee.attrs is None or callee.attrs.get("Codegen") != PREFIX:
                    continue
                symbol = str(v.op.name_hint)
                if symbol not in planned:  # TVM calls one function for equal regions
                    planned[symbol] = [
                        PlacedLayer(vta.spec.layer(vta.name),
                                    layer_plan(vta.spec, hw, vta.name, exact))
                        for vta in plan_region(symbol, callee, names).layers]
                layers += planned[symbol]
                steps += [x.layer for x in planned[symbol]]
                continue
            if not isinstance(v.op, t.ir.Op):
                continue
            op = v.op.name.removeprefix("relax.")
            reason = state.reason_for(v, b.var.name) if op in _KINDS else None
            if reason is None and op in _LAYER_OPS:
                reason = _unmatched(v, values)
            if reason:
                cpu = CpuLayer(b.var.name, _KINDS[op], _shape(b.var), reason,
                               quantized=not any(float_operands(v, values)),
                               macs=call_macs(v, b.var) or 0)
                layers.append(PlacedLayer(cpu))
                steps.append(cpu)
            else:
                steps.append(CpuOp(b.var.name, op, _shape(b.var)))
    return Placement(name, hw, tuple(layers), macs,
                     tuple(s for s in steps if isinstance(s, CpuOp)), tuple(steps), floats)


def placed_network(model: Any, hw: HardwareConfig | str | None = None, *,
                   tasks: str = "deployed", exact: bool | None = None,
                   name: str | None = None) -> Network:
    """``model`` as a :class:`~vtatune.networks.Network` placed by :func:`placement`: each
    offloaded layer's task the workload a log's record is looked up by, each of its VTA
    passes a step (the network's VTA time counts what deploy runs), every layer deploy
    leaves on the CPU with deploy's reason; ``tasks`` as :func:`vtatune.networks.tasks_of`
    groups them. ``name``: the network's (default: the file's stem, or the model's)."""
    p = placement(model, hw, exact=exact)
    placed = {x.name: (x.plan.workload, x.plan.passes) if x.plan is not None
              else x.layer.reason for x in p.layers}
    grouped, cpu, steps = tasks_of(list(p.steps), p.hw, name or network_name(
        model if isinstance(model, str | Path) else p.name), tasks, "deploy", placed=placed)
    source = f"ONNX model {model if isinstance(model, str | Path) else p.name}, placed as " \
             "deploy runs it (TVM's import and VTA's pattern table)"
    return Network(name or network_name(model if isinstance(model, str | Path) else p.name),
                   source, p.hw, grouped, cpu, (),
                   tuple(x.layer for x in p.layers), steps, "deploy")


def load_placed(network: str | Path, hw: HardwareConfig | str | None = None, *,
                batch: int | None = None, tasks: str = "deployed",
                placement: str | None = None) -> Network:
    """:func:`vtatune.networks.load_network`, with an ONNX model whose placement is
    ``deploy`` (its default) placed by deploy itself (:func:`placed_network`), so ``network``
    and ``design`` place and count it as deploy runs it. Where deploy does not run the model
    (a float model, one TVM cannot import, TVM not installed) or runs another batch than
    ``batch``, the ONNX reader places it, and a note says why."""
    hw = hw if isinstance(hw, HardwareConfig) else HardwareConfig.resolve(hw)
    onnx_file = str(network).endswith(".onnx") or Path(network).is_file()
    deployed = (placement or ("tvm014" if tasks == "autotvm" else "deploy")) == "deploy"
    if not onnx_file or not deployed or batch not in (None, 1):
        return load_network(network, hw, batch=batch, tasks=tasks, placement=placement)
    try:
        return placed_network(network, hw, tasks=tasks)
    except DeployError as exc:
        refused = str(exc)
    net = load_network(network, hw, tasks=tasks, placement="deploy")
    return replace(net, notes=(*net.notes, f"deploy does not run this model ({refused}); "
                               "its layers are placed by the ONNX reader as deploy would "
                               "place them"))
