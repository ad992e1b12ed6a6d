"""Throughput and duplicate rate of N workers sharing one study.

For each storage (the default journal, one log shared by all workers; PostgreSQL, one log per
worker) and each worker count, starts that many ``python -m vtatune conv2d`` processes on
one fresh study of ``--trials`` trials and reports: wall time, trials per second, simulations,
distinct configs, duplicated simulations (a config simulated more than once, over all logs),
trials left RUNNING, and exit codes.

PostgreSQL: ``--postgres URL`` of a database this script may fill (one fresh database per
run is created next to it when the URL names a server it can reach with ``createdb``), or,
by default, a throwaway server started on 127.0.0.1 like the tests do.

    python scripts/bench_workers.py                       # C8, 400 trials, 1/2/4 workers
    python scripts/bench_workers.py --trials 100 --workers 1,4 --storages journal
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def run(storage: str, workers: int, trials: int, workload: str, url: str | None) -> dict:
    import optuna

    from vtatune.records import read_records
    from vtatune.tuning.storages import open_storage

    tmp = Path(tempfile.mkdtemp(prefix="vtatune-bench-"))
    argv = [sys.executable, "-m", "vtatune", "conv2d", "--workload", workload,
            "--trials", str(trials), "--quiet"]
    logs = [tmp / ("w.jsonl" if storage == "journal" else f"w{i}.jsonl")
            for i in range(workers)]
    if url:
        argv += ["--storage", url]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.perf_counter()
    procs = [subprocess.Popen([*argv, "--log", str(log)], cwd=tmp, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for log in logs]
    codes = [p.wait() for p in procs]
    wall = time.perf_counter() - t0
    errors = [e.strip().splitlines()[-1] for p in procs if (e := p.stderr.read()).strip()]
    configs: collections.Counter[str] = collections.Counter()
    for log in set(logs):
        for _, r in read_records(log):
            if r["status"] != "illegal":
                configs[json.dumps(r["config"], sort_keys=True)] += 1
    store = open_storage(url, logs[0])
    (summary,) = optuna.study.get_all_study_summaries(store.storage)
    study = optuna.load_study(study_name=summary.study_name, storage=store.storage)
    running = sum(t.state.name == "RUNNING" for t in study.trials)
    store.close()
    simulated = sum(configs.values())
    return {"storage": storage, "workers": workers, "wall": wall, "simulated": simulated,
            "distinct": len(configs), "duplicated": simulated - len(configs),
            "running": running, "codes": codes, "errors": errors}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="resnet18.C8")
    ap.add_argument("--trials", type=int, default=400)
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--storages", default="journal,postgres")
    ap.add_argument("--postgres", metavar="URL", help="a PostgreSQL server to use "
                    "(default: start a throwaway one)")
    args = ap.parse_args()
    counts = [int(x) for x in args.workers.split(",")]
    server = None
    rows = []
    try:
        for storage in args.storages.split(","):
            for n in counts:
                url = None
                if storage == "postgres":
                    if args.postgres:
                        url = args.postgres
                    else:
                        from tests.tuning import _postgres

                        server = server or _postgres.start_server()
                        url = server.createdb(f"bench{len(rows)}")
                rows.append(run(storage, n, args.trials, args.workload, url))
                r = rows[-1]
                print(f"{storage:8s} {n} workers: {r['wall']:6.1f} s, "
                      f"{r['distinct'] / r['wall']:5.1f} trials/s, {r['simulated']} simulated, "
                      f"{r['distinct']} distinct, {r['duplicated']} duplicated "
                      f"({r['duplicated'] / max(1, r['simulated']):.1%}), "
                      f"{r['running']} left RUNNING, exit {r['codes']}"
                      + (f", errors: {r['errors']}" if r["errors"] else ""), flush=True)
    finally:
        if server is not None:
            server.remove()
    print()
    print("| storage | workers | wall s | trials/s | simulated | distinct | duplicated | "
          "RUNNING left | exit codes |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r['storage']} | {r['workers']} | {r['wall']:.1f} | "
              f"{r['distinct'] / r['wall']:.1f} | {r['simulated']} | {r['distinct']} | "
              f"{r['duplicated']} ({r['duplicated'] / max(1, r['simulated']):.1%}) | "
              f"{r['running']} | {' '.join(map(str, r['codes']))} |")


if __name__ == "__main__":
    main()
