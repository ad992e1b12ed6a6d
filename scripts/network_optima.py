"""Exhaustive optima of a network's tasks: every legal config of vtatune's full space, simulated.

    python scripts/network_optima.py [--network resnet50] [--hw pynq] [--jobs 2]
        [--threshold-from scripts/results/network.json] [--out scripts/results/resnet50_optima.json]

For each tunable task, every legal config of the task's template (``legal_configs()``, the
order the bruteforce sampler feeds them) goes through ``vtatune.scoring.score`` exactly
as the tuner scores it — except the configs that provably cannot be within ``--margin`` of
the optimum: a config whose compute lower bound (``_prior.compute_bound``: the compute
module's own in-order work, ≤ the simulated cycles; tests check it) exceeds
``(1 + margin) × threshold`` is skipped, where ``threshold`` is the best cycles known
beforehand (``--threshold-from``: the ``known`` of ``network.json``, or an earlier optima
file, whose recorded configs are simulated again now and the best still-legal one of each task
bounds it, so an optima file stays a valid start after the model or the tasks change) or,
without one, infinity. The optimum found is exact when it is ≤ the threshold (checked and
recorded: ``exact``), and every config within ``margin`` of the optimum is simulated, so
``within_margin`` counts them exactly.

Work is split into chunks run by ``--jobs`` processes (joblib); each finished chunk is
appended to ``scripts/results/local/<network>_optima.partial.jsonl``, so a rerun resumes.
Every simulated config's cycles are kept in ``scripts/results/local/<network>_cycles/``
(``<task>.npz``: the config's index in the template's product order, and its cycles) for
offline study of the cost model.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "scripts" / "results"
LOCAL = RESULTS / "local"
CHUNK = 3000


def _template(network: str, hw: str, task: str) -> tuple[Any, Any, Any]:
    from search_spaces import get_template
    from vtatune.networks import load_network

    net = load_network(network, hw)
    wl = next(t.workload for t in net.tasks if t.name == task)
    return wl, net.hw, get_template(wl, net.hw)


def run_chunk(network: str, hw: str, task: str, index: int, indices: list[int]
              ) -> dict[str, Any]:
    """Simulate the configs at ``indices`` (product order) of one task's template."""
    from vtatune.scoring import score

    wl, hwc, tpl = _template(network, hw, task)
    t0 = time.perf_counter()
    cycles = []
    bad = 0
    for i in indices:
        ev = score(wl, tpl.to_schedule(tpl.config_at(i)), hwc)
        if ev.status != "ok":
            bad += 1
            cycles.append(-1)
        else:
            cycles.append(ev.cycles)
    return {"task": task, "chunk": index, "n": len(indices), "not_ok": bad,
            "seconds": time.perf_counter() - t0, "indices": indices, "cycles": cycles}


def bound_plan(tpl: Any, limit: float) -> tuple[int, list[int]]:
    """(legal configs of ``tpl``, product-order indices of those whose compute lower bound
    is at most ``limit``: the others provably take longer). The bound depends on the tile
    shape alone, so it is computed once per shape."""
    from vtatune.tuning.cost_model import compute_bound

    legal, keep = 0, []
    memo: dict[tuple, int] = {}
    for c in tpl.legal_configs():
        legal += 1
        key = (c.get("tile_b"), c.get("tile_h"), c.get("tile_w"), c["tile_ci"], c["tile_co"])
        b = memo.get(key)
        if b is None:
            b = memo[key] = compute_bound(tpl, c)
        if b <= limit:
            keep.append(tpl.index_of(c))
    return legal, keep


def plan_task(network: str, hw: str, task: str, threshold: float, margin: float
              ) -> tuple[int, list[int]]:
    """(legal configs, indices of those not ruled out by the compute bound)."""
    _, _, tpl = _template(network, hw, task)
    return bound_plan(tpl, (1 + margin) * threshold)


