"""Two runs of ``scripts/bench_search.py`` side by side (before / after a change of the
tuner): per layer, the worst seed's best of the first 10, 20, 50 and 200 trials over a
common reference, and the trials until within 1%.

    python scripts/compare_search_runs.py BEFORE/runs.jsonl AFTER/runs.jsonl [--sampler guided]

The reference of a layer is the lowest optimum of the two runs (``layers.csv`` next to each
``runs.jsonl``: exhaustive for the GEMMs, the best known for the conv layers, which
includes every study's best), so neither run is judged against its own best alone.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

AT = (10, 20, 50, 200)


def _runs(path: Path, sampler: str) -> dict[tuple[str, int], list[int]]:
    out = {}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if r["sampler"] == sampler:
            out[(r["layer"], r["seed"])] = r["trajectory"]
    return out


def _at(traj: list[int], k: int) -> int:
    return traj[min(k, len(traj)) - 1]


def _to_within(traj: list[int], ref: int, tol: float) -> int:
    """Trials until within ``tol`` of ``ref`` (one more than the study's length if never)."""
    return next((i + 1 for i, c in enumerate(traj) if c <= ref * (1 + tol)), len(traj) + 1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--sampler", default="guided")
    args = ap.parse_args(argv)
    before, after = _runs(args.before, args.sampler), _runs(args.after, args.sampler)
    known: dict[str, int] = {}
    for runs_path in (args.before, args.after):
        with (runs_path.parent / "layers.csv").open() as f:
            for row in csv.DictReader(f):
                opt = int(float(row["optimum"]))
                known[row["layer"]] = min(opt, known.get(row["layer"], opt))
    layers = sorted({lay for lay, _ in before} & {lay for lay, _ in after},
                    key=lambda name: (not name.startswith("C"), len(name), name))
    print("| layer | reference | " + " | ".join(f"best@{k} before / after" for k in AT)
          + " | trials to 1% (median) before / after |")
    print("|---|---:|" + "---:|" * (len(AT) + 1))
    worse = []
    for lay in layers:
        trajs = {name: {s: t for (la, s), t in runs.items() if la == lay}
                 for name, runs in (("before", before), ("after", after))}
        ref = min([known.get(lay, 1 << 62)]
                  + [t[-1] for runs in trajs.values() for t in runs.values()])
        cells = []
        for k in AT:
            b, a = (max(_at(t, k) for t in trajs[n].values()) / ref for n in ("before",
                                                                                "after"))
            cells.append(f"{100 * (b - 1):.2f}% / {100 * (a - 1):.2f}%")
            if a > b:
                worse.append(f"{lay} best@{k}: {100 * (b - 1):.2f}% -> {100 * (a - 1):.2f}%")
        med = [sorted(_to_within(t, ref, 0.01) for t in trajs[n].values())
               for n in ("before", "after")]
        cells.append(" / ".join(str(m[len(m) // 2]) for m in med))
        print(f"| {lay} | {ref:,} | " + " | ".join(cells) + " |")
    print("\nworse after (worst seed):", "; ".join(worse) if worse else "none")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
