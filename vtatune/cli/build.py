"""``build``: a workload with the best tuned schedule, exported as program.json/.bin/.c."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from vtatune.cli._common import (
    OPERATORS,
    SCHEDULE_NOTATION,
    add_command,
    add_hw_flag,
    add_workload_flags,
    resolve_workload,
    warnings_one_line,
)

__all__ = [
    "COMMANDS", "register",
]


#: The commands :func:`register` adds.
COMMANDS = ("build",)


def register(sub: Any) -> None:
    b = add_command(
        sub, "build", "build a workload with its best tuned schedule and export the program",
        "Take the fastest ok record for the workload, its hardware config and bias flag from "
        "the logs (AutoTVM's apply_history_best habit; with no such record: the default "
        "schedule and a warning), lower it and write program.json, program.bin, program.c and "
        "vta_runtime.h to --out. Exit status: 0, 1 when --verify finds a difference, 2 on bad "
        "input.",
        ("python -m vtatune build conv2d --workload C11 --epilogue deployed --log "
         "logs/resnet18-pynq.jsonl --out build/c11",
         "python -m vtatune build gemm --workload dense128 --hw ultra96 --log "
         "logs/gemm-ultra96.jsonl --out build/dense128 --verify",
         "python -m vtatune simulate --program build/c11/program.bin"), SCHEDULE_NOTATION)
    b.add_argument("operator", choices=OPERATORS,
                   help="the operator; its workload: --workload or shape flags")
    add_workload_flags(b, OPERATORS)
    add_hw_flag(b)
    b.add_argument("--bias", action="store_true", help="add the per-channel int32 bias")
    b.add_argument("--log", action="append", default=[], metavar="LOG",
                   help="tuning log (repeatable); the best ok record for this workload and "
                        "hardware is used, else the default schedule (with a warning); a "
                        "file with no record (empty, or not a log) is refused")
    b.add_argument("--out", required=True, metavar="DIR",
                   help="directory for program.json, .bin, .c and vta_runtime.h (created; "
                        "those files replaced)")
    b.add_argument("--verify", action="store_true",
                   help="run the build on random data and compare with numpy (exit 1 if it "
                        "differs)")
    b.set_defaults(func=cmd_build)


def cmd_build(args: argparse.Namespace) -> int:
    from simulator.hardware import HardwareConfig
    from vtatune.builds import build
    from vtatune.scoring import simulate

    warnings_one_line()

    hw = HardwareConfig.resolve(args.hw)
    wl = resolve_workload(args.operator, args)
    b = build(wl, hw, log=args.log or None, bias=args.bias)
    paths = b.export(args.out)
    sim = simulate(b)
    print(f"workload   {wl.describe()}")
    print(f"hardware   {hw.target_model}")
    print(f"schedule   {b.schedule.short()}")
    print(f"from       {b.provenance.describe()}")
    print(f"cycles     {sim.cycles:,} ({sim.seconds * 1e3:.3f} ms, {sim.gops:.2f} GOPS, "
          f"utilization {sim.utilization:.1%}), {sim.instructions} instructions")
    if b.provenance.record is not None and b.provenance.record.get("cycles") != sim.cycles:
        print(f"note       the log recorded {b.provenance.record.get('cycles')} cycles",
              file=sys.stderr)
    for kind in ("json", "bin", "c", "header"):
        print(f"wrote      {paths[kind]}")
    if args.verify:
        from vtatune.workloads import random_operands, reference_output

        ops = random_operands(wl, args.bias, 0)
        ok = bool((b.run(ops.data, ops.weight, ops.bias)
                   == reference_output(wl, ops)).all())
        print("verified   " + ("yes (bit-exact with numpy)" if ok else "NO"))
        return 0 if ok else 1
    return 0
