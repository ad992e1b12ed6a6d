"""The tuning commands: ``conv2d`` / ``gemm`` (tune), ``replay`` and ``best``."""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from typing import Any

from ..errors import VtatuneError
from ._samplers import DEFAULT_SAMPLER, SAMPLERS


class _Usage(VtatuneError):
    pass


def add_parsers(sub: Any, add_shape_flags: Any) -> None:
    for op, what in (("conv2d", "the seed conv2d layer (1x256x14x14 -> 256, 3x3)"),
                     ("gemm", "the 1x1024x1024 GEMM")):
        p = sub.add_parser(op, help=f"tune {op} schedules (default: {what})")
        p.set_defaults(operator=op)
        p.add_argument("--trials", type=int, default=200, metavar="N",
                       help="distinct legal configs to simulate (default 200)")
        p.add_argument("--workload", help="named workload (tutorial, resnet18.C2 ... C11)")
        add_shape_flags(p)
        if op == "conv2d":
            p.add_argument("--network", choices=("resnet18",),
                           help="tune every conv layer of the network, one study each")
        p.add_argument("--hw", help="hardware preset or vta_config.json (default pynq)")
        p.add_argument("--sampler", default=DEFAULT_SAMPLER, metavar="NAME",
                       help=f"{', '.join(SAMPLERS)} (default {DEFAULT_SAMPLER}: TPE over "
                            "legal, untried configs, warm-started by a cost model)")
        p.add_argument("--seed", type=int, help="sampler seed (a serial run is reproducible)")
        p.add_argument("--jobs", type=int, default=1, metavar="N",
                       help="simulation processes (default 1)")
        p.add_argument("--log", help="JSON-lines log (default logs/<op>-<workload>-<hw>.jsonl)")
        p.add_argument("--storage", metavar="URL",
                       help="Optuna storage URL shared by workers (default: a journal file "
                            "beside the log)")
        p.add_argument("--resume", action="store_true",
                       help="continue the study in the log's storage")
        p.add_argument("--space", choices=("full", "autotvm"), default="full",
                       help="vtatune's space or AutoTVM's conv2d_packed/dense_packed space")
        p.add_argument("--bias", action="store_true", help="add the per-channel int32 bias")
        p.add_argument("--quiet", action="store_true", help="no progress bar")
    rp = sub.add_parser("replay", help="re-simulate a log's records and verify them")
    rp.add_argument("log")
    rp.add_argument("--best", action="store_true",
                    help="only the best record per workload and hardware")
    rp.add_argument("--jobs", type=int, default=1, metavar="N")
    bp = sub.add_parser("best", help="the best config per workload and hardware in a log")
    bp.add_argument("log")
    bp.add_argument("--json", action="store_true", help="one JSON record per line")


def _warnings_one_line() -> None:
    def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None,
             line: Any = None) -> None:
        print(f"vtatune: warning: {message}", file=sys.stderr)

    warnings.showwarning = show


def _quiet_optuna() -> None:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)


def cmd_tune(args: argparse.Namespace, resolve_workload: Any) -> int:
    from simulator.hardware import HardwareConfig

    from ..tuner import tune, tune_network

    _quiet_optuna()
    _warnings_one_line()
    if args.trials < 1:
        raise _Usage(f"--trials must be at least 1, got {args.trials}")
    if args.jobs < 1:
        raise _Usage(f"--jobs must be at least 1, got {args.jobs}")
    hw = HardwareConfig.resolve(args.hw)
    common = {"trials": args.trials, "sampler": args.sampler, "seed": args.seed,
              "jobs": args.jobs, "storage": args.storage, "resume": args.resume,
              "space": args.space, "bias": args.bias, "progress": not args.quiet}
    if getattr(args, "network", None):
        if args.workload or any(getattr(args, k, None) is not None for k in
                                ("height", "width", "in_channels", "out_channels", "kernel",
                                 "pad", "stride", "batch")):
            raise _Usage("--network tunes the network's own layers: drop --workload and "
                         "shape flags")
        results = tune_network(args.network, hw, log=args.log, **common)
    else:
        wl = resolve_workload(args.operator, args)
        wl.check(hw)
        results = [tune(wl, hw, log=args.log, **common)]
    print_table(results)
    return 130 if any(r.interrupted for r in results) else 0


