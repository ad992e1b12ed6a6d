"""Search quality: how close each sampler gets to the optimum, and how fast.

    python scripts/bench_search.py [--layers C2,C8,gemm.tutorial] [--samplers guided,tpe]
        [--seeds 5] [--trials 200] [--hw pynq] [--jobs 2] [--long 0] [--no-readme]

For the ten ResNet-18 conv layers and the two GEMMs (``gemm.tutorial`` 1x1024x1024,
``gemm.dense128`` 128x128x128) on one hardware config:

- the optimum of vtatune's full space: exhaustive over the legal configs where the legal
  space is at most ``--exhaustive-limit`` (the GEMMs); otherwise the best of every config
  this script ever simulated for the layer (all runs of all samplers, ``--long`` extra
  long guided runs, the AutoTVM sub-space, TopHub, and every loop order of the best tile
  shapes), labelled "best known";
- the optimum of AutoTVM's conv2d_packed / dense_packed sub-space (always exhaustive);
- per sampler x seed: the tuner's study of ``--trials`` trials (``vtatune.tune``, exactly as
  the CLI runs it): best found / optimum, trials to reach within 5% and 1%;
- TopHub's board-tuned configs (docs section 9: C2, C5, C8), the tutorial schedule where
  defined, the best config's compute and memory floors (``TimingResult``).

Outputs: ``runs.jsonl`` (one line per study, with its best-so-far trajectory), ``runs.csv``,
``layers.csv``, ``summary.json``, ``search_quality.md`` and ``convergence.png``, written to
``--out`` (default ``scripts/results/local/``, git-ignored), so a partial run (a few layers,
samplers or seeds) never overwrites the published report. ``--publish`` writes them to
``scripts/results/`` instead and splices ``search_quality.md`` into ``docs/search.md``
between the ``search-quality`` markers: use it for the complete run only. Studies already published
(``scripts/results/runs.jsonl``) are reused, never run again.

Evaluations are deterministic, so they are memoized on disk (``scripts/results/cache/``,
git-ignored; one JSON-lines file per hardware x timing model x workload, keyed by the
schedule) and shared
by every seed and sampler; studies already in ``runs.jsonl`` for the same tuner source are
not run again. Studies run in ``--jobs`` processes (joblib/loky).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PUBLISHED = ROOT / "scripts" / "results"
LOCAL = PUBLISHED / "local"  # git-ignored
RESULTS = LOCAL  # where this run writes: --out, or PUBLISHED with --publish (set in main)
CACHE = PUBLISHED / "cache"
LAYERS = [f"C{i}" for i in range(2, 12)] + ["gemm.tutorial", "gemm.dense128"]
SAMPLERS = ["guided", "tpe", "random", "cmaes", "gp"]

from vtatune.autotvm import TOPHUB  # noqa: E402  (TopHub's ResNet-18 configs, pynq 1x16)

# --- workloads, cache ------------------------------------------------------------------------

def workload(label: str) -> Any:
    from vtatune.workloads import WORKLOADS

    if label.startswith("gemm."):
        return WORKLOADS["gemm"][label[5:]]
    return WORKLOADS["conv2d"][f"resnet18.{label}"]


def tuner_hash() -> str:
    """Runs are redone when the tuner's source or the timing model (its rules' source and
    the default profile's fingerprint) changes."""
    import simulator.timing
    import vtatune.tuning
    from simulator.hardware import DEFAULT
    from simulator.timing import TimingProfile

    h = hashlib.sha256(TimingProfile.for_hw(DEFAULT).fingerprint().encode())
    # the sources of the packages imported (this script may run from a copy of scripts/)
    tuning = Path(vtatune.tuning.__file__).parent
    files = sorted(tuning.rglob("*.py")) + sorted(
        Path(simulator.timing.__file__).parent.glob("*.py"))
    for f in files:
        h.update(f.read_bytes())
    return h.hexdigest()[:12]


