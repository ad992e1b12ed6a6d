"""Hardware/schedule co-design benchmark: the best design per network and board against the
stock 1x16 design tuned the same way, with the resource that binds each tensor-core shape.

    python scripts/bench_design.py [--networks resnet18,resnet50,mobilenet_v1]
        [--boards ultra96,pynq,de10nano] [--trials-per-task 20] [--jobs 2] [--out DIR]

Per (network, board): ``vtatune.design.co_design`` (objective latency: the exhaustive walk
over the maximal buffer sizes of every BATCH x BLOCK_IN x BLOCK_OUT, bounded by the compute
floor), its wall time, the stock and best designs (cycles, ms at the board clock, speed-up,
binding resource, what toolchain it needs, whether the Chisel RTL's stock decoder reads
it) and, per shape, the network's compute floor and
the estimate of the shape's logic with the smallest buffers (what binds when a shape cannot
be built, and the LUT cost per LUT-built product at which it would fit). The load average
before and after goes into the results (the machine is shared).
Writes ``scripts/results/<name>.json`` and ``<name>.md`` (``--name``, default ``design``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simulator.chisel import decoder_check  # noqa: E402
from simulator.resources import DEVICES, LUT_PER_PRODUCT, estimate  # noqa: E402
from vtatune.design import (  # noqa: E402
    co_design,  # noqa: E402
    compute_floor,
    layout_reason,
    placed,
    placement_difference,
    shape_label,
    smallest,
    stock,
    toolchain,
    vta_layers,
)


def shape_table(network: str, board: str) -> list[dict]:
    ref = vta_layers(placed(network, stock(board)))
    rows = []
    for shape in SHAPES:
        hw = smallest(board, shape)
        net = placed(network, hw)
        est = estimate(hw, DEVICES[board])
        why = layout_reason(hw) or placement_difference(net, ref)
        rows.append({"shape": shape_label(shape), "macs": hw.macs_per_cycle,
                     "runs_network": why is None, "why_not": why,
                     "compute_floor": compute_floor(net) if vta_layers(net) == ref else None,
                     "percent": {k: round(v, 1) for k, v in est.utilization.items()},
                     "over_budget": list(est.over_budget), **spill(est)})
    return rows


def spill(est) -> dict:
    """Products built from LUTs, and the LUT cost per such product at which the shape's
    logic would just fit the board (the model charges the Yosys xc7-nodsp figure)."""
    dev, hw = est.device, est.hw
    products = hw.macs_per_cycle
    in_luts = max(0, products - dev.dsp * dev.products_per_dsp)
    charged = LUT_PER_PRODUCT
    rest = est.lut - charged * in_luts
    fit = (dev.lut - rest) / in_luts if in_luts else None
    return {"products_in_luts": in_luts, "lut_per_product_charged": round(charged, 1),
            "lut_per_product_to_fit": None if fit is None else round(fit, 1)}


#: (LOG_BATCH, LOG_BLOCK_IN, LOG_BLOCK_OUT) shown in the "what binds" table.
SHAPES = ((0, 3, 3), (0, 4, 4), (1, 4, 4), (0, 5, 4), (0, 4, 5), (0, 6, 3), (0, 5, 5))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--networks", default="resnet18,resnet50,mobilenet_v1")
    ap.add_argument("--boards", default="ultra96,pynq,de10nano")
    ap.add_argument("--trials-per-task", type=int, default=20)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "scripts" / "results" / "design_runs"))
    ap.add_argument("--name", default="design",
                    help="results file stem in scripts/results (default design)")
    args = ap.parse_args()
    load = os.getloadavg()
    results = []
    for network in args.networks.split(","):
        for board in args.boards.split(","):
            t0 = time.perf_counter()
            r = co_design(network, board, trials_per_task=args.trials_per_task,
                          jobs=args.jobs, out=Path(args.out) / f"{network}-{board}")
            wall = time.perf_counter() - t0
            best = r.best
            row = {"network": network, "board": board, "trials_per_task": r.trials_per_task,
                   "wall_seconds": round(wall, 1), "new_evaluations": r.new_evaluations,
                   "evaluated": len(r.evaluated), "infeasible": len(r.infeasible),
                   "stock": {"bitstream": r.stock.hw.bitstream,
                             "total_cycles": r.stock.total_cycles,
                             "total_ms": round(r.stock.total_ms, 3),
                             "binding": r.stock.resources.binding,
                             "percent": r.stock.resources.to_dict()["percent"]},
                   "best": {"bitstream": best.hw.bitstream, "toolchain": toolchain(best.hw),
                            "decoder": decoder_check(best.hw).summary(),
                            "total_cycles": best.total_cycles,
                            "total_ms": round(best.total_ms, 3),
                            "speedup": round(best.speedup, 3),
                            "binding": best.resources.binding,
                            "percent": best.resources.to_dict()["percent"]},
                   "front": [d.hw.bitstream for d in r.designs], "skipped": list(r.skipped),
                   "shapes": shape_table(network, board)}
            results.append(row)
            print(json.dumps({k: row[k] for k in ("network", "board", "wall_seconds",
                                                   "evaluated", "stock", "best")}), flush=True)
    out = ROOT / "scripts" / "results"
    (out / f"{args.name}.json").write_text(json.dumps(results, indent=1) + "\n")
    command = "python scripts/bench_design.py " + " ".join(sys.argv[1:])
    lines = [f"`{command}`", "", f"Load average (1 min) before {load[0]:.1f}, after "
             f"{os.getloadavg()[0]:.1f}; wall seconds on a 2-core machine.", "",
             "| network | board | stock ms | best design | best ms | speed-up | binds "
             "(best) | Chisel decoder (best) | designs | wall s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    changes = set()
    for r in results:
        b = r["best"]
        mark = ""
        if b["toolchain"] != "TVM stock":
            mark = " *"
            changes.add(b["toolchain"])
        lines.append(f"| {r['network']} | {r['board']} | {r['stock']['total_ms']} | "
                     f"`{b['bitstream']}`{mark} | {b['total_ms']} | {b['speedup']:.3f}x | "
                     f"{b['binding']} {b['percent'][b['binding']]}% | {b['decoder']} | "
                     f"{r['evaluated']} | "
                     f"{r['wall_seconds']} |")
    lines += [f"\n\\* {c}" for c in sorted(changes)]
    lines += ["", "Smallest-buffer logic of each tensor-core shape (percent of the board; "
              "products beyond the DSPs are built from LUTs at the charged LUT cost each; "
              "'to fit': the LUT cost per such product at which the logic would fit):", "",
              "| board | shape | MACs/cycle | LUT% | BRAM% | DSP% | products in LUTs | "
              "LUT/product charged, to fit | runs the network |",
              "|---|---|---|---|---|---|---|---|---|"]
    seen = set()
    for r in results:
        if r["board"] in seen:
            continue
        seen.add(r["board"])
        for s in r["shapes"]:
            p = s["percent"]
            fit = s["lut_per_product_to_fit"]
            cost = "-" if fit is None else \
                f"{s['lut_per_product_charged']}, {fit if fit > 0 else 'never'}"
            runs = "yes" if s["runs_network"] else f"no: {s['why_not']}"
            lines.append(f"| {r['board']} | {s['shape']} | {s['macs']} | {p['LUT']} | "
                         f"{p['BRAM']} | {p['DSP']} | {s['products_in_luts']} | {cost} | "
                         f"{runs} |")
    (out / f"{args.name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
