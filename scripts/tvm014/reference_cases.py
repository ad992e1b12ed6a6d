"""The tests' TVM v0.14 references from ``deploy.py``'s outputs.

    python scripts/tvm014/reference_cases.py OUT_DIR

``deploy.py --out OUT_DIR/<model>-<target>-<log label>.json`` (one per case) writes the whole
record of a deployment: every fused function with its Relay ops, device, shapes, AutoTVM
config and fsim counters, and the instruction streams beside it. The tests need only what
they compare: per case fsim's whole-run counters and, in execution order, each VTA
function's Relay ops, counters and whether AutoTVM fell back for it. This keeps those, in
``tests/networks/data/tvm014_<model>.json`` (``cases`` keyed ``<target>-<log label>``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
DATA = ROOT / "tests" / "networks" / "data"
ABOUT = ("Counters TVM v0.14's fsim printed deploying torchvision {model} (random weights, "
         "torch.manual_seed(0)) quantized by relay.quantize (global_scale 8.0, "
         "skip_conv_layers [0]) and graph_packed as VTA's deploy tutorial, built with TVM "
         "v0.14 as scripts/tvm014/build_tvm.sh does, by scripts/tvm014/deploy.py "
         "(tests/networks/data/README.md). 'vtatunelog': the conv schedules of "
         "resnet18-f4385aa.autotvm.log through autotvm.apply_history_best; 'fallback': no "
         "log (TVM's fallback configs). Per case: fsim's whole-run counters and, in "
         "execution order, each VTA function's relay ops, counters and (convs) whether "
         "AutoTVM fell back to its default config.")


def case_of(deployed: dict) -> dict:
    """What the tests compare of one ``deploy.py`` output."""
    if not deployed["sum_equals_whole"]:
        raise ValueError("the functions' counters do not sum to the whole run's")
    return {"whole_network_fsim": deployed["whole_network_fsim"],
            "vta_nodes": [{"relay_ops": n["relay_ops"], "counters": n["counters"],
                           # whether AutoTVM fell back for the conv (adds: not asked)
                           **({"autotvm_fallback": n["autotvm_fallback"]}
                              if n.get("autotvm_fallback") is not None else {})}
                          for n in deployed["nodes"] if n["device"] == "VTA"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir", type=Path, help="where deploy.py wrote its JSON files")
    args = ap.parse_args()
    by_model: dict[str, dict[str, dict]] = {}
    for path in sorted(args.out_dir.glob("*-*-*.json")):
        model, target, label = path.stem.split("-", 2)
        if label not in ("vtatunelog", "fallback"):
            continue
        by_model.setdefault(model, {})[f"{target}-{label}"] = case_of(
            json.loads(path.read_text()))
    if not by_model:
        print(f"no <model>-<target>-<log>.json in {args.out_dir}", file=sys.stderr)
        return 2
    from vtatune.records import write_whole

    for model, cases in by_model.items():
        out = DATA / f"tvm014_{model}.json"
        text = json.dumps({"about": ABOUT.format(model=model), "cases": cases}, indent=1)
        write_whole({out: (text + "\n").encode()})
        print(f"wrote {out}: {', '.join(cases)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
