"""``deploy``: build a quantized ONNX model with TVM (Relax), VTA's layers offloaded to
vtatune's programs, and run it once on the functional VTA."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from vtatune.cli._common import (
    UsageError,
    add_command,
    add_hw_flag,
    seed_arg,
    warnings_one_line,
)
from vtatune.deploy import DEFAULT_TUNE_TRIALS

__all__ = [
    "COMMANDS", "register",
]

_DESCRIPTION = (
    "Deploy an ONNX model quantized in QDQ format (onnxruntime's quantize_static) with "
    "today's TVM (pip install -e '.[tvm]'): import it, offload what VTA runs (int8 conv2d, "
    "grouped conv2d, conv2d_transpose, dense and residual adds with their fused epilogue, "
    "placed as the network command places layers) to vtatune's programs with the schedules "
    "of a tuned log, build the rest for the CPU, and run it once on the functional VTA (a "
    "seeded random input unless --input). Prints what ran where, the cycles of each "
    "offloaded layer and the VTA time at the board's clock, and saves the output. Every "
    "offloaded workload no log holds is tuned first (--tune: trials a workload, shared by "
    "the network command's task scheduler) into a log per hardware kept across runs and "
    "models ($VTATUNE_CACHE_DIR, else ~/.cache/vtatune); --tune 0 tunes nothing. VTA "
    "requantizes each layer in its one pass: by a shift (a power-of-two multiplier, rounding "
    "half up) or a fixed-point multiply from shifts and adds (any other multiplier, every "
    "element within one step of the exact rounding); a model that normalizes (LayerNorm, "
    "softmax: they amplify a step) is rounded exactly, still in one pass, where VTA can "
    "(per-tensor multipliers: a longer fixed point with guard bits). --exact rounds every "
    "layer exactly (the CPU where VTA cannot), --no-exact none. --check compares the output with "
    "TVM's CPU build, onnxruntime and exact arithmetic (the quantized graph in float64). "
    "Exit status: 0; 2 on bad input; 3 when --check could not run a reference (each one that "
    "failed is one line, the run's own result printed and its output saved all the same); "
    "130 when interrupted.")

_EXAMPLES = (
    "python -m vtatune deploy model.onnx --log logs/resnet18-pynq.jsonl",
    "python -m vtatune deploy model.onnx --hw sim --input x.npy --output y.npy --json",
    "python -m vtatune deploy float.onnx --calibration samples.npy --check",
    "python -m vtatune deploy model.onnx --save model.bundle",
    "python -m vtatune deploy model.onnx --hw ultra96 --cpu-target ultra96 --save model.bundle",
)


#: The commands :func:`register` adds.
COMMANDS = ("deploy",)


def register(sub: Any) -> None:
    p = add_command(sub, "deploy", "deploy an ONNX model with TVM, VTA's layers on vtatune",
                    _DESCRIPTION, _EXAMPLES)
    p.add_argument("model", metavar="MODEL.onnx", help="an ONNX model quantized in QDQ format")
    p.add_argument("--log", metavar="FILE",
                   help="a tuned log whose schedules the offloaded layers take first (a "
                        "workload it lacks is tuned, or with --tune 0 takes the cost model's "
                        "pick, with a warning); default: none")
    add_hw_flag(p)
    p.add_argument("--device", default="sim", metavar="sim|libvta:PATH",
                   help="what runs the offloaded layers: sim (vtatune's functional VTA) or "
                        "libvta:PATH (VTA's C driver API in the library PATH: a board's "
                        "libvta.so, TVM v0.14's libvta_fsim.so or libvta_tsim.so; "
                        "libvta:DRIVER:HARDWARE names tsim's verilated RTL library, by "
                        "default libvta_hw.so next to the driver)")
    p.add_argument("--input", metavar="X.npy",
                   help="the input (default: seeded random): an .npy of the model's input "
                        "shape, or of N x that shape (a batch: each runs in turn, the output "
                        "saved is N x the output shape), or a folder of .npy files (each one "
                        "input, in the order of their names: a batch)")
    p.add_argument("--seed", type=seed_arg, default=0, metavar="N",
                   help="seed of the random input and of tuning (the same seed and log give "
                        "the same schedules)")
    p.add_argument("--output", metavar="Y.npy",
                   help="the file to save the output to, as named (NumPy's .npy format; "
                        "checked before the build; default: runs/<model>.output.npy)")
    p.add_argument("--calibration", metavar="C.npy",
                   help="quantize a float model first (onnxruntime, power-of-two scales) on "
                        "these inputs: the model's input shape, or several stacked")
    p.add_argument("--tune", type=int, default=None, metavar="N", dest="tune_trials",
                   help="tune the offloaded workloads no log holds first, N trials a "
                        f"workload on average (default: {DEFAULT_TUNE_TRIALS}), into the "
                        "hardware's cache log "
                        "(deploy-<hw model>.jsonl in $VTATUNE_CACHE_DIR, else "
                        "$XDG_CACHE_HOME/vtatune or ~/.cache/vtatune); given with --log, "
                        "into that log (created if new); 0: no tuning")
    p.add_argument("--exact", action=argparse.BooleanOptionalAction, default=None,
                   help="--exact: round every layer as exact arithmetic does (VTA's exact "
                        "fixed point in one pass where it has one, else the CPU, VTA running "
                        "the layer once per accumulator byte); --no-exact: within one step, "
                        "one pass a layer; default: exactly in one pass where VTA can for a "
                        "model that normalizes (LayerNorm, softmax), within a step otherwise")
    p.add_argument("--check", action="store_true",
                   help="compare the output (each of a batch's) with TVM's CPU build, "
                        "onnxruntime's and exact arithmetic's (the quantized graph in float64, "
                        "which rounds as exact arithmetic does): elements exact over all, and "
                        "for class scores how many inputs have the same top-1 class (the "
                        "largest score, the first of equal ones); a reference that cannot run "
                        "is one line, exit status 3")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object: offloaded, cpu_ops, vta_cycles, "
                        "default_cycles, tuning, the output's shape, dtype, SHA-256 and "
                        "file, ...")
    p.add_argument("--json-values", action="store_true",
                   help="--json with the output's values too (output: nested lists)")
    p.add_argument("--save", metavar="DIR",
                   help="save the built model as a bundle in DIR (whole or not at all; DIR "
                        "is checked before the build: a new name, an empty directory or a "
                        "bundle, in a place this process can write), which `vtatune run DIR` "
                        "runs without building")
    p.add_argument("--cpu-target", default="host", metavar="host|pynq|de10nano|ultra96|TARGET",
                   help="the CPU TVM compiles the model's CPU part for: host (this machine), "
                        "a board's (pynq and de10nano: Cortex-A9, armv7l-linux-gnueabihf; "
                        "ultra96: Cortex-A53, aarch64-linux-gnu) or a TVM llvm target (JSON, "
                        "or 'llvm -mtriple=... -mcpu=...'); another machine's CPU part is "
                        "linked by its cross compiler (g++-arm-linux-gnueabihf, "
                        "g++-aarch64-linux-gnu) and cannot run here: it needs --save, and "
                        "nothing runs (no --input, --output, --check)")
    p.set_defaults(func=cmd_deploy)


def _load_npy(path: str, flag: str) -> Any:
    import numpy as np

    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise UsageError(f"{flag} {path}: {exc}") from None


def _tuning(args: argparse.Namespace) -> dict[str, Any]:
    """compile_model's tuning arguments: tuned by default into the cache log; ``--tune N``
    with ``--log`` into that log; a bar on a terminal only."""
    import sys

    trials = DEFAULT_TUNE_TRIALS if args.tune_trials is None else args.tune_trials
    tune_log = args.log if args.tune_trials is not None and args.log else None
    return {"tune_trials": trials, "tune_log": tune_log, "seed": args.seed,
            "progress": sys.stderr.isatty()}


def cmd_deploy(args: argparse.Namespace) -> int:
    import time

    import numpy as np

    from vtatune.deploy import (
        ENGINES,
        ModelInput,
        bundle_target,
        check_outputs,
        compile_model,
        load_model,
        model_input,
        output_file,
        output_sha256,
        random_input,
        resolve_cpu_target,
        save_output,
    )

    warnings_one_line()
    if args.tune_trials is not None and args.tune_trials < 0:
        raise UsageError(f"--tune must be at least 0, got {args.tune_trials}")
    cpu = resolve_cpu_target(args.cpu_target)
    if not cpu.runs_here:
        return _deploy_for_another_cpu(args, cpu)
    calibration = _load_npy(args.calibration, "--calibration") if args.calibration else None
    batch, is_batch = None, False
    if args.input:  # refused before the build, not after
        inputs = ModelInput(*model_input(load_model(args.model)[0])).read(args.input)
        batch, is_batch = inputs.arrays, inputs.batched
    out = output_file(args.output, f"runs/{Path(args.model).stem}.output.npy")
    if args.save:
        bundle_target(args.save)
    device = None
    if args.device != "sim":
        from simulator.hardware import HardwareConfig
        from vtatune.deploy import device_from_spec

        device = device_from_spec(args.device, HardwareConfig.resolve(args.hw))
    compiled = compile_model(args.model, hw=args.hw, log=args.log, calibration=calibration,
                             exact=args.exact, device=device, cpu_target=cpu,
                             **_tuning(args))
    if batch is None:
        batch = random_input(compiled.input_shape, compiled.input_dtype, args.seed)[None]
    t0 = time.perf_counter()
    results = [compiled.run(one) for one in batch]
    batch_seconds = time.perf_counter() - t0
    result = results[0]
    outputs = np.stack([r.output for r in results])
    saved = outputs if is_batch else outputs[0]
    if args.save:
        compiled.save(args.save)
    save_output(out, saved)
    checks = check_outputs(compiled.model, batch, outputs) if args.check else ()
    if args.json or args.json_values:
        d = result.as_dict(values=args.json_values)
        d["output_file"] = str(out)
        if is_batch:
            d["inputs"] = len(batch)
            d["output_shape"] = list(saved.shape)
            d["output_sha256"] = output_sha256(saved)
            if args.json_values:
                d["output"] = saved.tolist()
            d["seconds"]["runs"] = batch_seconds
        if args.save:
            d["bundle"] = args.save
        if checks:
            d["check"] = {c.engine: c.as_dict() for c in checks}
        if compiled.prepared:
            d["prepared"] = list(compiled.prepared)
        d["exact"] = compiled.exact
        print(json.dumps(d))
        return _check_status(checks)
    if compiled.prepared:
        print("import: TVM's importer failed on the model as given; imported after "
              + ", ".join(compiled.prepared))
    print(result.report())
    print(rounding_line(compiled))
    for c in checks:
        print(f"against {ENGINES[c.engine]}: {c.describe()}")
    s = result.seconds
    print(f"output {'x'.join(map(str, saved.shape))} {saved.dtype} saved to "
          f"{out}; " + ", ".join(f"{k} {v:.2f} s" for k, v in s.items()))
    if is_batch:
        print(f"{len(batch)} inputs run in {batch_seconds:.2f} s "
              f"({batch_seconds / len(batch):.2f} s each)")
    if args.save:
        print(f"bundle saved to {args.save} (run it: python -m vtatune run {args.save})")
    return _check_status(checks)


def rounding_line(compiled: Any) -> str:
    """How the model's layers were requantized, and why (``--exact`` or the model)."""
    from vtatune.deploy import IN_PASS, normalizing_ops

    if compiled.exact == IN_PASS:
        return (f"rounding: exact where VTA can in its one pass, the model normalizing "
                f"({', '.join(normalizing_ops(compiled.model))}: a step off would be "
                "amplified); --no-exact: within one step, fewer ALU instructions")
    if compiled.exact:
        return "rounding: exact in every layer (--exact)"
    return "rounding: within one step of exact arithmetic, one pass a layer"


