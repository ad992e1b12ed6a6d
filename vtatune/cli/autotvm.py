"""The AutoTVM interop commands: ``export`` (best configs as AutoTVM records) and ``import``
(simulate AutoTVM VTA records, e.g. TopHub's)."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import warnings
from typing import Any

from vtatune.cli._common import UsageError, add_command, hw_flag, warnings_one_line

__all__ = [
    "COMMANDS", "register",
]


_EXPORT_DESCRIPTION = (
    "Write one AutoTVM v0.2 record per workload x hardware, the file TVM's "
    "autotvm.apply_history_best reads: the fastest record TVM applies as it is (one tuned in "
    "AutoTVM's space, --space autotvm), simulated as TVM's conv2d_packed / dense_packed "
    "template lowers it. A workload tuned only in vtatune's full space (loop orders and load "
    "reuse AutoTVM lacks) gets the fastest buildable AutoTVM point nearest its tile choices, "
    "re-simulated with TVM's loop orders. Each line says what was tuned (the log's best, any "
    "space) and what TVM will run; when TVM will run more than 1% slower, one warning line "
    "on stderr gives both figures and the command that tunes in TVM's space. Exit status: 0 "
    "(warnings included), 2 on bad input or a log with no usable record.")


#: The commands :func:`register` adds.
COMMANDS = ("export", "import")


def register(sub: Any) -> None:
    e = add_command(
        sub, "export", "export the best configs of logs as AutoTVM records",
        _EXPORT_DESCRIPTION,
        ("python -m vtatune export logs/resnet18-pynq.jsonl -o resnet18.autotvm.log",
         "python -m vtatune export runs/c4.jsonl -o c4.autotvm.log --json",
         "python -m vtatune export logs/gemm-pynq.jsonl logs/gemm-ultra96.jsonl --format "
         "autotvm -o gemm.autotvm.log"))
    e.add_argument("logs", nargs="+", metavar="LOG", help="one or more vtatune logs")
    e.add_argument("--format", choices=("autotvm",), default="autotvm",
                   help="record format: AutoTVM's v0.2 JSON lines")
    e.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="the file to write (replaced)")
    e.add_argument("--json", action="store_true",
                   help="one JSON object per record written (tuned and exported cycles, ...)")
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


def tune_command(e: Any) -> str:
    """The command that tunes ``e``'s workload in AutoTVM's space into the log it was tuned
    in, so the next export takes what that tuning finds."""
    from vtatune.errors import WorkloadError
    from vtatune.records import workload_from
    from vtatune.workloads import autotvm_key, epilogue_name, get_workload

    w, r = e.tuned["workload"], e.tuned
    tuned = workload_from(r)
    try:  # the catalogue's name when it names these shapes
        named = bool(w.get("name")) and \
            autotvm_key(get_workload(w["operator"], w["name"])) == autotvm_key(tuned)
    except WorkloadError:
        named = False
    flags = (f"--workload {w['name']}" if named else
             " ".join(f"--{k.replace('_', '-')} {v}" for k, v in w["shape"].items()))
    # the epilogue it was tuned with (a network's layer: deployed), so the next export
    # compares like with like
    epilogue = epilogue_name(tuned.epilogue)  # type: ignore[attr-defined]
    epilogue_flag = f" --epilogue {epilogue}" if epilogue not in (None, "benchmark") else ""
    return (f"python -m vtatune {w['operator']} {flags}{epilogue_flag}"
            f"{hw_flag(r['hw']['config'], e.tuned_log)}{' --bias' if r.get('bias') else ''} "
            "--space autotvm "
            f"--trials 200 --log {shlex.quote(e.tuned_log)}")


def export_warning(e: Any) -> str:
    """The stderr line for an export TVM will run more than 1% slower than it was tuned."""
    why = ("AutoTVM's template cannot express the tuned schedule" if e.projected else
           "the fastest AutoTVM-space record of the log; AutoTVM's template cannot express "
           "the tuned schedule")
    return (f"vtatune: warning: {e.workload} on {e.model}: tuned at {e.tuned_cycles:,} cycles, "
            f"TVM will run {e.cycles:,} ({slower_by(e.slowdown)}: {why}); tune in TVM's "
            f"space: {tune_command(e)}")


def slower_by(ratio: float) -> str:
    """``16.8% slower`` below 2x, ``14.3x slower`` from there."""
    return f"{(ratio - 1) * 100:.1f}% slower" if ratio < 2 else f"{ratio:.1f}x slower"


def export_json(e: Any) -> dict[str, Any]:
    """The ``export --json`` object of one exported record."""
    return {"workload": e.workload, "operator": e.tuned["workload"]["operator"],
            "hw": e.model, "bias": bool(e.tuned.get("bias", False)),
            "tuned_cycles": e.tuned_cycles, "tuned_space": e.tuned_space,
            "tuned_log": e.tuned_log, "tuned_line": e.tuned_line, "retimed": e.retimed,
            "exported_cycles": e.cycles, "exported_seconds": e.seconds,
            "exported_log": e.log, "exported_line": e.line, "projected": e.projected,
            "config_index": e.record["config"]["index"],
            "entity": e.record["config"]["entity"], "slowdown": e.slowdown,
            "slower": e.slower, "tune_command": tune_command(e),
            "tvm014_builds_hardware": e.tvm014_builds}


def cmd_export(args: argparse.Namespace) -> int:
    from simulator.timing import MODEL_VERSION
    from vtatune.autotvm import ExportWarning, export_autotvm

    warnings_one_line()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExportWarning)  # reported below, with the command
        done = export_autotvm(args.logs, args.output)
    if not done:
        raise UsageError(f"{', '.join(args.logs)}: no ok record AutoTVM's templates can "
                         "express, nor an AutoTVM point among its tile choices that runs")

    def at(log: str, line: int) -> str:
        return f"line {line}" if len(args.logs) == 1 else f"{log}:{line}"

    for e in done:
        if args.json:
            print(json.dumps(export_json(e)))
        else:
            source = (f"the tiles of {at(e.log, e.line)} with TVM's loop orders" if e.projected
                      else f"{at(e.log, e.line)} as it is")
            print(f"{e.workload} on {e.model}: tuned {e.tuned_cycles:,} cycles "
                  f"({at(e.tuned_log, e.tuned_line)}, {e.tuned_space} space), TVM will run "
                  f"{e.cycles:,} ({e.seconds * 1e3:.3f} ms): config index "
                  f"{e.record['config']['index']}, {source}")
        if e.slower:
            print(export_warning(e), file=sys.stderr)
    if not args.json:
        retimed = sum(e.retimed for e in done)
        if retimed:
            print(f"note: {retimed} tuned record(s) were timed by another timing model than "
                  f"{MODEL_VERSION}: their cycles above are re-simulated")
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
