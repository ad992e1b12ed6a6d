"""Deploying a quantized ONNX model with today's TVM and vtatune's VTA programs: import
(``tvm.relax.frontend.onnx``), partition (``_partition``), build (``RunCodegen`` with
``relax.ext.vta``, then ``relax.build`` for the CPU), run.

:func:`compile_model` builds once (:class:`CompiledModel`, run it on any input);
:func:`deploy` builds and runs once (:class:`DeployResult`). :func:`reference` runs the same
model on TVM for the CPU alone or on onnxruntime, :func:`agreement` compares two outputs in
quantization steps.
"""

from __future__ import annotations

import contextlib
import hashlib
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
    model_macs,
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
    calls), every reason on the layers VTA could have run; ``vta_cycles``: the offloaded
    layers' cycles in all (timing model); ``output``: the model's output; ``model_macs``:
    the model's multiply-accumulates (:func:`~vtatune.deploy.model_macs`)."""

    model: str
    hw: HardwareConfig
    device: str
    offloaded: tuple[OffloadedCall, ...]
    cpu_ops: tuple[CpuOp, ...]
    vta_cycles: int
    output: np.ndarray
    seconds: dict[str, float] = field(default_factory=dict)
    model_macs: int = 0

    @property
    def vta_ms(self) -> float:
        """The VTA layers' time at the board's clock."""
        return self.vta_cycles / (self.hw.clock_mhz * 1e3)

    @property
    def vta_macs(self) -> int:
        """The multiply-accumulates of the layers VTA ran, as the model has them (padded
        channels not counted)."""
        return sum(c.macs for c in self.offloaded)

    @property
    def vta_mac_share(self) -> float:
        """The share of the model's multiply-accumulates that ran on VTA."""
        return self.vta_macs / self.model_macs if self.model_macs else 0.0

    def as_dict(self, values: bool = False) -> dict[str, Any]:
        """The ``deploy --json`` object: the output as its shape, dtype and
        :func:`output_sha256` (a 128x128 output's values are 340 KB of JSON); ``values``:
        the values too (``output``, nested lists)."""
        return {"model": self.model, "hw": self.hw.target_model, "device": self.device,
                "offloaded": [c.as_dict() for c in self.offloaded],
                "cpu_ops": [c.as_dict() for c in self.cpu_ops],
                "vta_cycles": self.vta_cycles, "vta_ms": self.vta_ms,
                "vta_macs": self.vta_macs, "model_macs": self.model_macs,
                "vta_mac_share": self.vta_mac_share,
                "output_shape": list(self.output.shape), "output_dtype": str(self.output.dtype),
                "output_sha256": output_sha256(self.output),
                **({"output": self.output.tolist()} if values else {}),
                "seconds": dict(self.seconds)}

    def report(self) -> str:
        """What ran where, as the ``deploy`` command prints it."""
        lines = [f"{self.model} on {self.hw.target_model} ({self.device})", "",
                 f"VTA: {len(self.offloaded)} offloaded layers, "
                 f"{100 * self.vta_mac_share:.1f} % of the model's multiply-accumulates "
                 f"({self.vta_macs:,} of {self.model_macs:,})"]
        if self.offloaded:
            rows = [("layer", "workload", "schedule from", "requantization", "passes",
                     "cycles")]
            rows += [(c.layer, c.workload, c.provenance, c.requantization, str(c.passes),
                      f"{c.cycles:,}") for c in self.offloaded]
            lines += _table(rows, right=(4, 5))
            for c in self.offloaded:
                notes = list(c.notes) + ([f"padding costs {c.padding_cycles:,} cycles"]
                                         if c.padding_cycles else [])
                lines += [f"  {c.layer}: {'; '.join(notes)}"] if notes else []
        tvm_ops = [c for c in self.cpu_ops if c.by == "tvm"]
        host = [c for c in self.cpu_ops if c.by == "vtatune"]
        lines += ["", f"CPU: {len(tvm_ops)} ops compiled by TVM ({_counts(tvm_ops)})"]
        lines += [f"  {c.op} -> {c.shape}: {c.reason}" for c in tvm_ops if c.reason]
        lines.append(f"CPU: {len(host)} ops of vtatune's runtime around the VTA calls"
                     + (f" ({_counts(host)})" if host else ""))
        lines += ["", f"VTA time: {self.vta_cycles:,} cycles = {self.vta_ms:.3f} ms at "
                      f"{self.hw.clock_mhz:g} MHz (timing model)"]
        return "\n".join(lines)


