"""Hardware/schedule co-design benchmark: the best design per network and board against the
stock 1x16 design tuned the same way, with the resource that binds each tensor-core shape.

    python scripts/bench_design.py [--networks resnet18,resnet50,mobilenet_v1]
        [--boards ultra96,pynq,de10nano] [--trials-per-task 20] [--jobs 2] [--out DIR]

Per (network, board): ``vtatune.design.co_design`` (objective latency: the exhaustive walk
over the maximal buffer sizes of every BATCH x BLOCK, bounded by the compute floor), its
wall time, the stock and best designs (cycles, ms at the board clock, speed-up, binding
resource) and, per (BATCH, BLOCK) shape, the network's compute floor and the estimate of
the shape's logic with the smallest buffers (what binds when a shape cannot be built).
Writes ``scripts/results/<name>.json`` and ``<name>.md`` (``--name``, default ``design``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simulator.resources import DEVICES, estimate  # noqa: E402
from vtatune._design._inner import placed, vta_layers  # noqa: E402
from vtatune._design._space import compute_floor, smallest, stock  # noqa: E402
from vtatune.design import co_design  # noqa: E402


def shape_table(network: str, board: str) -> list[dict]:
    ref = vta_layers(placed(network, stock(board)))
    rows = []
    for lb in (0, 1):
        for lk in (3, 4, 5):
            hw = smallest(board, lb, lk)
            net = placed(network, hw)
            est = estimate(hw, DEVICES[board])
            runs_all = vta_layers(net) == ref
            rows.append({"shape": f"{1 << lb}x{1 << lk}", "runs_network": runs_all,
                         "compute_floor": compute_floor(net) if runs_all else None,
                         "percent": {k: round(v, 1) for k, v in est.utilization.items()},
                         "over_budget": list(est.over_budget)})
    return rows


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
                   "best": {"bitstream": best.hw.bitstream, "total_cycles": best.total_cycles,
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
    lines = ["| network | board | stock ms | best design | best ms | speed-up | binds "
             "(best) | designs | wall s |", "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        b = r["best"]
        lines.append(f"| {r['network']} | {r['board']} | {r['stock']['total_ms']} | "
                     f"`{b['bitstream']}` | {b['total_ms']} | {b['speedup']:.3f}x | "
                     f"{b['binding']} {b['percent'][b['binding']]}% | {r['evaluated']} | "
                     f"{r['wall_seconds']} |")
    lines += ["", "Smallest-buffer logic of each tensor-core shape (percent of the board):", "",
              "| board | shape | LUT% | BRAM% | DSP% | over budget |", "|---|---|---|---|---|---|"]
    seen = set()
    for r in results:
        if r["board"] in seen:
            continue
        seen.add(r["board"])
        for s in r["shapes"]:
            p = s["percent"]
            lines.append(f"| {r['board']} | {s['shape']} | {p['LUT']} | {p['BRAM']} | "
                         f"{p['DSP']} | {'; '.join(s['over_budget']) or '-'} |")
    (out / f"{args.name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
