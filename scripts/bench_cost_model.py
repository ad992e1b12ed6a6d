"""The guided sampler's cost model on its own: what it costs a study, and how good its
warm starts are against exhaustive optima.

    python scripts/bench_cost_model.py [--repeat 3] [--no-resnet50]

For every (board, layer) of ``scripts/bench_generalization.py`` (optima from
``scripts/results/generalization_optima.json``) and ResNet-50's 22 tasks on pynq with the
benchmark epilogue (``scripts/results/resnet50_optima.json``; its optimum configs are
scored again, and that is the reference: the file predates main's TVM-v0.14 streams, so
it is an upper bound on today's optimum, a few cycles off):

- the wall time of :class:`vtatune.tuning.cost_model.ShapeCosts` (every tile shape with
  every outer order: the table the sampler's acquisition reads) and of
  :func:`~vtatune.tuning.cost_model.warm_starts` given that table, each the best of
  ``--repeat`` runs after one untimed run (the compiled loop loaded, the template's caches
  warm); the shapes tabulated;
- the best simulated cycles of the six warm starts over the optimum.

Prints a summary and writes ``cost_model.json`` to ``--out`` (default
``scripts/results/local/``, git-ignored).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_generalization import OPTIMA, draw_layers  # noqa: E402


def _timed(fn: Any, repeat: int) -> tuple[Any, float]:
    fn()  # untimed: compiled code loaded, caches warm
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return out, best


def measure(wl: Any, hw: Any, optimum: int, repeat: int) -> dict[str, Any]:
    from search_spaces import get_template
    from vtatune.scoring import score
    from vtatune.tuning.cost_model import ShapeCosts, warm_starts

    tpl = get_template(wl, hw)
    costs, t_table = _timed(lambda: ShapeCosts(tpl), repeat)
    starts, t_warm = _timed(lambda: warm_starts(tpl, costs=costs), repeat)
    cycles = [score(wl, tpl.to_schedule(c), hw).cycles for c in starts]
    return {"entries": int(costs.cycles.size), "table_ms": round(1e3 * t_table, 2),
            "warm_ms": round(1e3 * t_warm, 2), "optimum": optimum,
            "warm_best": min(cycles), "ratio": min(cycles) / optimum}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-resnet50", action="store_true")
    ap.add_argument("--out", type=Path, default=ROOT / "scripts" / "results" / "local")
    args = ap.parse_args(argv)
    from search_spaces import get_template
    from simulator.hardware import HardwareConfig
    from vtatune.networks import load_network
    from vtatune.scoring import score
    from vtatune.workloads import BENCHMARK

    layers = {lay["name"]: lay["workload"] for lay in draw_layers()}
    rows = []
    for key, row in json.loads(OPTIMA.read_text())["optima"].items():
        wl = layers[row["layer"]]
        m = measure(wl, HardwareConfig.resolve(row["hw"]), row["optimum"], args.repeat)
        rows.append({"set": "generalization", "pair": key, **m})
    if not args.no_resnet50:
        net = load_network("resnet50", "pynq")
        opt = json.loads((ROOT / "scripts" / "results" / "resnet50_optima.json").read_text())
        for name, t in opt["tasks"].items():
            # the file's optima are of the benchmark epilogue (the catalogue's tasks now
            # carry the deployed one, and are numbered otherwise): matched by shape
            # (the file's names carry their epilogue; describe() no longer does)
            shape = t["workload"].split(" ", 1)[1].split(", epilogue")[0]
            wl = next(w for w in (dataclasses.replace(task.workload, epilogue=BENCHMARK)
                                  for task in net.tasks)
                      if w.describe().split(" ", 1)[1].split(", epilogue")[0] == shape)
            rescored = score(wl, get_template(wl, net.hw).to_schedule(t["config"]),
                             net.hw).cycles
            m = measure(wl, net.hw, rescored, args.repeat)
            rows.append({"set": "resnet50", "pair": name, "recorded": t["optimum_cycles"],
                         **m})
    summary = {}
    for s in sorted({r["set"] for r in rows}):
        rs = [r for r in rows if r["set"] == s]
        summary[s] = {
            "pairs": len(rs), "warm_at_optimum": sum(r["ratio"] <= 1 for r in rs),
            "warm_worst": max(r["ratio"] for r in rs),
            "table_ms_median": statistics.median(r["table_ms"] for r in rs),
            "table_ms_max": max(r["table_ms"] for r in rs),
            "warm_ms_median": statistics.median(r["warm_ms"] for r in rs),
            "warm_ms_max": max(r["warm_ms"] for r in rs),
            "entries_median": statistics.median(r["entries"] for r in rs)}
        if s == "resnet50":
            summary[s]["rescored_differ"] = sum(r["recorded"] != r["optimum"] for r in rs)
    for r in rows:
        if r["ratio"] > 1:
            print(f"{r['set']} {r['pair']}: warm starts {r['warm_best']:,} against "
                  f"{r['optimum']:,} (+{100 * (r['ratio'] - 1):.3f}%)")
    print(json.dumps(summary, indent=1))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "cost_model.json").write_text(json.dumps(
        {"command": "python scripts/bench_cost_model.py " + " ".join(
            argv if argv is not None else sys.argv[1:]), "summary": summary, "rows": rows},
        indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
