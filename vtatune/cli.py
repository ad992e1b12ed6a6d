"""Command line: ``python -m vtatune {simulate,...}``.

Bad input prints one line ``vtatune: error: ...`` and exits with status 2; a failed
``--verify`` exits with status 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from simulator.errors import VTAError
from simulator.functional import count
from simulator.hardware import HardwareConfig
from simulator.timing import TimingProfile, simulate

from . import __version__
from .errors import VtatuneError, WorkloadError
from .lowering import lower
from .lowering._vadd import VaddWorkload, lower_vadd
from .schedule import Schedule, parse_schedule
from .timeline import draw_timeline, timing_report, write_trace_csv
from .workloads import Conv2dWorkload, GemmWorkload, Workload, get_workload

CONV_FLAGS = ("batch", "height", "width", "in_channels", "out_channels", "kernel", "pad",
              "stride")
GEMM_FLAGS = ("batch", "in_channels", "out_channels")


class UsageError(VtatuneError):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors in one line with exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def _add_shape_flags(p: argparse.ArgumentParser) -> None:
    for name in CONV_FLAGS:
        p.add_argument(f"--{name.replace('_', '-')}", type=int, dest=name, metavar="N",
                       help=argparse.SUPPRESS if name != "batch" else "shape flags: --batch "
                       "--height --width --in-channels --out-channels --kernel --pad --stride "
                       "(conv2d); --batch --in-channels --out-channels (gemm)")


def resolve_workload(operator: str, args: argparse.Namespace) -> Workload:
    """A named workload, optionally reshaped by shape flags."""
    base = get_workload(operator, args.workload or "tutorial")
    flags = CONV_FLAGS if operator == "conv2d" else GEMM_FLAGS
    given = {k: getattr(args, k) for k in CONV_FLAGS if getattr(args, k, None) is not None}
    extra = sorted(set(given) - set(flags))
    if extra:
        raise UsageError(f"--{extra[0].replace('_', '-')} does not apply to {operator}")
    if not given:
        return base
    shape = {**base.shape_args(), **given}
    cls = Conv2dWorkload if operator == "conv2d" else GemmWorkload
    return cls(**shape, name="")


def resolve_schedule(spec: str | None, workload: Workload, hw: HardwareConfig,
                     bias: bool) -> Schedule:
    if spec is None:
        spec = "tutorial" if workload.name == "tutorial" else "default"
    parsed = parse_schedule(spec, workload, hw)
    if parsed == "default":
        from .defaults import default_schedule

        return default_schedule(workload, hw, bias)
    return parsed


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="vtatune", description="Schedule search engine for the VTA "
                                                 "accelerator.")
    parser.add_argument("--version", action="version", version=f"vtatune {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    sim = sub.add_parser("simulate", help="lower a schedule and run it on the VTA model")
    sim.add_argument("operator", nargs="?", choices=("gemm", "conv2d", "vadd"))
    sim.add_argument("--workload", help="named workload (tutorial, resnet18.C2 ... C11)")
    _add_shape_flags(sim)
    sim.add_argument("--elements", type=int, default=1024, help="vadd length (default 1024)")
    sim.add_argument("--schedule", help="tutorial, default, a JSON object of knobs, "
                                        '{"autotvm": {...}} or @file (default: tutorial for '
                                        "the tutorial workloads, else default)")
    sim.add_argument("--hw", help="hardware preset (pynq, ultra96, de10nano, 4x8, 1x32) or a "
                                  "vta_config.json")
    sim.add_argument("--bias", action="store_true", help="add the per-channel int32 bias")
    sim.add_argument("--verify", action="store_true", help="check bit-exactly against numpy")
    sim.add_argument("--seed", type=int, default=0, help="random data seed for --verify")
    sim.add_argument("--json", action="store_true", help="print one JSON object")
    sim.add_argument("--profile", metavar="FILE.json",
                     help="timing profile overrides (fields of simulator.timing.TimingProfile)")
    sim.add_argument("--trace", metavar="FILE.csv", help="write one row per instruction")
    sim.add_argument("--timeline", metavar="FILE.png",
                     help="draw the modules as lanes over time (needs matplotlib)")
    from ._tuner._cli import add_parsers

    add_parsers(sub, _add_shape_flags)
    from . import _cli_tools

    _cli_tools.add_parsers(sub, _add_shape_flags, sim)
    return parser


def cmd_simulate(args: argparse.Namespace) -> int:
    hw = HardwareConfig.resolve(args.hw)
    report: dict[str, Any] = {"hw": {"target": hw.target, "bitstream": hw.bitstream,
                                     "model": hw.target_model, "clock_mhz": hw.clock_mhz,
                                     "config": hw.to_dict()}}
    if args.operator == "vadd":
        if args.workload not in (None, "tutorial"):
            raise UsageError("vadd takes --elements, not --workload")
        wl = VaddWorkload(args.elements)
        program = lower_vadd(wl, hw)
        report["workload"] = {"operator": "vadd", "name": "vadd", **wl.shape_args()}
        report["schedule"] = None
        lowered = None
    else:
        wl = resolve_workload(args.operator, args)
        wl.check(hw)
        schedule = resolve_schedule(args.schedule, wl, hw, args.bias)
        lowered = lower(wl, schedule, hw, bias=args.bias)
        program = lowered.program
        report["workload"] = {"operator": wl.operator, "name": wl.name, **wl.shape_args()}
        report["schedule"] = schedule.to_dict()
        report["sram"] = lowered.plan.sram_usage()
    report["bias"] = bool(args.bias)
    report["counters"] = count(program, hw).as_dict()
    report["instructions"] = program.instruction_mix()
    profile = TimingProfile.for_hw(hw)
    if args.profile:
        profile = TimingProfile.from_json(args.profile, profile)
    timing = simulate(program, hw, profile, trace=bool(args.trace or args.timeline))
    report.update(timing_report(timing, hw, getattr(wl, "macs", None)))
    if args.trace:
        write_trace_csv(timing.trace, args.trace)
    if args.timeline:
        draw_timeline(timing.trace, args.timeline, f"{wl.describe()} on {hw.target_model}")
    status = 0
    if args.verify:
        ok = _verify(wl, lowered, program, hw, args.seed)
        report["verified"] = ok
        status = 0 if ok else 1
    if args.json:
        print(json.dumps(report, indent=None))
    else:
        _print_summary(report, wl)
    return status


def _verify(wl, lowered, program, hw, seed: int) -> bool:
    import numpy as np

    from simulator.functional import run

    from .reference import verify

    if lowered is not None:
        return verify(lowered, seed).ok
    rng = np.random.default_rng(seed)
    t = program.tensor("a")
    a = rng.integers(-(1 << 20), 1 << 20, t.shape, dtype=np.int32)
    b = rng.integers(-(1 << 20), 1 << 20, t.shape, dtype=np.int32)
    result = run(program, hw, {"a": a, "b": b})
    want = (a.astype(np.int64) + b).astype(np.int32).astype(np.int8)
    return bool(np.array_equal(result.machine.read_tensor(program, "output"), want))


def _print_summary(report: dict[str, Any], wl) -> None:
    print(f"workload   {wl.describe()}")
    print(f"hardware   {report['hw']['model']}")
    if report["schedule"] is not None:
        print(f"schedule   {Schedule(**report['schedule']).short()}")
        sram = report["sram"]
        print("sram       " + "  ".join(
            f"{k} {v['elements']}/{v['depth']}" for k, v in sram.items()))
    print("counters")
    for k, v in report["counters"].items():
        print(f"  {k:<17} {v:>12}")
    mix = report["instructions"]
    print(f"instructions {mix['total']}: " + ", ".join(
        f"{k} {v}" for k, v in mix.items() if k != "total"))
    b = report["bounds"]
    print(f"cycles     {report['cycles']} ({report['seconds'] * 1e3:.3f} ms at "
          f"{report['hw']['clock_mhz']:g} MHz, {report['gops']:.2f} GOPS, utilization "
          f"{report['utilization']:.1%}); floors: compute {b['compute_floor']}, memory "
          f"{b['memory_floor']}")
    print("modules    " + "  ".join(
        f"{k} busy {v['busy']} stall {v['stall']}" for k, v in report["modules"].items()))
    if "verified" in report:
        print("verified   " + ("yes (bit-exact with numpy)" if report["verified"] else
                               "NO: output differs from numpy"))


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 2
        if args.command == "simulate":
            if args.program is not None or args.operator is None:
                from ._cli_tools import cmd_simulate_program

                return cmd_simulate_program(args)
            return cmd_simulate(args)
        if args.command in ("build", "analyze", "export", "import"):
            from ._cli_tools import run

            return run(args, resolve_workload)
        if args.command in ("conv2d", "gemm", "replay", "best"):
            from ._tuner import _cli

            if args.command == "replay":
                return _cli.cmd_replay(args)
            if args.command == "best":
                return _cli.cmd_best(args)
            return _cli.cmd_tune(args, resolve_workload)
        raise UsageError(f"unknown command {args.command}")  # pragma: no cover
    except (VTAError, WorkloadError) as exc:
        print(f"vtatune: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("vtatune: interrupted", file=sys.stderr)
        return 130