def _check_status(checks: Any) -> int:
    """3 when a reference --check asked for could not run, else 0."""
    return 3 if any(c.agreement is None for c in checks) else 0


def _deploy_for_another_cpu(args: argparse.Namespace, cpu: Any) -> int:
    """``deploy --cpu-target`` of another machine's CPU: built and saved, not run (this
    machine cannot run the CPU part); whatever would run it is refused first."""
    from vtatune.deploy import bundle_target, compile_model

    what = f"--cpu-target {args.cpu_target} builds for {cpu.describe()}, not this machine's CPU"
    if not args.save:
        raise UsageError(f"{what}: nothing can run here; give --save DIR to write the bundle "
                         "and run it on the board (python -m vtatune.deploy.runtime DIR --device "
                         "libvta:PATH)")
    running = [flag for flag, given in (("--input", args.input), ("--output", args.output),
                                        ("--check", args.check),
                                        ("--json-values", args.json_values),
                                        ("--device", args.device != "sim")) if given]
    if running:
        raise UsageError(f"{what}: it is saved, not run here ({', '.join(running)} would run "
                         "it): run the bundle on the board")
    calibration = _load_npy(args.calibration, "--calibration") if args.calibration else None
    bundle_target(args.save)
    compiled = compile_model(args.model, hw=args.hw, log=args.log, calibration=calibration,
                             exact=args.exact, cpu_target=cpu, **_tuning(args))
    compiled.save(args.save)
    if args.json:
        print(json.dumps({"model": compiled.name, "hw": compiled.hw.target_model,
                          "cpu": cpu.as_dict(), "bundle": args.save,
                          "offloaded": sorted(compiled.regions), "seconds": compiled.seconds,
                          "tuning": compiled.tuning}))
        return 0
    print(f"{compiled.name} built for {compiled.hw.target_model} with its CPU part for "
          f"{cpu.describe()} ({len(compiled.regions)} offloaded region(s)); bundle saved to "
          f"{args.save}: it does not run here; on the board: python -m "
          f"vtatune.deploy.runtime {args.save} --device libvta:PATH")
    if compiled.tuning is not None:
        print(compiled.tuning["summary"])
    return 0
