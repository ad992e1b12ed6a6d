"""AutoTVM's space, exhaustively: the optimum of ResNet-18's C2-C11 and the two GEMMs, and how
close the TVM v0.14 path of ``docs/tvm014.md`` gets to it, exported.

    nice -n 10 python scripts/autotvm_optima.py [--hw pynq] [--seeds 3] [--jobs 2]
        [--recompute] [--no-runs] [--out scripts/results/autotvm_optima.json]

1. Optima. Every legal config of each workload's ``autotvm`` template
   (``search_spaces.get_template(wl, hw, space="autotvm").legal_configs()``: TVM's
   ``conv2d_packed`` / ``dense_packed`` points that TVM builds) is scored by
   ``vtatune.scoring.score``, as the tuner scores it. Kept in ``--out`` with each optimum's
   AutoTVM knobs, how many configs tie and how many are within 1%; reused while the timing
   model's fingerprint and the legal counts are unchanged (``--recompute`` redoes them).
2. The path, run as a user would, for seeds 0..``--seeds``-1, each into a fresh log:
   ``layer``: ``python -m vtatune <op> --workload <name> --space autotvm --trials 200 --seed S
   --log L`` per workload, then ``python -m vtatune export L -o OUT --json``;
   ``network``: ``python -m vtatune network resnet18 --space autotvm --trials-per-task 200
   --seed S --log L`` (the network command's defaults otherwise: gradient scheduler,
   patience 6), then the same export. For each workload: the tuned best, the exported
   cycles (what TVM runs), whether they are equal, and exported / optimum.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "scripts" / "results"
LAYERS = [("conv2d", f"resnet18.C{i}") for i in range(2, 12)] + [("gemm", "tutorial"),
                                                                  ("gemm", "dense128")]
TRIALS = 200
MARGIN = 0.01


def label(op: str, name: str) -> str:
    return f"gemm.{name}" if op == "gemm" else name


def optimum(op: str, name: str, hw_name: str) -> dict[str, Any]:
    """Score every legal config of the workload's autotvm template."""
    from search_spaces import get_template
    from simulator.hardware import HardwareConfig
    from vtatune.schedule import to_autotvm
    from vtatune.scoring import score
    from vtatune.workloads import get_workload

    hw = HardwareConfig.resolve(hw_name)
    wl = get_workload(op, name)
    tpl = get_template(wl, hw, space="autotvm")
    t0 = time.perf_counter()
    scored = []
    not_ok = 0
    for config in tpl.legal_configs():
        schedule = tpl.to_schedule(config)
        ev = score(wl, schedule, hw)
        if ev.status != "ok":
            not_ok += 1
            continue
        scored.append((ev.cycles, schedule, ev.timing))
    best, schedule, timing = min(scored, key=lambda t: t[0])
    cycles = [c for c, _, _ in scored]
    return {"workload": label(op, name), "legal": len(scored) + not_ok, "not_ok": not_ok,
            "optimum_cycles": best, "autotvm": to_autotvm(schedule, wl, hw),
            "optima": cycles.count(best),
            "within_1pct": sum(c <= (1 + MARGIN) * best for c in cycles),
            "timing": timing, "cpu_seconds": round(time.perf_counter() - t0, 1)}


def optima(hw: str, jobs: int, cached: dict[str, Any] | None) -> dict[str, Any]:
    from joblib import Parallel, delayed

    from search_spaces import get_template
    from simulator.hardware import HardwareConfig
    from simulator.timing import TimingProfile
    from vtatune.workloads import get_workload

    hwc = HardwareConfig.resolve(hw)
    fingerprint = TimingProfile.for_hw(hwc).fingerprint()
    legal = {label(op, n): sum(1 for _ in get_template(get_workload(op, n), hwc,
                                                          space="autotvm").legal_configs())
             for op, n in LAYERS}
    old = (cached or {}).get("optima", {})
    if cached and cached.get("hw") == hwc.target_model and all(
            old.get(k, {}).get("timing") == fingerprint and old[k]["legal"] == legal[k]
            for k in legal):
        print(f"optima: cached in the results file (timing {fingerprint}, same legal counts)")
        return old
    print(f"optima: scoring {sum(legal.values())} legal configs in {jobs} process(es)...",
          flush=True)
    found = Parallel(n_jobs=jobs, backend="loky")(
        delayed(optimum)(op, n, hw) for op, n in LAYERS)
    return {f["workload"]: f for f in found}


def run(argv: list[str], env: dict[str, str]) -> tuple[str, float]:
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "vtatune", *argv], capture_output=True,
                       text=True, env=env, cwd=ROOT)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(argv)}: exit {p.returncode}\n{p.stderr}")
    return p.stdout, time.perf_counter() - t0


