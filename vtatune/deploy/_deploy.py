"""Deploying a quantized ONNX model with today's TVM and vtatune's VTA programs: import
(``tvm.relax.frontend.onnx``), partition (``_partition``), build (``RunCodegen`` with
``relax.ext.vta``, then ``relax.build`` for the CPU), run.

:func:`compile_model` builds once (:class:`CompiledModel`, run it on any input);
:func:`deploy` builds and runs once (:class:`DeployResult`). :func:`reference` runs the same
model on TVM for the CPU alone or on onnxruntime (:func:`references`: on a batch),
:func:`agreement` compares two outputs in quantization steps, :func:`check_outputs` a
batch's outputs with both references (and their top-1 classes: :func:`top1`).
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from simulator.hardware import HardwareConfig
from vtatune.builds import FallbackWarning
from vtatune.deploy._device import Device, SimulatedDevice
from vtatune.deploy._errors import DeployError
from vtatune.deploy._model import (
    check_input,
    is_quantized,
    load_model,
    model_input,
    output_step,
    random_input,
)
from vtatune.deploy._partition import partition
from vtatune.deploy._patterns import Partitioning
from vtatune.deploy._region import CpuOp, OffloadedCall, Trace
from vtatune.deploy._schedules import NO_LOG, LayerBuilder
from vtatune.deploy._tvm import tvm

#: What TVM compiles the CPU's part for.
TARGET = "llvm"
#: The op at the core of each layer kind VTA could run (CPU ops VTA refused get a reason).
_ANCHOR_OPS = ("nn.conv2d", "nn.conv2d_transpose", "matmul", "add", "nn.relu")


@dataclass(frozen=True, eq=False)
class DeployResult:
    """One inference of a deployed model.

    ``offloaded``: every VTA layer in the order it ran (:class:`OffloadedCall`: op,
    workload, schedule source, requantization, cycles); ``cpu_ops``: everything the CPU ran
    in order (:class:`CpuOp`: TVM's compiled ops, and vtatune's packing around the VTA
    calls), a reason on the layers VTA could have run; ``vta_cycles``: the offloaded
    layers' cycles in all (timing model); ``output``: the model's output."""

    model: str
    hw: HardwareConfig
    device: str
    offloaded: tuple[OffloadedCall, ...]
    cpu_ops: tuple[CpuOp, ...]
    vta_cycles: int
    output: np.ndarray
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def vta_ms(self) -> float:
        """The VTA layers' time at the board's clock."""
        return self.vta_cycles / (self.hw.clock_mhz * 1e3)

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.model, "hw": self.hw.target_model, "device": self.device,
                "offloaded": [c.as_dict() for c in self.offloaded],
                "cpu_ops": [c.as_dict() for c in self.cpu_ops],
                "vta_cycles": self.vta_cycles, "vta_ms": self.vta_ms,
                "output_shape": list(self.output.shape), "output": self.output.tolist(),
                "seconds": dict(self.seconds)}

    def report(self) -> str:
        """What ran where, as the ``deploy`` command prints it."""
        lines = [f"{self.model} on {self.hw.target_model} ({self.device})", "",
                 f"VTA: {len(self.offloaded)} offloaded layers"]
        if self.offloaded:
            rows = [("layer", "workload", "schedule from", "requantization", "cycles")]
            rows += [(c.layer, c.workload, c.provenance, c.requantization, f"{c.cycles:,}")
                     for c in self.offloaded]
            lines += _table(rows, right=(4,))
        tvm_ops = [c for c in self.cpu_ops if c.by == "tvm"]
        host = [c for c in self.cpu_ops if c.by == "vtatune"]
        lines += ["", f"CPU: {len(tvm_ops)} ops compiled by TVM ({_counts(tvm_ops)})"]
        lines += [f"  {c.op} -> {c.shape}: {c.reason}" for c in tvm_ops if c.reason]
        lines.append(f"CPU: {len(host)} ops of vtatune's runtime around the VTA calls"
                     + (f" ({_counts(host)})" if host else ""))
        lines += ["", f"VTA time: {self.vta_cycles:,} cycles = {self.vta_ms:.3f} ms at "
                      f"{self.hw.clock_mhz:g} MHz (timing model)"]
        return "\n".join(lines)


def _counts(ops: list[CpuOp]) -> str:
    counts: dict[str, int] = {}
    for c in ops:
        counts[c.op] = counts.get(c.op, 0) + 1
    return ", ".join(f"{op} x{n}" for op, n in counts.items())


def _table(rows: list[tuple[str, ...]], right: tuple[int, ...] = ()) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.rjust(w) if i in right else c.ljust(w)
                             for i, (c, w) in enumerate(zip(r, widths, strict=True))).rstrip()
            for r in rows]


def _import(model: Any, shape: tuple[int, ...], name: str) -> Any:
    tvm()
    from tvm.relax.frontend.onnx import from_onnx

    try:
        return from_onnx(model, shape_dict={name: list(shape)})
    except Exception as exc:  # the frontend raises whatever it meets
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DeployError(f"TVM cannot import the model: {first}") from None


#: The widest loop the CPU schedule vectorizes whole (a wider one: in pieces of this).
_VECTOR = 16


def _build_cpu(mod: Any) -> Any:
    """``relax.build`` for the CPU (:data:`TARGET`), with each reduction's innermost spatial
    loop moved inside its reduction loops and vectorized. relax.build leaves the CPU's TIR
    unscheduled (naive loop nests: a convolution's innermost loop is its sum, which LLVM
    cannot vectorize without reordering it); each output's sum still runs in the same order,
    term by term, so the outputs are the unscheduled build's (tests check it), 3-5x sooner
    for ResNet-18's convolutions."""
    t = tvm()
    from tvm import relax
    from tvm.relax.backend import cpu_generic
    from tvm.s_tir import Schedule, ScheduleError
    from tvm.tirx import IterVar, PrimFunc

    target = t.target.Target(TARGET)
    with target:
        mod = t.transform.Sequential(cpu_generic.library_dispatch_passes(target)
                                     + cpu_generic.legalize_passes(target))(mod)
    for gv, func in list(mod.functions.items()):
        if not isinstance(func, PrimFunc):
            continue
        sch = Schedule(func)
        changed = False
        for block in sch.get_child_blocks(sch.get_sblock("root")):
            kinds = [int(iv.iter_type) for iv in sch.get(block).iter_vars]
            loops = sch.get_loops(block)
            n = kinds.count(IterVar.DataPar)
            if (len(loops) != len(kinds) or not 0 < n < len(kinds)
                    or kinds != [IterVar.DataPar] * n + [IterVar.CommReduce] * (len(kinds) - n)):
                continue
            *outer, inner = loops[:n]
            try:
                if int(sch.get(inner).extent) > _VECTOR:
                    piece, inner = sch.split(inner, [None, _VECTOR])
                    outer.append(piece)
                sch.reorder(*outer, *loops[n:], inner)
                sch.vectorize(inner)
            except (ScheduleError, TypeError):  # a symbolic extent, an unusual nest
                continue
            changed = True
        if changed:
            mod[gv] = sch.mod["main"]
    return relax.build(mod, target=TARGET)


