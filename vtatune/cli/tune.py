"""``conv2d`` / ``gemm`` / ``group_conv2d`` / ``conv2d_transpose``: tune schedules of one
workload (or every layer of a network)."""

from __future__ import annotations

import argparse
import time
from typing import Any

from vtatune.cli._common import (
    SCHEDULE_NOTATION,
    UsageError,
    add_command,
    add_hw_flag,
    add_study_flags,
    add_workload_flags,
    next_steps,
    resolve_workload,
    shape_flags_given,
    warnings_one_line,
)

__all__ = [
    "COMMANDS", "register",
]

_ABOUT = {
    "conv2d": ("tune conv2d schedules (default: the seed layer, ResNet-18's 14x14 256->256 3x3)",
               "the seed conv2d layer (ResNet-18's 1x256x14x14 -> 256, 3x3, pad 1)",
               ("python -m vtatune conv2d --trials 200",
                "python -m vtatune conv2d --workload C11 --hw ultra96 --seed 0 --log c11.jsonl",
                "python -m vtatune conv2d --network resnet18 --trials 50 --jobs 2",
                "python -m vtatune conv2d --height 28 --width 28 --in-channels 128 "
                "--out-channels 128 --resume --log mine.jsonl",
                "python -m vtatune conv2d --workload C8 --trials 400 "
                "--storage postgresql://tuner@db.example/vta")),
    "gemm": ("tune gemm schedules (default: the 1x1024x1024 GEMM)",
             "the tutorial GEMM (1x1024 times 1024x1024)",
             ("python -m vtatune gemm --trials 100",
              "python -m vtatune gemm --workload dense128 --sampler tpe --seed 0",
              "python -m vtatune gemm --batch 16 --in-channels 256 --out-channels 256 "
              "--space autotvm")),
    "group_conv2d": ("tune grouped conv2d schedules (default: 14x14 512->512 3x3, 32 groups)",
                     "1x512x14x14 -> 512, 3x3, pad 1, 32 groups of 16 channels (TVM's "
                     "group_conv2d_packed)",
                     ("python -m vtatune group_conv2d --trials 100",
                      "python -m vtatune group_conv2d --workload mobilenet.D5 --space autotvm",
                      "python -m vtatune group_conv2d --in-channels 256 --out-channels 256 "
                      "--groups 8 --height 28 --width 28 --stride 2")),
    "conv2d_transpose": ("tune transposed conv2d schedules (default: DCGAN's 8x8 512->256 "
                         "4x4 stride 2)",
                         "DCGAN's generator layer 1x512x8x8 -> 256, 4x4, pad 1, stride 2 "
                         "(TVM's conv2d_transpose_packed)",
                         ("python -m vtatune conv2d_transpose --trials 100",
                          "python -m vtatune conv2d_transpose --workload dcgan.CT3 --bias",
                          "python -m vtatune conv2d_transpose --output-padding 1 --seed 0")),
}


#: The commands :func:`register` adds.
COMMANDS = tuple(_ABOUT)


def register(sub: Any) -> None:
    from vtatune.tuning import RUNS_DIR

    for op, (summary, default, examples) in _ABOUT.items():
        p = add_command(
            sub, op, summary,
            f"Tune {op} schedules with an Optuna study: every distinct legal config is "
            f"simulated and appended to a JSON-lines log; a table of the best schedule ends "
            f"the run, with the commands to run next on the log: replay it, build the best "
            f"schedule (program.json, .bin, .c), export it as AutoTVM records for TVM v0.14. "
            f"Default workload: {default}. Exit status: 0, 2 on bad input, 130 when "
            "interrupted (Ctrl-C keeps every finished trial; --resume continues).",
            examples, SCHEDULE_NOTATION)
        p.set_defaults(operator=op)
        p.add_argument("--trials", type=int, default=200, metavar="N",
                       help="distinct legal configs the study should hold in all (every "
                            "worker and earlier run counts; a study that has them already "
                            "simulates nothing and says so)")
        add_workload_flags(p, (op,))
        if op == "conv2d":
            p.add_argument("--network", choices=("resnet18",),
                           help="tune every conv layer of the network, one study each (no "
                                "--workload or shape flags)")
        add_hw_flag(p)
        add_study_flags(
            p, log_default=f"{RUNS_DIR}/{op}-<workload>-<hw model>.jsonl"
            + (f", {RUNS_DIR}/resnet18-<hw model>.jsonl for --network" if op == "conv2d"
               else ""))
        p.set_defaults(func=cmd_tune)


