"""Network tuning: quality against each task's optimum, wall time, and gradient vs round-robin.

    python scripts/bench_network.py [--network resnet50] [--hw pynq] [--trials-per-task 20]
        [--seeds 3] [--first-seed 0] [--optima scripts/results/resnet50_optima.json]
        [--reference-trials 300] [--compare resnet50,mobilenet_v1] [--compare-warmup 8]
        [--jobs 2] [--out scripts/results]

1. Quality and time: ``tune_network(network, trials_per_task=N)`` (the default gradient
   scheduler and guided sampler, one process, exactly as ``python -m vtatune network``
   runs it) once per seed; its wall time, and every task's best against the task's
   optimum.
2. The optimum of each task: with ``--optima FILE`` the **exhaustive optimum** of every
   task, as ``scripts/network_optima.py`` computed it (every legal config of the full
   space simulated, bar those a proven compute lower bound rules out). Without it, the
   **best known**, as in ``scripts/bench_search.py``: the best of every
   config simulated for the task by this script: the network runs (this one's and those
   kept in ``network.json`` from earlier ones), ``--reference-trials``-trial guided
   studies with ``--reference-seeds`` other seeds, and the whole of AutoTVM's
   conv2d_packed sub-space (exhaustive, bruteforce sampler). The references are kept in
   ``network.json`` and reused.
   Beside it, what the cost model alone finds: the best of the guided sampler's warm
   starts for the task, simulated.
3. Gradient against round-robin: the network's VTA time (Σ multiplicity × best cycles)
   after every round against the trials spent, for each network of ``--compare`` and each
   seed, with the default warm-up round and with ``--compare-warmup`` trials a task,
   plotted in ``scripts/results/network_schedulers.png``.

Outputs in ``scripts/results/``: ``network.json`` (every run and reference),
``network.md`` (the tables) and ``network_schedulers.png``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "scripts" / "results"


def quiet() -> None:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)


def network_run(network: str, hw: str, per_task: int, scheduler: str, seed: int,
                warmup: int | None = None) -> dict[str, Any]:
    """One network tuning run in a fresh temporary log (``warmup``: None for the default)."""
    quiet()
    from vtatune.networks import DEFAULT_WARMUP, tune_network

    warmup = warmup or DEFAULT_WARMUP
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        r = tune_network(network, hw, trials_per_task=per_task, scheduler=scheduler,
                         seed=seed, log=Path(tmp) / "net.jsonl", warmup_trials=warmup)
        wall = time.perf_counter() - t0
    return {"network": network, "scheduler": scheduler, "seed": seed, "wall": wall,
            "warmup": warmup,
            "trials": r.trials, "stopped": r.stopped, "total_cycles": r.total_cycles,
            "total_ms": r.total_ms, "speedup_default": r.speedup_default,
            "sim_seconds": r.sim_seconds,
            "tasks": {t.task.name: {"best": t.best_cycles, "trials": t.trials,
                                    "multiplicity": t.task.multiplicity, "dead": t.dead}
                      for t in r.tasks},
            "history": [[n, v] for n, v in r.history]}


def reference(network: str, hw: str, task: str, trials: int, seeds: list[int]
              ) -> dict[str, Any]:
    """The best of long guided studies and AutoTVM's whole sub-space for one task."""
    quiet()
    from vtatune.networks import load_network
    from vtatune.tuning import tune

    net = load_network(network, hw)
    wl = next(t.workload for t in net.tasks if t.name == task)
    out: dict[str, Any] = {"task": task}
    with tempfile.TemporaryDirectory() as tmp:
        for s in seeds:
            r = tune(wl, net.hw, trials=trials, seed=s, log=Path(tmp) / f"g{s}.jsonl")
            out[f"guided_{s}"] = r.best_cycles
        r = tune(wl, net.hw, trials=10**6, sampler="bruteforce", space="autotvm",
                 log=Path(tmp) / "autotvm.jsonl")
        out["autotvm"] = r.best_cycles
        out["autotvm_legal"] = r.trials
    return out