class EvalCache:
    """Evaluations of one workload on one hardware config, memoized in a JSON-lines file
    per timing model (its profile's fingerprint): a new model never reads an old score."""

    def __init__(self, wl: Any, hw: Any) -> None:
        from simulator.timing import TimingProfile

        model = TimingProfile.for_hw(hw).fingerprint().replace(":", "-")
        self.path = CACHE / hw.target_model / model / f"{wl.key()}.jsonl"
        self.data: dict[str, dict[str, Any]] = {}
        self._read_to = 0
        self.refresh()

    def refresh(self) -> None:
        if not self.path.exists():
            return
        with self.path.open("rb") as f:
            f.seek(self._read_to)
            chunk = f.read()
        end = chunk.rfind(b"\n") + 1
        self._read_to += end
        for line in chunk[:end].splitlines():
            try:
                d = json.loads(line)
            except ValueError:
                continue
            self.data[d["k"]] = d["e"]

    @staticmethod
    def key(schedule: Any, bias: bool) -> str:
        return json.dumps([schedule.to_dict(), bool(bias)], sort_keys=True,
                          separators=(",", ":"))

    def get(self, schedule: Any, bias: bool) -> Any:
        from vtatune.scoring import Score

        k = self.key(schedule, bias)
        e = self.data.get(k)
        return Score(**e) if e is not None else None

    def put(self, schedule: Any, bias: bool, ev: Any) -> None:
        k = self.key(schedule, bias)
        if k in self.data:
            return
        self.data[k] = ev.as_dict()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = (json.dumps({"k": k, "e": self.data[k]}, separators=(",", ":")) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)


_CACHES: dict[tuple[str, str], EvalCache] = {}


def cache_for(wl: Any, hw: Any) -> EvalCache:
    k = (wl.key(), hw.target_model)
    if k not in _CACHES:
        _CACHES[k] = EvalCache(wl, hw)
    return _CACHES[k]


def install_cache() -> None:
    """Route every score() of this process (the tuner's included) through the cache."""
    import vtatune.scoring as scoring_module

    real = getattr(scoring_module, "_uncached", scoring_module.score)

    def cached(wl: Any, schedule: Any, hw: Any, *, bias: bool = False, profile: Any = None):
        if profile is not None:
            return real(wl, schedule, hw, bias=bias, profile=profile)
        c = cache_for(wl, hw)
        ev = c.get(schedule, bias)
        if ev is None:
            ev = real(wl, schedule, hw, bias=bias)
            c.put(schedule, bias, ev)
        return ev

    scoring_module._uncached = real
    scoring_module.score = cached


def evaluate_cached(wl: Any, schedule: Any, hw: Any) -> Any:
    install_cache()
    import vtatune.scoring as scoring_module

    return scoring_module.score(wl, schedule, hw)


# --- one study ---------------------------------------------------------------------------------

def run_study(label: str, hw_name: str, sampler: str, seed: int, trials: int) -> dict[str, Any]:
    import optuna

    from simulator.hardware import HardwareConfig
    from vtatune.records import read_records
    from vtatune.tuning import tune

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    install_cache()
    hw = HardwareConfig.resolve(hw_name)
    wl = workload(label)
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "run.jsonl"
        t0 = time.perf_counter()
        r = tune(wl, hw, trials=trials, sampler=sampler, seed=seed, log=log)
        wall = time.perf_counter() - t0
        ok = [rec for _, rec in read_records(log) if rec["status"] == "ok"]
    traj, best = [], math.inf
    for rec in ok:
        best = min(best, rec["cycles"])
        traj.append(int(best))
    best_rec = min(ok, key=lambda x: x["cycles"])
    return {"layer": label, "hw": hw.target_model, "sampler": sampler, "seed": seed,
            "trials": trials, "tuner": tuner_hash(), "best": int(best),
            "best_config": best_rec["config"], "best_schedule": best_rec["schedule"],
            "trajectory": traj, "asks": r.asks, "illegal": r.illegal_asks,
            "duplicate": r.duplicate_asks, "wall": round(wall, 2)}


