"""``network``: list a network's tasks, or tune the whole network over one trial budget."""

from __future__ import annotations

import argparse
import json
import math
import time
from typing import Any

from vtatune.cli._common import (
    UsageError,
    add_command,
    add_hw_flag,
    add_study_flags,
    next_steps,
    warnings_one_line,
)

__all__ = [
    "COMMANDS", "register",
]

_DESCRIPTION = (
    "Tune a whole network: a catalogue network by name or an ONNX model file. Each layer VTA "
    "can run (a quantized ONNX model: as `vtatune deploy` places and runs it, each VTA pass "
    "counted; a catalogue network: TVM's graph-packing rules, channels per group multiples "
    "of the block, batch a multiple of BATCH; the first convolution and depthwise "
    "convolutions stay on the CPU) becomes a task; identical layers are one task with a "
    "multiplicity. --trials is the network's total, shared out by the task scheduler "
    "(gradient: Ansor's, on the objective sum of multiplicity x cycles; round-robin). A task "
    "that has converged stops taking trials. One study per task, all in one storage and one "
    "log. Without NAME, lists the catalogue. Exit status: 0, 2 on bad input, 130 when "
    "interrupted (--resume continues).")

_EXAMPLES = (
    "python -m vtatune network resnet18 --list",
    "python -m vtatune network resnet50 --trials-per-task 20 --plot resnet50.png",
    "python -m vtatune network model.onnx --hw ultra96 --trials 400 --json",
    "python -m vtatune network resnet50 --trials 800 --resume      # continue to 800 in all",
)


#: How ``--list`` says where the layers were placed from (:data:`vtatune.networks.PLACEMENTS`).
PLACEMENT_WORDS = {
    "tvm014": "as TVM v0.14's graph packing places it (channel counts in whole blocks)",
    "deploy": "as `vtatune deploy` runs it with today's TVM (channel counts padded to whole "
              "blocks)",
}


#: The commands :func:`register` adds.
COMMANDS = ("network",)


def register(sub: Any) -> None:
    from vtatune.networks import (
        DEFAULT_PATIENCE,
        DEFAULT_ROUND,
        DEFAULT_TRIALS_PER_TASK,
        DEFAULT_WARMUP,
        PLACEMENTS,
    )
    from vtatune.networks.schedulers import SCHEDULERS
    from vtatune.tuning import RUNS_DIR

    p = add_command(sub, "network", "list or tune a whole network (catalogue or ONNX)",
                    _DESCRIPTION, _EXAMPLES)
    p.add_argument("network", nargs="?", metavar="NAME|MODEL.onnx",
                   help="a catalogue network or an ONNX model file")
    p.add_argument("--list", action="store_true", help="print the tasks and CPU layers only")
    add_hw_flag(p)
    p.add_argument("--batch", type=int, metavar="N",
                   help="batch of a catalogue network, or of an ONNX model's dynamic batch "
                        "axis (default: 1; a model with a fixed batch takes only that one)")
    p.add_argument("--trials", type=int, metavar="N",
                   help="the network's total trials (default: --trials-per-task x tasks)")
    p.add_argument("--trials-per-task", type=int, metavar="N",
                   help=f"average trials per tunable task (default: {DEFAULT_TRIALS_PER_TASK}); "
                        "0 with --log: no tuning, the network as TVM v0.14 deploys it with the "
                        "log's records (tasks the log lacks take TVM's fallback config)")
    p.add_argument("--scheduler", choices=tuple(SCHEDULERS), default="gradient",
                   help="how the budget is shared out")
    p.add_argument("--round", type=int, default=DEFAULT_ROUND, metavar="N", dest="round_trials",
                   help="trials a task gets per turn")
    p.add_argument("--warmup", type=int, default=DEFAULT_WARMUP, metavar="N",
                   dest="warmup_trials",
                   help="trials of each task's first round, at least one round "
                        "(default: %(default)s, one round of the default --round)")
    p.add_argument("--patience", type=int, default=DEFAULT_PATIENCE, metavar="N",
                   help="rounds without improvement after which a task has converged "
                        "(0: never; default: %(default)s)")
    add_study_flags(p, log_default=f"{RUNS_DIR}/<network>-<hw model>.jsonl")
    p.add_argument("--placement", choices=PLACEMENTS, default=None,
                   help="place the layers as `vtatune deploy` runs them with today's TVM "
                        "(deploy: channel counts padded to whole blocks) or as TVM v0.14's "
                        "graph packing (tvm014); default: deploy for an ONNX model, tvm014 "
                        "for a catalogue network and with --space autotvm")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--plot", metavar="FILE.png",
                   help="bar chart of where the network's time goes (needs matplotlib)")
    p.set_defaults(func=cmd_network)


