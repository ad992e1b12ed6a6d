"""Issue 39's goal "``network --list`` share equals deploy's share": for every file
``scripts/bench_formats.py`` deployed (its JSON lines), run ``python -m vtatune network FILE
--list --json`` and compare its ``vta_mac_share`` and VTA layer count with deploy's (and its
``vta_quantized_share`` where the quantizer left layers in float).

    python scripts/network_share_forms.py [FILE ...] [--results scripts/results/formats.jsonl]
        [--models /work/models]

``FILE``: only these of the results' files (their names, e.g. ``resnet18.default.onnx``).

Prints one line per file, ``EQUAL`` or ``DIFF``, and a summary."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", type=Path, default=ROOT / "scripts/results/formats.jsonl")
    ap.add_argument("--models", type=Path, default=Path("/work/models"))
    ap.add_argument("files", nargs="*", help="only these files of the results")
    args = ap.parse_args()
    equal = total = 0
    for line in args.results.read_text().splitlines():
        d = json.loads(line)
        if not d.get("deployed") or (args.files and d["model"] not in args.files):
            continue
        out = subprocess.run([sys.executable, "-m", "vtatune", "network",
                              str(args.models / d["model"]), "--list", "--json"],
                             capture_output=True, text=True, timeout=900)
        try:
            n = json.loads(out.stdout)
            share = n["vta_mac_share"]
            layers = sum(1 for x in n.get("layers", []) if x.get("on") == "vta")
            quantized = n.get("vta_quantized_share") if d.get("float_macs") else None
        except (ValueError, KeyError):
            share, layers = None, (out.stderr.strip().splitlines() or ["?"])[-1]
            quantized = None
        same = share is not None and abs(share - d["vta_mac_share"]) < 1e-12 \
            and layers == d["offloaded"] and (not d.get("float_macs") or (
                quantized is not None and abs(quantized - d["vta_quantized_share"]) < 1e-12))
        if d.get("float_macs"):
            share = f"{share} ({quantized} of the quantized)"
            d["vta_mac_share"] = f"{d['vta_mac_share']} ({d['vta_quantized_share']} of the " \
                "quantized)"
        total += 1
        equal += same
        print(f"{d['model']}: network {share} ({layers} VTA layers), deploy "
              f"{d['vta_mac_share']} ({d['offloaded']}) {'EQUAL' if same else 'DIFF'}",
              flush=True)
    print(f"{equal} of {total} files: network's share and VTA layers equal deploy's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
