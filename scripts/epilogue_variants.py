"""What tuning a task on one epilogue costs the layers that fuse another.

    python scripts/epilogue_variants.py [--network resnet18] [--hw pynq] [--jobs 2]
                                        [--tasks C2,C5] [--out scripts/results/epilogue_variants.md]

TVM v0.14 applies one record per AutoTVM key to every layer of that key, whatever epilogue
the layer fuses (ReLU or not, a residual's requantization or not), and vtatune tunes such a
task on the epilogue most of its layers fuse (``vtatune.networks``). For every task whose
layers fuse more than one epilogue, this scores every legal config of the task's template
with each epilogue (``vtatune.scoring.score``, exactly as the tuner scores) and reports the
config that is optimal for the tuned epilogue, on each epilogue, against that epilogue's own
optimum, and the layers' total (each epilogue's cycles times its layers) against the best
total any one config gives: what tuning on the total instead would gain.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHUNK = 4000


def _score_chunk(workload: Any, hw: Any, indices: list[int]) -> list[int]:
    """Cycles of the configs at ``indices`` (the template's product order); -1 if not ok."""
    from search_spaces import get_template
    from vtatune.scoring import score

    tpl = get_template(workload, hw)
    out = []
    for i in indices:
        s = score(workload, tpl.to_schedule(tpl.config_at(i)), hw)
        out.append(s.cycles if s.status == "ok" else -1)
    return out


def main() -> int:
    import joblib
    import numpy as np

    from search_spaces import get_template
    from vtatune.networks import load_network
    from vtatune.records import write_whole

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--network", default="resnet18")
    ap.add_argument("--hw", default="pynq")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--tasks", default="", help="only these tasks (names or labels, commas)")
    ap.add_argument("--out", default=str(ROOT / "scripts" / "results" / "epilogue_variants.md"))
    args = ap.parse_args()
    net = load_network(args.network, args.hw)
    tuned = {t.name: t.workload for t in net.tasks}
    variants: dict[str, Counter] = {}
    for step in net.steps:
        if step.workload is not None and step.task:
            variants.setdefault(step.task, Counter())[step.workload] += 1
    lines = [f"# {args.network} on {args.hw}: tasks whose layers fuse several epilogues", "",
             f"`python {' '.join(sys.argv)}`",
             "", "| task | epilogue (layers) | tuned | legal configs | the tuned optimum on "
             "it / its own optimum |", "|---|---|---|---:|---:|"]
    totals = []
    wanted = {t for t in args.tasks.split(",") if t}
    for task, counts in variants.items():
        if len(counts) < 2 or wanted and not {task, task.split(".")[-1]} & wanted:
            continue
        tpl = get_template(tuned[task], net.hw)
        legal = [tpl.index_of(c) for c in tpl.legal_configs()]
        cycles = {}
        for wl in counts:
            if [k.name for k in get_template(wl, net.hw).knobs] != [k.name for k in tpl.knobs]:
                raise SystemExit(f"{task}: the epilogues' templates differ")
            chunks = [legal[i:i + CHUNK] for i in range(0, len(legal), CHUNK)]
            parts = joblib.Parallel(n_jobs=args.jobs)(
                joblib.delayed(_score_chunk)(wl, net.hw, c) for c in chunks)
            c = np.array([x for p in parts for x in p], dtype=float)
            c[c < 0] = np.inf
            cycles[wl] = c
        tuned_wl = _same(tuned[task], counts)
        best_tuned = int(np.argmin(cycles[tuned_wl]))
        total = sum(n * cycles[wl] for wl, n in counts.items())
        for wl, n in counts.items():
            lines.append(f"| {task} | {wl.epilogue.describe()} ({n}) | "
                         f"{'yes' if wl == tuned_wl else ''} | {len(legal):,} | "
                         f"{_ratio(cycles[wl][best_tuned], cycles[wl].min())} |")
        totals.append((task, _ratio(total[best_tuned], total.min())))
    lines += ["", "The layers' total cycles (each epilogue's cycles times its layers) with the "
              "tuned optimum, over the best total of any one config:", ""]
    lines += [f"- {task}: {ratio}" for task, ratio in totals]
    text = "\n".join(lines) + "\n"
    write_whole({Path(args.out): text.encode()})
    print(text)
    return 0


def _ratio(cycles: float, best: float) -> str:
    """``cycles / best``, said exactly when they are equal."""
    return "1 (its optimum)" if cycles == best else f"{cycles / best:.5f}"


def _same(workload: Any, counts: Counter) -> Any:
    """The variant among ``counts`` that ``workload`` (the task's, renamed) is."""
    from dataclasses import replace

    return next(wl for wl in counts if replace(wl, name=workload.name) == workload)


if __name__ == "__main__":
    sys.exit(main())
