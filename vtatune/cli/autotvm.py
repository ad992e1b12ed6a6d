"""The AutoTVM interop commands: ``export`` (best configs as AutoTVM records) and ``import``
(simulate AutoTVM VTA records, e.g. TopHub's)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from vtatune.cli._common import UsageError, add_command, warnings_one_line

__all__ = [
    "register",
]


def register(sub: Any) -> None:
    e = add_command(
        sub, "export", "export the best configs of logs as AutoTVM records",
        "Write one AutoTVM v0.2 record per workload x hardware: the best config that "
        "AutoTVM's conv2d_packed.vta / dense_packed.vta template can express (for a log of "
        "vtatune's full space: the fastest AutoTVM point among its tile choices, "
        "re-simulated). The file is what TVM's autotvm.apply_history_best reads.",
        ("python -m vtatune export logs/resnet18-pynq.jsonl -o resnet18.autotvm.log",
         "python -m vtatune export logs/gemm-pynq.jsonl logs/gemm-ultra96.jsonl --format "
         "autotvm -o gemm.autotvm.log"))
    e.add_argument("logs", nargs="+", metavar="LOG", help="one or more vtatune logs")
    e.add_argument("--format", choices=("autotvm",), default="autotvm",
                   help="record format: AutoTVM's v0.2 JSON lines")
    e.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="the file to write (replaced)")
    e.set_defaults(func=cmd_export)
    i = add_command(
        sub, "import", "simulate AutoTVM VTA records (e.g. TopHub's)",
        "Read AutoTVM VTA records, map each config to a vtatune schedule as TVM's template "
        "lowers it, and simulate it; -o appends them to a vtatune log so build, analyze and "
        "best compare them with tuned schedules.",
        ("python -m vtatune import tophub_vta.log --best",
         "python -m vtatune import tophub_vta.log -o runs/tophub.jsonl",
         "python -m vtatune import resnet18.autotvm.log --json"))
    i.add_argument("file", metavar="FILE", help="AutoTVM records (JSON lines, v0.2)")
    i.add_argument("-o", "--output", metavar="LOG", help="append them to a vtatune log")
    i.add_argument("--best", action="store_true", help="only the best record per task")
    i.add_argument("--json", action="store_true", help="one JSON object per config")
    i.set_defaults(func=cmd_import)


def cmd_export(args: argparse.Namespace) -> int:
    from vtatune.autotvm import export_autotvm

    warnings_one_line()

    done = export_autotvm(args.logs, args.output)
    if not done:
        raise UsageError(f"{', '.join(args.logs)}: no ok record AutoTVM's templates can "
                        "express, nor an AutoTVM point among its tile choices that runs")
    for e in done:
        source = (f"the tiles of log line {e.line}, with TVM's loop orders" if e.projected
                  else f"log line {e.line}")
        print(f"{e.workload} on {e.model}: {e.cycles:,} cycles ({e.seconds * 1e3:.3f} ms), "
              f"config index {e.record['config']['index']} ({source})")
    print(f"wrote {len(done)} AutoTVM v0.2 record(s) to {args.output}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from vtatune.autotvm import import_autotvm, write_records

    warnings_one_line()

    imported = import_autotvm(args.file, best=args.best)
    for imp in imported:
        ev = imp.score
        if args.json:
            print(json.dumps({"line": imp.line, "task": imp.task,
                              "workload": imp.workload.name or imp.workload.key(),
                              "hw": imp.hw.target_model, "knobs": imp.knobs,
                              "schedule": imp.schedule.to_dict(),
                              "autotvm_seconds": imp.autotvm_seconds, **ev.as_dict()}))
            continue
        board = "-" if imp.autotvm_seconds is None else f"{imp.autotvm_seconds * 1e3:.3f} ms"
        sim = (f"{ev.cycles:,} cycles ({ev.seconds * 1e3:.3f} ms, {ev.gops:.2f} GOPS)"
               if ev.status == "ok" else f"{ev.status}: {ev.error}")
        print(f"line {imp.line}: {imp.workload.name or imp.workload.key()} on "
              f"{imp.hw.target_model}: autotvm {board}, simulated {sim}")
        print(f"  schedule {imp.schedule.short()}")
    if args.output:
        write_records(imported, args.output, args.file)
        print(f"appended {len(imported)} record(s) to {args.output}")
    return 0
