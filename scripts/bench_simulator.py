"""Benchmark: evaluations per second of lowering + timing random legal schedules.

For every ResNet-18 conv layer (C2..C11) it draws random legal configs from the full
template, then times ``lower`` and ``simulate`` separately, one process, one core.

    python scripts/bench_simulator.py [--per-layer 40] [--seed 0] [--hw pynq] [--repeat 1] [--cpu]
                                      [--breakdown]

Prints a table per layer (evaluations/s, ms lowering, ms simulation, instructions) and the
median and worst layer. Every config is evaluated once, as in tuning. This machine's speed
drifts by up to 1.5x between minutes: quote the median of a few runs. ``--repeat N`` times
each layer's configs N times and keeps the fastest pass, every cache of the lowering and the
simulator cleared before each pass (so each config is still new to them): the best of N
stands for the machine's speed when other processes leave the core alone. ``--cpu`` times
by the process's CPU time instead of the wall clock (a loaded machine's waits for the core
left out).

``--breakdown`` also splits each evaluation's time between the compiled passes and the
Python around them: the lowering's Python (planning, rules, setting up the queue program),
the executor that writes the instruction table, the timing's Python, the cost pass and the
event engine, in microseconds per evaluation and, for the compiled passes, nanoseconds per
instruction (the timers wrap the compiled functions, ~1 µs a call).
"""

from __future__ import annotations

import argparse
import functools
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from search_spaces import get_template  # noqa: E402
from simulator.hardware import HardwareConfig  # noqa: E402
from simulator.timing import time_program  # noqa: E402
from vtatune.lowering import lower  # noqa: E402
from vtatune.workloads import resnet18_layers  # noqa: E402


def random_legal_configs(template, rng: random.Random, count: int) -> list[dict]:
    found: list[dict] = []
    tries = 0
    while len(found) < count and tries < 200000:
        tries += 1
        config = {k.name: rng.choice(k.choices) for k in template.knobs}
        if template.legal(config):
            found.append(config)
    return found


def clear_caches() -> None:
    """Empty every ``functools`` cache of the lowering's and the simulator's modules."""
    for name, module in list(sys.modules.items()):
        if name.split(".")[0] in ("vtatune", "simulator"):
            for value in list(vars(module).values()):
                if isinstance(value, functools._lru_cache_wrapper):
                    value.cache_clear()


#: The compiled passes ``--breakdown`` times: (module, function, name in the table).
COMPILED = (("vtatune.lowering._emit", "_queue_tables", "queue"),
            ("vtatune.lowering._runtime", "_execute", "executor"),
            ("simulator.timing._pricing", "_costs", "costs"),
            ("simulator.timing._events", "_engine", "engine"))
_in_compiled: dict[str, float] = {}  # seconds per compiled pass, while --breakdown times them


def time_compiled_passes(clock) -> None:
    """Wrap each compiled pass of :data:`COMPILED` with a timer adding to ``_in_compiled``
    (after the first evaluation: numba replaces a function's module attribute when it loads
    it)."""
    for module_name, function, name in COMPILED:
        module = sys.modules[module_name]
        compiled = getattr(module, function)

        def timed(*args, _compiled=compiled, _name=name):
            t0 = clock()
            result = _compiled(*args)
            _in_compiled[_name] = _in_compiled.get(_name, 0.0) + clock() - t0
            return result

        setattr(module, function, timed)


