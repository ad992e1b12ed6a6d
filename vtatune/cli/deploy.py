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

__all__ = [
    "register",
]

_DESCRIPTION = (
    "Deploy an ONNX model quantized in QDQ format (onnxruntime's quantize_static) with "
    "today's TVM (pip install -e '.[tvm]'): import it, offload what VTA runs (int8 conv2d, "
    "grouped conv2d, conv2d_transpose, dense and residual adds with their fused epilogue, "
    "placed as the network command places layers) to vtatune's programs with the schedules "
    "of a tuned log, build the rest for the CPU, and run it once on the functional VTA (a "
    "seeded random input unless --input). Prints what ran where, the cycles of each "
    "offloaded layer and the VTA time at the board's clock, and saves the output. A "
    "requantization VTA can shift (a power-of-two multiplier) runs on VTA, rounding half up; "
    "any other, or every one with --exact, on the CPU. Exit status: 0, 2 on bad input.")

_EXAMPLES = (
    "python -m vtatune deploy model.onnx --log logs/resnet18-pynq.jsonl",
    "python -m vtatune deploy model.onnx --hw sim --input x.npy --output y.npy --json",
    "python -m vtatune deploy float.onnx --calibration samples.npy --check",
    "python -m vtatune deploy model.onnx --save model.bundle",
    "python -m vtatune deploy model.onnx --hw ultra96 --cpu-target ultra96 --save model.bundle",
)


def register(sub: Any) -> None:
    p = add_command(sub, "deploy", "deploy an ONNX model with TVM, VTA's layers on vtatune",
                    _DESCRIPTION, _EXAMPLES)
    p.add_argument("model", metavar="MODEL.onnx", help="an ONNX model quantized in QDQ format")
    p.add_argument("--log", metavar="FILE",
                   help="the tuned log whose schedules the offloaded layers take (a layer it "
                        "lacks takes the default schedule, with a warning); default: none")
    add_hw_flag(p)
    p.add_argument("--device", default="sim", metavar="sim|libvta:PATH",
                   help="what runs the offloaded layers: sim (vtatune's functional VTA) or "
                        "libvta:PATH (VTA's C driver API in the library PATH: a board's "
                        "libvta.so, TVM v0.14's libvta_fsim.so)")
    p.add_argument("--input", metavar="X.npy",
                   help="the input (default: seeded random): an .npy of the model's input "
                        "shape, or of N x that shape (a batch: each runs in turn, the output "
                        "saved is N x the output shape), or a folder of .npy files (each one "
                        "input, in the order of their names: a batch)")
    p.add_argument("--seed", type=seed_arg, default=0, metavar="N",
                   help="seed of the random input")
    p.add_argument("--output", metavar="Y.npy",
                   help="the file to save the output to, as named (NumPy's .npy format; "
                        "checked before the build; default: runs/<model>.output.npy)")
    p.add_argument("--calibration", metavar="C.npy",
                   help="quantize a float model first (onnxruntime, power-of-two scales) on "
                        "these inputs: the model's input shape, or several stacked")
    p.add_argument("--tune", type=int, default=0, metavar="N", dest="tune_trials",
                   help="tune each offloaded workload the log lacks for N trials first "
                        "(appended to --log, created if new, else "
                        "runs/deploy-<hw model>.jsonl)")
    p.add_argument("--exact", action="store_true",
                   help="requantize on the CPU wherever VTA's half-up rounding could differ "
                        "from TVM's half-to-even (VTA then runs such a layer once per "
                        "accumulator byte)")
    p.add_argument("--check", action="store_true",
                   help="compare the output (each of a batch's) with TVM's CPU build and "
                        "onnxruntime's: elements exact over all, and for class scores how many "
                        "inputs have the same top-1 class (the largest score, the first of "
                        "equal ones)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object: offloaded, cpu_ops, vta_cycles, the output's "
                        "shape, dtype, SHA-256 and file, ...")
    p.add_argument("--json-values", action="store_true",
                   help="--json with the output's values too (output: nested lists)")
    p.add_argument("--save", metavar="DIR",
                   help="save the built model as a bundle in DIR (whole or not at all), which "
                        "`vtatune run DIR` runs without building")
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