def cmd_network(args: argparse.Namespace) -> int:
    from vtatune.networks import NETWORKS

    warnings_one_line()
    if args.network is None:
        width = max(map(len, NETWORKS))
        for name, spec in NETWORKS.items():
            print(f"{name:<{width}}  {spec.source}")
        return 0
    from_log = args.trials_per_task == 0
    if from_log and not args.log:
        raise UsageError("--trials-per-task 0 reports a network from a log: give --log")
    for flag in ("batch", "trials", "trials_per_task", "round_trials", "warmup_trials",
                 "jobs"):
        v = getattr(args, flag)
        if v is not None and v < 1 and not (flag == "trials_per_task" and from_log):
            name = {"round_trials": "round", "warmup_trials": "warmup"}.get(flag, flag)
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1, got {v}")
    if args.patience < 0:
        raise UsageError(f"--patience must be at least 0, got {args.patience}")
    if args.trials is not None and args.trials_per_task is not None:
        raise UsageError("give --trials (the network's total) or --trials-per-task, not both")
    if args.plot and args.list:
        raise UsageError("--plot draws a tuned network: drop --list")
    net = _load(args)
    if args.list:
        if args.json:
            print(json.dumps(network_json(net)))
        else:
            print_network(net)
        return 0
    from vtatune.networks import network_from_logs, tune_network

    if from_log:  # a vtatune log or an AutoTVM log, read only
        from pathlib import Path

        if not Path(args.log).is_file():
            raise UsageError(f"no log {args.log}")
        result = network_from_logs(net, [args.log])
    else:
        result = tune_network(
            net, trials=args.trials, trials_per_task=args.trials_per_task,
            scheduler=args.scheduler, round_trials=args.round_trials,
            warmup_trials=args.warmup_trials, patience=args.patience or None,
            sampler=args.sampler, seed=args.seed, jobs=args.jobs,
            log=args.log, storage=args.storage, resume=args.resume, space=args.space,
            bias=args.bias, progress=not (args.quiet or args.json))
    if args.plot:
        from vtatune.networks import draw_network

        draw_network(result, args.plot)
    if args.json:
        print(json.dumps(result.as_dict()))
    else:
        print_result(result, time.perf_counter() - args.started, args.hw)
        tunable = sum(1 for t in result.tasks if not t.task.skip)
        if not from_log and tunable and args.warmup_trials > result.requested // tunable:
            print(f"note      --warmup {args.warmup_trials} cut to "
                  f"{result.requested // tunable} trials a task "
                  f"(the budget of {result.requested} over {tunable} tasks)")
        if args.plot:
            print(f"plot      {args.plot}")
    return 130 if result.interrupted else 0


def _load(args: argparse.Namespace) -> Any:
    """The network, an ONNX model placed as deploy runs it (:func:`vtatune.deploy.load_placed`)."""
    from vtatune.deploy import load_placed

    return load_placed(args.network, args.hw, batch=args.batch,
                       tasks="autotvm" if getattr(args, "space", "full") == "autotvm"
                       else "deployed", placement=args.placement)


def _shape(wl: Any) -> str:
    """The workload's shape (its epilogue has a column: :func:`_epilogue`)."""
    return wl.describe().removeprefix(f"{wl.name} ").removeprefix(f"{wl.operator} ") \
        .split(", epilogue ")[0]


def _epilogue(wl: Any) -> str:
    """The epilogue a task is tuned with, as ``--epilogue`` names it: the deployed model's
    (deployed, deployed-relu) in vtatune's space, TVM's benchmark one in AutoTVM's (its
    template is the conv alone), so the two tables say side by side what they tuned."""
    from vtatune.workloads import epilogue_name

    return epilogue_name(wl.epilogue) or wl.epilogue.describe()


