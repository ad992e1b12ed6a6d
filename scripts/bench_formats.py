"""Issue 39's goal, measured: models in each of onnxruntime's quantized forms (QDQ,
QOperator, dynamic) deployed as a user deploys them. Per file: deployed or refused (and
why), what the import needed, the share of the model's multiply-accumulates on VTA (and of
those the quantizer quantized, where it left layers in float), the
output against onnxruntime's (on the file as given), TVM's CPU build's and the exact
reference's, top-1 (classifiers), wall time.

    python scripts/bench_formats.py MODEL.onnx ... [--hw pynq] [--seed 0] [--inputs N]
        [--exact] [--json OUT.jsonl] [--markdown OUT.md]

The models come from ``scripts/quantized_models.py`` (``DIR/<family>.<form>.onnx``). A
seeded random input per model (integer inputs, token ids, uniform in [0, 100)). Distances:
in quantization steps of the output where it is a dequantized int8 tensor, else (a float
output: LayerNorm's, a dynamic model's) the largest absolute difference. ``--inputs N``
measures N seeded inputs per model: the row's distances are the largest over them, the
verdict is each input's (``ok`` when all are; the JSON line has each input's). The verdict
``ok`` is issue 39's: VTA within max(2 steps, TVM's distance from onnxruntime) of
onnxruntime (a float output: within TVM's distance, or 1e-5 of the output's range) or
within 1 step of the exact reference (the quantized graph in float64: ``reference(...,
"exact")``), top-1 onnxruntime's. ``--exact`` / ``--no-exact`` deploy with ``exact=True``
/ ``False`` (default: deploy's own choice, exact in one pass for a model that
normalizes). Each model's row is printed as soon as it is done.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_quantizers import _input, parser, tabulate  # noqa: E402

COLUMNS = ("model", "deployed", "import", "vta_mac_share", "VTA vs onnxruntime",
           "TVM vs onnxruntime", "VTA vs TVM", "VTA vs exact", "top-1 = onnxruntime",
           "verdict", "seconds")


def _distance(a: np.ndarray, b: np.ndarray, step: float | None) -> float:
    """Largest difference, in steps of ``step`` (rounded) or in output units."""
    d = float(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).max(initial=0))
    return float(np.rint(d / step)) if step else d


def _verdict(d: dict, step: float | None, scale: float, top1: bool | None) -> bool | None:
    """Issue 39's verdict on one input's distances ``d`` (None when a reference is
    missing)."""
    if "vta_vs_ort" not in d or "tvm_vs_ort" not in d:
        return None
    if step:
        within = (d["vta_vs_ort"] <= max(2, d["tvm_vs_ort"])
                  or d.get("vta_vs_exact", 2) <= 1)
    else:
        within = d["vta_vs_ort"] <= max(d["tvm_vs_ort"], 1e-5 * scale)
    return within and top1 is not False


def measure(path: Path, hw: str, seed: int, exact: bool | None = None, inputs: int = 1
            ) -> dict:
    import onnx

    from vtatune.deploy import (
        DeployError,
        compile_model,
        model_input,
        output_step,
        references,
    )

    proto = onnx.load(str(path))
    _, shape, dtype = model_input(proto)
    xs = [_input(shape, dtype, seed + i) for i in range(inputs)]
    m: dict = {"model": path.name, "hw": hw, "exact": exact, "inputs": inputs}
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled = compile_model(proto, hw=hw, exact=exact)
            runs = [compiled.run(x) for x in xs]
    except DeployError as exc:
        m.update(deployed=False, refused=str(exc), seconds=time.perf_counter() - t0)
        return m
    except Exception as exc:  # noqa: BLE001  (a bug: recorded, the next model goes on)
        m.update(deployed=False, error=f"{type(exc).__name__}: {exc}",
                 seconds=time.perf_counter() - t0)
        return m
    seconds = time.perf_counter() - t0
    try:
        step = output_step(proto)
    except DeployError:
        step = None
    refs = {}
    for engine in ("onnxruntime", "tvm", "exact"):
        try:
            refs[engine] = references(proto, xs, engine)
        except Exception as exc:  # noqa: BLE001  (onnxruntime cannot run some exports)
            m[f"{engine}_failed"] = str(exc).strip().splitlines()[0]
    r = runs[0]
    m.update(deployed=True, prepared=list(compiled.prepared), vta_mac_share=r.vta_mac_share,
             float_macs=r.float_macs, vta_quantized_share=r.vta_quantized_share,
             vta_cycles=r.vta_cycles, offloaded=len(r.offloaded), step=step, seconds=seconds,
             cpu_reasons=sorted({c.reason for c in r.cpu_ops if c.reason}))
    pairs = {"vta_vs_ort": ("vta", "onnxruntime"), "vta_vs_tvm": ("vta", "tvm"),
             "tvm_vs_ort": ("tvm", "onnxruntime"), "vta_vs_exact": ("vta", "exact"),
             "tvm_vs_exact": ("tvm", "exact")}
    per_input = []
    for i, run in enumerate(runs):
        outs = {"vta": run.output, **{k: v[i] for k, v in refs.items()}}
        d = {key: _distance(outs[a], outs[b], step) for key, (a, b) in pairs.items()
             if a in outs and b in outs}
        ort = outs.get("onnxruntime")
        top1 = None
        if ort is not None and run.output.ndim == 2 and run.output.shape[1] > 1:
            top1 = bool((run.output.argmax(1) == ort.argmax(1)).all())
        scale = float(np.abs(ort).max(initial=0)) if ort is not None else 0.0
        per_input.append({**d, "top1": top1, "ok": _verdict(d, step, scale, top1)})
    for key in pairs:
        if all(key in d for d in per_input):
            m[key] = max(d[key] for d in per_input)
    if any(d["top1"] is not None for d in per_input):
        m["top1"] = all(d["top1"] is not False for d in per_input)
    verdicts = [d["ok"] for d in per_input]
    if None not in verdicts:
        m["ok"] = all(verdicts)
        m["ok_inputs"] = sum(verdicts)
    if inputs > 1:
        m["per_input"] = per_input
    return m


def row(m: dict) -> str:
    if not m["deployed"]:
        why = m.get("refused") or m.get("error", "")
        cells = (m["model"], "no: " + why.replace("|", "/"), "-", "-", "-", "-", "-", "-",
                 "-", "refused" if "refused" in m else "ERROR", f"{m['seconds']:.1f}")
        return "| " + " | ".join(cells) + " |"

    def dist(key: str) -> str:
        if key not in m:
            return "-"
        v = m[key]
        return f"{v:.0f} steps" if m["step"] else f"{v:.3g}"

    top1 = {None: "-", True: "yes", False: "NO"}[m.get("top1")]
    verdict = {None: "-", True: "ok", False: "NOT ok"}[m.get("ok")]
    if m.get("inputs", 1) > 1 and "ok_inputs" in m:
        verdict += f" ({m['ok_inputs']}/{m['inputs']} inputs ok)"
    if "onnxruntime_failed" in m:
        verdict = "onnxruntime cannot run it"
    cells = (m["model"], f"yes ({m['offloaded']} on VTA)",
             "; ".join(m["prepared"]) or "as given", f"{100 * m['vta_mac_share']:.1f} %"
             + (f" ({100 * m['vta_quantized_share']:.1f} % of the quantized)"
                if m.get("float_macs") else ""),
             dist("vta_vs_ort"), dist("tvm_vs_ort"), dist("vta_vs_tvm"), dist("vta_vs_exact"),
             top1, verdict,
             f"{m['seconds']:.1f}")
    return "| " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--exact", action=argparse.BooleanOptionalAction, default=None,
                   help="deploy with exact=True (--no-exact: False); default: deploy's")
    p.add_argument("--inputs", type=int, default=1,
                   help="inputs per model (seeds SEED, SEED+1, ...): the distances are the "
                        "largest over them, the verdict each input's")
    args = p.parse_args(argv)
    return tabulate(args, COLUMNS,
                    lambda path: measure(path, args.hw, args.seed, args.exact, args.inputs),
                    row)


if __name__ == "__main__":
    sys.exit(main())