def _rescored(net: Any, names: list[str], configs: list[dict[str, Any]]) -> dict[str, float]:
    """Each task's best cycles now over the earlier ``configs`` its template holds."""
    from search_spaces import get_template
    from vtatune.scoring import score

    best: dict[str, float] = {}
    for task in net.tunable:
        if task.name not in names:
            continue
        tpl = get_template(task.workload, net.hw)
        for c in configs:
            if tpl.legal(c):
                ev = score(task.workload, tpl.to_schedule(c), net.hw)
                if ev.status == "ok":
                    best[task.name] = min(best.get(task.name, math.inf), ev.cycles)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--network", default="resnet50")
    ap.add_argument("--hw", default="pynq")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--margin", type=float, default=0.01)
    ap.add_argument("--threshold-from", default=str(RESULTS / "network.json"))
    ap.add_argument("--tasks", default="", help="comma-separated subset (default: all)")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    import optuna
    from joblib import Parallel, delayed

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    from vtatune.networks import load_network

    net = load_network(args.network, args.hw)
    names = [t.name for t in net.tunable]
    if args.tasks:
        names = [n for n in names if n in args.tasks.split(",")]
    known: dict[str, float] = {}
    if args.threshold_from and Path(args.threshold_from).exists():
        earlier = json.loads(Path(args.threshold_from).read_text())
        known = (earlier["known"] if "known" in earlier
                 else _rescored(net, names, [t["config"] for t in earlier["tasks"].values()]))
    LOCAL.mkdir(parents=True, exist_ok=True)
    partial = LOCAL / f"{args.network}_optima.partial.jsonl"
    cyc_dir = LOCAL / f"{args.network}_cycles"
    cyc_dir.mkdir(exist_ok=True)
    t_start = time.perf_counter()

    plans = {}
    for name in names:
        thr = float(known.get(name, math.inf))
        legal, keep = plan_task(args.network, args.hw, name, thr, args.margin)
        plans[name] = {"legal": legal, "keep": keep, "threshold": thr}
        print(f"[{time.perf_counter() - t_start:6.0f}s] {name}: {legal} legal, "
              f"{len(keep)} to simulate", flush=True)
    done: dict[tuple[str, int], dict[str, Any]] = {}
    if partial.exists():
        for line in partial.read_text().splitlines():
            r = json.loads(line)
            p = plans.get(r["task"])
            if p is not None and r.get("plan") == [p["legal"], len(p["keep"]), p["threshold"]]:
                done[(r["task"], r["chunk"])] = r
    jobs = []
    for name in names:
        keep = plans[name]["keep"]
        for ci, lo in enumerate(range(0, len(keep), CHUNK)):
            if (name, ci) not in done:
                jobs.append((name, ci, keep[lo:lo + CHUNK]))
    total = sum(len(j[2]) for j in jobs)
    print(f"[{time.perf_counter() - t_start:6.0f}s] {len(done)} chunks done before, "
          f"{len(jobs)} chunks ({total} configs) to run", flush=True)
    simulated = 0
    with partial.open("a") as fh:
        results = Parallel(n_jobs=args.jobs, backend="loky", return_as="generator_unordered")(
            delayed(run_chunk)(args.network, args.hw, n, ci, idx) for n, ci, idx in jobs)
        for r in results:
            p = plans[r["task"]]
            r["plan"] = [p["legal"], len(p["keep"]), p["threshold"]]
            fh.write(json.dumps(r) + "\n")
            fh.flush()
            done[(r["task"], r["chunk"])] = r
            simulated += r["n"]
            el = time.perf_counter() - t_start
            print(f"[{el:6.0f}s] {r['task']} chunk {r['chunk']}: {r['n']} in "
                  f"{r['seconds']:.1f}s; {simulated}/{total}", flush=True)

    from search_spaces import get_template

    tasks = {}
    for name in names:
        p = plans[name]
        rs = [done[k] for k in sorted(done) if k[0] == name]
        idx = np.array([i for r in rs for i in r["indices"]], np.int64)
        cyc = np.array([c for r in rs for c in r["cycles"]], np.int64)
        np.savez_compressed(cyc_dir / f"{name}.npz", index=idx, cycles=cyc)
        ok = cyc > 0
        best_pos = int(np.argmin(np.where(ok, cyc, np.iinfo(np.int64).max)))
        best = int(cyc[best_pos])
        wl = next(t.workload for t in net.tasks if t.name == name)
        tpl = get_template(wl, net.hw)
        tasks[name] = {
            "workload": wl.describe(), "multiplicity": next(
                t.multiplicity for t in net.tasks if t.name == name),
            "optimum_cycles": best, "config": tpl.config_at(int(idx[best_pos])),
            "legal": p["legal"], "simulated": int(len(idx)), "not_ok": int((~ok).sum()),
            "skipped_by_bound": p["legal"] - len(p["keep"]),
            "threshold": None if math.isinf(p["threshold"]) else p["threshold"],
            "exact": bool(best <= p["threshold"]) and len(idx) == len(p["keep"]),
            "within_margin": int((ok & (cyc <= (1 + args.margin) * best)).sum()),
            "optima": int((cyc == best).sum()),
            "cpu_seconds": round(sum(r["seconds"] for r in rs), 1),
        }
    cmd = ("python scripts/network_optima.py " + " ".join(sys.argv[1:])).strip()
    out = {"command": cmd, "network": args.network, "hw": net.hw.target_model,
           "margin": args.margin, "template": get_template(net.tunable[0].workload,
                                                           net.hw).name,
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "wall_seconds": round(time.perf_counter() - t_start, 1), "tasks": tasks}
    path = Path(args.out) if args.out else RESULTS / f"{args.network}_optima.json"
    from vtatune.records import write_whole

    write_whole({path: (json.dumps(out, indent=1) + "\n").encode()})
    for name, t in tasks.items():
        print(name, t["optimum_cycles"], t["simulated"], t["exact"], t["within_margin"])
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