def output_sha256(output: np.ndarray) -> str:
    """SHA-256 (hex) of ``output``'s values as little-endian bytes in C order: what
    ``hashlib.sha256(np.load(f).astype(a.dtype.newbyteorder("<")).tobytes())`` gives for the
    saved file, whatever the machine's byte order."""
    a = np.ascontiguousarray(output, dtype=output.dtype.newbyteorder("<"))
    return hashlib.sha256(a.tobytes()).hexdigest()


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


def _build(mod: Any) -> Any:
    """``relax.build`` for the CPU; DeployError when TVM cannot build what its own frontend
    imported (TVM 0.27 leaves an ``R.concat`` of tensors of unknown shape unlegalized, as in
    torchvision's ShuffleNet exported as it is: its CPU-only build fails alike; after
    onnxruntime's ``quant_pre_process``, which infers the shapes, it builds)."""
    tvm()
    from tvm import relax

    try:
        return relax.build(mod, target=TARGET)
    except Exception as exc:  # TVM raises InternalError, TVMError, ...
        text = str(exc).strip().splitlines()
        first = next((line for line in text if "Error" in line), text[0] if text else "")
        offending = next((text[i + 1].strip() for i, line in enumerate(text[:-1])
                          if line.startswith("Offending call")), "")
        raise DeployError(f"TVM cannot build the model for the CPU: {first.strip()}"
                          + (f" ({offending})" if offending else "") + "; shapes TVM could "
                          "not infer are the usual cause: run onnxruntime's quant_pre_process "
                          "on the float model before quantizing it") from None


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
        self.model_macs = model_macs(model)

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
                            sum(c.cycles for c in calls), output, seconds, self.model_macs)


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
    values = {b.var: b.value for block in func.body.blocks for b in block.bindings}
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
            if reason is None and name in _LAYER_OPS:
                reason = _unmatched(v, values)
            out.append(("", CpuOp(name, shape, "tvm", reason or "")))
    return out


#: The ops of a layer VTA could compute: each one on the CPU gets a reason.
_LAYER_OPS = ("nn.conv2d", "nn.conv2d_transpose", "matmul")


def _unmatched(call: Any, values: dict[Any, Any]) -> str:
    """Why no pattern of VTA's table matched a conv or matmul at all (its check function
    never ran): which part of a QDQ layer it lacks."""
    t = tvm()

    def is_op(expr: Any, op: str) -> bool:
        expr = values.get(expr, expr)
        return isinstance(expr, t.relax.Call) and isinstance(expr.op, t.ir.Op) \
            and expr.op.name == f"relax.{op}"

    lacking = [what for arg, what in zip(call.args[:2], ("input", "weight"), strict=False)
               if not (is_op(arg, "dequantize") or is_op(arg, "permute_dims"))]
    if lacking:
        what = "is not a dequantized 8-bit tensor" if len(lacking) == 1 else \
            "are not dequantized 8-bit tensors"
        return (f"its {' and '.join(lacking)} {what}: VTA computes QDQ layers (quantize "
                "the model)")
    return ("its result is not quantized to 8 bits (no QuantizeLinear after the layer, its "
            "bias add and ReLU): VTA's layers end in an 8-bit tensor")


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
    executable = _build(mod)
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
    proto, _ = load_model(model)
    name, shape, dtype = model_input(proto)
    x = check_input(input, shape, dtype)
    if engine == "tvm":
        t = tvm()
        from tvm import relax

        vm = relax.VirtualMachine(_build(_import(proto, shape, name)),
                                  t.cpu())
        return _run_vm(vm, x)
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
        return session.run(None, {name: x})[0]
    raise DeployError(f"unknown reference engine {engine!r} (tvm, onnxruntime)")


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
