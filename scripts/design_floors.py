"""What bounds each best design of ``bench_design.py``: per network and board, the stock and
the best design's tuned network cycles against their floors, read from the tuning logs that
the benchmark left (nothing is tuned again).

    python scripts/design_floors.py [--name design] [--out scripts/results/design_runs]

Per task (its best ``ok`` record in the design's network log, times its multiplicity):

* compute floor: GEMM micro-op cycles plus ALU iterations (one each per cycle at best; the
  compute module runs both, one instruction at a time);
* memory floor: the busier AXI channel's bytes over the bus width (reads: inp, wgt, acc and
  uop loads plus 16 bytes per instruction; writes: stores);
* roofline: the larger of the two.

The table gives each as a share of the design's tuned cycles, and the best design's
speed-up against the ratio of the two designs' roofline sums (how far a schedule search
could move it). Reads ``scripts/results/<name>.json``; writes ``<name>_floors.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simulator.hardware import HardwareConfig  # noqa: E402
from vtatune.design import network_log, placed  # noqa: E402


def floors(network: str, hw: HardwareConfig, logdir: Path) -> dict[str, int]:
    """Network cycles and floors of ``hw``'s tuned log (best record per task)."""
    net = placed(network, hw)
    counts = {t.name: t.multiplicity for t in net.tasks if not t.skip}
    best: dict[str, dict] = {}
    for line in network_log(logdir, network, hw).read_text().splitlines():
        r = json.loads(line)
        name = r["workload"]["name"]
        if r.get("status") == "ok" and name in counts and \
                (name not in best or r["cycles"] < best[name]["cycles"]):
            best[name] = r
    bus = hw.bus_bits // 8
    total = {"cycles": 0, "gemm": 0, "alu": 0, "compute": 0, "memory": 0, "roofline": 0}
    for name, r in best.items():
        c, m = r["counters"], counts[name]
        reads = (c["inp_load_nbytes"] + c["wgt_load_nbytes"] + c["acc_load_nbytes"]
                 + c["uop_load_nbytes"] + hw.insn_bytes * r["instructions"])
        compute = c["gemm_counter"] + c["alu_counter"]
        memory = -(-max(reads, c["out_store_nbytes"]) // bus)
        total["cycles"] += m * r["cycles"]
        total["gemm"] += m * c["gemm_counter"]
        total["alu"] += m * c["alu_counter"]
        total["compute"] += m * compute
        total["memory"] += m * memory
        total["roofline"] += m * max(compute, memory)
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--name", default="design")
    ap.add_argument("--out", default=str(ROOT / "scripts" / "results" / "design_runs"))
    args = ap.parse_args()
    results = json.loads((ROOT / "scripts" / "results" / f"{args.name}.json").read_text())
    command = "python scripts/design_floors.py " + " ".join(sys.argv[1:])
    lines = [f"`{command}` (from the tuning logs of `{args.name}.json`'s run)", "",
             "| network | board | design | cycles | GEMM | ALU | compute floor (GEMM + ALU) | "
             "memory floor | roofline | speed-up | roofline ratio |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in results:
        network, board = row["network"], row["board"]
        logdir = Path(args.out) / f"{network}-{board}" / "tuning"
        got = {}
        for which in ("stock", "best"):
            text = row[which]["bitstream"]
            hw = _hardware(board, text, logdir, network)
            got[which] = floors(network, hw, logdir)
        s = got["stock"]
        for which, f in got.items():
            speed = f"{s['cycles'] / f['cycles']:.3f}x" if which == "best" else "-"
            ratio = f"{s['roofline'] / f['roofline']:.3f}x" if which == "best" else "-"
            lines.append(
                f"| {network} | {board} | {which} `{row[which]['bitstream']}` | "
                f"{f['cycles']} | {f['gemm']} | {f['alu']} | "
                f"{f['compute']} ({100 * f['compute'] / f['cycles']:.0f}%) | "
                f"{f['memory']} ({100 * f['memory'] / f['cycles']:.0f}%) | "
                f"{f['roofline']} ({100 * f['roofline'] / f['cycles']:.0f}%) | {speed} | "
                f"{ratio} |")
    out = ROOT / "scripts" / "results" / f"{args.name}_floors.md"
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def _hardware(board: str, bitstream: str, logdir: Path, network: str) -> HardwareConfig:
    """The design's configuration, from the first record of its network log."""
    path = logdir / f"{board}_{bitstream}" / f"{Path(network).stem}.jsonl"
    with path.open() as f:
        return HardwareConfig.from_dict(json.loads(f.readline())["hw"]["config"])


if __name__ == "__main__":
    sys.exit(main())
