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
from vtatune.deploy.runtime._bundle import load
from vtatune.deploy.runtime._errors import DeployError
from vtatune.deploy.runtime._model import output_file, save_output
from vtatune.deploy.runtime._select import SPECS

#: What the command does.
DESCRIPTION = (
    "Run a model saved by `deploy MODEL --save DIR` once: TVM's runtime runs the CPU's part "
    "from the bundle's exported library, the device the offloaded layers with the bundle's "
    "VTA programs and packed weights. Nothing is imported, partitioned, built or tuned, and "
    "the output is the one the building process computed. Before anything runs the bundle "
    "is checked: every file against the manifest's SHA-256, the vtatune and TVM versions "
    "that saved it against these, its CPU part's target against this machine's CPU, its "
    "hardware against --hw. Prints what ran where and the VTA time, and saves the output. "
    "Exit status: 0, 2 on bad input or a refused bundle.")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's arguments, added to ``p``."""
    p.add_argument("bundle", metavar="DIR", help="a bundle saved by deploy --save")
    p.add_argument("--input", metavar="X.npy", help="the input (default: seeded random)")
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
                   help="print one JSON object: offloaded, cpu_ops, vta_cycles, output, ...")


def run_bundle(args: argparse.Namespace) -> int:
    """The command's handler: load the bundle, run it once, save and report the output;
    DeployError in one line for a bad input or a refused bundle."""
    x = None
    if args.input:
        try:
            x = np.load(args.input, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise DeployError(f"--input {args.input}: {exc}") from None
    out = output_file(args.output, f"runs/{Path(args.bundle).resolve().name}.output.npy")
    model = load(args.bundle, device=args.device, hw=args.hw)
    result = model.run(x, args.seed)
    save_output(out, result.output)
    if args.json:
        print(json.dumps({**result.as_dict(), "bundle": args.bundle, "output_file": str(out)}))
        return 0
    print(result.report())
    print(f"output {'x'.join(map(str, result.output.shape))} {result.output.dtype} saved to "
          f"{out}; " + ", ".join(f"{k} {v:.2f} s" for k, v in result.seconds.items()))
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are one line with exit status 2, as vtatune's command line's."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise DeployError(message)


def main(argv: list[str] | None = None) -> int:
    """``python -m vtatune.deploy.runtime DIR [--input X.npy] [--output Y.npy] [--device
    sim|libvta:PATH] [--hw HW] [--json]``: exit status 0, 2 on bad input or a refused
    bundle (one line on stderr)."""
    parser = _Parser(prog="python -m vtatune.deploy.runtime", description=DESCRIPTION)
    add_arguments(parser)
    try:
        return run_bundle(parser.parse_args(argv))
    except VTAError as exc:
        print(f"vtatune: error: {exc}", file=sys.stderr)
        return 2