def network_json(net: Any) -> dict[str, Any]:
    """The ``--list --json`` object: the network's tasks and CPU layers."""
    hw = net.hw
    return {"network": net.name, "source": net.source, "placement": net.placement,
            "vta_mac_share": net.vta_mac_share, "float_macs": net.float_macs,
            "vta_quantized_share": net.vta_quantized_share,
            "hw": {"target": hw.target, "bitstream": hw.bitstream, "model": hw.target_model,
                   "clock_mhz": hw.clock_mhz},
            "tasks": [{"name": t.name, "operator": t.operator,
                       "shape": t.workload.shape_args(), "multiplicity": t.multiplicity,
                       "layers": list(t.layers), "skipped": t.skip} for t in net.tasks],
            "cpu": [{"name": c.name, "operator": c.operator, "shape": c.shape,
                     "reason": c.reason, "quantized": c.quantized} for c in net.cpu],
            "layers": layer_placements(net),
            "int8_layers": [layer.name for layer in net.layers if layer.quantized],
            "notes": list(net.notes)}


def layer_placements(net: Any) -> list[dict[str, Any]]:
    """Where each layer runs, in order: on VTA, its task, the workload's shape and the VTA
    programs one run of it runs (its passes, steps ``<layer>/<j>`` after the first; a
    batch_matmul's for every head, ``<layer>#<h>``), as deploy's ``passes``; on the CPU,
    the reason."""
    cpu = {c.name: c for c in net.cpu}
    tasks = {name: t for t in net.tasks for name in t.layers}
    passes: dict[str, int] = {}  # the last pass's index + 1 (a layer may run twice)
    for step in net.steps:
        if step.task is not None:
            base, j = _layer_and_pass(step.name, tasks)
            passes[base] = max(passes.get(base, 1), j + 1)
    out = []
    for layer in net.layers:
        if layer.name in cpu:
            out.append({"name": layer.name, "operator": layer.operator, "on": "cpu",
                        "reason": cpu[layer.name].reason, "macs": layer.macs})
        elif layer.name in tasks:
            task = tasks[layer.name]
            heads = getattr(layer, "heads", 1)
            out.append({"name": layer.name, "operator": layer.operator, "on": "vta",
                        "task": task.name, "workload": _shape(task.workload), "heads": heads,
                        "passes": heads * passes.get(layer.name, 1), "macs": layer.macs})
    return out


def _layer_and_pass(step: str, layers: Any) -> tuple[str, int]:
    """The layer a step ``<layer>[#<head>][/<pass>]`` runs and its pass index; a layer's own
    name may hold ``/`` and ``#`` (an ONNX node's: ``/model/layer.0/MatMul``), so a suffix
    counts only where what is left is one of ``layers``."""
    name, j = step, 0
    head, _, tail = step.rpartition("/")
    if tail.isdigit() and head:
        name, j = head, int(tail)
    if name not in layers:
        base, _, h = name.rpartition("#")
        if h.isdigit() and base in layers:
            name = base
    return (name, j) if name in layers else (step, 0)


