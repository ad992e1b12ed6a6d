"""VTA's code generator for Relax BYOC: ``relax.ext.vta``, which ``RunCodegen`` calls with
every external function the partitioning made.

For each function it reads the composites (each a match of the pattern table, read again
with the same annotations the check function accepted: ``_match.spec_of``), fuses each
``vta.qrelu`` into the layer before it, builds the layers for the active session's device
(programs with the log's schedules, weights and biases packed and uploaded once:
``_region``), and registers a packed function under the function's ``global_symbol``.
``RunCodegen`` turns the call into ``R.call_dps_packed(symbol, args, out_ty)``, and TVM's
VM finds the symbol in the global function registry when the model runs. It returns no
runtime module: the registered functions live in this process; a saved bundle carries what
they run (programs, packed constants, the plan of each region), and loading it registers
them again before its VM is created (:mod:`vtatune.deploy.runtime`).
"""

from __future__ import annotations

import contextvars
import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from vtatune.deploy._match import LayerSpec, Unsupported, spec_of
from vtatune.deploy._patterns import annotations, kind_of, register
from vtatune.deploy._region import Region, RegionPlan, Trace, VtaLayer
from vtatune.deploy._schedules import LayerBuilder
from vtatune.deploy._tvm import tvm
from vtatune.deploy.runtime import packed_function
from vtatune.deploy.runtime._device import Device
from vtatune.deploy.runtime._errors import DeployError
from vtatune.deploy.runtime._tvm import register as register_region

#: The name TVM's RunCodegen looks the code generator up by (``relax.ext.<Codegen>``).
CODEGEN = "relax.ext.vta"


@dataclass
class Session:
    """What the code generator builds for: the device, the schedules' builder, the trace
    the regions' calls write to, and the regions it built (by symbol)."""

    device: Device
    builder: LayerBuilder
    exact: bool = False
    trace: Trace = field(default_factory=Trace)
    regions: dict[str, Region] = field(default_factory=dict)
    _names: dict[str, Iterator[int]] = field(default_factory=dict)

    def layer_name(self, kind: str) -> str:
        counter = self._names.setdefault(kind, itertools.count(1))
        return f"{kind}_{next(counter)}"


_SESSION: contextvars.ContextVar[Session | None] = contextvars.ContextVar(
    "vtatune_codegen_session", default=None)


@contextmanager
def session(state: Session) -> Iterator[Session]:
    """``relax.ext.vta`` builds for ``state`` meanwhile."""
    register_codegen()
    token = _SESSION.set(state)
    try:
        yield state
    finally:
        _SESSION.reset(token)


def _bindings(func: Any) -> dict[Any, Any]:
    return {b.var: b.value for block in func.body.blocks for b in block.bindings}


def _composite_spec(comp: Any) -> tuple[LayerSpec, dict[str, Any]]:
    """The layer a composite function holds, and its annotated expressions."""
    name = str(comp.attrs["Composite"])
    kind = kind_of(name)
    var2val = _bindings(comp)
    root = var2val.get(comp.body.body, comp.body.body)
    ann = annotations(name, root, var2val)
    if ann is None:
        raise DeployError(f"composite {name} no longer matches its pattern")
    try:
        return spec_of(kind, ann), ann
    except Unsupported as exc:  # the check function accepted it: cannot happen
        raise DeployError(f"composite {name}: {exc}") from None


