"""The commands that use tuned logs: ``build``, ``analyze``, ``export``, ``import`` and
``simulate --program``."""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from typing import Any

from .errors import VtatuneError

COMMANDS = ("build", "analyze", "export", "import")


class ToolError(VtatuneError):
    pass


def add_parsers(sub: Any, add_shape_flags: Any, simulate_parser: Any) -> None:
    b = sub.add_parser("build", help="build a workload with the best tuned schedule and "
                                     "export program.json/.bin/.c")
    b.add_argument("operator", choices=("gemm", "conv2d"))
    b.add_argument("--workload", help="named workload (tutorial, resnet18.C2 ... C11)")
    add_shape_flags(b)
    b.add_argument("--hw", help="hardware preset or vta_config.json (default pynq)")
    b.add_argument("--bias", action="store_true", help="add the per-channel int32 bias")
    b.add_argument("--log", action="append", default=[], metavar="LOG",
                   help="tuning log (repeatable); the best ok record for this workload and "
                        "hardware is used, else the default schedule (with a warning)")
    b.add_argument("--out", required=True, metavar="DIR", help="output directory")
    b.add_argument("--verify", action="store_true",
                   help="run the build on random data and compare with numpy")
    a = sub.add_parser("analyze", help="summary per workload of one or more tuning logs")
    a.add_argument("logs", nargs="+", metavar="LOG")
    a.add_argument("--csv", metavar="OUT", help="write the summary table as CSV")
    a.add_argument("--trials-csv", metavar="OUT", help="write every trial (read_log) as CSV")
    a.add_argument("--no-default", action="store_true",
                   help="skip simulating the default schedule (no speed-up column)")
    e = sub.add_parser("export", help="export the best configs of logs for AutoTVM")
    e.add_argument("logs", nargs="+", metavar="LOG")
    e.add_argument("--format", choices=("autotvm",), default="autotvm")
    e.add_argument("-o", "--output", required=True, metavar="FILE")
    i = sub.add_parser("import", help="simulate AutoTVM VTA records (e.g. TopHub's)")
    i.add_argument("file")
    i.add_argument("-o", "--output", metavar="LOG", help="append them to a vtatune log")
    i.add_argument("--best", action="store_true", help="only the best record per task")
    i.add_argument("--json", action="store_true", help="one JSON object per config")
    simulate_parser.add_argument("--program", metavar="FILE",
                                 help="run an exported program.bin (or program.json)")


def _warnings_one_line() -> None:
    def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None,
             line: Any = None) -> None:
        print(f"vtatune: warning: {message}", file=sys.stderr)

    warnings.showwarning = show


def run(args: argparse.Namespace, resolve_workload: Any) -> int:
    _warnings_one_line()
    if args.command == "build":
        return cmd_build(args, resolve_workload)
    if args.command == "analyze":
        return cmd_analyze(args)
    if args.command == "export":
        return cmd_export(args)
    return cmd_import(args)


def cmd_build(args: argparse.Namespace, resolve_workload: Any) -> int:
    from simulator.hardware import HardwareConfig

    from .builds import build, simulate

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
        from .reference import random_operands, reference_output

        ops = random_operands(wl, args.bias, 0)
        ok = bool((b.run(ops.data, ops.weight, ops.bias)
                   == reference_output(wl, ops)).all())
        print("verified   " + ("yes (bit-exact with numpy)" if ok else "NO"))
        return 0 if ok else 1
    return 0


def _table(df: Any, cols: list[tuple[str, str, Any]]) -> None:
    rows = [[fmt(r[c]) for c, _, fmt in cols] for _, r in df.iterrows()]
    head = [h for _, h, _ in cols]
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h)
              for i, h in enumerate(head)]
    print("  ".join(h.ljust(w) if i == 0 else h.rjust(w)
                    for i, (h, w) in enumerate(zip(head, widths, strict=True))))
    for row in rows:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                        for i, (c, w) in enumerate(zip(row, widths, strict=True))))


def _f(spec: str, scale: float = 1.0, unit: str = "") -> Any:
    import pandas as pd

    return lambda v: "-" if v is None or pd.isna(v) else format(v * scale, spec) + unit