def exported(log: Path, env: dict[str, str]) -> dict[str, dict[str, Any]]:
    out, _ = run(["export", str(log), "-o", str(log.with_suffix(".autotvm.log")), "--json"],
                 env)
    found = {}
    for line in out.splitlines():
        d = json.loads(line)
        key = label(d["operator"], d["workload"])
        found[key] = {k: d[k] for k in ("tuned_cycles", "tuned_space", "exported_cycles",
                                        "projected", "slower")}
    return found


def paths(hw: str, seeds: int) -> list[dict[str, Any]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(seeds):
            for op, name in LAYERS:
                log = Path(tmp) / f"{label(op, name)}-{seed}.jsonl"
                _, wall = run([op, "--workload", name, "--hw", hw, "--space", "autotvm",
                               "--trials", str(TRIALS), "--seed", str(seed), "--log",
                               str(log), "--quiet"], env)
                (e,) = exported(log, env).values()
                runs.append({"path": "layer", "seed": seed, "workload": label(op, name),
                             "wall_seconds": round(wall, 1), **e})
                print(f"layer   seed {seed} {label(op, name):<16} tuned "
                      f"{e['tuned_cycles']:>9,}  exported {e['exported_cycles']:>9,}  "
                      f"{wall:5.1f} s", flush=True)
            log = Path(tmp) / f"resnet18-{seed}.jsonl"
            out, wall = run(["network", "resnet18", "--hw", hw, "--space", "autotvm",
                             "--trials-per-task", str(TRIALS), "--seed", str(seed), "--log",
                             str(log), "--json"], env)
            trials = {t["name"]: t["trials"] for t in json.loads(out)["tasks"]}
            for key, e in exported(log, env).items():
                runs.append({"path": "network", "seed": seed, "workload": key,
                             "trials": trials.get(key),
                             "wall_seconds": round(wall, 1), **e})
            print(f"network seed {seed}: {sum(trials.values())} trials, {wall:.1f} s",
                  flush=True)
    return runs


def table(found: dict[str, Any], runs: list[dict[str, Any]]) -> str:
    rows = ["| workload | legal configs | AutoTVM optimum (cycles) | within 1% | layer: exported"
            " / optimum, worst seed | network: exported / optimum, worst seed (trials) |"
            " exported = tuned |",
            "|---|---:|---:|---:|---:|---:|---|"]
    for key, f in found.items():
        cells = []
        for path in ("layer", "network"):
            rs = [r for r in runs if r["path"] == path and r["workload"] == key]
            if not rs:
                cells.append("-")
                continue
            worst = max(r["exported_cycles"] for r in rs) / f["optimum_cycles"]
            trials = [r["trials"] for r in rs if r.get("trials")]
            cells.append(f"{worst:.4f}" + (f" ({min(trials)}-{max(trials)})" if trials
                                           else ""))
        rs = [r for r in runs if r["workload"] == key]
        same = (f"{sum(r['exported_cycles'] == r['tuned_cycles'] for r in rs)}/{len(rs)}"
                if rs else "-")
        rows.append(f"| {key} | {f['legal']} | {f['optimum_cycles']:,} | {f['within_1pct']} | "
                    f"{cells[0]} | {cells[1]} | {same} |")
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hw", default="pynq")
    ap.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 of each path")
    ap.add_argument("--jobs", type=int, default=2, help="processes for the optima")
    ap.add_argument("--recompute", action="store_true", help="score the spaces again")
    ap.add_argument("--no-runs", action="store_true", help="the optima only")
    ap.add_argument("--out", default=str(RESULTS / "autotvm_optima.json"))
    args = ap.parse_args()
    out = Path(args.out)
    previous = json.loads(out.read_text()) if out.exists() else None
    cached = None if args.recompute else previous
    from simulator.hardware import HardwareConfig

    t0 = time.perf_counter()
    found = optima(args.hw, args.jobs, cached)
    runs = [] if args.no_runs else paths(args.hw, args.seeds)
    if args.no_runs and previous:  # the runs of the file, with when they were made
        runs = previous.get("runs", [])
    runs_date = previous.get("runs_date", previous["date"]) if args.no_runs and previous \
        else time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    result = {"command": ("python scripts/autotvm_optima.py " + " ".join(sys.argv[1:])).strip(),
              "hw": HardwareConfig.resolve(args.hw).target_model, "trials": TRIALS,
              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "wall_seconds": round(time.perf_counter() - t0, 1),
              "load_average": round(os.getloadavg()[0], 1),
              "optima": found, "runs": runs, "runs_date": runs_date,
              "table": table(found, runs)}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(result["table"])
    bad = [r for r in runs if r["exported_cycles"] > (1 + MARGIN)
           * found[r["workload"]]["optimum_cycles"] or r["exported_cycles"] != r["tuned_cycles"]]
    for r in bad:
        print(f"short: {r['path']} seed {r['seed']} {r['workload']}: exported "
              f"{r['exported_cycles']:,}, tuned {r['tuned_cycles']:,}, optimum "
              f"{found[r['workload']]['optimum_cycles']:,}")
    print(f"wrote {out} ({result['wall_seconds']:.0f} s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
