"""Size of every template's space and of its legal part, per workload.

    python scripts/space_sizes.py [--hw PRESET] [--bias]

Columns: AutoTVM-style raw cartesian size (before pruning), the template's size (knob
choices after pruning), the number of legal configs (exact: every point is decided by the
legality rules; knobs no rule reads are multiplied out), the legal share of the template,
and the mean cost of one ``Template.legal`` call over 2000 random configs.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from search_spaces import SPACES, get_template  # noqa: E402
from simulator.hardware import PRESETS, HardwareConfig  # noqa: E402
from vtatune.errors import VtatuneError  # noqa: E402
from vtatune.workloads import WORKLOADS  # noqa: E402


def _workloads(hw: HardwareConfig):
    """The workloads; a batch that is not a whole number of BATCH blocks (batch-1 ResNet on
    the 4x8 bitstream) is raised to BATCH and labelled so."""
    names = [("conv2d", f"resnet18.C{n}") for n in range(2, 12)]
    names += [("gemm", "tutorial"), ("gemm", "dense128")]
    for op, name in names:
        wl = WORKLOADS[op][name]
        label = f"{op}.{name}"
        if wl.batch % hw.batch:
            wl = replace(wl, batch=hw.batch)
            label += f" (b{hw.batch})"
        yield wl, label


def _us_per_check(tpl, n=2000) -> float:
    rng = random.Random(0)
    configs = [tpl.config_at(rng.randrange(tpl.size())) for _ in range(n)]
    t0 = time.perf_counter()
    for c in configs:
        tpl.legal(c)
    return (time.perf_counter() - t0) / n * 1e6


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hw", default="pynq", help=f"preset ({', '.join(PRESETS)})")
    ap.add_argument("--bias", action="store_true", help="with the int32 bias epilogue")
    args = ap.parse_args(argv)
    try:
        hw = HardwareConfig.resolve(args.hw)
    except VtatuneError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - simulator's own config errors
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"hardware: {hw.summary()}{'  (bias)' if args.bias else ''}")
    head = (f"{'template':<18} {'workload':<27} {'raw size':>10} {'size':>10} {'legal':>9} "
            f"{'legal %':>8} {'us/check':>9}")
    print(head)
    print("-" * len(head))
    t_all = time.perf_counter()
    for space in SPACES:
        for wl, label in _workloads(hw):
            try:
                tpl = get_template(wl, hw, bias=args.bias, space=space)
            except VtatuneError as exc:
                print(f"{space:<18} {label:<27} n/a: {exc}")
                continue
            legal = tpl.count_legal()
            print(f"{tpl.name:<18} {label:<27} {tpl.raw_size():>10,} {tpl.size():>10,} "
                  f"{legal:>9,} {100 * legal / tpl.size():>7.1f}% {_us_per_check(tpl):>9.1f}")
    print(f"({time.perf_counter() - t_all:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