def plan_region(symbol: str, func: Any, state: Session) -> RegionPlan:
    """The layers of an external function, each ReLU fused into the layer before it."""
    tvm()
    from tvm import relax

    ids: dict[Any, int] = {}
    params = []
    for p in func.params:
        ids[p] = len(ids)
        params.append((ids[p], tuple(int(s) for s in p.ty.shape)))
    local: dict[Any, Any] = {}
    layers: list[VtaLayer] = []
    producer: dict[int, int] = {}  # value id -> index of the layer writing it
    alias: dict[Any, Any] = {}
    for block in func.body.blocks:
        for b in block.bindings:
            value = b.value
            if isinstance(value, relax.Function):
                local[b.var] = value
                continue
            if isinstance(value, relax.Tuple):
                alias[b.var] = value
                continue
            comp = local.get(value.op) if isinstance(value.op, relax.Var) else (
                value.op if isinstance(value.op, relax.Function) else None)
            if comp is None or comp.attrs is None or "Composite" not in comp.attrs:
                raise DeployError(f"{symbol}: a binding that is not a VTA layer: {value.op}")
            spec, ann = _composite_spec(comp)
            comp_index = {p: i for i, p in enumerate(comp.params)}
            roles = {"add": ("a_q", "r_q"), "batch_matmul": ("x_q", "w_q")}.get(spec.kind,
                                                                                 ("x_q",))
            inputs = []
            for role in roles:
                param = ann[role]
                if param not in comp_index:
                    raise DeployError(f"{symbol}: the {role} of {comp.attrs['Composite']} is "
                                      "not an input of the composite")
                arg = value.args[comp_index[param]]
                if arg not in ids:
                    raise DeployError(f"{symbol}: an input that is not a tensor of the region")
                inputs.append(ids[arg])
            ids[b.var] = len(ids)
            if spec.kind == "relu":
                before = producer.get(inputs[0])
                if before is None:
                    raise DeployError(f"{symbol}: a ReLU with no VTA layer before it")
                prev = layers[before]
                layers[before] = VtaLayer(prev.name, prev.spec.with_relu(spec), prev.inputs,
                                          ids[b.var])
                producer[ids[b.var]] = before
                continue
            layers.append(VtaLayer(state.layer_name(spec.kind), spec, tuple(inputs),
                                   ids[b.var]))
            producer[ids[b.var]] = len(layers) - 1
    ret = func.body.body
    ret = alias.get(ret, ret)
    fields = list(ret.fields) if isinstance(ret, relax.Tuple) else [ret]
    outputs = tuple(ids[f] for f in fields)
    return RegionPlan(symbol, tuple(params), tuple(layers), outputs)


def tuning_problems(mod: Any, state: Session) -> list[tuple[Any, bool, int]]:
    """What the code generator will ask ``state``'s builder for, before it runs: each
    offloaded layer of the partitioned ``mod`` as ``(workload, bias, programs run per
    inference)`` (:func:`vtatune.deploy._match.layer_plan`, what the code generator builds
    from), planned with a session of its own (the layers' names are not used up)."""
    from vtatune.deploy._match import layer_plan
    from vtatune.deploy._partition import external_functions

    planner = Session(state.device, state.builder, state.exact)
    out = []
    for symbol, func in external_functions(mod):
        for layer in plan_region(symbol, func, planner).layers:
            plan = layer_plan(layer.spec, state.device.hw, layer.name, state.exact)
            out.append((plan.workload, plan.bias, len(plan.epilogues) * plan.calls))
    return out


def vta_codegen(functions: Any, options: Any, constant_names: Any) -> list[Any]:
    """``relax.ext.vta(functions, options, constant_names) -> [runtime.Module]``: builds and
    registers each function for the active session; no runtime module."""
    tvm()
    state = _SESSION.get()
    if state is None:
        raise DeployError("relax.ext.vta runs inside vtatune.deploy.compile_model (it needs "
                          "the device and the log)")
    try:
        for func in functions:
            symbol = str(func.attrs["global_symbol"])
            region = Region(plan_region(symbol, func, state), state.device, state.builder,
                            state.trace, state.exact)
            state.regions[symbol] = region
            register_region(symbol, packed_function(region))
    except Exception as exc:  # kept: RunCodegen's caller would see a RuntimeError
        state.trace.error = exc
        raise
    return []


_REGISTERED = []


def register_codegen() -> None:
    """Register ``relax.ext.vta`` (and the pattern table) with TVM, once per process."""
    t = tvm()
    register()
    if not _REGISTERED:
        t.register_global_func(CODEGEN, vta_codegen, override=True)
        _REGISTERED.append(CODEGEN)
