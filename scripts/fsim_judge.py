"""VTA's own driver as the judge: vtatune's programs run on TVM v0.14's ``libvta_fsim.so``
(through :class:`vtatune.deploy.DriverDevice`) against vtatune's functional VTA
(:class:`vtatune.deploy.SimulatedDevice`): outputs bit-identical, fsim's profiler counters
equal to vtatune's (:func:`simulator.functional.count`, what ``functional.run`` returns).

The cases: lowered kernels (GEMM, conv2d with padding and stride, grouped, transposed,
ALU-only add, the bias / shift / clip epilogues, several schedules of each, virtual threads
among them), and every offloaded call of the deploy tests' models (built with
``vtatune.deploy`` on a SimulatedDevice that records each program and the buffers bound to
it; each call replayed on the driver).

Usage:
    python scripts/fsim_judge.py LIBVTA [--record tests/deploy/data/fsim_driver/cases.jsonl]
        [--kernels-only] [--resnet18]
    python scripts/fsim_judge.py LIBVTA --tokens [--resnet18]

Prints one line per case and a summary; exit 1 when anything differs. ``--record`` writes
what the library returned (output sha256 and counters per case) as JSONL: the test data of
``tests/deploy/test_driver_judge.py``. LIBVTA: ``scripts/tvm014/build_libvta_fsim.sh``'s
``libvta_fsim.so`` (``vta_config.json`` and ``libtvm_runtime.so`` next to it).
``--tokens``: each model compiled on the driver and run twice, with the token NOPs the
driver put in front of its programs in each inference (:func:`token_adjustments`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from search_spaces import default_schedule, get_template  # noqa: E402
from simulator.functional import count  # noqa: E402
from simulator.hardware import DEFAULT, HardwareConfig  # noqa: E402
from simulator.program import Program  # noqa: E402
from vtatune.deploy import (  # noqa: E402
    Buffer,
    DeployError,
    Device,
    DriverDevice,
    SimulatedDevice,
    compile_model,
    deploy,
    models,
    quantize,
)
from vtatune.lowering import lower, packed_inputs  # noqa: E402
from vtatune.records import write_whole  # noqa: E402
from vtatune.workloads import (  # noqa: E402
    AddWorkload,
    Conv2dTransposeWorkload,
    Conv2dWorkload,
    Epilogue,
    EpilogueOp,
    GemmWorkload,
    GroupConv2dWorkload,
    deployed,
    random_operands,
)

__all__ = ["Case", "MODELS", "ModelRun", "RESNET18", "inputs_sha256", "kernel_cases",
           "model_cases", "program_sha256", "replay", "simulate", "token_adjustments",
           "whole_models"]

RECORD = ROOT / "tests" / "deploy" / "data" / "fsim_driver" / "cases.jsonl"


@dataclass(frozen=True)
class Case:
    """One call: a program, the arrays bound to its input tensors, the hardware."""

    name: str
    program: Program
    inputs: Mapping[str, np.ndarray]
    hw: HardwareConfig


def program_sha256(program: Program) -> str:
    """Of the instruction table, the micro-ops, the tensors and the tokens it starts with."""
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(program.rows, np.int64).tobytes())
    h.update(np.ascontiguousarray(program.uop_table, np.int64).tobytes())
    h.update(repr((program.tensors, program.dram_bytes, program.tokens_in)).encode())
    return h.hexdigest()


def inputs_sha256(inputs: Mapping[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in sorted(inputs):
        a = np.ascontiguousarray(inputs[name])
        h.update(f"{name}:{a.dtype}:{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _run(device: Device, case: Case) -> np.ndarray:
    tensors: dict[str, Buffer] = {k: device.upload(v) for k, v in case.inputs.items()}
    out = case.program.tensor("output")
    tensors["output"] = device.alloc(out.shape, out.dtype)
    device.run(case.program, tensors)
    return device.download(tensors["output"])


def simulate(case: Case) -> tuple[np.ndarray, dict[str, int]]:
    """vtatune's output and counters of the case."""
    return _run(SimulatedDevice(case.hw), case), count(case.program, case.hw).as_dict()


def replay(device: DriverDevice, case: Case) -> tuple[np.ndarray, dict[str, int]]:
    """The library's output and profiler counters of the case."""
    out = _run(device, case)
    if device.counters is None:
        raise DeployError(f"{device.name} has no fsim profiler")
    return out, dict(device.counters)