def cmd_analyze(args: argparse.Namespace) -> int:
    from .analysis import read_log, summary

    df = read_log(args.logs)
    if df.empty:
        raise ToolError(f"{', '.join(args.logs)}: no records")
    s = summary(df, default=not args.no_default)
    _table(s, [("workload", "workload", str), ("hw_model", "hardware", str),
               ("trials", "trials", str), ("ok", "legal", str), ("failed", "failed", str),
               ("best_cycles", "best cycles", _f(",.0f")), ("best_ms", "time", _f(".3f", 1,
                                                                                 " ms")),
               ("gops", "GOPS", _f(".2f")), ("utilization", "util", _f(".1f", 100, "%")),
               ("speedup_default", "vs default", _f(".2f", 1, "x"))])
    for _, r in s.iterrows():
        if r["best_knobs"]:
            print(f"best  {r['workload']}{' (bias)' if r['bias'] else ''}: {r['best_knobs']} "
                  f"[{r['best_line']}]")
    for out, frame in ((args.csv, s), (args.trials_csv, df)):
        if out:
            try:
                frame.to_csv(out, index=False)
            except OSError as exc:
                raise ToolError(f"cannot write {out}: {exc.strerror}") from None
            print(f"wrote {out}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from .autotvm import export_autotvm

    done = export_autotvm(args.logs, args.output)
    if not done:
        raise ToolError(f"{', '.join(args.logs)}: no ok record AutoTVM's templates can "
                        "express, nor an AutoTVM point among its tile choices that runs")
    for e in done:
        source = (f"the tiles of log line {e.line}, with TVM's loop orders" if e.projected
                  else f"log line {e.line}")
        print(f"{e.workload} on {e.model}: {e.cycles:,} cycles ({e.seconds * 1e3:.3f} ms), "
              f"config index {e.record['config']['index']} ({source})")
    print(f"wrote {len(done)} AutoTVM v0.2 record(s) to {args.output}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from .autotvm import import_autotvm, write_records

    imported = import_autotvm(args.file, best=args.best)
    for imp in imported:
        ev = imp.evaluation
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


def cmd_simulate_program(args: argparse.Namespace) -> int:
    from simulator.timing import TimingProfile

    from .builds import simulate
    from .export import load_bin, load_json

    if args.program is None:
        raise ToolError("simulate needs an operator (gemm, conv2d, vadd) or --program FILE")
    if args.operator is not None:
        raise ToolError("give an operator or --program, not both")
    loaded = (load_json if args.program.endswith(".json") else load_bin)(args.program)
    hw = loaded.hw
    profile = TimingProfile.for_hw(hw)
    if args.profile:
        profile = TimingProfile.from_json(args.profile, profile)
    sim = simulate(loaded, profile=profile)
    wl = loaded.workload
    report: dict[str, Any] = {
        "program": args.program, "hw": {"target": hw.target, "bitstream": hw.bitstream,
                                        "model": hw.target_model, "clock_mhz": hw.clock_mhz},
        "workload": loaded.meta.get("workload"), "bias": loaded.bias,
        "counters": sim.counters, "instructions": loaded.program.instruction_mix(),
        "cycles": sim.cycles, "seconds": sim.seconds, "gops": sim.gops,
        "utilization": sim.utilization}
    status = 0
    if args.verify:
        if wl is None:
            raise ToolError(f"{args.program}: no workload in the metadata, cannot --verify")
        from types import SimpleNamespace

        from .reference import verify

        v = verify(SimpleNamespace(workload=wl, hw=hw, bias=loaded.bias,
                                   program=loaded.program), args.seed)
        report["verified"] = v.ok
        status = 0 if v.ok else 1
    if args.json:
        print(json.dumps(report))
        return status
    print(f"program    {args.program}")
    if wl is not None:
        print(f"workload   {wl.describe()}{' with bias' if loaded.bias else ''}")
    print(f"hardware   {hw.target_model}")
    print("counters")
    for k, v in sim.counters.items():
        print(f"  {k:<17} {v:>12}")
    mix = report["instructions"]
    print(f"instructions {mix['total']}: " + ", ".join(
        f"{k} {v}" for k, v in mix.items() if k != "total"))
    print(f"cycles     {sim.cycles} ({sim.seconds * 1e3:.3f} ms at {hw.clock_mhz:g} MHz, "
          f"{sim.gops:.2f} GOPS, utilization {sim.utilization:.1%})")
    if "verified" in report:
        print("verified   " + ("yes (bit-exact with numpy)" if report["verified"] else
                               "NO: output differs from numpy"))
    return status
