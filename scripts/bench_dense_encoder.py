"""A DistilBERT-style encoder layer (seq 128, hidden 256, 4 heads, FFN 1024:
``vtatune.deploy.models.encoder_block``) deployed with default flags (no log, no tuning) on
pynq, quantized with power-of-two scales: the VTA cycles of each offloaded layer and in all
(the timing model's, load-independent) and the deploy's wall time (load-dependent: the load
average is printed beside it).

    python scripts/bench_dense_encoder.py [--hw pynq] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from vtatune.deploy import deploy, models, quantize  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hw", default="pynq")
    parser.add_argument("--out", default=str(ROOT / "scripts/results/bench_dense_encoder.txt"))
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    shape = (1, 128, 256)
    model = quantize(models.encoder_block(seq=128, hidden=256, heads=4, intermediate=1024),
                     rng.standard_normal((4, *shape)).astype(np.float32))
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = deploy(model, hw=args.hw, input=rng.standard_normal(shape).astype(np.float32))
    wall = time.perf_counter() - t0
    lines = [f"{c.layer:<16} {c.op:<14} {c.cycles:>12,}  {c.schedule}" for c in r.offloaded]
    lines.append(f"VTA cycles {r.vta_cycles:,}; deploy {wall:.1f} s wall "
                 f"(load average {os.getloadavg()[0]:.1f})")
    text = "\n".join(lines) + "\n"
    Path(args.out).write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
