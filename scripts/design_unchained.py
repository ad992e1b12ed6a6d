"""Upper bound of a design the co-design search refuses for its layout: every layer tuned on
it alone, as if one layer's output reached the next in its input layout for free.

    python scripts/design_unchained.py [--board ultra96] [--config 1x16x32]
        [--networks resnet18,resnet50,mobilenet_v1] [--trials-per-task 20]

For BLOCK_OUT > BLOCK_IN (default 1x16x32 on ultra96, stock buffers) a layer's NCHW{BO}c
output is not the next layer's NCHW{BI}c input and vtatune lowers no transform between them
(``vtatune._design._space.layout_reason``); this prints the speed-up such a core would give
over the stock design tuned the same way if that transform cost nothing. Stock cycles come
from ``scripts/results/design*.json`` of ``bench_design.py``; writes
``scripts/results/design_unchained.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simulator.hardware import HardwareConfig  # noqa: E402
from simulator.resources import estimate  # noqa: E402
from vtatune._design._inner import tune_tasks  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--board", default="ultra96")
    ap.add_argument("--config", default="1x16x32", help="BATCHxBLOCK_INxBLOCK_OUT")
    ap.add_argument("--networks", default="resnet18,resnet50,mobilenet_v1")
    ap.add_argument("--trials-per-task", type=int, default=20)
    args = ap.parse_args()
    b, bi, bo = (int(x).bit_length() - 1 for x in args.config.split("x"))
    hw = HardwareConfig(target=args.board, log_batch=b, log_block_in=bi, log_block_out=bo)
    stock = {}
    for name in ("design", "design_more"):
        for row in json.loads((ROOT / "scripts" / "results" / f"{name}.json").read_text()):
            stock[row["network"], row["board"]] = row["stock"]["total_cycles"]
    est = estimate(hw)
    lines = [f"`python scripts/design_unchained.py {' '.join(sys.argv[1:])}`", "",
             f"`{hw.bitstream}` on {args.board}: LUT {est.utilization['LUT']:.1f}%, "
             f"BRAM {est.utilization['BRAM']:.1f}%, DSP {est.utilization['DSP']:.1f}%, "
             f"fits: {est.fits}. Every layer tuned alone ({args.trials_per_task} trials, seed 0); "
             "the transform between layers is NOT lowered or costed: upper bounds.", "",
             "| network | stock cycles | cycles | speed-up (upper bound) |", "|---|---|---|---|"]
    for network in args.networks.split(","):
        r = tune_tasks(network, hw, args.trials_per_task, 0,
                       ROOT / "scripts" / "results" / "design_runs" / "unchained")
        s = stock[network, args.board]
        lines.append(f"| {network} | {s} | {r.total_cycles} | {s / r.total_cycles:.3f}x |")
        print(lines[-1], flush=True)
    (ROOT / "scripts" / "results" / "design_unchained.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
