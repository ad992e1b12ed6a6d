"""Dense layers against the same maths as a 1x1 conv2d: per shape M x K x N (M rows:
tokens, batch), the best gemm schedule the guided sampler finds in N trials, the best 1x1
conv2d over M spatial positions (the most square H x W = M) in as many trials, and the
gemm template's default schedule (what a layer gets with no log and no tuning).

    python scripts/bench_dense.py [--trials 100] [--seeds 0 1] [--hw pynq]
        [--shapes 128x256x256 ...] [--defaults-only] [--out FILE]

Cycles are the timing model's (load-independent); each tuning run is a fresh study in a
temporary directory. Writes a markdown table to ``--out`` (default
``scripts/results/bench_dense.md``) and prints it.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from search_spaces import get_template  # noqa: E402
from simulator.hardware import HardwareConfig  # noqa: E402
from vtatune.scoring import score  # noqa: E402
from vtatune.tuning import tune  # noqa: E402
from vtatune.workloads import Conv2dWorkload, GemmWorkload  # noqa: E402

#: issue 38's transformer and MLP shapes (M x K x N)
SHAPES = ("128x256x256", "128x256x1024", "128x1024x256", "197x192x768", "3136x96x384",
          "784x192x768")


def square(m: int) -> tuple[int, int]:
    """The most square H x W = m, H >= W."""
    w = max(d for d in range(1, math.isqrt(m) + 1) if m % d == 0)
    return m // w, w


def best_of(workload, hw, trials: int, seeds: list[int]) -> tuple[int, str]:
    """The best cycles (and schedule) over one guided study per seed."""
    best = None
    for seed in seeds:
        with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = tune(workload, hw, trials=trials, seed=seed, log=Path(tmp) / "log.jsonl")
        if best is None or r.best.cycles < best[0]:
            best = (r.best.cycles, r.best_schedule.short())
    return best


def default_of(workload, hw) -> tuple[int, str]:
    tpl = get_template(workload, hw)
    s = tpl.to_schedule(tpl.default_config())
    return score(workload, s, hw).cycles, s.short()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--hw", default="pynq")
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES))
    parser.add_argument("--defaults-only", action="store_true")
    parser.add_argument("--out", default=str(ROOT / "scripts/results/bench_dense.md"))
    args = parser.parse_args(argv)
    hw = HardwareConfig.resolve(args.hw)
    what = "the default schedules only" if args.defaults_only else \
        f"guided sampler, {args.trials} trials x seeds {' '.join(map(str, args.seeds))} " \
        "(best of the seeds)"
    lines = [f"hardware {hw.target_model}; {what}", "",
             "| M x K x N | default gemm | default schedule | best gemm | best 1x1 conv "
             "(H x W) | gemm / conv | best gemm schedule | best conv schedule |",
             "|---|---:|---|---:|---:|---:|---|---|"]
    for shape in args.shapes:
        m, k, n = map(int, shape.split("x"))
        gemm = GemmWorkload(m, k, n)
        d_cycles, d_sched = default_of(gemm, hw)
        if args.defaults_only:
            lines.append(f"| {shape} | {d_cycles:,} | `{d_sched}` | | | | | |")
        else:
            h, w = square(m)
            conv = Conv2dWorkload(1, h, w, k, n, 1, 0, 1)
            g_cycles, g_sched = best_of(gemm, hw, args.trials, args.seeds)
            c_cycles, c_sched = best_of(conv, hw, args.trials, args.seeds)
            lines.append(f"| {shape} | {d_cycles:,} | `{d_sched}` | {g_cycles:,} | "
                         f"{c_cycles:,} ({h} x {w}) | {g_cycles / c_cycles:.3f} | `{g_sched}` "
                         f"| `{c_sched}` |")
        print(lines[-1], flush=True)
    text = "\n".join(lines) + "\n"
    Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
