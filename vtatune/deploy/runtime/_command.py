"""Running a bundle from the command line, with the runtime part alone: ``python -m
vtatune.deploy.runtime DIR`` (:func:`main`, a board's command: it imports what :func:`load`
imports and argparse) and ``python -m vtatune run DIR`` (the same arguments and handler,
in vtatune's command line, which imports every command's modules: the tuner, Optuna,
numba)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from simulator.errors import VTAError
from vtatune.deploy.runtime._bundle import input_of, load, read_manifest
from vtatune.deploy.runtime._errors import DeployError
from vtatune.deploy.runtime._inputs import Inputs
from vtatune.deploy.runtime._model import output_file, random_input, save_output
from vtatune.deploy.runtime._select import SPECS

#: What the command does.
DESCRIPTION = (
    "Run a model saved by `deploy MODEL --save DIR` on one input or many, in one process: "
    "TVM's runtime runs the CPU's part from the bundle's exported library, the device the "
    "offloaded layers with the bundle's VTA programs and packed weights. Nothing is "
    "imported, partitioned, built or tuned, and each output is the one the building process "
    "computes. Before anything runs the inputs are checked against what the model takes and "
    "the bundle is checked: every file against the manifest's SHA-256, the vtatune and TVM "
    "versions that saved it against these, its CPU part's target against this machine's "
    "CPU, its hardware against --hw. Prints what ran where, the VTA time and each input's "
    "time, and saves the outputs. Exit status: 0, 2 on bad input or a refused bundle, 130 "
    "when interrupted.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's arguments, added to ``p``."""
    p.add_argument("bundle", metavar="DIR", help="a bundle saved by deploy --save")
    p.add_argument("--input", metavar="X.npy",
                   help="the input (default: seeded random): an .npy of the model's input "
                        "shape, or of N x that shape (a batch: each runs in turn in this "
                        "process, the output saved is N x the output shape), or a folder of "
                        ".npy files (each one input, in the order of their names: a batch)")
    p.add_argument("--seed", type=int, default=0, metavar="N", help="seed of the random input")
    p.add_argument("--output", metavar="Y.npy",
                   help="where to save the output (default: runs/<bundle>.output.npy)")
    p.add_argument("--device", default="sim", metavar="|".join(SPECS),
                   help="what runs the offloaded layers: sim (vtatune's functional VTA) or "
                        "libvta:PATH (VTA's C driver API in the library PATH: a board's "
                        "libvta.so, TVM v0.14's libvta_fsim.so or libvta_tsim.so; "
                        "libvta:DRIVER:HARDWARE names tsim's verilated RTL library, by "
                        "default libvta_hw.so next to the driver)")
    p.add_argument("--hw", metavar="PRESET|FILE",
                   help="the hardware the device is (a preset or a vta_config.json): a bundle "
                        "built for other hardware is refused; default: the bundle's")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object per input, a line each as it finishes: "
                        "input (its index), offloaded, cpu_ops, vta_cycles, its output's "
                        "SHA-256, seconds, ...")


def run_bundle(args: argparse.Namespace) -> int:
    """The command's handler: check the inputs and the output's place, load the bundle,
    run each input, save and report the outputs; DeployError in one line for a bad input or
    a refused bundle."""
    inputs = input_of(args.bundle, read_manifest(args.bundle)).read(args.input) \
        if args.input else None
    out = output_file(args.output, f"runs/{Path(args.bundle).resolve().name}.output.npy")
    model = load(args.bundle, device=args.device, hw=args.hw)
    if inputs is None:
        inputs = Inputs(random_input(model.input_shape, model.input_dtype, args.seed)[None],
                        False)
    outputs, seconds = [], []
    for i, x in enumerate(inputs.arrays):
        result = model.run(x)
        outputs.append(result.output)
        seconds.append(result.seconds["run"])
        if args.json:
            print(json.dumps({**result.as_dict(), "input": i,
                              **({"input_file": inputs.files[i]} if inputs.files else {}),
                              "bundle": args.bundle, "output_file": str(out)}), flush=True)
            continue
        if i == 0:
            print(result.report() + ("\n" if inputs.batched else ""))
        if inputs.batched:
            print(f"input {inputs.label(i)}: {seconds[-1]:.2f} s", flush=True)
    saved = np.stack(outputs) if inputs.batched else outputs[0]
    save_output(out, saved)
    if args.json:
        return 0
    what = f"output {'x'.join(map(str, saved.shape))} {saved.dtype} saved to {out}; "
    if not inputs.batched:
        print(what + ", ".join(f"{k} {v:.2f} s" for k, v in result.seconds.items()))
        return 0
    later = f", then {np.median(seconds[1:]):.2f} s each (median)" if len(seconds) > 1 else ""
    print(f"{what}load {model.seconds['load']:.2f} s; {len(seconds)} inputs in "
          f"{sum(seconds):.2f} s: the first {seconds[0]:.2f} s{later}")
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one line with exit status 2, as vtatune's command line's."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise DeployError(message)


def main(argv: list[str] | None = None) -> int:
    """``python -m vtatune.deploy.runtime DIR [--input X.npy|DIR] [--output Y.npy] [--device
    sim|libvta:PATH] [--hw HW] [--json]``: exit status 0, 2 on bad input or a refused
    bundle (one line on stderr), 130 when interrupted."""
    parser = _Parser(prog="python -m vtatune.deploy.runtime", description=DESCRIPTION)
    add_arguments(parser)
    try:
        return run_bundle(parser.parse_args(argv))
    except VTAError as exc:
        print(f"vtatune: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("vtatune: interrupted", file=sys.stderr)
        return 130