def _run_vm(vm: Any, x: np.ndarray) -> np.ndarray:
    t = tvm()
    out = vm["main"](t.runtime.tensor(x))
    if hasattr(out, "numpy"):
        return out.numpy()
    return out[0].numpy()


# --- building ---------------------------------------------------------------------------------
class CompiledModel:
    """A model built for VTA and the CPU: :meth:`run` it on inputs (each run is one
    inference, with its own trace of offloaded calls)."""

    def __init__(self, name: str, model: Any, hw: HardwareConfig, device: Device,
                 input_spec: tuple[str, tuple[int, ...], np.dtype], vm: Any, trace: Trace,
                 main_ops: list[tuple[str, CpuOp | None]], partitioning: Partitioning,
                 seconds: dict[str, float]) -> None:
        self.name = name
        self.model = model  # the ONNX model built (quantized here when it came as float)
        self.hw = hw
        self.device = device
        self.input_name, self.input_shape, self.input_dtype = input_spec
        self.vm = vm
        self.trace = trace
        self.main_ops = main_ops
        self.partitioning = partitioning
        self.seconds = seconds

    def run(self, x: Any = None, seed: int = 0) -> DeployResult:
        """One inference on ``x`` (None: :func:`random_input` with ``seed``)."""
        x = random_input(self.input_shape, self.input_dtype, seed) if x is None \
            else check_input(x, self.input_shape, self.input_dtype)
        self.trace.calls.clear()
        self.trace.host_ops.clear()
        self.trace.error = None
        t0 = time.perf_counter()
        with _reraised(self.trace):
            output = _run_vm(self.vm, x)
        seconds = {**self.seconds, "run": time.perf_counter() - t0}
        cpu: list[CpuOp] = []
        for symbol, op in self.main_ops:
            if op is not None:
                cpu.append(op)
            else:
                cpu += [h for s, h in self.trace.host_ops if s == symbol]
        calls = tuple(self.trace.calls)
        return DeployResult(self.name, self.hw, self.device.name, calls, tuple(cpu),
                            sum(c.cycles for c in calls), output, seconds)


