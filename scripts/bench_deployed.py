"""What a deployed network's VTA time is made of: GEMM kernels, their fused epilogues and the
ALU-only kernels (residual adds), before and after the adds are tuned.

    python scripts/bench_deployed.py [--networks resnet18,resnet50] [--targets sim,pynq]
        [--trials-per-task 40] [--seed 0] [--out scripts/results]

For each network and target, one ``tune_network(space="autotvm")`` run (TVM's own space:
what TVM v0.14 can apply) tunes every task, conv and add alike. The deployed model is then
run (:func:`vtatune.networks.deployed_run`: every VTA kernel in order, tokens carried) with

- ``fallback``: TVM's fallback config for every task (no log);
- ``convs tuned``: the tuned convs, the adds on TVM's fallback (a log of conv records, as
  TopHub's or AutoTVM's tune_relay_vta tutorial gives: it tunes ``conv2d_packed.vta`` only);
- ``all tuned``: the adds tuned too.

Each row gives the VTA time and what the epilogues and the ALU-only kernels add to the GEMM
kernels alone (the benchmark epilogue AutoTVM tunes with). On ``pynq`` the adds run on the
CPU (TVM offloads ALU-only kernels on ``sim`` and ``intelfocl`` only).

Outputs: ``deployed.json`` and ``deployed.md`` in ``--out``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "scripts" / "results"


def breakdown(network: str, target: str, per_task: int, seed: int) -> dict[str, Any]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    from vtatune.networks import (
        deployed_run,
        load_network,
        schedules_from_logs,
        tune_network,
    )
    from vtatune.schedule import tvm_fallback

    net = load_network(network, target, tasks="autotvm")
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "net.jsonl"
        t0 = time.perf_counter()
        tuned = tune_network(net, trials_per_task=per_task, seed=seed, log=log,
                             space="autotvm")
        wall = time.perf_counter() - t0
        deployed = load_network(network, target)  # what runs: each layer's own epilogue
        applied = {k: a.schedule for k, a in schedules_from_logs(deployed, [log]).items()}
    fallback = {t.name: tvm_fallback(t.workload, deployed.hw) for t in deployed.tasks}
    adds = {t.name for t in deployed.tasks if t.operator == "add"}
    cases = {"fallback": fallback,
             "convs tuned": {k: fallback[k] if k in adds else s for k, s in applied.items()},
             "all tuned": applied}
    rows = {}
    for case, schedules in cases.items():
        run = deployed_run(deployed, schedules)
        rows[case] = {"vta_cycles": run.cycles, "gemm_kernels": run.gemm_kernels,
                      "epilogues": run.epilogues, "alu_kernels": run.alu_kernels,
                      "kernels": len(run.kernels)}
    return {"network": network, "target": target, "hw": deployed.hw.target_model,
            "trials": tuned.trials, "tune_seconds": round(wall, 1), "cases": rows}


def table(results: list[dict[str, Any]]) -> str:
    lines = ["| network | target | schedules | VTA cycles | GEMM kernels | epilogues | "
             "ALU-only kernels | epilogues + ALU share |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        for case, c in r["cases"].items():
            g = c["gemm_kernels"]
            lines.append(
                f"| {r['network']} | {r['target']} | {case} | {c['vta_cycles']:,} | {g:,} | "
                f"+{c['epilogues']:,} ({c['epilogues'] / g:.1%}) | "
                f"+{c['alu_kernels']:,} ({c['alu_kernels'] / g:.1%}) | "
                f"{(c['epilogues'] + c['alu_kernels']) / c['vta_cycles']:.1%} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--networks", default="resnet18,resnet50")
    ap.add_argument("--targets", default="sim,pynq")
    ap.add_argument("--trials-per-task", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args()
    results = []
    for network in args.networks.split(","):
        for target in args.targets.split(","):
            r = breakdown(network, target, args.trials_per_task, args.seed)
            results.append(r)
            print(f"{network} on {target}: {r['trials']} trials in {r['tune_seconds']} s",
                  flush=True)
    md = table(results)
    print(md)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    command = ("python scripts/bench_deployed.py --networks " + args.networks + " --targets "
               + args.targets + f" --trials-per-task {args.trials_per_task} --seed {args.seed}")
    (out / "deployed.json").write_text(json.dumps({"command": command, "results": results},
                                                  indent=1) + "\n")
    (out / "deployed.md").write_text(f"# Deployed VTA time\n\n`{command}`\n\n{md}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
