"""The commands that read tuning logs: ``replay``, ``best``, ``analyze``, ``export`` and
``import``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ._common import UsageError, warnings_one_line


def register(sub: Any) -> None:
    rp = sub.add_parser("replay", help="re-simulate a log's records and verify them")
    rp.add_argument("log")
    rp.add_argument("--best", action="store_true",
                    help="only the best record per workload and hardware")
    rp.add_argument("--jobs", type=int, default=1, metavar="N")
    bp = sub.add_parser("best", help="the best config per workload and hardware in a log")
    bp.add_argument("log")
    bp.add_argument("--json", action="store_true", help="one JSON record per line")
    rp.set_defaults(func=cmd_replay)
    bp.set_defaults(func=cmd_best)
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
    a.set_defaults(func=cmd_analyze)
    e.set_defaults(func=cmd_export)
    i.set_defaults(func=cmd_import)


def cmd_replay(args: argparse.Namespace) -> int:
    from ..records import replay

    warnings_one_line()
    if args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}")
    report = replay(args.log, best=args.best, jobs=args.jobs)
    what = "best records" if args.best else "ok records"
    for m in report.mismatches:
        print(f"{args.log}:{m.line}: {m.what}", file=sys.stderr)
    if not report.ok:
        lines = ", ".join(str(m.line) for m in report.mismatches)
        print(f"vtatune: replay: {len(report.mismatches)} of {report.replayed} {what} differ "
              f"(lines {lines})", file=sys.stderr)
        return 1
    if report.other_timing:
        print(f"replayed {report.replayed} {what} of {args.log}: counters identical; cycles of "
              f"{report.other_timing} not compared (scored by another timing model than "
              f"{_timing_now()}: retune or rescore to compare)")
    else:
        print(f"replayed {report.replayed} {what} of {args.log}: cycles and counters identical")
    return 0


def _timing_now() -> str:
    from simulator.timing import MODEL_VERSION

    return MODEL_VERSION


def _hw_flag(config: dict[str, Any]) -> str:
    from simulator.hardware import DEFAULT, PRESETS, HardwareConfig

    hw = HardwareConfig.from_dict(config)
    if hw == DEFAULT:
        return ""
    name = next((n for n, p in PRESETS.items() if p == hw), None)
    return f" --hw {name}" if name else " --hw vta_config.json"


def cmd_best(args: argparse.Namespace) -> int:
    from ..records import best_records, read_records

    warnings_one_line()
    best = best_records(read_records(args.log))
    if not best:
        raise UsageError(f"{args.log} has no ok record")
    for b in best:
        r = b.record
        if args.json:
            print(json.dumps(r, separators=(",", ":")))
            continue
        w, hw = r["workload"], r["hw"]
        print(f"{w.get('name') or w['key']} ({w['key']}) on {hw['model']}"
              f"{' with bias' if r.get('bias') else ''}")
        print(f"  cycles {r['cycles']:,}  {r['seconds'] * 1e3:.3f} ms  {r['gops']:.2f} GOPS  "
              f"util {r['utilization']:.1%}  (line {b.line}, trial {r['trial']}, "
              f"study {r['study']})")
        print(f"  config {json.dumps(r['config'])}")
        print(f"  simulate: python -m vtatune simulate {w['operator']} "
              + " ".join(f"--{k.replace('_', '-')} {v}" for k, v in w["shape"].items())
              + _hw_flag(hw["config"]) + (" --bias" if r.get("bias") else "")
              + f" --schedule '{json.dumps(r['schedule'], separators=(',', ':'))}'")
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
    from ..analysis import read_log, summary

    warnings_one_line()

    df = read_log(args.logs)
    if df.empty:
        raise UsageError(f"{', '.join(args.logs)}: no records")
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
                raise UsageError(f"cannot write {out}: {exc.strerror}") from None
            print(f"wrote {out}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from ..autotvm import export_autotvm

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
    from ..autotvm import import_autotvm, write_records

    warnings_one_line()

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
