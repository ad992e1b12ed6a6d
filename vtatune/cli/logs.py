"""The commands that read tuning logs: ``replay``, ``best``, ``analyze``, ``export`` and
``import``."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from vtatune.cli._common import UsageError, add_command, hw_flag, warnings_one_line

__all__ = [
    "COMMANDS", "register",
]


#: The commands :func:`register` adds.
COMMANDS = ("replay", "best", "analyze")


def register(sub: Any) -> None:
    rp = add_command(
        sub, "replay", "re-simulate a log's records and check they are unchanged",
        "Re-lower and re-simulate every ok record of a log (or the best per workload and "
        "hardware with --best) and check that cycles and counters equal the recorded ones. "
        "Exit status: 0 when all are identical, 1 naming the lines that differ, 2 for a log "
        "with no ok record or bad input.",
        ("python -m vtatune replay logs/gemm-pynq.jsonl --best",
         "python -m vtatune replay runs/conv2d-tutorial-pynq_1x16_i8w8a32_15_15_18_17.jsonl "
         "--jobs 2"))
    rp.add_argument("log", metavar="LOG", help="a vtatune JSON-lines log")
    rp.add_argument("--best", action="store_true",
                    help="only the best record per workload and hardware")
    rp.add_argument("--jobs", type=int, default=1, metavar="N",
                    help="simulation processes")
    rp.set_defaults(func=cmd_replay)
    bp = add_command(
        sub, "best", "the best config per workload and hardware in a log",
        "Print the fastest ok record of each workload x hardware (x bias) in a log, with a "
        "simulate command that reruns it. Exit status 2 for a log with no ok record.",
        ("python -m vtatune best logs/resnet18-pynq.jsonl",
         "python -m vtatune best logs/gemm-pynq.jsonl --json"))
    bp.add_argument("log", metavar="LOG", help="a vtatune JSON-lines log")
    bp.add_argument("--json", action="store_true", help="one JSON record per line")
    bp.set_defaults(func=cmd_best)
    a = add_command(
        sub, "analyze", "summary per workload of one or more tuning logs",
        "One row per workload x hardware x bias of the logs: trials, legal and failed counts, "
        "best cycles, time, GOPS, utilization, speed-up over the default schedule (simulated) "
        "and the best knobs. The same tables as vtatune.records.analysis.summary / read_log.",
        ("python -m vtatune analyze logs/resnet18-pynq.jsonl",
         "python -m vtatune analyze logs/gemm-pynq.jsonl logs/gemm-ultra96.jsonl --no-default",
         "python -m vtatune analyze logs/gemm-pynq.jsonl --csv summary.csv "
         "--trials-csv trials.csv"))
    a.add_argument("logs", nargs="+", metavar="LOG", help="one or more vtatune logs")
    a.add_argument("--csv", metavar="OUT", help="write the summary table as CSV")
    a.add_argument("--trials-csv", metavar="OUT", help="write every trial (read_log) as CSV")
    a.add_argument("--no-default", action="store_true",
                   help="skip simulating the default schedule (no speed-up column)")
    a.set_defaults(func=cmd_analyze)


def cmd_replay(args: argparse.Namespace) -> int:
    from vtatune.records import replay

    warnings_one_line()
    if args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}")
    report = replay(args.log, best=args.best, jobs=args.jobs)
    what = "best records" if args.best else "ok records"
    if report.replayed == 0:
        raise UsageError(f"{args.log} has no ok record to replay")
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


def cmd_best(args: argparse.Namespace) -> int:
    from vtatune.records import best_records, read_records

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
              + hw_flag(hw["config"], args.log) + (" --bias" if r.get("bias") else "")
              + f" --schedule '{json.dumps(r['schedule'], separators=(',', ':'))}'")
    return 0


def _table(df: Any, cols: list[tuple[str, str, Any]], left: int = 1) -> None:
    """``df``'s ``cols`` (column, heading, format) as a text table, the first ``left``
    columns aligned left."""
    rows = [[fmt(r[c]) for c, _, fmt in cols] for _, r in df.iterrows()]
    head = [h for _, h, _ in cols]
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h)
              for i, h in enumerate(head)]
    print("  ".join(h.ljust(w) if i < left else h.rjust(w)
                    for i, (h, w) in enumerate(zip(head, widths, strict=True))))
    for row in rows:
        print("  ".join(c.ljust(w) if i < left else c.rjust(w)
                        for i, (c, w) in enumerate(zip(row, widths, strict=True))))


def _f(spec: str, scale: float = 1.0, unit: str = "") -> Any:
    import pandas as pd

    return lambda v: "-" if v is None or pd.isna(v) else format(v * scale, spec) + unit


def cmd_analyze(args: argparse.Namespace) -> int:
    from vtatune.records.analysis import read_log, summary

    warnings_one_line()

    df = read_log(args.logs)
    if df.empty:
        raise UsageError(f"{', '.join(args.logs)}: no records")
    s = summary(df, default=not args.no_default)
    _table(s, [("workload", "workload", str), ("epilogue", "epilogue", str),
               ("hw_model", "hardware", str),
               ("trials", "trials", str), ("ok", "legal", str), ("failed", "failed", str),
               ("best_cycles", "best cycles", _f(",.0f")), ("best_ms", "time", _f(".3f", 1,
                                                                                 " ms")),
               ("gops", "GOPS", _f(".2f")), ("utilization", "util", _f(".1f", 100, "%")),
               ("speedup_default", "vs default", _f(".2f", 1, "x"))], left=2)
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