def _fmt(v: float | None, spec: str, unit: str = "") -> str:
    return "-" if v is None else format(v, spec) + unit


def print_table(results: list[Any]) -> None:
    if not results:
        return
    head = ("workload", "trials", "best cycles", "time", "GOPS", "util", "vs default",
            "vs tutorial")
    rows = []
    for r in results:
        b = r.best
        rows.append((
            r.workload.name or r.workload.describe(),
            str(r.trials),
            _fmt(b.cycles if b else None, ",d"),
            _fmt(b.seconds * 1e3 if b else None, ".3f", " ms"),
            _fmt(b.gops if b else None, ".2f"),
            _fmt(b.utilization * 100 if b else None, ".1f", "%"),
            _fmt(r.speedup_default, ".2f", "x"),
            _fmt(r.speedup_tutorial, ".2f", "x"),
        ))
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    line = "  ".join(h.ljust(w) if i == 0 else h.rjust(w)
                     for i, (h, w) in enumerate(zip(head, widths, strict=True)))
    print(line)
    for row in rows:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                        for i, (c, w) in enumerate(zip(row, widths, strict=True))))
    first = results[0]
    print(f"hardware  {first.hw.target_model} at {first.hw.clock_mhz:g} MHz, "
          f"template {first.template}, sampler {first.sampler}, seed {first.seed}")
    for r in results:
        label = r.workload.name or r.workload.describe()
        if r.exhausted and r.trials < r.requested:
            print(f"note      {label}: the legal space has only {r.trials} configs; "
                  f"all were tuned")
        if r.best_schedule is not None and len(results) == 1:
            print(f"best      {r.best_schedule.short()}")
        if r.interrupted:
            print(f"note      {label}: interrupted; {r.trials} trials kept in the log and "
                  f"study (--resume continues)")
    asks = sum(r.asks for r in results)
    wasted = sum(r.illegal_asks + r.duplicate_asks for r in results)
    wall = sum(r.wall_seconds for r in results)
    sim = sum(r.sim_seconds for r in results)
    print(f"search    {sum(r.new_trials for r in results)} simulated this run, {asks} asks "
          f"({sum(r.illegal_asks for r in results)} illegal, "
          f"{sum(r.duplicate_asks for r in results)} repeats, "
          f"{(wasted / asks if asks else 0):.0%} not simulated); "
          f"{wall:.1f} s wall, {sim:.1f} s simulating")
    logs = sorted({r.log for r in results})
    for log in logs:
        print(f"log       {log}")
        print(f"replay    python -m vtatune replay {log} --best")


def cmd_replay(args: argparse.Namespace) -> int:
    from ..records import replay

    _warnings_one_line()
    if args.jobs < 1:
        raise _Usage(f"--jobs must be at least 1, got {args.jobs}")
    report = replay(args.log, best=args.best, jobs=args.jobs)
    what = "best records" if args.best else "ok records"
    for m in report.mismatches:
        print(f"{args.log}:{m.line}: {m.what}", file=sys.stderr)
    if not report.ok:
        lines = ", ".join(str(m.line) for m in report.mismatches)
        print(f"vtatune: replay: {len(report.mismatches)} of {report.replayed} {what} differ "
              f"(lines {lines})", file=sys.stderr)
        return 1
    print(f"replayed {report.replayed} {what} of {args.log}: cycles and counters identical")
    return 0


def _hw_flag(config: dict[str, Any]) -> str:
    from simulator.hardware import DEFAULT, PRESETS, HardwareConfig

    hw = HardwareConfig.from_dict(config)
    if hw == DEFAULT:
        return ""
    name = next((n for n, p in PRESETS.items() if p == hw), None)
    return f" --hw {name}" if name else " --hw vta_config.json"


def cmd_best(args: argparse.Namespace) -> int:
    from ..records import best_records, read_records

    _warnings_one_line()
    best = best_records(read_records(args.log))
    if not best:
        raise _Usage(f"{args.log} has no ok record")
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
