"""``simulate``: lower a schedule (or load an exported program) and run it on the VTA model."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from search_spaces import resolve_schedule
from simulator.functional import count
from simulator.hardware import HardwareConfig
from simulator.timing import TimingProfile, time_program
from vtatune.cli._common import (
    OPERATORS,
    UsageError,
    add_command,
    add_hw_flag,
    add_workload_flags,
    resolve_workload,
    shape_flags_given,
)
from vtatune.lowering import lower, lower_vadd
from vtatune.schedule import Schedule
from vtatune.scoring import draw_timeline, timing_report, write_trace_csv
from vtatune.workloads import VaddWorkload

__all__ = [
    "COMMANDS", "register",
]


#: The commands :func:`register` adds.
COMMANDS = ("simulate",)


def register(sub: Any) -> None:
    sim = add_command(
        sub, "simulate", "lower a schedule and run it on the VTA model",
        "Lower one schedule of a workload to VTA instructions, count them with fsim's counters "
        "and time them on the event-driven model; or run an exported program (--program). "
        "Prints a summary (or one JSON object with --json). Exit status: 0, 1 when --verify "
        "finds a difference or a program's stored expectations differ, 2 on bad input.",
        ("python -m vtatune simulate conv2d --workload C8 --schedule tutorial --verify",
         "python -m vtatune simulate gemm --in-channels 256 --out-channels 64 --hw ultra96 --json",
         "python -m vtatune simulate vadd --elements 4096",
         "python -m vtatune simulate group_conv2d --workload mobilenet.D7 --bias --verify",
         "python -m vtatune simulate conv2d_transpose --height 4 --width 4 --in-channels 64 "
         "--out-channels 32 --kernel 4 --stride 2 --pad 1 --output-padding 1 --verify",
         "python -m vtatune simulate --program out/program.bin --verify"))
    sim.add_argument("operator", nargs="?", choices=(*OPERATORS, "vadd"),
                     help="what to lower: gemm, conv2d, group_conv2d, conv2d_transpose or "
                          "vadd (an element-wise add); omit it with --program")
    add_workload_flags(sim, OPERATORS)
    sim.add_argument("--elements", type=int, metavar="N",
                     help="vadd only: vector length (default: 1024)")
    sim.add_argument("--schedule", metavar="SPEC",
                     help="tutorial, default, a JSON object of knobs (the others at their "
                          'defaults), {"autotvm": {...}} or @file holding such JSON (default: '
                          "tutorial for the conv2d and gemm tutorial workloads where the "
                          "tutorial's schedule exists on the hardware, else default: a legal "
                          "schedule whenever one exists)")
    add_hw_flag(sim)
    sim.add_argument("--bias", action="store_true", help="add the per-channel int32 bias")
    sim.add_argument("--verify", action="store_true",
                     help="run on random data and check bit-exactly against numpy (exit 1 "
                          "if it differs)")
    sim.add_argument("--seed", type=int, default=0, metavar="N",
                     help="random data seed for --verify")
    sim.add_argument("--json", action="store_true", help="print one JSON object")
    sim.add_argument("--profile", metavar="FILE.json",
                     help="timing profile overrides (fields of simulator.timing.TimingProfile)")
    sim.add_argument("--trace", metavar="FILE.csv", help="write one row per instruction")
    sim.add_argument("--timeline", metavar="FILE.png",
                     help="draw the modules as lanes over time (png, svg or pdf; needs "
                          "matplotlib)")
    sim.add_argument("--program", metavar="FILE",
                     help="run an exported program.bin (or program.json) instead; its stored "
                          "expected cycles and counters are checked (exit 1 if they differ)")
    sim.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.program is not None or args.operator is None:
        return cmd_simulate_program(args)
    return cmd_simulate(args)


def cmd_simulate(args: argparse.Namespace) -> int:
    hw = HardwareConfig.resolve(args.hw)
    report: dict[str, Any] = {"hw": {"target": hw.target, "bitstream": hw.bitstream,
                                     "model": hw.target_model, "clock_mhz": hw.clock_mhz,
                                     "config": hw.to_dict()}}
    if args.operator == "vadd":
        if args.workload is not None or shape_flags_given(args):
            raise UsageError("vadd takes --elements, not --workload or shape flags")
        wl = VaddWorkload(1024 if args.elements is None else args.elements)
        program = lower_vadd(wl, hw)
        report["workload"] = {"operator": "vadd", "name": "vadd", **wl.shape_args()}
        report["schedule"] = None
        lowered = None
    else:
        if args.elements is not None:
            raise UsageError(f"--elements applies to vadd, not {args.operator}")
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
    timing = time_program(program, hw, profile, trace=bool(args.trace or args.timeline))
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
    from vtatune.scoring import verify

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


def cmd_simulate_program(args: argparse.Namespace) -> int:
    from vtatune.builds import load_bin, load_json
    from vtatune.scoring import simulate

    if args.program is None:
        raise UsageError(f"simulate needs an operator ({', '.join(OPERATORS)}, vadd) or "
                         "--program FILE")
    if args.operator is not None:
        raise UsageError("give an operator or --program, not both")
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
    expected = loaded.meta.get("expected")  # program.json's; program.bin has its checksum
    if isinstance(expected, dict) and not args.profile:
        same = (expected.get("cycles") == sim.cycles
                and expected.get("counters") == sim.counters)
        report["expected_matches"] = same
        status = 0 if same else 1
    if args.verify:
        if wl is None:
            raise UsageError(f"{args.program}: no workload in the metadata, cannot --verify")
        from types import SimpleNamespace

        from vtatune.scoring import verify

        v = verify(SimpleNamespace(workload=wl, hw=hw, bias=loaded.bias,
                                   program=loaded.program), args.seed)
        report["verified"] = v.ok
        status = status or (0 if v.ok else 1)
    if args.json:
        print(json.dumps(report))
        return status
    if report.get("expected_matches") is False:
        print(f"vtatune: {args.program}: the simulation differs from the file's expected block "
              f"({expected.get('cycles')} cycles recorded, {sim.cycles} now): the program was "
              "edited or damaged since vtatune wrote it, or it was written by another "
              "version; its results are not the build's", file=sys.stderr)
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