def evaluate_all(label: str, hw_name: str, space: str, configs: list[dict[str, Any]]) -> int:
    """Simulate configs of a template (through the cache); the count simulated."""
    from search_spaces import get_template
    from simulator.hardware import HardwareConfig

    hw = HardwareConfig.resolve(hw_name)
    wl = workload(label)
    tpl = get_template(wl, hw, space=space)
    for c in configs:
        evaluate_cached(wl, tpl.to_schedule(c), hw)
    return len(configs)


# --- analysis ----------------------------------------------------------------------------------

def trials_to(traj: list[int], target: float) -> int | None:
    for i, v in enumerate(traj):
        if v <= target:
            return i + 1
    return None


def full_space_best(label: str, hw: Any) -> tuple[int, dict[str, Any]] | None:
    """The best full-space config in the cache (any config a run or sweep simulated)."""
    from search_spaces import get_template
    from vtatune.schedule import Schedule

    wl = workload(label)
    tpl = get_template(wl, hw)
    c = cache_for(wl, hw)
    c.refresh()
    best = None
    for k, e in c.data.items():
        if e["status"] != "ok":
            continue
        sched, bias = json.loads(k)
        if bias:
            continue
        if best is not None and e["cycles"] >= best[0]:
            continue
        config = tpl.from_schedule(Schedule.from_dict(sched))
        if config is not None and tpl.to_schedule(config).to_dict() == sched:
            best = (e["cycles"], config)
    return best


def floors(wl: Any, schedule: Any, hw: Any) -> tuple[int, int]:
    from simulator.timing import time_program
    from vtatune.lowering import lower

    t = time_program(lower(wl, schedule, hw).program, hw)
    return t.compute_floor, t.memory_floor