def time_layer(wl, hw, schedules, clock=time.perf_counter
               ) -> tuple[float, float, int, dict[str, float]]:
    """(seconds lowering, seconds simulating, instructions, seconds in each compiled pass if
    they are timed) over ``schedules``."""
    _in_compiled.clear()
    t_lower = t_sim = 0.0
    insns = 0
    for schedule in schedules:
        t0 = clock()
        lowered = lower(wl, schedule, hw)
        t1 = clock()
        time_program(lowered.program, hw)
        t2 = clock()
        t_lower += t1 - t0
        t_sim += t2 - t1
        insns += len(lowered.program)
    return t_lower, t_sim, insns, dict(_in_compiled)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-layer", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--hw", default="pynq")
    ap.add_argument("--repeat", type=int, default=1,
                    help="passes per layer, caches cleared before each; the fastest is kept")
    ap.add_argument("--cpu", action="store_true", help="time by CPU time, not the wall clock")
    ap.add_argument("--breakdown", action="store_true",
                    help="split each evaluation between the compiled passes and Python")
    args = ap.parse_args()
    clock = time.process_time if args.cpu else time.perf_counter
    hw = HardwareConfig.resolve(args.hw)
    rng = random.Random(args.seed)
    layers = resnet18_layers()
    # Warm up: numba loads (or, on a fresh checkout, compiles) the engines on first use;
    # that one-time cost is reported apart, not charged to the first layer.
    t0 = time.perf_counter()
    tpl = get_template(layers[0], hw)
    time_program(lower(layers[0], tpl.to_schedule(tpl.default_config()), hw).program, hw)
    print(f"first evaluation (JIT load or compile): {time.perf_counter() - t0:.2f} s")
    if args.breakdown:
        time_compiled_passes(clock)
    print(f"{'layer':<14}{'evals/s':>9}{'lower ms':>10}{'sim ms':>8}{'insns':>8}")
    rates = []
    tot_lower = tot_sim = 0.0
    tot_parts: dict[str, float] = {}
    tot_evals = tot_insns = 0
    for wl in layers:
        tpl = get_template(wl, hw)
        # Each config is evaluated once, as in tuning (a second time would find its loop
        # tree cached).
        schedules = [tpl.to_schedule(c) for c in random_legal_configs(tpl, rng, args.per_layer)]
        if args.repeat == 1:
            t_lower, t_sim, insns, parts = time_layer(wl, hw, schedules, clock)
        else:
            passes = []
            for _ in range(args.repeat):
                clear_caches()
                passes.append(time_layer(wl, hw, schedules, clock))
            t_lower, t_sim, insns, parts = min(passes, key=lambda p: p[0] + p[1])
        n = len(schedules)
        for name, seconds in parts.items():
            tot_parts[name] = tot_parts.get(name, 0.0) + seconds
        tot_evals += n
        tot_insns += insns
        rate = n / (t_lower + t_sim)
        rates.append((rate, wl.name))
        tot_lower += t_lower
        tot_sim += t_sim
        print(f"{wl.name:<14}{rate:>9.0f}{1e3 * t_lower / n:>10.2f}{1e3 * t_sim / n:>8.2f}"
              f"{insns // n:>8}")
    med = statistics.median(r for r, _ in rates)
    worst = min(rates)
    share = tot_lower / (tot_lower + tot_sim)
    print(f"median {med:.0f} evaluations/s per core; worst {worst[1]} {worst[0]:.0f}/s; "
          f"lowering {share:.0%} of the time, simulation {1 - share:.0%}")
    if args.breakdown:
        print_breakdown(tot_lower, tot_sim, tot_parts, tot_evals, tot_insns)


def print_breakdown(t_lower: float, t_sim: float, parts: dict[str, float], evals: int,
                    insns: int) -> None:
    """Where an evaluation's time goes, over every layer's evaluations."""
    python_lower = t_lower - parts.get("queue", 0.0) - parts.get("executor", 0.0)
    python_sim = t_sim - parts.get("costs", 0.0) - parts.get("engine", 0.0)
    print(f"per evaluation ({evals} evaluations, {insns / evals:.0f} instructions each on "
          "average):")
    rows = [("lowering, Python", python_lower, False),
            ("lowering, queue program (compiled)", parts.get("queue", 0.0), False),
            ("lowering, executor (compiled)", parts.get("executor", 0.0), True),
            ("timing, Python", python_sim, False),
            ("timing, cost pass (compiled)", parts.get("costs", 0.0), True),
            ("timing, event engine (compiled)", parts.get("engine", 0.0), True)]
    total = t_lower + t_sim
    for name, seconds, per_insn in rows:
        line = f"  {name:<36}{1e6 * seconds / evals:>7.0f} µs  {seconds / total:>4.0%}"
        if per_insn:
            line += f"  {1e9 * seconds / insns:>5.1f} ns/instruction"
        print(line)


if __name__ == "__main__":
    main()
