"""How closely the timing model follows VTA's RTL, record by record.

Runs every record of the tsim reference (``tsim_reference.jsonl`` and
``tsim_micro/*.bin``: cycles VTA's Chisel RTL counted under Verilator, launch to FINISH,
against tsim's simulated memory, not a board's DDR): schedules through the normal lowering,
micro-benchmarks through their program files, and prints per workload and bias setting and
overall the RTL/model ratio's median, p10, p90, min and max, the mean absolute error, the
Spearman rank correlation, whether the model's fastest schedule is the RTL's, and how many
micro-benchmarks land within 2% or 2 cycles. Then the same for the codesign reference
(``tsim_codesign_reference.jsonl``: other VTA shapes and buses, the configurations in its
``hw/``), per workload, bias and hardware, with a line per hardware configuration,
against its own goal (MAE <= 0.2%, programs of 10,000 cycles or more within 1%, the best
schedule agreeing).

The data is the repository's ``tests/data/`` (its README.md: what each file is and where it
came from); ``$VTATUNE_SHARED_DATA`` or ``--data`` name another copy.

    python scripts/bench_fidelity.py                    # tests/data in this checkout
    python scripts/bench_fidelity.py --data DIR --jobs 2
    python scripts/bench_fidelity.py --reference codesign   # only one of the two files
    python scripts/bench_fidelity.py --recorded         # the model the reference recorded
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from vtatune.errors import VtatuneError  # noqa: E402
from vtatune.fidelity import (  # noqa: E402
    CODESIGN,
    CODESIGN_GOAL,
    DATA_ENV,
    REFERENCE,
    REPO_DATA,
    TSIM_GOAL,
    compare,
    data_dir,
    format_report,
    load_reference,
    recorded,
)

DEFAULT_DATA = data_dir(ROOT)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA,
                    help=f"reference data directory (default ${DATA_ENV} or the "
                         f"repository's {REPO_DATA}: {DEFAULT_DATA})")
    ap.add_argument("--jobs", type=int, default=1, help="processes (default 1)")
    ap.add_argument("--profile", metavar="FILE.json",
                    help="timing profile overrides (fields of TimingProfile)")
    ap.add_argument("--recorded", action="store_true",
                    help="score the reference's own vtatune_cycles (the model of that time)")
    ap.add_argument("--reference", choices=("stock", "codesign", "both"), default="both",
                    help=f"score {REFERENCE} (stock), {CODESIGN} (codesign) or both (default; "
                         "the codesign file is skipped, saying so, where the data has none)")
    args = ap.parse_args(argv)
    profile = None
    if args.profile and not args.recorded:
        from simulator.timing import TimingProfile

        profile = TimingProfile.from_json(args.profile)
    files = {"stock": [(REFERENCE, TSIM_GOAL)], "codesign": [(CODESIGN, CODESIGN_GOAL)],
             "both": [(REFERENCE, TSIM_GOAL), (CODESIGN, CODESIGN_GOAL)]}[args.reference]
    for k, (name, goal) in enumerate(files):
        if k:
            print()
        if args.reference == "both" and name == CODESIGN and not (args.data / name).is_file():
            print(f"no {args.data / name}: the codesign reference is not scored")
            continue
        try:
            records = load_reference(args.data, name)
        except VtatuneError as exc:
            print(f"bench_fidelity: error: {exc}", file=sys.stderr)
            return 2
        t0 = time.perf_counter()
        if args.recorded:
            scored = recorded(records)
            what = "the reference's recorded vtatune_cycles"
            if not scored:
                print(f"{args.data / name}: no record has vtatune_cycles")
                continue
        else:
            scored = compare(records, args.data, profile, jobs=args.jobs)
            what = f"the model ({profile.fingerprint() if profile else 'board profiles'})"
        print(f"{len(scored)} records of {args.data / name} against {what}, "
              f"{time.perf_counter() - t0:.1f} s")
        print(format_report(scored, goal))
    return 0


if __name__ == "__main__":
    sys.exit(main())