def cmd_tune(args: argparse.Namespace) -> int:
    from simulator.hardware import HardwareConfig
    from vtatune.records import check_log_target
    from vtatune.tuning import start_sampler_warmup, tune

    warnings_one_line()
    if args.log is not None:
        check_log_target(args.log)
    if args.trials < 1:
        raise UsageError(f"--trials must be at least 1, got {args.trials}")
    if args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}")
    hw = HardwareConfig.resolve(args.hw)
    common = {"trials": args.trials, "sampler": args.sampler, "seed": args.seed,
              "jobs": args.jobs, "storage": args.storage, "resume": args.resume,
              "space": args.space, "bias": args.bias, "progress": not args.quiet}
    if getattr(args, "network", None):
        if args.workload or shape_flags_given(args):
            raise UsageError("--network tunes the network's own layers: drop --workload and "
                             "shape flags")
        from vtatune.networks import tune_network  # only here: one layer needs none of it

        # Each task one round of --trials, in turn: the per-layer budget of a single layer.
        net = tune_network(args.network, hw, trials_per_task=args.trials,
                           round_trials=args.trials, scheduler="round-robin", patience=None,
                           log=args.log, **{k: v for k, v in common.items() if k != "trials"})
        results = [t.result for t in net.tasks if t.result is not None]
    else:
        wl = resolve_workload(args.operator, args)
        wl.check(hw)
        if args.sampler == "guided" and args.jobs == 1:  # else workers use the cores
            start_sampler_warmup(wl, hw, space=args.space, bias=args.bias)
        results = [tune(wl, hw, log=args.log, **common)]
    print_table(results, time.perf_counter() - args.started, args.hw)
    return 130 if any(r.interrupted for r in results) else 0


def _fmt(v: float | None, spec: str, unit: str = "") -> str:
    return "-" if v is None else format(v, spec) + unit


def print_table(results: list[Any], wall_seconds: float, hw: str | None = None) -> None:
    """The table that ends a tuning run; ``wall_seconds``: the command's time so far (one
    clock: not the sum of a network's studies, which run in turn); ``hw``: the --hw given
    (for the commands it prints)."""
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
    seeds = {r.seed for r in results}
    seed = f"seed {first.seed}" if len(seeds) == 1 else "each study its own seed"
    print(f"hardware  {first.hw.target_model} at {first.hw.clock_mhz:g} MHz, "
          f"template {first.template}, sampler {first.sampler}, {seed}")
    for r in results:
        label = r.workload.name or r.workload.describe()
        if r.exhausted:
            print(f"note      {label}: all {r.trials} legal configs of the space were tuned"
                  + (f" (fewer than --trials {r.requested})" if r.trials < r.requested
                     else ""))
        if r.best_schedule is not None and len(results) == 1:
            print(f"best      {r.best_schedule.short()}")
        if r.interrupted:
            print(f"note      {label}: interrupted; {r.trials} trials kept in the log and "
                  f"study (--resume continues)")
        for note in r.notes:
            print(f"note      {label}: {note}")
        if len(results) == 1:
            print(f"study     {r.study} (id {r.study_id[:12]}) in {r.storage}")
    asks = sum(r.asks for r in results)
    wasted = sum(r.illegal_asks + r.duplicate_asks for r in results)
    sim = sum(r.sim_seconds for r in results)
    print(f"search    {sum(r.new_trials for r in results)} simulated this run, {asks} asks "
          f"({sum(r.illegal_asks for r in results)} illegal, "
          f"{sum(r.duplicate_asks for r in results)} repeats, "
          f"{(wasted / asks if asks else 0):.0%} not simulated); "
          f"{wall_seconds:.1f} s wall, {sim:.1f} s simulating")
    for log in sorted({r.log for r in results}):
        tuned = [r for r in results if r.log == log]
        print(f"log       {log}")
        for line in next_steps(log, tuned[0].workload, hw, tuned[0].bias, len(tuned) - 1):
            print(line)


