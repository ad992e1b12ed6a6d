"""``run``: run a saved bundle (``deploy MODEL --save DIR``) on an input, in a process that
builds nothing: no ONNX file, no log, no code generation (:func:`vtatune.deploy.load`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from vtatune.cli._common import UsageError, add_command

__all__ = [
    "register",
]

_DESCRIPTION = (
    "Run a model saved by `deploy MODEL --save DIR` once: TVM's runtime runs the CPU's part "
    "from the bundle's exported library, the device the offloaded layers with the bundle's "
    "VTA programs and packed weights. Nothing is imported, partitioned, built or tuned, and "
    "the output is the one the building process computed. Before anything runs the bundle "
    "is checked: every file against the manifest's SHA-256, the vtatune and TVM versions "
    "that saved it against these, its hardware against --hw. Prints what ran where and the "
    "VTA time, and saves the output. Exit status: 0, 2 on bad input or a refused bundle.")

_EXAMPLES = (
    "python -m vtatune run resnet18.bundle --input x.npy --output y.npy",
    "python -m vtatune run resnet18.bundle --input x.npy --device sim --json",
)


def register(sub: Any) -> None:
    from vtatune.deploy.runtime import SPECS

    p = add_command(sub, "run", "run a saved bundle (deploy --save) on an input",
                    _DESCRIPTION, _EXAMPLES)
    p.add_argument("bundle", metavar="DIR", help="a bundle saved by deploy --save")
    p.add_argument("--input", metavar="X.npy", help="the input (default: seeded random)")
    p.add_argument("--seed", type=int, default=0, metavar="N", help="seed of the random input")
    p.add_argument("--output", metavar="Y.npy",
                   help="where to save the output (default: runs/<bundle>.output.npy)")
    p.add_argument("--device", default="sim", metavar="|".join(SPECS),
                   help="what runs the offloaded layers: sim (vtatune's functional VTA) or "
                        "libvta:PATH (VTA's C driver API in the library PATH)")
    p.add_argument("--hw", metavar="PRESET|FILE",
                   help="the hardware the device is (a preset or a vta_config.json): a bundle "
                        "built for other hardware is refused; default: the bundle's")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object: offloaded, cpu_ops, vta_cycles, output, ...")
    p.set_defaults(func=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    import numpy as np

    from vtatune.deploy.runtime import load

    x = None
    if args.input:
        try:
            x = np.load(args.input, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise UsageError(f"--input {args.input}: {exc}") from None
    model = load(args.bundle, device=args.device, hw=args.hw)
    result = model.run(x, args.seed)
    out = Path(args.output or f"runs/{Path(args.bundle).resolve().name}.output.npy")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        np.save(out, result.output)
    except OSError as exc:
        raise UsageError(f"cannot write {out}: {exc.strerror}") from None
    if args.json:
        print(json.dumps({**result.as_dict(), "bundle": args.bundle, "output_file": str(out)}))
        return 0
    print(result.report())
    print(f"output {'x'.join(map(str, result.output.shape))} {result.output.dtype} saved to "
          f"{out}; " + ", ".join(f"{k} {v:.2f} s" for k, v in result.seconds.items()))
    return 0
