"""What ``deploy`` gives with default flags (tuning included) on the models a new user
quantizes with onnxruntime, and how long it takes (issue 38, items 1 and 4).

    python scripts/bench_default_deploy.py MODEL.onnx [...] [--hw pynq] [--check]
        [--reference 200] [--out scripts/results/bench_default_deploy.json]

For each model, each run a fresh ``python -m vtatune deploy MODEL --json`` process (wall
time from its start to its end, imports included), the cache log in a directory of the
script's own (``$VTATUNE_CACHE_DIR``):

- ``cold``: default flags, an empty cache log: tunes every workload;
- ``warm``: default flags again, the cache log holding its workloads (nothing to tune);
- ``--check``: the warm run with ``--check`` (what the check adds);
- ``tune0``: ``--tune 0``: no tuning, each layer the cost model's pick;
- ``exact`` (``--exact``): default flags with ``--exact`` (tuned too: every layer rounded
  exactly, VTA's exact fixed point in one pass where it has one, else once per
  accumulator byte, the CPU requantizing);
- ``no_exact`` (``--no-exact``): every layer within a step, one pass (tuned too: for a
  model that normalizes, what the default's exact rounding costs);
- ``reference``: ``--reference N`` trials every workload (no early stop: ``tune_patience``
  None), in this process, into a log of its own; then deployed with it, ``--tune 0``.

Prints, per model: VTA cycles with default flags, with the default schedules (every
report's ``default_cycles``), with ``--tune 0`` and with the reference; default flags over
the reference; wall seconds cold and warm (and each step's, from ``seconds``), the trials
the cold run tuned and the load average beside each wall time. Writes every run's figures
to ``--out`` (JSON) whole.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vtatune.records import write_whole  # noqa: E402


def _deploy(model: str, cache: Path, hw: str, *flags: str) -> dict:
    """One deploy command in a fresh process: its JSON, wall seconds and the load."""
    env = {**os.environ, "VTATUNE_CACHE_DIR": str(cache),
           "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "vtatune", "deploy", model, "--hw", hw,
                               "--json", "--output", f"{tmp}/y.npy", *flags], env=env,
                              capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t0
    if done.returncode:
        raise SystemExit(f"deploy {model} {' '.join(flags)} failed: {done.stderr.strip()}")
    d = json.loads(done.stdout)
    return {"wall": wall, "load": os.getloadavg()[0], "vta_cycles": d["vta_cycles"],
            "default_cycles": d["default_cycles"], "seconds": d["seconds"],
            "tuning": d["tuning"], "check": d.get("check"),
            "sources": sorted({c["source"] for c in d["offloaded"]}),
            "layers": len(d["offloaded"])}


def _reference(model: str, hw: str, trials: int, log: Path) -> dict:
    """``trials`` trials every workload, no early stop, then the deploy with that log."""
    import warnings

    from vtatune.builds import FallbackWarning
    from vtatune.deploy import compile_model

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FallbackWarning)
        compiled = compile_model(model, hw=hw, tune_trials=trials, tune_log=log,
                                 tune_patience=None)
        r = compiled.run()
    return {"wall": time.perf_counter() - t0, "load": os.getloadavg()[0],
            "vta_cycles": r.vta_cycles, "default_cycles": r.default_cycles,
            "tuning": compiled.tuning}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+", metavar="MODEL.onnx")
    ap.add_argument("--hw", default="pynq")
    ap.add_argument("--check", action="store_true", help="time a warm run with --check too")
    ap.add_argument("--reference", type=int, default=0, metavar="N",
                    help="also tune N trials every workload (no early stop) and deploy it")
    ap.add_argument("--no-tune0", action="store_true", help="leave out the --tune 0 run")
    ap.add_argument("--exact", action="store_true",
                    help="also deploy with --exact (every layer rounded exactly)")
    ap.add_argument("--no-exact", action="store_true",
                    help="also deploy with --no-exact (every layer within a step)")
    ap.add_argument("--out", default=str(ROOT / "scripts/results/bench_default_deploy.json"))
    args = ap.parse_args()
    results = {}
    out = Path(args.out)
    for model in args.models:
        name = Path(model).name
        with tempfile.TemporaryDirectory(prefix="vtatune-cache-") as cache:
            runs = {"cold": _deploy(model, Path(cache), args.hw),
                    "warm": _deploy(model, Path(cache), args.hw)}
            if args.check:
                runs["check"] = _deploy(model, Path(cache), args.hw, "--check")
            if not args.no_tune0:
                runs["tune0"] = _deploy(model, Path(cache), args.hw, "--tune", "0")
            if args.exact:
                runs["exact"] = _deploy(model, Path(cache), args.hw, "--exact")
            if args.no_exact:
                runs["no_exact"] = _deploy(model, Path(cache), args.hw, "--no-exact")
            if args.reference:
                runs["reference"] = _reference(model, args.hw, args.reference,
                                               Path(cache) / "reference.jsonl")
        results[name] = runs
        cold, warm = runs["cold"], runs["warm"]
        line = (f"{name}: default flags {cold['vta_cycles']:,} cycles (warm "
                f"{warm['vta_cycles']:,}), default schedules {cold['default_cycles']:,}")
        if "tune0" in runs:
            line += f", --tune 0 {runs['tune0']['vta_cycles']:,}"
        if "exact" in runs:
            line += f", --exact {runs['exact']['vta_cycles']:,}"
        if "no_exact" in runs:
            line += f", --no-exact {runs['no_exact']['vta_cycles']:,}"
        if "reference" in runs:
            ref = runs["reference"]["vta_cycles"]
            line += f", --reference {ref:,} (default flags {cold['vta_cycles'] / ref:.4f}x)"
        line += (f"; wall cold {cold['wall']:.1f} s (load {cold['load']:.1f}), warm "
                 f"{warm['wall']:.1f} s (load {warm['load']:.1f}); "
                 f"{cold['tuning']['trials']} trials over {cold['tuning']['workloads']} "
                 f"workloads; cold steps " + ", ".join(f"{k} {v:.1f}" for k, v in
                                                      cold["seconds"].items()))
        if "check" in runs:
            line += f"; --check run {runs['check']['wall']:.1f} s"
        print(line, flush=True)
        write_whole({out: (json.dumps(results, indent=1) + "\n").encode(),
                     out.with_suffix(".md"): table(results).encode()})


def table(results: dict) -> str:
    """The runs as docs/deploy.md's table (markdown)."""
    rows = ["| model | VTA cycles: default schedules | `--tune 0` (cost model's pick) | "
            "default flags (tuned) | 200 trials a workload | default / 200 | trials "
            "(workloads) | `--exact` | `--no-exact` | wall: cold / warm / warm `--check` "
            "(load) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name, runs in results.items():
        cold = runs["cold"]
        ref = runs.get("reference", {}).get("vta_cycles")
        ratio = f"{cold['vta_cycles'] / ref:.4f}" if ref else "-"
        walls = [f"{runs[k]['wall']:.0f} s" for k in ("cold", "warm", "check") if k in runs]
        loads = sorted(runs[k]["load"] for k in ("cold", "warm", "check") if k in runs)
        rows.append(
            f"| {name.split('.')[0]} | {cold['default_cycles']:,} | "
            f"{format(runs['tune0']['vta_cycles'], ',') if 'tune0' in runs else '-'} | "
            f"**{cold['vta_cycles']:,}** | "
            f"{f'{ref:,}' if ref else '-'} | "
            f"{ratio} | "
            f"{cold['tuning']['trials']} ({cold['tuning']['workloads']}) | "
            f"{format(runs['exact']['vta_cycles'], ',') if 'exact' in runs else '-'} | "
            f"{format(runs['no_exact']['vta_cycles'], ',') if 'no_exact' in runs else '-'} | "
            f"{' / '.join(walls)} ({loads[0]:.0f}-{loads[-1]:.0f}) |")
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    main()