@contextlib.contextmanager
def _reraised(trace: Trace) -> Iterator[None]:
    """The exception a function TVM called raised, as it was (TVM turns it into a
    RuntimeError on its way back)."""
    try:
        yield
    except Exception:
        if trace.error is not None:
            error, trace.error = trace.error, None
            raise error from None
        raise


def _main_ops(mod: Any, state: Partitioning) -> list[tuple[str, CpuOp | None]]:
    """``main``'s calls in order: ``("", CpuOp)`` for an op TVM compiles for the CPU,
    ``(symbol, None)`` for an offloaded region's call."""
    t = tvm()
    from tvm import relax

    out: list[tuple[str, CpuOp | None]] = []
    func = mod["main"]
    for block in func.body.blocks:
        for b in block.bindings:
            v = b.value
            if not isinstance(v, relax.Call) or not isinstance(v.op, t.ir.Op):
                continue
            name = v.op.name.removeprefix("relax.")
            if name == "call_dps_packed" and isinstance(v.args[0], relax.ExternFunc):
                out.append((str(v.args[0].global_symbol), None))
                continue
            shape = "x".join(str(int(s)) for s in b.var.ty.shape) \
                if hasattr(b.var.ty, "shape") and b.var.ty.shape is not None else "?"
            reason = state.reason_for(v, b.var.name) if name in _ANCHOR_OPS else None
            out.append(("", CpuOp(name, shape, "tvm", reason or "")))
    return out


