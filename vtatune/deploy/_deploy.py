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

import hashlib
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from simulator.hardware import HardwareConfig
from vtatune.builds import FallbackWarning
from vtatune.deploy._chain import link
from vtatune.deploy._cpu_build import CpuBuild, build_cpu
from vtatune.deploy._cpu_target import CpuTarget, resolve_cpu_target
from vtatune.deploy._dynamic import to_accumulators
from vtatune.deploy._exactness import resolve_exact
from vtatune.deploy._import import import_model
from vtatune.deploy._macs import float_macs, float_operands, module_macs
from vtatune.deploy._model import (
    float_model_error,
    is_quantized,
    load_model,
    model_input,
    output_step,
)
from vtatune.deploy._partition import partition
from vtatune.deploy._patterns import Partitioning
from vtatune.deploy._qoperator import to_qdq
from vtatune.deploy._region import CpuOp, Region, Trace
from vtatune.deploy._schedules import NO_LOG, LayerBuilder
from vtatune.deploy._tvm import tvm
from vtatune.deploy.runtime import DeployedModel, DeployResult, check_input, reraised
from vtatune.deploy.runtime._device import Device, SimulatedDevice
from vtatune.deploy.runtime._errors import DeployError
from vtatune.deploy.runtime._tvm import run_main
from vtatune.networks import DEFAULT_PATIENCE

#: The op at the core of each layer kind VTA could run (CPU ops VTA refused get a reason).
_ANCHOR_OPS = ("nn.conv2d", "nn.conv2d_transpose", "matmul", "add", "nn.relu")