# --- the cases -----------------------------------------------------------------------------

def _schedules(wl, hw, bias: bool, n: int, seed: int) -> Iterator[tuple[str, object]]:
    """The default schedule, then ``n`` distinct random legal ones (drawn from the template's
    space), half of them with two virtual threads where the space has them."""
    default = default_schedule(wl, hw, bias)
    yield "default", default
    tpl = get_template(wl, hw, bias=bias)
    rng, seen, threaded, single = random.Random(seed), {default}, [], []
    for _ in range(2000):
        if len(threaded) >= n // 2 and len(threaded) + len(single) >= n:
            break
        config = tpl.config_at(rng.randrange(tpl.size()))
        if not tpl.legal(config):
            continue
        s = tpl.to_schedule(config)
        if s in seen:
            continue
        seen.add(s)
        (threaded if s.oc_nthread * s.h_nthread > 1 else single).append(s)
    picks = threaded[:n // 2]
    picks += single[:n - len(picks)]
    for s in picks:
        yield s.short().replace(" ", "_"), s


def kernel_cases(n_schedules: int = 4, hw: HardwareConfig = DEFAULT) -> Iterator[Case]:
    """Lowered kernels on random operands: each workload with the default schedule and
    ``n_schedules`` random legal ones."""
    shift_relu = deployed(6, relu=True)
    shift_clip = deployed(4, relu=False, clip=100)
    fixed_point = Epilogue((
        EpilogueOp("add", tensor="bias"), EpilogueOp("save"), EpilogueOp("shr", 3),
        EpilogueOp("add", tensor="saved"), EpilogueOp("shr", 2),
        EpilogueOp("add", tensor="saved"), EpilogueOp("shr", 9),
        EpilogueOp("clip", -3, hi=127)))
    # per channel: each shift a plane of the per-channel shift input
    channel_fixed_point = Epilogue((
        EpilogueOp("add", tensor="bias"), EpilogueOp("save"),
        EpilogueOp("shr", tensor="shift"), EpilogueOp("add", tensor="saved"),
        EpilogueOp("shr", tensor="shift1"), EpilogueOp("add", tensor="saved"),
        EpilogueOp("shr", tensor="shift2"), EpilogueOp("clip", -128, hi=127)))
    kernels = [
        ("gemm", GemmWorkload(1, 64, 32), False),
        ("gemm_bias", GemmWorkload(1, 64, 48), True),
        ("gemm_shift_relu", replace(GemmWorkload(1, 32, 32), epilogue=shift_relu), True),
        ("conv3x3_pad1", Conv2dWorkload(1, 8, 8, 32, 32, 3, 1, 1), False),
        ("conv3x3_pad1_stride2_bias", Conv2dWorkload(1, 9, 9, 16, 32, 3, 1, 2), True),
        ("conv1x1_stride2", Conv2dWorkload(1, 8, 8, 32, 16, 1, 0, 2), False),
        ("conv_shift_clip", replace(Conv2dWorkload(1, 6, 6, 16, 32, 3, 1, 1),
                                    epilogue=shift_clip), True),
        ("group_conv", GroupConv2dWorkload(1, 8, 8, 32, 32, 3, 1, 1, 2), True),
        ("conv_transpose", Conv2dTransposeWorkload(1, 4, 4, 32, 16, 4, 1, 2, 0), False),
        ("add", AddWorkload(1, 32, 8, 8), False),
        ("add_shift_clip", replace(AddWorkload(1, 16, 6, 6), epilogue=Epilogue((
            EpilogueOp("shr", 1), EpilogueOp("clip", -128, hi=127)))), False),
        # a fixed-point requantization (one pass): a copy of the tile, shifts and adds
        ("conv_fixed_point", replace(Conv2dWorkload(1, 8, 8, 32, 32, 3, 1, 1),
                                     epilogue=fixed_point), True),
        ("gemm_fixed_point", replace(GemmWorkload(4, 64, 32), epilogue=fixed_point), True),
        ("conv_channel_fixed_point", replace(Conv2dWorkload(1, 8, 8, 32, 32, 3, 1, 1),
                                             epilogue=channel_fixed_point), True),
        ("gemm_channel_fixed_point", replace(GemmWorkload(4, 64, 32),
                                             epilogue=channel_fixed_point), True),
    ]
    for k, (name, wl, bias) in enumerate(kernels):
        for label, schedule in _schedules(wl, hw, bias, n_schedules, seed=k):
            lowered = lower(wl, schedule, hw, bias=bias)
            ops = random_operands(wl, lowered.bias, seed=k)
            yield Case(f"{name}/{label}", lowered.program, packed_inputs(wl, ops, hw), hw)


class _Recorder(SimulatedDevice):
    """A SimulatedDevice that keeps every call: its program and the inputs bound to it."""

    def __init__(self, hw: HardwareConfig, prefix: str) -> None:
        super().__init__(hw)
        self.prefix, self.calls = prefix, []

    def run(self, program, tensors):
        inputs = {k: b.handle.reshape(b.shape).copy() for k, b in tensors.items()
                  if k != "output"}
        cycles = super().run(program, tensors)
        self.calls.append(Case(f"{self.prefix}/call{len(self.calls)}", program, inputs,
                               self.hw))
        return cycles


@dataclass(frozen=True)
class ModelRun:
    """One deploy of a model as the deploy tests build it: its float model, quantized with
    power-of-two scales or not (``calibration`` samples), on a hardware preset, exact
    requantization or not, schedules from a log (else the fallback)."""

    name: str
    factory: Callable[[], object]
    power_of_two: bool = True
    preset: str = "pynq"
    exact: bool = False
    log: Path | None = None
    calibration: int = 4

    def build(self):
        """The quantized model and its input (as tests/deploy quantizes its models)."""
        float_model = self.factory()
        shape = [d.dim_value for d in float_model.graph.input[0].type.tensor_type.shape.dim]
        rng = np.random.default_rng(0)
        samples = rng.standard_normal((self.calibration, *shape)).astype(np.float32)
        x = rng.standard_normal(shape).astype(np.float32)
        return quantize(float_model, samples, power_of_two=self.power_of_two), x

    def deploy(self, device: Device, built=None):
        model, x = built if built is not None else self.build()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return deploy(model, input=x, hw=self.preset, exact=self.exact, log=self.log,
                          device=device)


def _residual(channels):
    return lambda: models.conv_residual(channels=channels)


#: The deploy tests' models (tests/deploy/test_deploy.py) on VTA's stock hardware.
MODELS = (
    ModelRun("residual32", _residual(32)),
    ModelRun("residual32_sim", _residual(32), preset="sim"),
    ModelRun("residual32_sim_exact", _residual(32), preset="sim", exact=True),
    ModelRun("grouped32_g2_exact", lambda: models.grouped_conv(channels=32, groups=2),
             exact=True),
    ModelRun("transposed_exact", lambda: models.transposed_conv(32, 32, size=4,
                                                                 conv_first=True), exact=True),
    ModelRun("transposed", lambda: models.transposed_conv(32, 32, size=4, conv_first=True)),
    ModelRun("mlp", models.mlp),
    # onnxruntime-like scales: the fixed-point requantization on VTA, one pass a layer
    ModelRun("residual16_float_scales", _residual(16), power_of_two=False),
    ModelRun("residual16_float_scales_exact", _residual(16), power_of_two=False,
             exact=True),
    ModelRun("mlp_float_scales", models.mlp, power_of_two=False),
)
#: tests/deploy/test_resnet18.py's (slow): ResNet-18 with the shipped log's schedules.
RESNET18 = (
    ModelRun("resnet18_exact", models.resnet18, exact=True,
             log=ROOT / "logs" / "resnet18-pynq.jsonl", calibration=2),
    ModelRun("resnet18", models.resnet18, log=ROOT / "logs" / "resnet18-pynq.jsonl",
             calibration=2),
)


def model_cases(runs: Sequence[ModelRun] = MODELS) -> Iterator[Case]:
    """Every offloaded call of one inference of each model run."""
    for run in runs:
        recorder = _Recorder(HardwareConfig.resolve(run.preset), run.name)
        run.deploy(recorder)
        yield from recorder.calls


def whole_models(library: str, runs: Sequence[ModelRun] = MODELS) -> Iterator[tuple[str, bool]]:
    """Each model deployed whole on the driver and on the simulated device: (name, whether
    the two outputs are identical)."""
    for run in runs:
        built = run.build()
        hw = HardwareConfig.resolve(run.preset)
        on_driver = run.deploy(DriverDevice(library, hw), built).output
        on_sim = run.deploy(SimulatedDevice(hw), built).output
        yield run.name, bool(np.array_equal(on_driver, on_sim))


def token_adjustments(library: str, runs: Sequence[ModelRun] = MODELS
                      ) -> Iterator[tuple[str, int, int, int]]:
    """Each model compiled once with a fresh :class:`DriverDevice` (on the FIFOs the model
    before left) and run twice: (name, calls per inference, the driver's token adjustments
    in the first inference, in the second). The programs are one chain in its steady state
    (``vtatune.deploy._chain``): at most the first program of the first inference."""
    for run in runs:
        model, x = run.build()
        device = DriverDevice(library, HardwareConfig.resolve(run.preset))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled = compile_model(model, hw=run.preset, exact=run.exact, log=run.log,
                                     device=device)
        counts = []
        for _ in range(2):
            before = device.token_adjustments
            result = compiled.run(x)
            counts.append(device.token_adjustments - before)
        yield run.name, sum(c.passes for c in result.offloaded), *counts


# --- the command --------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("library", help="libvta_fsim.so (vta_config.json, libtvm_runtime.so next "
                    "to it)")
    ap.add_argument("--record", type=Path, help="write the library's results here (JSONL)")
    ap.add_argument("--kernels-only", action="store_true", help="skip the deploy models")
    ap.add_argument("--resnet18", action="store_true", help="also ResNet-18 (exact and not; "
                    "a few minutes)")
    ap.add_argument("--tokens", action="store_true", help="only run each model twice on the "
                    "driver and print its token adjustments per inference")
    args = ap.parse_args(argv)
    if args.tokens:
        for name, calls, first, second in token_adjustments(
                args.library, MODELS + (RESNET18 if args.resnet18 else ())):
            print(f"{name}: {calls} calls per inference; token adjustments: {first} in the "
                  f"first inference, {second} in the second")
        return 0
    devices: dict[str, DriverDevice] = {}
    rows, differ = [], 0
    runs = () if args.kernels_only else MODELS + (RESNET18 if args.resnet18 else ())
    cases = _chain(kernel_cases(), model_cases(runs))
    try:
        for case in cases:
            key = case.hw.bitstream
            if key not in devices:
                devices[key] = DriverDevice(args.library, case.hw)
            got, counters = replay(devices[key], case)
            want, want_counters = simulate(case)
            same_out, same_counters = np.array_equal(got, want), counters == want_counters
            differ += not (same_out and same_counters)
            print(f"{case.name}: output {'equal' if same_out else 'DIFFERS'}, counters "
                  f"{'equal' if same_counters else f'DIFFER {counters} vs {want_counters}'}")
            rows.append({"case": case.name, "hw": case.hw.bitstream,
                         "program": program_sha256(case.program),
                         "inputs": inputs_sha256(case.inputs),
                         "output": hashlib.sha256(np.ascontiguousarray(got).tobytes())
                         .hexdigest(),
                         "counters": counters})
        whole = list(whole_models(args.library, runs))
    except DeployError as exc:
        print(f"fsim_judge: {exc}", file=sys.stderr)
        return 2
    for name, same in whole:
        print(f"{name} deployed whole on the driver: output "
              f"{'identical' if same else 'DIFFERS'} to SimulatedDevice's")
    identical = sum(same for _, same in whole)
    adjusted = sum(d.token_adjustments for d in devices.values())
    print(f"{len(rows)} calls compared on {args.library}: {len(rows) - differ} equal "
          f"(outputs and counters), {differ} differ; {adjusted} started from other tokens "
          f"than the call before left (NOPs in front); {len(whole)} models deployed whole, "
          f"{identical} identical")
    if args.record is not None:
        args.record.parent.mkdir(parents=True, exist_ok=True)
        write_whole({args.record: "".join(json.dumps(r, sort_keys=True) + "\n"
                                          for r in rows).encode()})
    return 1 if differ or identical < len(whole) else 0


def _chain(*parts):
    for part in parts:
        yield from part


if __name__ == "__main__":
    sys.exit(main())