def _table(head: tuple[str, ...], rows: list[tuple[str, ...]], left: int = 4) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h)
              for i, h in enumerate(head)]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(c.ljust(w) if i < left else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    print(line(head))
    for r in rows:
        print(line(r))


def _print_cpu(net: Any) -> None:
    if not net.cpu:
        return
    print(f"on the CPU ({len(net.cpu)} layers):")
    width = max(len(c.name) for c in net.cpu)
    for c in net.cpu:
        print(f"  {c.name:<{width}}  {c.shape}: {c.reason}")


def _quantized_share(net: Any) -> str:
    """The share of the quantized multiply-accumulates, when the quantizer left some in
    float."""
    if not net.float_macs:
        return ""
    return (f"; {100 * net.vta_quantized_share:.1f} % of those the quantizer quantized, "
            f"{net.float_macs:,} left in float")


def print_network(net: Any) -> None:
    hw = net.hw
    print(f"network   {net.name} on {hw.target_model}: {net.vta_layers} layers on VTA in "
          f"{len(net.tasks)} tasks ({100 * net.vta_mac_share:.1f} % of the "
          f"multiply-accumulates{_quantized_share(net)}), {len(net.cpu)} on the CPU")
    print(f"placement {PLACEMENT_WORDS[net.placement]}")
    print(f"source    {net.source}")
    for note in net.notes:
        print(f"note      {note}")
    rows = [(t.name, t.operator, _shape(t.workload), _epilogue(t.workload), str(t.multiplicity),
             ", ".join(t.layers[:3]) + (", ..." if len(t.layers) > 3 else ""),
             t.skip or "tunable") for t in net.tasks]
    if rows:
        head = ("task", "operator", "shape", "epilogue", "count", "layers", "status")
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
        print("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip())
        for r in rows:
            print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    _print_cpu(net)


def _seed(seed: int | None) -> str:
    return "each study its own seed" if seed is None else f"seed {seed}"


def _fmt(v: float | None, spec: str, unit: str = "") -> str:
    return "-" if v is None else format(v, spec) + unit


def print_result(r: Any, wall_seconds: float, hw_flag: str | None = None) -> None:
    """The network's table; ``wall_seconds``: the command's time so far; ``hw_flag``: the
    --hw given (for the commands it prints)."""
    net, hw = r.network, r.hw
    total = r.total_cycles
    rows = []
    for t in r.tasks:
        ms = t.seconds(hw)
        rows.append((
            t.task.name, t.task.operator, _shape(t.task.workload), _epilogue(t.task.workload),
            str(t.task.multiplicity),
            str(t.trials), _fmt(t.best_cycles, ",d"), _fmt(ms * 1e3 if ms else None, ".3f"),
            _fmt(t.network_cycles / total * 100 if t.network_cycles and total else None,
                 ".1f", "%"),
            _fmt(t.default_cycles / t.best_cycles if t.best_cycles and t.default_cycles
                 else None, ".2f", "x"),
            _fmt(t.tophub_cycles / t.best_cycles if t.best_cycles and t.tophub_cycles
                 else None, ".2f", "x"),
            t.skipped or t.dead or ""))
    _table(("task", "operator", "shape", "epilogue", "count", "trials", "best cycles", "ms",
            "share",
            "vs default", "vs TopHub", "state"), rows)
    tuned = [t for t in r.tasks if t.best_cycles]
    print(f"network   {net.name} on {hw.target_model} at {hw.clock_mhz:g} MHz: tasks "
          f"{total:,} cycles = {r.total_ms:.3f} ms (multiplicity x cycles of "
          f"{sum(t.task.multiplicity for t in tuned)} layers in {len(tuned)} tasks)")
    d = r.deployed
    if d is not None:
        ms = 1e3 * hw.clock_mhz
        print(f"deployed  VTA time {d.cycles:,} cycles = {d.cycles / ms:.3f} ms over "
              f"{len(d.kernels)} kernels in order: GEMM kernels {d.gemm_kernels:,}, "
              f"epilogues +{d.epilogues:,}, ALU-only kernels +{d.alu_kernels:,}")
    fallback = [n for n, src in r.sources if src == "fallback"]
    if fallback:
        print(f"note      {len(fallback)} task(s) run TVM's fallback config (no record): "
              + ", ".join(fallback))
    sd, st = r.speedup_default, r.speedup_tophub
    top = sum(1 for t in r.tasks if t.tophub_cycles and t.best_cycles)
    if sd is not None or st:  # a network from logs has no tuning to compare
        print(f"speed-up  {_fmt(sd, '.2f', 'x')} over the default schedules"
              + (f", {st:.2f}x over TopHub on its {top} layers" if st else ""))
    skipped = [t for t in r.tasks if t.skipped]
    if skipped:
        print(f"note      {len(skipped)} task(s) not tuned and not counted: "
              + "; ".join(f"{t.task.name}: {t.skipped}" for t in skipped))
    _print_cpu(net)
    if r.stopped == "from logs":
        print(f"schedules from {r.log} as TVM's apply_history_best applies them (no tuning)")
        return
    print(f"search    {r.trials} trials ({r.requested} asked; {r.scheduler}, sampler "
          f"{r.sampler}, {_seed(r.seed)}); stopped: {r.stopped}; {wall_seconds:.1f} s wall, "
          f"{r.sim_seconds:.1f} s simulating")
    if r.interrupted:
        print("note      interrupted; every finished trial is kept (--resume continues)")
    if r.storage:
        print(f"log       {r.log}")
        tuned = sorted((t for t in r.tasks if t.best_cycles), key=lambda t: -t.network_cycles)
        if tuned:  # the build line names the task that weighs most
            for line in next_steps(r.log, tuned[0].task.workload, hw_flag,
                                   tuned[0].result.bias, len(tuned) - 1):
                print(line)
        else:
            print(f"replay    python -m vtatune replay {r.log} --best")
    if not math.isfinite(r.history[-1][1] if r.history else 0.0):
        print("note      some task found no legal config")