def _load_inputs(path: str) -> Any:
    """``--input``: an .npy file's array, or a folder's .npy files stacked (a batch)."""
    import numpy as np

    folder = Path(path)
    if not folder.is_dir():
        return _load_npy(path, "--input")
    files = sorted(folder.glob("*.npy"))
    if not files:
        raise UsageError(f"--input {path}: a folder with no .npy file")
    arrays = [_load_npy(str(f), "--input") for f in files]
    for f, a in zip(files, arrays, strict=True):
        if a.shape != arrays[0].shape:
            raise UsageError(f"--input {f}: shape {list(a.shape)}, {files[0].name} is "
                             f"{list(arrays[0].shape)}: each file is one input")
    return np.stack(arrays)


_ENGINES = {"tvm": "TVM (CPU only)", "onnxruntime": "onnxruntime"}


def cmd_deploy(args: argparse.Namespace) -> int:
    import time

    import numpy as np

    from vtatune.deploy import (
        check_outputs,
        compile_model,
        input_batch,
        load_model,
        model_input,
        output_file,
        output_sha256,
        random_input,
        resolve_cpu_target,
        save_output,
    )

    warnings_one_line()
    if args.tune_trials < 0:
        raise UsageError(f"--tune must be at least 0, got {args.tune_trials}")
    cpu = resolve_cpu_target(args.cpu_target)
    if not cpu.runs_here:
        return _deploy_for_another_cpu(args, cpu)
    x = _load_inputs(args.input) if args.input else None
    calibration = _load_npy(args.calibration, "--calibration") if args.calibration else None
    batch, is_batch = None, False
    if x is not None:  # refused before the build, not after
        shape, dtype = model_input(load_model(args.model)[0])[1:]
        if Path(args.input).is_dir() and x.shape[1:] != shape:
            raise UsageError(f"--input {args.input}: inputs of shape {list(x.shape[1:])}: the "
                             f"model takes {list(shape)}")
        batch, is_batch = input_batch(x, shape, dtype)
    out = output_file(args.output, f"runs/{Path(args.model).stem}.output.npy")
    device = None
    if args.device != "sim":
        from simulator.hardware import HardwareConfig
        from vtatune.deploy import device_from_spec

        device = device_from_spec(args.device, HardwareConfig.resolve(args.hw))
    compiled = compile_model(args.model, hw=args.hw, log=args.log, tune_trials=args.tune_trials,
                             calibration=calibration, exact=args.exact, device=device,
                             cpu_target=cpu)
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
        print(json.dumps(d))
        return 0
    if compiled.prepared:
        print("import: TVM's importer failed on the model as given; imported after "
              + ", ".join(compiled.prepared))
    print(result.report())
    for c in checks:
        print(f"against {_ENGINES[c.engine]}: {c.describe()}")
    s = result.seconds
    print(f"output {'x'.join(map(str, saved.shape))} {saved.dtype} saved to "
          f"{out}; " + ", ".join(f"{k} {v:.2f} s" for k, v in s.items()))
    if is_batch:
        print(f"{len(batch)} inputs run in {batch_seconds:.2f} s "
              f"({batch_seconds / len(batch):.2f} s each)")
    if args.save:
        print(f"bundle saved to {args.save} (run it: python -m vtatune run {args.save})")
    return 0


def _deploy_for_another_cpu(args: argparse.Namespace, cpu: Any) -> int:
    """``deploy --cpu-target`` of another machine's CPU: built and saved, not run (this
    machine cannot run the CPU part); whatever would run it is refused first."""
    from vtatune.deploy import compile_model

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
    compiled = compile_model(args.model, hw=args.hw, log=args.log, tune_trials=args.tune_trials,
                             calibration=calibration, exact=args.exact, cpu_target=cpu)
    compiled.save(args.save)
    if args.json:
        print(json.dumps({"model": compiled.name, "hw": compiled.hw.target_model,
                          "cpu": cpu.as_dict(), "bundle": args.save,
                          "offloaded": sorted(compiled.regions), "seconds": compiled.seconds}))
        return 0
    print(f"{compiled.name} built for {compiled.hw.target_model} with its CPU part for "
          f"{cpu.describe()} ({len(compiled.regions)} offloaded region(s)); bundle saved to "
          f"{args.save}: it does not run here; on the board: python -m "
          f"vtatune.deploy.runtime {args.save} --device libvta:PATH")
    return 0