def compile_model(model: Any, *, hw: HardwareConfig | str | None = None,
                  log: str | Path | None = None, tune_trials: int = 0,
                  tune_log: str | Path | None = None, calibration: Any = None,
                  exact: bool = False, device: Device | None = None) -> CompiledModel:
    """Import, partition and build ``model`` (an ONNX path or ModelProto, quantized in QDQ
    format; a float one only with ``calibration`` inputs, quantized by :func:`quantize`)
    for ``hw`` (a preset, a ``vta_config.json`` or a HardwareConfig; default pynq) with the
    schedules of ``log`` (see ``_schedules``; ``tune_trials`` > 0 tunes what it lacks);
    ``exact``: requantize on the CPU wherever VTA's half-up rounding could differ from
    TVM's half-to-even (VTA then runs each such layer once per accumulator byte);
    ``device`` runs the offloaded layers (default: :class:`SimulatedDevice`)."""
    from vtatune.deploy._codegen import Session, session
    from vtatune.deploy._quantize import quantize

    t = tvm()
    from tvm import relax

    hw = hw if isinstance(hw, HardwareConfig) else (
        device.hw if device is not None and hw is None else HardwareConfig.resolve(hw))
    if device is None:
        device = SimulatedDevice(hw)
    elif device.hw != hw:
        raise DeployError(f"the device is {device.hw.target_model}, the build is for "
                          f"{hw.target_model}")
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    proto, name = load_model(model)
    if not is_quantized(proto):
        if calibration is None:
            raise DeployError(
                f"{name} is a float model: VTA runs int8. Quantize it in QDQ format "
                "(onnxruntime.quantization.quantize_static, QuantType.QInt8, "
                "ActivationSymmetric=True) or give calibration inputs (--calibration X.npy) "
                "to have vtatune do it")
        proto = quantize(proto, calibration)
    input_spec = model_input(proto)
    mod = _import(proto, input_spec[1], input_spec[0])
    seconds["import"] = time.perf_counter() - t0
    builder = LayerBuilder(hw, log, tune_trials, tune_log)
    t0 = time.perf_counter()
    mod, state = partition(mod, hw)
    seconds["partition"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    codegen = Session(device, builder, exact)
    with builder, session(codegen), _reraised(codegen.trace):
        mod = relax.transform.RunCodegen()(mod)
    seconds["codegen"] = time.perf_counter() - t0
    if builder.without_log and codegen.regions:
        warnings.warn(NO_LOG, FallbackWarning, stacklevel=2)
    t0 = time.perf_counter()
    executable = _build_cpu(mod)
    vm = relax.VirtualMachine(executable, t.cpu())
    seconds["build"] = time.perf_counter() - t0
    return CompiledModel(name, proto, hw, device, input_spec, vm, codegen.trace,
                         _main_ops(mod, state), state, seconds)


def deploy(model: Any, *, log: str | Path | None = None, hw: HardwareConfig | str | None = None,
           input: Any = None, seed: int = 0, tune_trials: int = 0,
           tune_log: str | Path | None = None, calibration: Any = None,
           exact: bool = False, device: Device | None = None) -> DeployResult:
    """Build ``model`` (:func:`compile_model`) and run it once on ``input`` (None: a seeded
    random input)."""
    compiled = compile_model(model, hw=hw, log=log, tune_trials=tune_trials, tune_log=tune_log,
                             calibration=calibration, exact=exact, device=device)
    return compiled.run(input, seed)


# --- references -------------------------------------------------------------------------------
def reference(model: Any, input: Any, engine: str = "tvm") -> np.ndarray:
    """The same model's output on ``engine``: ``tvm`` (built by TVM for the CPU alone) or
    ``onnxruntime`` (graph optimizations off: the float QDQ semantics; its fused integer
    kernels are not exact on CPUs without VNNI)."""
    return references(model, [input], engine)[0]


def references(model: Any, inputs: Any, engine: str = "tvm") -> np.ndarray:
    """:func:`reference` for each of a batch of inputs (N x the input shape, or a sequence),
    the engine built once: the outputs stacked (N x the output shape)."""
    proto, _ = load_model(model)
    name, shape, dtype = model_input(proto)
    xs = [check_input(x, shape, dtype) for x in inputs]
    if engine == "tvm":
        t = tvm()
        from tvm import relax

        vm = relax.VirtualMachine(_build_cpu(_import(proto, shape, name)), t.cpu())
        return np.stack([_run_vm(vm, x) for x in xs])
    if engine == "onnxruntime":
        try:
            import onnxruntime as ort
        except ImportError:
            raise DeployError("the onnxruntime reference needs onnxruntime: "
                              "pip install -e '.[tvm]'") from None
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.log_severity_level = 3
        session = ort.InferenceSession(proto.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
        return np.stack([session.run(None, {name: x})[0] for x in xs])
    raise DeployError(f"unknown reference engine {engine!r} (tvm, onnxruntime)")


def input_batch(x: Any, shape: tuple[int, ...], dtype: np.dtype) -> tuple[np.ndarray, bool]:
    """``x`` as a batch of the model's inputs (N x ``shape``) and whether it came as one: an
    array of the input shape is a batch of one (False), N x the input shape a batch of N
    (True)."""
    arr = np.asarray(x)
    shape = tuple(shape)
    if arr.ndim == len(shape) + 1 and arr.shape[1:] == shape:
        if not len(arr):
            raise DeployError(f"an empty batch of inputs {list(arr.shape)}")
        return np.stack([check_input(a, shape, dtype) for a in arr]), True
    return check_input(arr, shape, dtype)[None], False


def top1(outputs: np.ndarray, refs: np.ndarray) -> int | None:
    """How many of a batch's outputs (N x the output shape) pick the same class as the
    reference's: a class is the index of the largest score, the first of equal ones (numpy's
    argmax), after dequantization. None when an output is not one vector of class scores
    (a shape with more than one axis longer than 1, or a single score)."""
    outputs, refs = np.asarray(outputs), np.asarray(refs)
    if outputs.shape != refs.shape:
        raise DeployError(f"outputs of shapes {list(outputs.shape)} and {list(refs.shape)}")
    if sum(d > 1 for d in outputs.shape[1:]) != 1:
        return None
    n = len(outputs)
    a, b = outputs.reshape(n, -1).argmax(axis=1), refs.reshape(n, -1).argmax(axis=1)
    return int((a == b).sum())


@dataclass(frozen=True)
class Agreement:
    """Two outputs compared in quantization steps: how many elements, how many equal, the
    largest difference."""

    elements: int
    exact: int
    max_steps: int

    @property
    def share(self) -> float:
        return self.exact / self.elements if self.elements else 1.0

    def describe(self) -> str:
        return (f"{self.exact}/{self.elements} elements exact ({100 * self.share:.4f} %), "
                f"at most {self.max_steps} quantization step(s) apart")


def agreement(a: np.ndarray, b: np.ndarray, step: float) -> Agreement:
    """``a`` against ``b`` in units of ``step`` (the output's quantization step)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        raise DeployError(f"outputs of shapes {list(a.shape)} and {list(b.shape)}")
    steps = np.rint(np.abs(a - b) / step).astype(np.int64)
    return Agreement(int(steps.size), int((steps == 0).sum()), int(steps.max(initial=0)))


@dataclass(frozen=True)
class Check:
    """A batch's outputs against a reference engine's (:func:`check_outputs`): the
    elements' agreement over all of them and, for class scores, on how many of the
    ``inputs`` the top-1 class is the reference's (:func:`top1`; None otherwise)."""

    engine: str
    inputs: int
    agreement: Agreement
    top1: int | None

    def describe(self) -> str:
        text = self.agreement.describe()
        if self.top1 is not None:
            text += f"; top-1 the same on {self.top1}/{self.inputs} inputs"
        return text

    def as_dict(self) -> dict[str, Any]:
        a = self.agreement
        return {"inputs": self.inputs, "exact": a.exact, "elements": a.elements,
                "max_steps": a.max_steps, "top1": self.top1}


def check_outputs(model: Any, inputs: Any, outputs: Any,
                  engines: tuple[str, ...] = ("tvm", "onnxruntime")) -> tuple[Check, ...]:
    """A batch's outputs (N x the output shape) on VTA against each engine's
    (:func:`references`) for the same inputs (N x the input shape), in quantization steps
    of the model's output."""
    proto, _ = load_model(model)
    step = output_step(proto)
    outputs = np.asarray(outputs)
    if len(inputs) != len(outputs):
        raise DeployError(f"{len(outputs)} outputs for {len(inputs)} inputs")
    checks = []
    for engine in engines:
        refs = references(proto, inputs, engine)
        checks.append(Check(engine, len(outputs), agreement(outputs, refs, step),
                            top1(outputs, refs)))
    return tuple(checks)