# --- building ---------------------------------------------------------------------------------
class CompiledModel(DeployedModel):
    """A model built for VTA and the CPU in this process: :meth:`run` it on inputs (each
    run is one inference, with its own trace of offloaded calls), :meth:`save` it as a
    bundle. ``model``: the ONNX model built (quantized here when it came as float);
    ``model_sha256``: the SHA-256 of the model given (its file, or its serialized proto);
    ``cpu_build``: TVM's build of the CPU's part (:class:`CpuBuild`), for ``cpu_target``
    (another machine's CPU: ``vm`` is None, the model is saved to run there, not run
    here); ``regions``: the offloaded regions by symbol; ``output_spec``: the output's
    shape and dtype."""

    #: The preparation TVM's importer needed (``_import``: shape inference, constant
    #: folding), in order; empty when it took the model as given.
    prepared: tuple[str, ...] = ()
    #: How exactly it requantizes (``compile_model``'s ``exact`` as resolved: False, True
    #: or ``IN_PASS``, a model that normalizes rounding exactly in VTA's one pass).
    exact: bool | str = False

    def __init__(self, name: str, model: Any, hw: HardwareConfig, device: Device,
                 input_spec: tuple[str, tuple[int, ...], np.dtype], vm: Any, trace: Trace,
                 main_ops: list[tuple[str, CpuOp | None]], partitioning: Partitioning,
                 seconds: dict[str, float], *, model_sha256: str = "",
                 cpu_build: CpuBuild | None = None,
                 regions: dict[str, Region] | None = None,
                 output_spec: tuple[tuple[int, ...], np.dtype] | None = None,
                 cpu_target: CpuTarget | None = None, macs: int = 0,
                 float_macs: int = 0) -> None:
        super().__init__(name, hw, device, input_spec, vm, trace, main_ops, seconds, macs,
                         float_macs)
        self.model = model
        self.partitioning = partitioning
        self.model_sha256 = model_sha256
        self.cpu_build = cpu_build
        self.regions = regions or {}
        self.output_spec = output_spec
        self.cpu_target = cpu_target or resolve_cpu_target()

    def run(self, x: Any = None, seed: int = 0) -> DeployResult:
        """One inference on ``x`` (None: a seeded random input); DeployError when the CPU
        part is built for another machine's CPU."""
        if self.vm is None:
            raise DeployError(f"{self.name} is built for {self.cpu_target.describe()}, not "
                              "this machine's CPU: save it and run the bundle there")
        return super().run(x, seed)

    def save(self, path: str | Path) -> Path:
        """The model as a bundle in the directory ``path``, written whole or not at all
        (:func:`vtatune.deploy.save`)."""
        from vtatune.deploy._bundle import save

        return save(self, path)


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
    never ran): which part of a QDQ layer it lacks; a layer of float operands only is one
    the quantizer left in float (attention's activation x activation MatMuls, which
    ``quantize_dynamic`` does not quantize), and VTA runs the model as it was quantized."""
    floats = float_operands(call, values)
    if all(floats):
        return (f"float {_ONNX_OP[call.op.name]}: the quantizer left it unquantized "
                "(VTA runs the layers a quantizer quantized)")
    lacking = [what for f, what in zip(floats, ("input", "weight"), strict=False) if f]
    if lacking:
        what = "is not a dequantized 8-bit tensor" if len(lacking) == 1 else \
            "are not dequantized 8-bit tensors"
        return (f"its {' and '.join(lacking)} {what}: VTA computes QDQ layers (quantize "
                "the model)")
    return ("its result is not quantized to 8 bits (no QuantizeLinear after the layer, its "
            "bias add and ReLU): VTA's layers end in an 8-bit tensor")


#: A layer's ONNX operator, by the Relax op it imports as.
_ONNX_OP = {"relax.nn.conv2d": "Conv", "relax.nn.conv2d_transpose": "ConvTranspose",
            "relax.matmul": "MatMul"}


def compile_model(model: Any, *, hw: HardwareConfig | str | None = None,
                  log: str | Path | None = None, tune_trials: int = 0,
                  tune_log: str | Path | None = None, calibration: Any = None,
                  exact: bool | None = None, device: Device | None = None,
                  cpu_target: CpuTarget | str | None = None, seed: int = 0,
                  progress: bool = False,
                  tune_patience: int | None = DEFAULT_PATIENCE) -> CompiledModel:
    """Import, partition and build ``model`` (an ONNX path or ModelProto, quantized in QDQ
    format; a float one only with ``calibration`` inputs, quantized by :func:`quantize`)
    for ``hw`` (a preset, a ``vta_config.json`` or a HardwareConfig; default pynq) with the
    schedules of ``log`` (see ``_schedules``); ``tune_trials`` > 0 (the ``deploy`` command's
    default: :data:`DEFAULT_TUNE_TRIALS`) first tunes every workload no log holds, that
    many trials a workload on average, into ``tune_log`` (default: the hardware's cache
    log, :func:`cache_log`), seeded by ``seed``, with a progress bar on stderr if
    ``progress``, a workload leaving the budget to the others after ``tune_patience``
    rounds without a better schedule (None: never; ``_tuning``); a layer with no record
    takes the cost model's pick;
    ``exact``: round every layer exactly (``True``: VTA's exact fixed point where it has
    one, else the CPU, VTA running the layer once per accumulator byte), within one step
    (``False``: one pass a layer), or (None, the default) exactly where VTA can in its one
    pass for a model that normalizes (LayerNorm, softmax: ``_exactness``), within a step
    for any other;
    ``device`` runs the offloaded layers (default: :class:`SimulatedDevice`);
    ``cpu_target``: the CPU TVM compiles the rest for (:func:`resolve_cpu_target`: ``host``,
    the default, a board's name, or a TVM llvm target): for another machine's CPU the model
    is built to be saved (its cross compiler, checked first, links the bundle's library),
    not run here."""
    from vtatune.deploy._codegen import Session, session, tuning_problems
    from vtatune.deploy._quantize import quantize

    tvm()
    from tvm import relax

    hw = hw if isinstance(hw, HardwareConfig) else (
        device.hw if device is not None and hw is None else HardwareConfig.resolve(hw))
    if device is None:
        device = SimulatedDevice(hw)
    elif device.hw != hw:
        raise DeployError(f"the device is {device.hw.target_model}, the build is for "
                          f"{hw.target_model}")
    cpu = cpu_target if isinstance(cpu_target, CpuTarget) else resolve_cpu_target(cpu_target)
    cpu.fcompile()  # a missing cross compiler is refused before the build, not after
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    proto, name = load_model(model)
    digest = _model_sha256(model, proto)
    proto = to_accumulators(to_qdq(proto))  # QOperator: its QDQ form; dynamic: VTA's
    if not is_quantized(proto):
        if calibration is None:
            raise float_model_error(name)
        proto = quantize(proto, calibration)
    exact = resolve_exact(exact, proto)
    input_spec = model_input(proto)
    imported = import_model(proto, input_spec[1], input_spec[0])
    mod, proto = imported.module, imported.model  # prepared, when the import needed it
    seconds["import"] = time.perf_counter() - t0
    macs, floats = module_macs(mod), float_macs(mod)  # the shapes the model is built with
    builder = LayerBuilder(hw, log, tune_trials, tune_log, seed=seed, progress=progress,
                           patience=tune_patience)
    t0 = time.perf_counter()
    mod, state = partition(mod, hw)
    seconds["partition"] = time.perf_counter() - t0
    codegen = Session(device, builder, exact)
    if builder.tune_trials:
        t0 = time.perf_counter()
        builder.tune(tuning_problems(mod, codegen))
        seconds["tune"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    with builder, session(codegen), reraised(codegen.trace):
        mod = relax.transform.RunCodegen()(mod)
    # RunCodegen keeps the offloaded functions' constants for codegens whose runtime modules
    # read them; vtatune packed its own when it built the regions, so the CPU's part (and a
    # bundle's exported library) does not carry the VTA layers' weights a second time
    mod = mod.without_attr("const_name_to_constant")
    main_ops = _main_ops(mod, state)
    # the programs lowered again as one chain, in the order main calls the regions
    link([codegen.regions[s] for s, op in main_ops if s in codegen.regions], hw)
    seconds["codegen"] = time.perf_counter() - t0
    if builder.without_log and codegen.regions:
        warnings.warn(NO_LOG, FallbackWarning, stacklevel=2)
    t0 = time.perf_counter()
    cpu_build = build_cpu(mod, cpu)
    vm = cpu_build.vm() if cpu.runs_here else None
    seconds["build"] = time.perf_counter() - t0
    compiled = CompiledModel(name, proto, hw, device, input_spec, vm, codegen.trace,
                             main_ops, state, seconds, model_sha256=digest,
                             cpu_build=cpu_build, regions=codegen.regions,
                             output_spec=_output_spec(mod), cpu_target=cpu, macs=macs,
                             float_macs=floats)
    compiled.tuning = builder.tuning.as_dict() if builder.tuning is not None else None
    compiled.prepared = imported.prepared  # what the import needed, said (deploy prints it)
    compiled.exact = exact
    return compiled


def _model_sha256(model: Any, proto: Any) -> str:
    """The SHA-256 of the model as given: its file's bytes, or its serialized proto."""
    if isinstance(model, str | Path):
        return hashlib.sha256(Path(model).read_bytes()).hexdigest()
    return hashlib.sha256(proto.SerializeToString()).hexdigest()


def _output_spec(mod: Any) -> tuple[tuple[int, ...], np.dtype]:
    """The shape and dtype of ``main``'s output (its first, for a tuple)."""
    tvm()
    from tvm import relax

    info = mod["main"].ret_ty
    if isinstance(info, relax.TupleType):
        info = info.fields[0]
    return tuple(int(s) for s in info.shape), np.dtype(str(info.dtype))


def deploy(model: Any, *, log: str | Path | None = None, hw: HardwareConfig | str | None = None,
           input: Any = None, seed: int = 0, tune_trials: int = 0,
           tune_log: str | Path | None = None, calibration: Any = None,
           exact: bool | None = None, device: Device | None = None) -> DeployResult:
    """Build ``model`` (:func:`compile_model`, ``seed`` seeding its tuning) and run it once
    on ``input`` (None: a random input of ``seed``)."""
    compiled = compile_model(model, hw=hw, log=log, tune_trials=tune_trials, tune_log=tune_log,
                             calibration=calibration, exact=exact, device=device, seed=seed)
    return compiled.run(input, seed)


# --- references -------------------------------------------------------------------------------
#: The reference engines, as ``--check`` names them: TVM's CPU build, onnxruntime (both
#: float32) and exact arithmetic (the graph in float64: ``_exact``).
ENGINES = {"tvm": "TVM (CPU only)", "onnxruntime": "onnxruntime",
           "exact": "exact arithmetic (float64)"}


#: The TVM reference of a few inputs is built with LLVM's optimizer off: compiling the
#: whole model costs more than running it (DenseNet-121: 11 CPU-s to compile and 8 to run
#: instead of 40 and 0.7); the outputs are the same (LLVM keeps IEEE arithmetic at every
#: level, no fast-math: equal on DenseNet-121 and ResNet-50, tests check it).
_UNOPTIMIZED, _FEW_INPUTS = '{"kind": "llvm", "opt-level": 0}', 2


def reference(model: Any, input: Any, engine: str = "tvm") -> np.ndarray:
    """The same model's output on ``engine``: ``tvm`` (built by TVM for the CPU alone),
    ``onnxruntime`` (graph optimizations off: the float QDQ semantics; its fused integer
    kernels are not exact on CPUs without VNNI) or ``exact`` (the QDQ graph in float64,
    evaluated by ONNX's reference implementation: rounds as exact arithmetic does;
    :func:`vtatune.deploy._exact.evaluate_exact`)."""
    return references(model, [input], engine)[0]


def references(model: Any, inputs: Any, engine: str = "tvm") -> np.ndarray:
    """:func:`reference` for each of a batch of inputs (N x the input shape, or a sequence),
    the engine built once: the outputs stacked (N x the output shape)."""
    proto, _ = load_model(model)
    name, shape, dtype = model_input(proto)
    xs = [check_input(x, shape, dtype) for x in inputs]
    if engine == "tvm":
        proto = to_accumulators(to_qdq(proto))
        target = resolve_cpu_target(None if len(xs) > _FEW_INPUTS else _UNOPTIMIZED)
        vm = build_cpu(import_model(proto, shape, name).module, target).vm()
        return np.stack([run_main(vm, x) for x in xs])
    if engine == "exact":
        from vtatune.deploy._exact import evaluate_exact

        return np.stack(evaluate_exact(to_accumulators(to_qdq(proto)), name, xs))
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
    raise DeployError(f"unknown reference engine {engine!r} ({', '.join(ENGINES)})")


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
    largest difference; for a float output (no step: a dynamically quantized model's, a
    LayerNorm's) ``max_steps`` is None and ``max_difference`` the largest absolute one."""

    elements: int
    exact: int
    max_steps: int | None
    max_difference: float | None = None

    @property
    def share(self) -> float:
        return self.exact / self.elements if self.elements else 1.0

    def describe(self) -> str:
        text = f"{self.exact}/{self.elements} elements exact ({100 * self.share:.4f} %), "
        if self.max_steps is None:
            return text + (f"at most {self.max_difference:.3g} apart (a float output: no "
                           "quantization step to count in)")
        return text + f"at most {self.max_steps} quantization step(s) apart"


def agreement(a: np.ndarray, b: np.ndarray, step: float | None) -> Agreement:
    """``a`` against ``b`` in units of ``step`` (the output's quantization step), or with
    ``step`` None (a float output) equal elements and the largest absolute difference."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape:
        raise DeployError(f"outputs of shapes {list(a.shape)} and {list(b.shape)}")
    if step is None:
        diff = np.abs(a - b)
        return Agreement(int(diff.size), int((diff == 0).sum()), None,
                         float(diff.max(initial=0)))
    steps = np.rint(np.abs(a - b) / step).astype(np.int64)
    return Agreement(int(steps.size), int((steps == 0).sum()), int(steps.max(initial=0)))


@dataclass(frozen=True)
class Check:
    """A batch's outputs against a reference engine's (:func:`check_outputs`): the
    elements' agreement over all of them and, for class scores, on how many of the
    ``inputs`` the top-1 class is the reference's (:func:`top1`; None otherwise); or, when
    the engine could not run the model, ``error`` (its first line) and no agreement."""

    engine: str
    inputs: int
    agreement: Agreement | None
    top1: int | None
    error: str = ""

    def describe(self) -> str:
        if self.agreement is None:
            return f"could not run: {self.error}"
        text = self.agreement.describe()
        if self.top1 is not None:
            text += f"; top-1 the same on {self.top1}/{self.inputs} inputs"
        return text

    def as_dict(self) -> dict[str, Any]:
        a = self.agreement
        if a is None:
            return {"inputs": self.inputs, "error": self.error}
        d = {"inputs": self.inputs, "exact": a.exact, "elements": a.elements,
             "max_steps": a.max_steps, "top1": self.top1}
        if a.max_difference is not None:
            d["max_difference"] = a.max_difference
        return d


def check_outputs(model: Any, inputs: Any, outputs: Any,
                  engines: tuple[str, ...] = tuple(ENGINES)) -> tuple[Check, ...]:
    """A batch's outputs (N x the output shape) on VTA against each engine's
    (:func:`references`) for the same inputs (N x the input shape), in quantization steps
    of the model's output (a float output, not a dequantized int8 tensor: in its own
    units). An engine that cannot run the model (onnxruntime refusing an export it cannot
    compute, say) is a Check with its ``error``, never an exception."""
    proto, _ = load_model(model)
    outputs = np.asarray(outputs)
    if len(inputs) != len(outputs):
        raise DeployError(f"{len(outputs)} outputs for {len(inputs)} inputs")
    try:
        step: float | None = output_step(proto)
    except DeployError:
        step = None  # a float output
    checks = []
    for engine in engines:
        try:
            refs = references(proto, inputs, engine)
            checks.append(Check(engine, len(outputs), agreement(outputs, refs, step),
                                top1(outputs, refs)))
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # noqa: BLE001 - an engine raises whatever it meets
            checks.append(Check(engine, len(outputs), None, None, _first_line(exc)))
    return tuple(checks)


def _first_line(exc: BaseException) -> str:
    """An exception as one line: its message's first line that says something (an
    onnxruntime or TVM error is many lines), with its type when it says nothing."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