def warm_start_best(network: str, hw: str, task: str) -> int:
    """The best cycles of the guided sampler's warm starts for one task, simulated (what
    the cost model alone finds, before any search)."""
    from search_spaces import get_template
    from vtatune.networks import load_network
    from vtatune.scoring import score
    from vtatune.tuning.cost_model import warm_starts

    net = load_network(network, hw)
    wl = next(t.workload for t in net.tasks if t.name == task)
    tpl = get_template(wl, net.hw)
    return min(score(wl, tpl.to_schedule(c), net.hw).cycles for c in warm_starts(tpl))


def run_par(fn: Any, args: list[tuple], jobs: int) -> list[Any]:
    if jobs <= 1:
        return [fn(*a) for a in args]
    from joblib import Parallel, delayed

    return Parallel(n_jobs=jobs, backend="loky")(delayed(fn)(*a) for a in args)


def plot(compare: list[dict[str, Any]], path: Path, optimum: dict[str, float]) -> None:
    import math

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nets = sorted({r["network"] for r in compare})
    warmups = sorted({r["warmup"] for r in compare})
    fig, axes = plt.subplots(len(warmups), len(nets), figsize=(6 * len(nets),
                                                               3.6 * len(warmups)),
                             squeeze=False)
    for row, warmup in zip(axes, warmups, strict=True):
        for ax, net in zip(row, nets, strict=True):
            for sched, colour in (("gradient", "tab:blue"), ("round-robin", "tab:orange")):
                runs = [r for r in compare if r["network"] == net and r["scheduler"] == sched
                        and r["warmup"] == warmup]
                for r in runs:
                    pts = [(n, v / 1e5) for n, v in r["history"] if v is not None
                           and math.isfinite(v)]
                    ax.plot(*zip(*pts, strict=True), color=colour, alpha=0.35, lw=1)
                ax.plot([], [], color=colour, label=f"{sched} ({len(runs)} seeds)")
            if net in optimum:
                ax.axhline(optimum[net] / 1e5, color="black", ls=":", lw=1,
                           label="every task at its exhaustive optimum")
            ax.set_title(f"{net} on pynq, warm-up round of {warmup} trials a task")
            ax.set_xlabel("trials spent (network total)")
            ax.set_ylabel("network VTA time (ms at 100 MHz)")
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--network", default="resnet50")
    ap.add_argument("--hw", default="pynq")
    ap.add_argument("--trials-per-task", type=int, default=20)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--reference-trials", type=int, default=300)
    ap.add_argument("--reference-seeds", type=int, default=2,
                    help="guided reference studies per task")
    ap.add_argument("--optima", default="",
                    help="exhaustive optima (scripts/network_optima.py's JSON) as the "
                         "reference, instead of --reference-trials studies")
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--compare", default="resnet50,mobilenet_v1",
                    help="networks of the gradient vs round-robin plot ('' for none)")
    ap.add_argument("--out", default=str(RESULTS),
                    help="where network.md, network.json and the plot go")
    ap.add_argument("--compare-warmup", type=int, default=8,
                    help="the comparison's second warm-up round (trials a task)")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    quiet()
    from vtatune.networks import load_network

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    t_start = time.perf_counter()

    # 1. the timed runs: one at a time, alone (the wall time is the figure)
    runs = [network_run(args.network, args.hw, args.trials_per_task, "gradient", s)
            for s in seeds]
    for r in runs:
        print(f"[{time.perf_counter() - t_start:5.0f}s] {r['network']} seed {r['seed']}: "
              f"{r['trials']} trials, {r['wall']:.1f} s wall, {r['total_ms']:.3f} ms",
              flush=True)

    # 2. the optimum of every task: exhaustive (--optima) or the best known
    net = load_network(args.network, args.hw)
    optima = json.loads(Path(args.optima).read_text()) if args.optima else None
    if optima is not None and optima["network"] != args.network:
        print(f"{args.optima} holds {optima['network']}'s optima, not {args.network}'s",
              file=sys.stderr)
        return 2
    ref_seeds = [1000 + s for s in range(args.reference_seeds)]
    # References are deterministic: reuse the last file's for the same problem and budget,
    # and keep the best of every run it holds (all of it was simulated: best known).
    old = json.loads((out / "network.json").read_text()) \
        if (out / "network.json").exists() else {}
    key = [args.network, args.hw, args.reference_trials, args.reference_seeds] \
        if optima is None else [args.network, args.hw, "optima", optima["command"]]
    same = old.get("reference_key") == key
    refs = old.get("references", []) if same else []
    if optima is not None:
        refs = [{"task": name, "optimum": t["optimum_cycles"]}
                for name, t in optima["tasks"].items()]
    elif not refs:
        refs = run_par(reference, [(args.network, args.hw, t.name, args.reference_trials,
                                    ref_seeds) for t in net.tunable], args.jobs)
    known: dict[str, int] = dict(old.get("known", {})) if same else {}
    for r in runs + (old.get("runs", []) + old.get("compare", []) if same else []):
        if r["network"] != args.network:
            continue
        for name, t in r["tasks"].items():
            if t["best"]:
                known[name] = min(known.get(name, t["best"]), t["best"])
    print(f"[{time.perf_counter() - t_start:5.0f}s] references done", flush=True)
    warm = dict(zip([ref["task"] for ref in refs], run_par(
        warm_start_best, [(args.network, args.hw, ref["task"]) for ref in refs], args.jobs),
        strict=True))
    rows = []
    within = []
    for ref in refs:
        name = ref["task"]
        if optima is not None:
            best = ref["optimum"]
            if name in known and known[name] < best:
                raise SystemExit(f"{name}: a run found {known[name]} cycles, below the "
                                 f"recorded optimum {best}: the optima file is stale")
        else:
            cands = [v for k, v in ref.items() if k.startswith(("guided_", "autotvm"))
                     and k != "autotvm_legal" and v]
            best = min(cands + ([known[name]] if name in known else []))
        ratios = [r["tasks"][name]["best"] / best for r in runs]
        within.append(all(x <= 1.01 for x in ratios))
        rows.append((name, net.tasks[[t.name for t in net.tasks].index(name)].multiplicity,
                     best, ref.get("autotvm"), ratios,
                     [r["tasks"][name]["trials"] for r in runs], warm[name] / best))

    # 3. gradient vs round-robin
    nets = [n for n in args.compare.split(",") if n]
    # At the default warm-up (one round), and at --compare-warmup trials a task (the default
    # schedule and every warm start first).
    compare = [r for r in runs] + [
        network_run(n, args.hw, args.trials_per_task, sched, s, warmup)
        for warmup in (None, args.compare_warmup)
        for n in nets for sched in ("gradient", "round-robin") for s in seeds
        if not (n == args.network and sched == "gradient" and warmup is None)]
    print(f"[{time.perf_counter() - t_start:5.0f}s] scheduler comparison done", flush=True)
    net_optimum = {args.network: sum(mult * best for _, mult, best, *_ in rows)} \
        if optima is not None else {}
    if compare != runs:
        plot(compare, out / "network_schedulers.png", net_optimum)

    cmd = ("python scripts/bench_network.py " + " ".join(sys.argv[1:])).strip()
    md = [f"Produced by `{cmd}` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}).", "",
          f"{args.network} on {net.hw.target_model}, {args.trials_per_task} trials per task "
          f"on average ({args.trials_per_task * len(net.tunable)} in all), gradient "
          f"scheduler, guided sampler, seeds {seeds}:", "",
          "| seed | wall (s) | simulating (s) | trials | stopped | VTA time (ms) | vs default |",
          "|---:|---:|---:|---:|---|---:|---:|"]
    for r in runs:
        md.append(f"| {r['seed']} | {r['wall']:.1f} | {r['sim_seconds']:.1f} | {r['trials']} "
                  f"| {r['stopped']} | {r['total_ms']:.3f} | {r['speedup_default']:.2f}x |")
    what = "exhaustive optimum" if optima is not None else "best known optimum"
    md += ["", f"Tasks within 1% of their {what} in every seed: {sum(within)}/{len(within)}."]
    if optima is not None:
        md += ["", f"Optima: `{args.optima}`, from `{optima['command']}` ({optima['date']}; "
               f"{sum(t['legal'] for t in optima['tasks'].values()):,} legal configs, "
               f"{sum(t['simulated'] for t in optima['tasks'].values()):,} simulated, the "
               "rest ruled out by the compute lower bound)."]
    worst = [max(r[4]) for r in rows]
    net_best = sum(mult * best for _, mult, best, *_ in rows)
    md += [f"Worst task (over seeds): {max(worst):.4f} of its optimum; mean over tasks of "
           f"the worst seed: {statistics.mean(worst):.4f}. The network at the tasks' "
           f"{what}s: {net_best / (net.hw.clock_mhz * 1e3):.3f} ms; the runs: "
           + ", ".join(f"{r['total_cycles'] / net_best:.4f}" for r in runs) + " of it.",
           f"The cost model's warm starts alone (the six configs the guided sampler queues "
           f"first, simulated) are within 1% for "
           f"{sum(r[6] <= 1.01 for r in rows)}/{len(rows)} tasks.", "",
           f"| task | count | {what} (cycles) | "
           + ("AutoTVM sub-space optimum | " if optima is None else "")
           + f"run best / {what} (per seed) | trials (per seed) | warm starts' best |",
           "|---|---:|---:|" + ("---:|" if optima is None else "") + "---|---|---:|"]
    for name, mult, best, atvm, ratios, trials, ws in rows:
        md.append(f"| {name} | {mult} | {best:,} | "
                  + (f"{atvm:,} | " if optima is None else "")
                  + ", ".join(f"{x:.4f}" for x in ratios) + " | "
                  + ", ".join(map(str, trials)) + f" | {ws:.4f} |")
    target_is = f"; for {args.network}, of its exhaustive optimum" if net_optimum else ""
    md += ["", "Gradient against round-robin (same budget; a warm-up round of the default "
           f"and of {args.compare_warmup} trials a task; VTA time in ms at the end, and "
           "trials spent until the network's time first came within 0.1% of the best "
           f"end of any run of the network{target_is}):",
           "", "| network | warm-up | scheduler | seed | trials | final ms | "
           "trials to within 0.1% |", "|---|---:|---|---:|---:|---:|---:|"]
    import math

    for r in sorted(compare, key=lambda r: (r["network"], r["warmup"], r["scheduler"],
                                           r["seed"])):
        target = net_optimum.get(r["network"]) or min(
            x["total_cycles"] for x in compare if x["network"] == r["network"])
        hit = next((n for n, v in r["history"] if v is not None and math.isfinite(v)
                    and v <= 1.001 * target), None)
        md.append(f"| {r['network']} | {r['warmup']} | {r['scheduler']} | {r['seed']} | "
                  f"{r['trials']} | {r['total_ms']:.3f} | {hit} |")
    text = "\n".join(md) + "\n"
    (out / "network.md").write_text(text)
    for r in compare:
        if r["network"] == args.network:
            for name, t in r["tasks"].items():
                if t["best"]:
                    known[name] = min(known.get(name, t["best"]), t["best"])
    (out / "network.json").write_text(json.dumps(
        {"args": vars(args), "reference_key": key,
         "runs": runs, "references": refs, "known": known, "warm_starts": warm,
         "compare": compare}) + "\n")
    print(text)
    meds = {(n, w, s): statistics.median(r["total_ms"] for r in compare
                                         if r["network"] == n and r["scheduler"] == s
                                         and r["warmup"] == w)
            for n in nets for s in ("gradient", "round-robin")
            for w in {r["warmup"] for r in compare}}
    print(meds)
    print(f"[{time.perf_counter() - t_start:5.0f}s] done")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
