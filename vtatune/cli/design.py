"""``design``: which VTA configuration to build for a network on a board (hardware and
schedule co-design; see :mod:`vtatune.design`)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from vtatune.cli._common import UsageError, add_command, seed_arg, warnings_one_line

__all__ = [
    "COMMANDS", "register",
]

_EXAMPLES = (
    "python -m vtatune design --network resnet18 --board ultra96",
    "python -m vtatune design --network resnet18 --board pynq --trials-per-task 30 --jobs 2 "
    "--plot front.png --out designs/pynq",
    "python -m vtatune design --network resnet18 --board de10nano --objective latency-area "
    "--candidates 16 --json",
)

_TABLE = """\
The table lists the Pareto designs (network latency against the mean share of the board's
LUT, block RAM and DSP), and the stock 1x16 design once (marked "stock", in its place when
it is on the front): bitstream name, resources in percent of the board (LUT% at 95 LUTs
per int8 product built in LUTs, LUT%hi at 181, the measured range; LUTmul: how many
products are LUT-built), the binding resource, the deployed network's VTA cycles (every
kernel in order, epilogues and ALU-only kernels included) and ms at the board's clock, the
speed-up over the stock design tuned the same way, and whether the Chisel RTL's stock
instruction decoder reads the design's instructions ("stock", or the index field widths it
must change, "+ padding" when a spare field moves, "+ ALU patterns" when the ALU dispatch
patterns must test other bits); below it, the designs over the board at 181 LUTs a
product. A design marked * needs a change to TVM's VTA toolchain (said below the table:
BLOCK_IN != BLOCK_OUT). --out gets, per Pareto design, <bitstream>/vta_config.json,
<bitstream>/hardware_build.json (for VTA's Chisel flow: the target clock, the resources
with the LUT margin, the core and shell parameters, every instruction and micro-op field's
offset and width, the decoder fields that differ from the stock RTL's with their Chisel
source lines, and the complete decoder spec: width constants, bundle declarations with
their spare fields, dispatch patterns) and <bitstream>/<network>.jsonl (its tuned log),
plus the design study and every tuning log; the design files are written whole or not at
all."""


#: The commands :func:`register` adds.
COMMANDS = ("design",)


def register(sub: Any) -> None:
    from simulator.resources import DEVICES
    from vtatune.design import OBJECTIVES
    from vtatune.networks import NETWORKS

    p = add_command(sub, "design", "search VTA configurations with their schedules",
                    "Hardware and schedule co-design: search VTA configurations (BATCH, "
                    "BLOCK_IN, BLOCK_OUT, buffer sizes) for a network on a board, tuning every "
                    "layer's schedule on each, under the board's FPGA budget. Exit status: 0, "
                    "2 on bad input.", _EXAMPLES, _TABLE)
    p.add_argument("--network", required=True, metavar="NAME|MODEL.onnx",
                   help=f"a catalogue network ({', '.join(NETWORKS)}) or an ONNX model "
                        "file; a design must run on VTA the layers the stock design runs")
    p.add_argument("--board", required=True, choices=tuple(DEVICES),
                   help="board whose FPGA budget and clock apply")
    p.add_argument("--trials-per-task", type=int, default=20, metavar="N",
                   help="legal schedules tuned per layer on each design")
    p.add_argument("--objective", choices=OBJECTIVES, default="latency",
                   help="latency: exhaustive over the largest buffers of each shape; "
                        "latency-area: NSGA-II over every knob, each proposal evaluated as "
                        "the nearest feasible design")
    p.add_argument("--candidates", type=int, metavar="N",
                   help="at most N candidates: designs besides the stock one whose "
                        "tasks are tuned (one refused by a rule before tuning is none; "
                        "default: the whole exhaustive walk for latency, 24 for "
                        "latency-area)")
    p.add_argument("--seed", type=seed_arg, default=0, metavar="N",
                   help="seed of every search")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="designs tuned in parallel processes")
    p.add_argument("--out", metavar="DIR",
                   help="output directory (default: runs/design-<network>-<board>)")
    p.add_argument("--storage", metavar="URL",
                   help="Optuna storage URL of the design study, or journal:FILE (default: "
                        "DIR/design.journal)")
    p.add_argument("--resume", action="store_true",
                   help="continue the design study: designs evaluated are not re-tuned")
    p.add_argument("--plot", metavar="FILE.png", help="draw the front (needs matplotlib)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_design)


def cmd_design(args: argparse.Namespace) -> int:
    from simulator.resources import LUT_PER_PRODUCT_RANGE
    from vtatune.design import co_design, plot_front

    warnings_one_line()
    for flag, value in (("--trials-per-task", args.trials_per_task), ("--jobs", args.jobs),
                        ("--candidates", args.candidates)):
        if value is not None and value < 1:
            raise UsageError(f"{flag} must be at least 1, got {value}")
    result = co_design(args.network, args.board, trials_per_task=args.trials_per_task,
                       objective=args.objective, candidates=args.candidates, jobs=args.jobs,
                       seed=args.seed, out=args.out, storage=args.storage, resume=args.resume)
    if args.plot:
        plot_front(result, args.plot)
    if args.json:
        print(json.dumps(result.to_dict(), indent=1))
        return 0
    dev = result.stock.resources.device
    print(f"{result.network} on {result.board} ({dev.part}: {dev.lut} {dev.lut_kind}, "
          f"{dev.bram} {dev.bram_kind}, {dev.dsp} DSP), {result.trials_per_task} trials/task, "
          f"{len(result.evaluated)} designs evaluated ({result.new_evaluations} new) in "
          f"{result.wall_seconds:.0f} s")
    lo, hi = LUT_PER_PRODUCT_RANGE
    head = (f"{'design':<30}{'LUT%':>6}{'LUT%hi':>7}{'LUTmul':>7}{'FF%':>6}{'BRAM%':>7}"
            f"{'DSP%':>6}  {'binds':<5}{'VTA cycles':>11}{'ms':>9}{'speedup':>9}  decoder")
    print(head)
    changes = set()
    # the stock design once: in its place when it is on the front, else below it
    stock_key = result.stock.hw.bitstream
    rows = list(result.designs)
    if stock_key not in {d.hw.bitstream for d in rows}:
        rows.append(result.stock)
    over = []
    for d in rows:
        u = d.resources.utilization
        margin = d.resources.lut_margin
        mark = "" if d.stock_toolchain else " *"
        if mark:
            changes.add(d.toolchain)
        if not margin["fits_at_high"]:
            over.append(d.hw.bitstream)
        tag = "stock " if d.hw.bitstream == stock_key else ""
        print(f"{tag + d.hw.bitstream + mark:<30}{u['LUT']:>6.1f}{margin['lut_percent'][1]:>7.1f}"
              f"{margin['products_in_luts']:>7}{u['FF']:>6.1f}{u['BRAM']:>7.1f}"
              f"{u['DSP']:>6.1f}  {d.resources.binding:<5}{d.total_cycles:>11}"
              f"{d.total_ms:>9.3f}{d.speedup:>8.2f}x  {d.decoder.summary()}")
    for change in sorted(changes):
        print(f"* {change}")
    print("VTA cycles: the deployed network, every VTA kernel in order (fused epilogues and "
          "ALU-only kernels included)")
    print(f"LUTmul: int8 products beyond the DSPs, built in LUTs; LUT% charges {lo:g} LUTs "
          f"each (Yosys 0.70, Booth), LUT%hi {hi:g} (Yosys 0.23): logic synthesis estimates, "
          "no design placed and routed")
    print(f"over the board at {hi:g} LUTs a product: {', '.join(over)}" if over else
          f"every design listed fits at {hi:g} LUTs a product")
    for line in result.skipped:
        print(f"skipped {line}")
    if result.infeasible:
        print(f"{len(result.infeasible)} designs infeasible (reasons in --json)")
    print(f"designs written under {result.out}")
    return 0
