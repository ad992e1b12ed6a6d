"""Benchmark the tuner's main command: wall time, simulation time, overhead, wasted asks.

    python scripts/bench_tuner.py [--trials 200] [--operator conv2d] [--seed 0] [--jobs 1]
                                  [--sampler tpe] [--repeat 1]

Runs ``vtatune.tune`` the way ``python -m vtatune conv2d --trials 200`` does (tutorial
workload, default hardware, fresh log and journal in a temporary directory) and prints the
wall time, the time inside the simulator (``evaluate``), the rest (sampler + storage +
legality checks + logging), per-ask overhead and the share of asks that were illegal or
repeats. Also times the process end to end (imports included) with ``--cli``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--operator", default="conv2d", choices=("conv2d", "gemm"))
    ap.add_argument("--sampler", default="guided")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--cli", action="store_true",
                    help="also time `python -m vtatune OP --trials N` as a process")
    args = ap.parse_args()

    import optuna

    from vtatune.tuner import tune

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    for i in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            r = tune(args.operator, trials=args.trials, sampler=args.sampler,
                     seed=args.seed + i, jobs=args.jobs, log=Path(tmp) / "bench.jsonl")
            wall = time.perf_counter() - t0
        print(f"{args.operator} tutorial, {args.sampler}, seed {args.seed + i}, jobs "
              f"{args.jobs}: {r.trials} trials, best {r.best_cycles:,} cycles "
              f"({r.speedup_default or 0:.2f}x default)")
        print(f"  wall {wall:.2f} s (tune() {r.wall_seconds:.2f} s + baselines), "
              f"simulating {r.sim_seconds:.2f} s ({r.sim_seconds / max(r.new_trials, 1) * 1e3:.1f}"
              f" ms/trial), outside the simulator {r.overhead_seconds:.2f} s "
              f"({r.overhead_seconds / max(r.asks, 1) * 1e3:.1f} ms/ask)")
        print(f"  asks {r.asks}: illegal {r.illegal_asks} ({r.illegal_asks / r.asks:.0%}), "
              f"repeats {r.duplicate_asks} ({r.duplicate_asks / r.asks:.0%}), "
              f"wasted {r.wasted_fraction:.0%}")
    if args.cli:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "vtatune", args.operator, "--trials",
                            str(args.trials), "--seed", str(args.seed), "--log",
                            str(Path(tmp) / "cli.jsonl"), "--quiet"], check=True,
                           stdout=subprocess.DEVNULL)
            print(f"  python -m vtatune {args.operator} --trials {args.trials}: "
                  f"{time.perf_counter() - t0:.2f} s end to end")


if __name__ == "__main__":
    main()
