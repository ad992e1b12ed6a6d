"""Benchmark: the timing model's event engine alone, per instruction, by program size.

    python scripts/bench_engine.py [--per-layer 40] [--seed 0] [--hw pynq] [--passes 5]

Lowers the same random legal configs as ``scripts/bench_simulator.py`` (every ResNet-18
layer, the same seed), prices each program once with the cost pass, then runs only the
compiled event engine over them, its working arrays allocated once and warm, and keeps the
fastest of ``--passes`` passes (CPU time). It reports nanoseconds per instruction over
all programs and by program size, and beside it a bare recurrence over the same cost
tables (each module's free time and the read channel, in stream order: no fetch, tokens or
event order): what a loop touching every instruction once costs on this machine, the
floor under any engine. The engine's time per instruction not growing with the program
says it is not waiting on memory (a program's arrays outgrow the 512 KiB L2 at about
5,000 instructions).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_simulator import random_legal_configs  # noqa: E402

from search_spaces import get_template  # noqa: E402
from simulator import timing  # noqa: E402
from simulator.hardware import HardwareConfig  # noqa: E402
from simulator.jit import njit  # noqa: E402
from vtatune.lowering import lower  # noqa: E402
from vtatune.workloads import resnet18_layers  # noqa: E402

SIZES = ((0, 2000), (2000, 5000), (5000, 10000), (10000, 10**9))


@njit()
def bare_recurrence(costs, out):
    """Each instruction starts when its module is free (a read also when the channel is)."""
    mod, pre, xfer, post = costs[0], costs[4], costs[5], costs[6]
    free = np.zeros(3, np.int64)
    chan = 0
    for i in range(mod.shape[0]):
        m = mod[i]
        s = free[m]
        if xfer[i]:
            s = max(s + pre[i], chan)
            chan = s + xfer[i]
            e = chan + post[i]
        else:
            e = s + pre[i]
        free[m] = e
        out[i] = e
    return free.max()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-layer", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--hw", default="pynq")
    ap.add_argument("--passes", type=int, default=5)
    args = ap.parse_args()
    hw = HardwareConfig.resolve(args.hw)
    rng = random.Random(args.seed)
    pricing, events = timing._pricing, timing._events  # the two compiled passes' modules
    _, P, elem, priority, store_elem, wide, out_bytes, insn_bytes = timing._run._setup(hw, None)
    runs = []  # (instructions, engine arguments, bare recurrence arguments)
    for wl in resnet18_layers():
        tpl = get_template(wl, hw)
        for config in random_legal_configs(tpl, rng, args.per_layer):
            program = lower(wl, tpl.to_schedule(config), hw).program
            n = len(program)
            costs = np.empty((pricing._COST_ROWS, n), np.int64)
            pricing._costs(program.rows, elem, priority, out_bytes, store_elem, wide, P,
                           pricing._POP_MASK, pricing._PUSH_MASK, costs)
            engine_args = (costs, P, insn_bytes,
                           np.empty((events._SCRATCH, n + sum(program.tokens_in)), np.int64),
                           np.empty((events._STATE_ROWS, 4), np.int64),
                           timing._run._tokens_array(program.tokens_in), pricing._CONSUMER)
            runs.append((n, engine_args, (costs, np.empty(n, np.int64))))

    def timed(function, which: int) -> list[float]:
        """Seconds per program, the fastest of the passes."""
        best = [float("inf")] * len(runs)
        for _ in range(args.passes):
            for k, run in enumerate(runs):
                t0 = time.process_time()
                function(*run[which])
                best[k] = min(best[k], time.process_time() - t0)
        return best

    events._engine(*runs[0][1])
    bare_recurrence(*runs[0][2])  # compiled (or loaded) before timing
    engine, bare = timed(events._engine, 1), timed(bare_recurrence, 2)
    total = sum(n for n, _, _ in runs)
    print(f"{len(runs)} programs, {total / len(runs):.0f} instructions each on average")
    print(f"event engine     {1e9 * sum(engine) / total:6.1f} ns/instruction")
    print(f"bare recurrence  {1e9 * sum(bare) / total:6.1f} ns/instruction")
    print("by program size (median ns/instruction of the programs):")
    for lo, hi in SIZES:
        picked = [k for k, (n, _, _) in enumerate(runs) if lo <= n < hi]
        if picked:
            per = statistics.median(engine[k] / runs[k][0] for k in picked)
            print(f"  {lo:>6}-{hi if hi < 10**9 else '':<6} instructions: {len(picked):>3} "
                  f"programs, engine {1e9 * per:5.1f}")


if __name__ == "__main__":
    main()
