"""When merging a grouped conv's groups is worth it (``vtatune.networks.MAX_GROUP_MERGE``):
for each grouped conv of a model, the workload VTA runs with ``k`` neighbouring groups
merged into one of whole blocks (:func:`vtatune.networks.group_merge`, whatever ``k``), its
cycles with the default schedule (timing model), and the model's MACs it computes per
cycle, against the model's other VTA layers (the same default schedules).

    python scripts/group_merge_cycles.py MODEL.onnx ... [--hw pynq]

The layers are the ONNX reader's (``network``'s, deploy's placement); cycles are counts
of the timing model, independent of the machine's load. Per model, one line per grouped
conv shape (with its count), then a summary: the grouped convs' share of the model's
MACs, and of its VTA cycles if every one were merged.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from search_spaces import default_schedule
from simulator.hardware import HardwareConfig
from vtatune.networks import Layer, group_merge, load_network, place
from vtatune.scoring import score


def cycles(layer: Layer, hw: HardwareConfig, max_merge: int | None = None) -> tuple[int, int]:
    """The default schedule's cycles of ``layer`` as deploy places it (groups merged up to
    ``max_merge``), and the MACs VTA does for it; (0, 0) when it does not run."""
    wl = place(layer, hw, pad_channels=True, max_merge=max_merge)
    if isinstance(wl, str):
        return 0, 0
    ev = score(wl, default_schedule(wl, hw, bias=True), hw, bias=True)
    return (ev.cycles, wl.macs) if ev.status == "ok" else (0, 0)


def measure(path: Path, hw: HardwareConfig) -> list[str]:
    net = load_network(path, hw, placement="deploy")
    convs = [x for x in net.layers if isinstance(x, Layer) and x.operator in
             ("conv2d", "dense", "batch_matmul", "conv2d_transpose")]
    grouped = [x for x in convs if x.groups > 1]
    other = [x for x in convs if x.groups == 1]
    base = [(x, *cycles(x, hw)) for x in other]
    base_cycles = sum(c for _, c, _ in base if c)
    base_macs = sum(x.macs for x, c, _ in base if c)
    lines = [f"{path.name}: {len(grouped)} grouped convs; the other VTA layers: "
             f"{base_macs:,} MACs in {base_cycles:,} cycles "
             f"({base_macs / max(base_cycles, 1):.1f} MACs a cycle)"]
    shapes = Counter((x.in_channels, x.out_channels, x.height, x.width, x.kernel, x.stride,
                      x.groups) for x in grouped)
    merged_cycles = merged_macs = 0
    for (ci, co, h, w, kernel, stride, g), n in shapes.items():
        layer = next(x for x in grouped if (x.in_channels, x.out_channels, x.height, x.width,
                                            x.kernel, x.stride, x.groups)
                     == (ci, co, h, w, kernel, stride, g))
        k = group_merge(ci // g, co // g, hw)
        c, vta_macs = cycles(layer, hw, max_merge=k)
        merged_cycles += n * c
        merged_macs += n * layer.macs
        lines.append(f"  {n:>2} x {layer.describe()}: k={k}, {layer.macs:,} MACs, VTA does "
                     f"{vta_macs:,} in {c:,} cycles ({layer.macs / max(c, 1):.1f} of the "
                     f"model's MACs a cycle)")
    total = base_macs + merged_macs
    if grouped:
        share = merged_cycles / (merged_cycles + base_cycles)
        lines.append(f"  grouped convs: {merged_macs / total:.1%} of the MACs on VTA; merged, "
                     f"{merged_cycles:,} cycles = {share:.1%} of the VTA cycles "
                     f"(+{merged_cycles / max(base_cycles, 1):.1%} over the other layers')")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("models", nargs="+", type=Path)
    p.add_argument("--hw", default="pynq")
    args = p.parse_args(argv)
    hw = HardwareConfig.resolve(args.hw)
    for path in args.models:
        print("\n".join(measure(path, hw)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