def order_polish_configs(label: str, hw: Any, runs: list[dict[str, Any]], top: int = 3):
    """Every legal loop-order combination of the ``top`` best tile shapes seen."""
    from search_spaces import get_template

    tpl = get_template(workload(label), hw)
    tile_names = [n for n in tpl.knob_names if n not in ("gemm_order", "outer_order")]
    seen, shapes = set(), []
    for r in sorted(runs, key=lambda r: r["best"]):
        shape = tuple(r["best_config"][n] for n in tile_names)
        if shape not in seen:
            seen.add(shape)
            shapes.append(shape)
        if len(shapes) >= top:
            break
    out = []
    for shape in shapes:
        base = dict(zip(tile_names, shape, strict=True))
        for g in tpl.knob("gemm_order").choices:
            for o in tpl.knob("outer_order").choices:
                c = dict(base, gemm_order=g, outer_order=o)
                if tpl.legal(c):
                    out.append(c)
    return out


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def summarize(args: argparse.Namespace, hw: Any, layers: list[str], samplers: list[str],
              runs: list[dict[str, Any]], optimum: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Per layer x sampler: best/optimum and trials-to-5%/1%; the targets."""
    out: dict[str, Any] = {"hw": hw.target_model, "trials": args.trials, "seeds": args.seeds,
                           "layers": {}, "samplers": {}}
    for s in samplers:
        t5_all, r_all = [], []
        for lab in layers:
            rs = [r for r in runs if r["layer"] == lab and r["sampler"] == s]
            if not rs:
                continue
            opt = optimum[lab]["cycles"]
            ratios = [r["best"] / opt for r in rs]
            t5 = [trials_to(r["trajectory"], 1.05 * opt) for r in rs]
            t1 = [trials_to(r["trajectory"], 1.01 * opt) for r in rs]
            cens = args.trials + 1  # "not reached" counts as trials + 1 in medians
            d = {"n": len(rs), "median_ratio": statistics.median(ratios),
                 "worst_ratio": max(ratios),
                 "median_t5": statistics.median(v or cens for v in t5),
                 "median_t1": statistics.median(v or cens for v in t1),
                 "reached5": sum(v is not None for v in t5),
                 "reached1": sum(v is not None for v in t1)}
            out["layers"].setdefault(lab, {})[s] = d
            t5_all += [v or cens for v in t5]
            r_all += ratios
        if t5_all:
            out["samplers"][s] = {"median_t5": statistics.median(t5_all),
                                  "median_ratio": statistics.median(r_all),
                                  "worst_ratio": max(r_all), "studies": len(r_all)}
    return out


def write_outputs(args: argparse.Namespace, hw: Any, layers: list[str], samplers: list[str],
                  runs: list[dict[str, Any]], optimum: dict[str, dict[str, Any]],
                  extra: dict[str, dict[str, Any]], summary: dict[str, Any]) -> str:
    import csv

    RESULTS.mkdir(parents=True, exist_ok=True)
    with (RESULTS / "runs.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["layer", "hw", "sampler", "seed", "trials", "best", "optimum",
                    "ratio", "trials_to_5pct", "trials_to_1pct", "asks", "illegal",
                    "duplicate", "wall_s"])
        for r in runs:
            opt = optimum[r["layer"]]["cycles"]
            w.writerow([r["layer"], r["hw"], r["sampler"], r["seed"], r["trials"], r["best"],
                        opt, f"{r['best'] / opt:.5f}",
                        trials_to(r["trajectory"], 1.05 * opt) or "",
                        trials_to(r["trajectory"], 1.01 * opt) or "", r["asks"],
                        r["illegal"], r["duplicate"], r["wall"]])
    default = samplers[0]
    with (RESULTS / "layers.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["layer", "optimum", "optimum_method", "configs_simulated",
                    "autotvm_optimum", "autotvm_legal", f"{default}_median", f"{default}_worst",
                    "tophub", "tutorial", "utilization", "compute_floor", "memory_floor"])
        for lab in layers:
            o, x = optimum[lab], extra[lab]
            d = summary["layers"].get(lab, {}).get(default, {})
            w.writerow([lab, o["cycles"], o["method"], o["simulated"], x.get("autotvm"),
                        x.get("autotvm_legal"), d.get("median_best"), d.get("worst_best"),
                        x.get("tophub"), x.get("tutorial"), f"{x['utilization']:.4f}",
                        x["compute_floor"], x["memory_floor"]])
    (RESULTS / "summary.json").write_text(json.dumps(
        {"summary": summary, "optimum": optimum, "extra": extra}, indent=1, default=str))

    # markdown
    lines = [f"Hardware `{hw.target_model}`; {args.trials} trials per study, seeds "
             f"0..{args.seeds - 1}; produced by `{args.command}`.", ""]
    lines.append(f"| layer | optimum (cycles) | how | AutoTVM sub-space | {default} median "
                 f"(worst) | TopHub | tutorial | util | floors C / M |")
    lines.append("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    for lab in layers:
        o, x = optimum[lab], extra[lab]
        d = summary["layers"].get(lab, {}).get(default)
        tuned = (f"{d['median_best']:,} ({pct(d['median_ratio'] - 1)}, worst "
                 f"{pct(d['worst_ratio'] - 1)})" if d else "-")
        how = ("exhaustive" if o["method"] == "exhaustive"
               else f"best known ({o['simulated']:,} simulated)")
        atv = (f"{x['autotvm']:,} (+{pct(x['autotvm'] / o['cycles'] - 1)})"
               if x.get("autotvm") else "-")
        top = (f"{x['tophub']:,} (+{pct(x['tophub'] / o['cycles'] - 1)})"
               if x.get("tophub") else "-")
        tut = (f"{x['tutorial']:,}" if x.get("tutorial") else "-")
        lines.append(f"| {lab} | {o['cycles']:,} | {how} | {atv} | {tuned} | {top} | {tut} | "
                     f"{pct(x['utilization'])} | {x['compute_floor']:,} / "
                     f"{x['memory_floor']:,} |")
    lines += ["", "| sampler | studies | median best/optimum | worst | median trials to 5% "
              "| layers: median within 1% |", "|---|---:|---:|---:|---:|---:|"]
    for s in samplers:
        a = summary["samplers"].get(s)
        if not a:
            continue
        n1 = sum(1 for lab in layers
                 if summary["layers"].get(lab, {}).get(s, {}).get("median_ratio", 9) <= 1.01)
        nl = sum(1 for lab in layers if s in summary["layers"].get(lab, {}))
        lines.append(f"| {s} | {a['studies']} | {a['median_ratio']:.4f} | "
                     f"{a['worst_ratio']:.4f} | {a['median_t5']:g} | {n1}/{nl} |")
    md = "\n".join(lines) + "\n"
    (RESULTS / "search_quality.md").write_text(md)
    return md


def plot(layers: list[str], samplers: list[str], runs: list[dict[str, Any]],
         optimum: dict[str, dict[str, Any]], trials: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    n = len(layers)
    cols = min(4, n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3 * rows), squeeze=False)
    for ax, lab in zip(axes.flat, layers, strict=False):
        opt = optimum[lab]["cycles"]
        for s in samplers:
            rs = [r for r in runs if r["layer"] == lab and r["sampler"] == s]
            if not rs:
                continue
            m = np.full((len(rs), trials), np.nan)
            for i, r in enumerate(rs):
                t = np.array(r["trajectory"], dtype=float) / opt
                m[i, : len(t)] = t
                m[i, len(t):] = t[-1] if len(t) else np.nan
            x = np.arange(1, trials + 1)
            med = np.nanmedian(m, axis=0)
            line, = ax.plot(x, med, label=s)
            ax.fill_between(x, np.nanmin(m, axis=0), np.nanmax(m, axis=0), alpha=0.15,
                            color=line.get_color())
        ax.axhline(1.01, color="grey", lw=0.6, ls=":")
        ax.axhline(1.05, color="grey", lw=0.6, ls="--")
        ax.set_xscale("log")
        ax.set_ylim(0.99, 1.6)
        ax.set_title(lab, fontsize=9)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.supxlabel("trial (distinct legal configs simulated)")
    fig.supylabel("best so far / optimum (median, min-max over seeds)")
    fig.tight_layout()
    fig.savefig(RESULTS / "convergence.png", dpi=110)
    plt.close(fig)


def splice_readme(md: str) -> None:
    """Put the table into docs/search.md between its ``search-quality`` markers."""
    readme = ROOT / "docs" / "search.md"
    text = readme.read_text()
    begin, end = "<!-- search-quality:begin -->", "<!-- search-quality:end -->"
    if begin not in text or end not in text:
        print("docs/search.md has no search-quality markers: not updated")
        return
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    readme.write_text(head + begin + "\n" + md + end + tail)


# --- main ------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", default=",".join(LAYERS))
    ap.add_argument("--samplers", default=None,
                    help="comma list (default guided,tpe,random,cmaes, +gp if torch imports)")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--hw", default="pynq")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--long", type=int, default=0, metavar="N",
                    help="also run one N-trial guided study per layer (seed 1000) towards the "
                         "best-known optimum")
    ap.add_argument("--exhaustive-limit", type=int, default=1000)
    ap.add_argument("--out", type=Path, default=LOCAL, metavar="DIR",
                    help="where to write the outputs (default scripts/results/local/, "
                         "git-ignored)")
    ap.add_argument("--publish", action="store_true",
                    help="write scripts/results/ and docs/search.md's search-quality table "
                         "(the complete run only)")
    ap.add_argument("--no-readme", action="store_true",
                    help="with --publish: leave docs/search.md alone")
    ap.add_argument("--report-only", action="store_true",
                    help="run nothing new: summarize the studies already in runs.jsonl")
    args = ap.parse_args(argv)
    global RESULTS
    RESULTS = PUBLISHED if args.publish else args.out
    args.command = "python scripts/bench_search.py " + " ".join(argv if argv is not None
                                                                else sys.argv[1:])
    from joblib import Parallel, delayed

    from search_spaces import get_template
    from simulator.hardware import HardwareConfig
    from vtatune.schedule import from_autotvm, tutorial_schedule

    hw = HardwareConfig.resolve(args.hw)
    layers = args.layers.split(",")
    if args.samplers:
        samplers = args.samplers.split(",")
    else:
        samplers = SAMPLERS[:4]
        try:
            import torch  # noqa: F401

            samplers.append("gp")
        except ImportError:
            print("gp skipped: torch is not importable")
    install_cache()
    par = Parallel(n_jobs=args.jobs, backend="loky") if args.jobs > 1 else None

    def run_par(fn: Any, tasks: list[tuple]) -> list[Any]:
        if par is None or len(tasks) < 2:
            return [fn(*t) for t in tasks]
        return par(delayed(fn)(*t) for t in tasks)

    t_start = time.perf_counter()
    # 1. exhaustive sweeps: AutoTVM sub-space always; the full space where small
    tasks, sizes = [], {}
    for lab in layers:
        wl = workload(lab)
        for space in ("autotvm", "full"):
            tpl = get_template(wl, hw, space=space)
            n = tpl.count_legal()
            sizes[(lab, space)] = n
            if space == "full" and n > args.exhaustive_limit:
                continue
            configs = list(tpl.legal_configs())
            chunk = max(1, math.ceil(len(configs) / (2 * args.jobs)))
            for i in range(0, len(configs), chunk):
                tasks.append((lab, args.hw, space, configs[i:i + chunk]))
    print(f"[{time.perf_counter() - t_start:6.0f}s] exhaustive sweeps: {len(tasks)} chunks",
          flush=True)
    run_par(evaluate_all, [] if args.report_only else tasks)

    # 2. studies (resumable: runs.jsonl keeps finished ones for this tuner source)
    runs_path = RESULTS / "runs.jsonl"
    RESULTS.mkdir(parents=True, exist_ok=True)
    th = tuner_hash()
    done: dict[tuple, dict[str, Any]] = {}
    for path in dict.fromkeys((PUBLISHED / "runs.jsonl", runs_path)):  # published ones first
        if path.exists():
            for line in path.read_text().splitlines():
                r = json.loads(line)
                done[(r["layer"], r["hw"], r["sampler"], r["seed"], r["trials"],
                      r["tuner"])] = r
    want = [(lab, s, seed, args.trials) for s in samplers for seed in range(args.seeds)
            for lab in layers]
    if args.long:
        want += [(lab, "guided", 1000, args.long) for lab in layers]
    if args.report_only and done and not any(k[5] == th for k in done):
        # The tuner changed since the studies ran: report the newest ones, and say so.
        th = list(done)[-1][5]
        print(f"reporting studies of tuner {th} (its source has changed since they ran)",
              flush=True)
    todo = [w for w in want if (w[0], hw.target_model, w[1], w[2], w[3], th) not in done]
    if args.report_only:
        todo = []
    print(f"[{time.perf_counter() - t_start:6.0f}s] studies: {len(want)} wanted, "
          f"{len(todo)} to run", flush=True)
    batch = max(2, 2 * args.jobs)
    for i in range(0, len(todo), batch):
        chunk = todo[i:i + batch]
        for r in run_par(run_study, [(lab, args.hw, s, seed, n) for lab, s, seed, n in chunk]):
            done[(r["layer"], r["hw"], r["sampler"], r["seed"], r["trials"], r["tuner"])] = r
            with runs_path.open("a") as f:
                f.write(json.dumps(r, separators=(",", ":")) + "\n")
            print(f"[{time.perf_counter() - t_start:6.0f}s] {r['layer']:<14} {r['sampler']:<7} "
                  f"seed {r['seed']:<4} best {r['best']:>10,}  ({r['wall']:.1f} s)", flush=True)
    if args.publish:  # the published studies are today's tuner's only (whole or as it was)
        from vtatune.records import write_whole

        write_whole({runs_path: "".join(json.dumps(r, separators=(",", ":")) + "\n"
                                        for k, r in done.items() if k[5] == th).encode()})
    runs_all = [r for k, r in done.items() if k[1] == hw.target_model and k[5] == th]
    runs = [r for r in runs_all if r["trials"] == args.trials and r["layer"] in layers
            and r["sampler"] in samplers and r["seed"] < args.seeds]

    # 3. loop-order polish of the best tile shapes, TopHub, tutorial
    tasks = []
    for lab in layers:
        if sizes[(lab, "full")] > args.exhaustive_limit:
            rs = [r for r in runs_all if r["layer"] == lab]
            configs = order_polish_configs(lab, hw, rs)
            tasks.append((lab, args.hw, "full", configs))
    print(f"[{time.perf_counter() - t_start:6.0f}s] loop-order polish of the best tile shapes",
          flush=True)
    run_par(evaluate_all, tasks)

    optimum: dict[str, dict[str, Any]] = {}
    extra: dict[str, dict[str, Any]] = {}
    for lab in layers:
        wl = workload(lab)
        x: dict[str, Any] = {}
        for key, sched in (("tophub", TOPHUB.get(lab)), ("tutorial", "tutorial")):
            if sched is None:
                continue
            try:
                s = (tutorial_schedule(wl, hw) if sched == "tutorial"
                     else from_autotvm(sched, wl, hw))
                ev = evaluate_cached(wl, s, hw)
                x[key] = ev.cycles if ev.status == "ok" else None
            except Exception as exc:  # noqa: BLE001 - reported, not fatal
                x[key] = None
                x[f"{key}_error"] = str(exc)
        atpl = get_template(wl, hw, space="autotvm")
        avals = [evaluate_cached(wl, atpl.to_schedule(c), hw) for c in atpl.legal_configs()]
        aok = [e.cycles for e in avals if e.status == "ok"]
        x["autotvm"] = min(aok) if aok else None
        x["autotvm_legal"] = sizes[(lab, "autotvm")]
        best = full_space_best(lab, hw)
        assert best is not None, lab
        cycles, config = best
        tpl = get_template(wl, hw)
        n_sim = sum(1 for k in cache_for(wl, hw).data if not json.loads(k)[1])
        exhaustive = sizes[(lab, "full")] <= args.exhaustive_limit
        optimum[lab] = {"cycles": cycles, "config": config,
                        "method": "exhaustive" if exhaustive else "best known",
                        "simulated": sizes[(lab, "full")] if exhaustive else n_sim,
                        "legal": sizes[(lab, "full")]}
        cf, mf = floors(wl, tpl.to_schedule(config), hw)
        x.update(compute_floor=cf, memory_floor=mf, utilization=cf / cycles)
        extra[lab] = x
    summary = summarize(args, hw, layers, samplers, runs, optimum)
    for lab in layers:
        for s, d in summary["layers"].get(lab, {}).items():
            bests = sorted(r["best"] for r in runs if r["layer"] == lab and r["sampler"] == s)
            d["median_best"] = int(statistics.median(bests))
            d["worst_best"] = bests[-1]
    md = write_outputs(args, hw, layers, samplers, runs, optimum, extra, summary)
    plot(layers, samplers, runs, optimum, args.trials)
    if args.publish and not args.no_readme:
        splice_readme(md)
    print(md)
    print(f"[{time.perf_counter() - t_start:6.0f}s] done: {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
