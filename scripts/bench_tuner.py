"""Benchmark the tuner's main command: wall time, simulation time, overhead, wasted asks.

    python scripts/bench_tuner.py [--trials 200] [--operator conv2d] [--workload NAME]
                                  [--seed 0] [--jobs 1] [--sampler guided] [--repeat 1]
                                  [--warm] [--long] [--cpu] [--cli]

Runs ``vtatune.tune`` the way ``python -m vtatune conv2d --trials 200`` does (tutorial
workload, default hardware, fresh log and journal in a temporary directory) and prints the
wall time, the time inside the simulator (``vtatune.scoring.score``), the rest (sampler + storage +
legality checks + logging), per-ask overhead and the share of asks that were illegal or
repeats, then where each ask's time goes:

- ``sampler``: the sampler's own work (Optuna's TPE / the guided sampler's model), without
  the legality checks and cost-model calls it makes;
- ``legality``: ``Template.check`` / ``Template.legal`` (the sampler's candidate filter and
  the driver's check of every ask);
- ``prior``: the guided sampler's cost model (:mod:`vtatune.tuning.cost_model`);
- ``storage``: every call into the Optuna storage (journal replay, writes, the fsynced flush);
- ``log``: writing the JSON-lines log;
- ``simulation``: lowering, the functional model and timing (:func:`vtatune.scoring.score`);
- ``other``: the rest (Optuna's ask/tell bookkeeping, the driver's loop).

Each figure is exclusive (a legality check made inside the sampler counts as legality only).
The timers wrap those functions for the run, which adds ~1 µs per wrapped call.

``--cpu`` measures the breakdown and ``--long``'s windows in CPU time (the process's),
which a shared machine's load disturbs less than wall time (it leaves out waiting for the
disk and for a core).

``--warm`` runs a short untimed study first, so the compiled engines are loaded and the
simulation time is the steady state (a fresh process pays ~0.5 s once to load them).

``--long``: one study of ``--trials`` (default 3000) on a layer with a large legal space
(``--workload`` default: the tutorial conv2d, ResNet-18 C8, 113,724 legal configs) and the
wall time of each 100 simulated trials, in all and outside the simulator (the configs a
study simulates late cost differently from the early ones; the goal is about the tuner's
own time), plus the ratio of the last window to the one ending at trial 300 (the goal: at
most 1.3) and of the median of the last three to that of those ending at 200-400 (one
window can catch a pause of the machine or a full garbage collection).

Also times the process end to end (imports included) with ``--cli``.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CATEGORIES = ("sampler", "legality", "prior", "storage", "log", "simulation")


class Timers:
    """Exclusive time per category: a wrapped call nested in another counts only once."""

    clock = staticmethod(time.perf_counter)  # time.process_time with --cpu

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._stack: list[list[float]] = []  # [start, time spent in nested wrapped calls]

    def wrap(self, category: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            frame = [self.clock(), 0.0]
            self._stack.append(frame)
            try:
                return fn(*args, **kwargs)
            finally:
                self._stack.pop()
                total = self.clock() - frame[0]
                self.seconds[category] += total - frame[1]
                self.calls[category] += 1
                if self._stack:
                    self._stack[-1][1] += total

        return timed

    def reset(self) -> None:
        self.seconds.clear()
        self.calls.clear()


def _methods(cls: type, names: Iterator[str] | None = None) -> list[str]:
    if names is not None:
        return list(names)
    return [n for n, v in vars(cls).items() if callable(v) and not n.startswith("__")]


@contextmanager
def instrumented(timers: Timers, template_cls: type) -> Iterator[None]:
    """Wrap the functions of each category for the duration of the block."""
    import optuna
    from optuna.storages.journal import JournalStorage

    from vtatune import scoring
    from vtatune.records import RecordWriter
    from vtatune.tuning import cost_model, samplers, storages

    patches: list[tuple[Any, str, Any]] = []

    def patch(owner: Any, name: str, category: str) -> None:
        if name in vars(owner):
            old = vars(owner)[name]
            if isinstance(old, (staticmethod, classmethod)):
                return
            patches.append((owner, name, old))
            setattr(owner, name, timers.wrap(category, old))

    sampler_classes = {optuna.samplers.TPESampler, optuna.samplers.RandomSampler,
                       optuna.samplers.BaseSampler}
    sampler_classes |= {c for c in vars(samplers).values()
                        if isinstance(c, type) and issubclass(c, optuna.samplers.BaseSampler)}
    for cls in sampler_classes:
        for name in ("infer_relative_search_space", "sample_relative", "sample_independent",
                     "before_trial", "after_trial"):
            patch(cls, name, "sampler")
    for name in ("check", "legal"):
        patch(template_cls, name, "legality")
    for name in [n for n, v in vars(cost_model).items() if callable(v) and not n.startswith("_")
                 and getattr(v, "__module__", None) == cost_model.__name__]:
        patch(cost_model, name, "prior")
    for name in _methods(JournalStorage):
        patch(JournalStorage, name, "storage")
    # vtatune's own storage layers: retries, the journal file, reading a study (not the
    # heartbeat thread, which runs beside the loop)
    for cls in [c for c in vars(storages).values()
                if isinstance(c, type) and c.__module__.startswith(storages.__name__)
                and not issubclass(c, (Exception, Warning)) and c is not storages.Heartbeats]:
        for name in _methods(cls):
            patch(cls, name, "storage")
    patch(RecordWriter, "write", "log")
    patch(scoring, "score", "simulation")
    try:
        yield
    finally:
        for owner, name, old in reversed(patches):
            setattr(owner, name, old)


def breakdown(timers: Timers, wall: float, asks: int) -> str:
    parts = [f"{c} {timers.seconds.get(c, 0.0) / asks * 1e3:.2f}" for c in CATEGORIES]
    other = wall - sum(timers.seconds.values())
    return "  per ask (ms): " + ", ".join(parts) + f", other {other / asks * 1e3:.2f}"


def run_short(args: argparse.Namespace) -> None:
    from vtatune.tuning import tune

    workload = args.workload or args.operator
    template_cls = _template_class(workload)
    from vtatune import scoring

    timers = Timers()
    setup = [0.0]  # seconds from the start of tune() to its first simulation
    score = scoring.score

    def first_score(*a: Any, **k: Any) -> Any:
        if not setup[0]:
            setup[0] = time.perf_counter() - t0
        return score(*a, **k)

    for i in range(args.repeat):
        with tempfile.TemporaryDirectory() as tmp:
            timers.reset()
            setup[0] = 0.0
            scoring.score = first_score  # inside the timers' wrapper of score
            try:
                with instrumented(timers, template_cls):
                    t0, c0 = time.perf_counter(), Timers.clock()
                    r = tune(workload, trials=args.trials, sampler=args.sampler,
                             seed=args.seed + i, jobs=args.jobs, log=Path(tmp) / "bench.jsonl")
                    wall, total = time.perf_counter() - t0, Timers.clock() - c0
            finally:
                scoring.score = score
        print(f"{workload}, {args.sampler}, seed {args.seed + i}, jobs "
              f"{args.jobs}: {r.trials} trials, best {r.best_cycles:,} cycles "
              f"({r.speedup_default or 0:.2f}x default)")
        print(f"  wall {wall:.2f} s (tune() {r.wall_seconds:.2f} s + baselines), "
              f"simulating {r.sim_seconds:.2f} s ({r.sim_seconds / max(r.new_trials, 1) * 1e3:.1f}"
              f" ms/trial), outside the simulator {r.overhead_seconds:.2f} s "
              f"({r.overhead_seconds / max(r.asks, 1) * 1e3:.1f} ms/ask)")
        print(f"  asks {r.asks}: illegal {r.illegal_asks} ({r.illegal_asks / r.asks:.0%}), "
              f"repeats {r.duplicate_asks} ({r.duplicate_asks / r.asks:.0%}), "
              f"wasted {r.wasted_fraction:.0%}")
        print(breakdown(timers, total, r.asks) + (" (CPU time)" if args.cpu else ""))
        per_ask = r.overhead_seconds / max(r.asks, 1)
        per_trial = r.sim_seconds / max(r.new_trials, 1)
        print(f"  outside the simulator / simulating: {per_ask / per_trial:.2f} (the goal: at "
              f"most 1); of the outside, {setup[0]:.2f} s before the first simulation "
              f"({setup[0] / max(r.asks, 1) * 1e3:.1f} ms/ask: template, storage, warm starts)")


def run_long(args: argparse.Namespace) -> None:
    """Wall time of each 100 simulated trials of one long study, and the same without the
    time inside the simulator (the tuner's own time per trial: the simulated configs differ
    along a study, and so does their cost) and without the storage's (its writes depend on
    the disk, shared on this machine)."""
    from vtatune import scoring
    from vtatune.tuning import tune

    workload = args.workload or "conv2d"
    timers = Timers()
    # per trial: (clock, storage seconds so far, simulation seconds so far)
    stamps: list[tuple[float, float, float]] = []
    with instrumented(timers, _template_class(workload)):
        simulate = scoring.score

        def stamped(*a: Any, **k: Any) -> Any:
            out = simulate(*a, **k)
            stamps.append((timers.clock(), timers.seconds.get("storage", 0.0),
                           timers.seconds.get("simulation", 0.0)))
            return out

        scoring.score = stamped
        try:
            with tempfile.TemporaryDirectory() as tmp:
                t0 = time.perf_counter()
                r = tune(workload, trials=args.trials, sampler=args.sampler, seed=args.seed,
                         jobs=1, log=Path(tmp) / "long.jsonl")
                wall = time.perf_counter() - t0
        finally:
            scoring.score = simulate
    print(f"{workload}, {args.sampler}, seed {args.seed}: {r.trials} trials ({r.asks} asks, "
          f"{r.wasted_fraction:.0%} wasted), best {r.best_cycles:,} cycles, wall {wall:.1f} s, "
          f"simulating {r.sim_seconds:.1f} s, storage {timers.seconds['storage']:.1f} s")
    # the simulation of the window's last trial is stamped after it: it belongs to the window
    windows = []
    for n in range(200, len(stamps) + 1, 100):
        (t0_, st0, sim0), (t1, st1, sim1) = stamps[n - 101], stamps[n - 1]
        windows.append((n, t1 - t0_, (t1 - t0_) - (sim1 - sim0), st1 - st0))
    print(f"  {'CPU ' if args.cpu else ''}seconds per 100 trials: all / outside the simulator "
          "(/ and without storage), by the trial that ends the window:")
    for row in range(0, len(windows), 4):
        print("   " + "  ".join(f"{n:>5} {dt:4.2f} / {out:4.2f} ({out - st:4.2f})"
                                for n, dt, out, st in windows[row:row + 4]))
    at = {n: (dt, out, out - st) for n, dt, out, st in windows}
    if 300 in at and windows:
        last_n, *last = windows[-1]
        last_all, last_out, last_bare = last[0], last[1], last[1] - last[2]
        print(f"  trial {last_n} / trial 300: all {last_all / at[300][0]:.2f}x, outside the "
              f"simulator {last_out / at[300][1]:.2f}x (without storage "
              f"{last_bare / at[300][2]:.2f}x)")
        near = [w for w in windows if 200 <= w[0] <= 400]
        if len(windows) >= len(near) + 3:  # one window is noisy on a shared machine
            end = windows[-3:]
            med = [[statistics.median(f(w) for w in ws) for ws in (end, near)]
                   for f in (lambda w: w[1], lambda w: w[2], lambda w: w[2] - w[3])]
            print(f"  median of the last 3 windows / of those ending at 200-400: all "
                  f"{med[0][0] / med[0][1]:.2f}x, outside the simulator "
                  f"{med[1][0] / med[1][1]:.2f}x (without storage {med[2][0] / med[2][1]:.2f}x)")


def _template_class(workload: str) -> type:
    from search_spaces import get_template
    from vtatune.workloads import resolve

    wl, hw = resolve(workload, None)
    return type(get_template(wl, hw))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=None,
                    help="trials per study (default 200, with --long 3000)")
    ap.add_argument("--operator", default="conv2d", choices=("conv2d", "gemm"))
    ap.add_argument("--workload", default=None,
                    help="a workload as tune() takes it, e.g. conv2d:resnet18.C2")
    ap.add_argument("--sampler", default="guided")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--warm", action="store_true",
                    help="run a short untimed study first (steady-state simulation time)")
    ap.add_argument("--long", action="store_true",
                    help="one long study: seconds per 100 trials along it")
    ap.add_argument("--cpu", action="store_true",
                    help="the per-ask breakdown and --long's windows in this process's CPU "
                         "time, not wall time (steadier on a loaded machine; no I/O waits)")
    ap.add_argument("--cli", action="store_true",
                    help="also time `python -m vtatune OP --trials N` as a process")
    args = ap.parse_args()
    if args.trials is None:
        args.trials = 3000 if args.long else 200
    if args.cpu:
        Timers.clock = staticmethod(time.process_time)

    import optuna

    from vtatune.tuning import tune

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if args.warm:
        with tempfile.TemporaryDirectory() as tmp:
            tune(args.workload or args.operator, trials=20, sampler=args.sampler,
                 seed=args.seed + 1000, log=Path(tmp) / "warm.jsonl")
    if args.long:
        run_long(args)
    else:
        run_short(args)
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
