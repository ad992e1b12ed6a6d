"""How close deployed outputs are to TVM's CPU build and onnxruntime's: the four small
models of the deploy tests (a conv chain with a residual add, a grouped conv, a conv then a
transposed conv, a two-layer MLP), 32 channels wide, quantized by onnxruntime with
power-of-two or calibrated float scales, on several VTA configurations, with VTA's
requantization (default) and with ``exact`` (the CPU's wherever VTA's half-up rounding
could differ).

    python scripts/deploy_agreement.py [--inputs 8] [--out FILE.json]

Prints one row per model x scales x hardware x mode: layers offloaded, VTA passes, and
against each reference the share of exact output elements over ``--inputs`` seeded random
inputs and the largest difference in quantization steps.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from simulator.hardware import HardwareConfig  # noqa: E402
from vtatune.builds import FallbackWarning  # noqa: E402
from vtatune.deploy import (  # noqa: E402
    agreement,
    compile_model,
    models,
    output_step,
    quantize,
    reference,
)

HARDWARE = {
    "pynq": HardwareConfig.resolve("pynq"),
    "sim": HardwareConfig.resolve("sim"),
    "1x32x16": HardwareConfig(target="ultra96", log_block_in=5, log_block_out=4,
                              log_inp_buff_size=16, log_wgt_buff_size=19),
    "1x16x32": HardwareConfig(target="ultra96", log_block_in=4, log_block_out=5),
}
#: The deploy tests' models, 32 channels wide (whole blocks of 32 too).
MODELS = {
    "conv_residual": lambda: models.conv_residual(channels=32),
    "grouped_conv": lambda: models.grouped_conv(channels=64, groups=2),
    "conv_transposed": lambda: models.transposed_conv(32, 32, conv_first=True),
    "mlp": lambda: models.mlp(features=64, hidden=32, classes=32),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--inputs", type=int, default=8)
    ap.add_argument("--out", metavar="FILE.json")
    args = ap.parse_args()
    warnings.simplefilter("ignore", FallbackWarning)
    rows = []
    print(f"{'model':16} {'scales':6} {'hw':8} {'mode':7} {'VTA':>3} {'passes':>6}  "
          f"{'vs TVM (CPU)':>22}  {'vs onnxruntime':>22}")
    for name, build in MODELS.items():
        float_model = build()
        shape = [d.dim_value for d in float_model.graph.input[0].type.tensor_type.shape.dim]
        rng = np.random.default_rng(0)
        calibration = rng.standard_normal((8, *shape)).astype(np.float32)
        inputs = [rng.standard_normal(shape).astype(np.float32) for _ in range(args.inputs)]
        for scales in ("pow2", "float"):
            model = quantize(float_model, calibration, power_of_two=scales == "pow2")
            step = output_step(model)
            refs = {e: [reference(model, x, e) for x in inputs] for e in ("tvm", "onnxruntime")}
            for hw_name, hw in HARDWARE.items():
                for exact in (False, True):
                    compiled = compile_model(model, hw=hw, exact=exact)
                    results = [compiled.run(x) for x in inputs]
                    got = np.stack([r.output for r in results])
                    row = {"model": name, "scales": scales, "hw": hw_name,
                           "mode": "exact" if exact else "default",
                           "offloaded": len(results[0].offloaded),
                           "passes": sum(c.passes for c in results[0].offloaded)}
                    for e, outs in refs.items():
                        a = agreement(got, np.stack(outs), step)
                        row[e] = {"exact": a.exact, "elements": a.elements,
                                  "max_steps": a.max_steps}
                    rows.append(row)
                    cells = [f"{row[e]['exact']}/{row[e]['elements']} ({100 * row[e]['exact'] / row[e]['elements']:.2f} %) <={row[e]['max_steps']}"  # noqa: E501
                             for e in ("tvm", "onnxruntime")]
                    print(f"{name:16} {scales:6} {hw_name:8} {row['mode']:7} "
                          f"{row['offloaded']:>3} {row['passes']:>6}  {cells[0]:>22}  "
                          f"{cells[1]:>22}", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
