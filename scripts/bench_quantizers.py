"""What `vtatune deploy` runs of models as onnxruntime's quantizer leaves them: per model
file, the Conv/ConvTranspose/Gemm/MatMul nodes offloaded, the share of the model's
multiply-accumulates on VTA, the VTA cycles and passes, agreement with TVM's CPU build and
with onnxruntime, top-1 (classifiers), wall time.

    python scripts/bench_quantizers.py MODEL.onnx ... [--hw pynq] [--log LOG] [--exact]
        [--seed 0] [--json OUT.jsonl] [--markdown OUT.md]

The models of issue 33 come from ``scripts/quantized_models.py`` (torchvision's ResNet-18,
ResNet-50, MobileNet-v2, transformers' BERT and ViT encoders, quantized three ways). One
seeded random input per model (an integer input, as BERT's token ids, uniform in [0, 100)).
Each model's result is printed as a markdown row as soon as it is done.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

from vtatune.records import append_json_line, write_whole

COLUMNS = ("model", "layers on VTA", "vta_mac_share", "VTA cycles", "VTA passes",
           "vs TVM (CPU)", "vs onnxruntime", "onnxruntime vs TVM", "top-1", "seconds")


def _input(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(0, 100, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def measure(path: Path, hw: str, log: str | None, exact: bool, seed: int) -> dict:
    import onnx

    from vtatune.deploy import (
        MAC_OPS,
        agreement,
        compile_model,
        model_input,
        output_step,
        reference,
    )

    proto = onnx.load(str(path))
    nodes = sum(n.op_type in MAC_OPS for n in proto.graph.node)
    _, shape, dtype = model_input(proto)
    x = _input(shape, dtype, seed)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = compile_model(proto, hw=hw, log=log, exact=exact)
        r = compiled.run(x)
    seconds = time.perf_counter() - t0
    step = output_step(proto)
    refs = {e: reference(proto, x, e) for e in ("tvm", "onnxruntime")}
    agree = {e: agreement(r.output, ref, step) for e, ref in refs.items()}
    agree["onnxruntime_vs_tvm"] = agreement(refs["onnxruntime"], refs["tvm"], step)
    layers = [c for c in r.offloaded if c.op != "add"]
    top1 = None
    if r.output.ndim == 2 and r.output.shape[1] > 1:
        top1 = bool((r.output.argmax(1) == refs["tvm"].argmax(1)).all())
    return {"model": path.name, "hw": r.hw.target_model, "nodes": nodes,
            "offloaded_layers": len(layers), "offloaded_adds": len(r.offloaded) - len(layers),
            "vta_mac_share": r.vta_mac_share, "vta_cycles": r.vta_cycles,
            "vta_passes": sum(c.passes for c in r.offloaded),
            "agreement": {e: {"exact": a.exact, "elements": a.elements,
                              "max_steps": a.max_steps} for e, a in agree.items()},
            "top1_equal_tvm": top1, "seconds": seconds,
            "cpu_reasons": sorted({c.reason for c in r.cpu_ops if c.reason})}


def row(m: dict) -> str:
    def agree(e):
        a = m["agreement"][e]
        return f"{100 * a['exact'] / a['elements']:.2f} %, <= {a['max_steps']}"

    top1 = {None: "-", True: "equal", False: "differs"}[m["top1_equal_tvm"]]
    adds = f" (+{m['offloaded_adds']} adds)" if m["offloaded_adds"] else ""
    cells = (m["model"], f"{m['offloaded_layers']}/{m['nodes']}{adds}",
             f"{100 * m['vta_mac_share']:.1f} %", f"{m['vta_cycles']:,}", str(m["vta_passes"]),
             agree("tvm"), agree("onnxruntime"), agree("onnxruntime_vs_tvm"), top1,
             f"{m['seconds']:.1f}")
    return "| " + " | ".join(cells) + " |"


def parser(doc: str) -> argparse.ArgumentParser:
    """The options this script and bench_formats.py share: model files, hardware, input
    seed, where the JSON lines and the table go."""
    p = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    p.add_argument("models", nargs="+", type=Path)
    p.add_argument("--hw", default="pynq")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", type=Path, help="append one JSON line per model")
    p.add_argument("--markdown", type=Path, help="write the table here too")
    return p


def tabulate(args: argparse.Namespace, columns: tuple[str, ...],
             measure_one: Callable[[Path], dict], row_of: Callable[[dict], str],
             notes: Callable[[dict], list[str]] = lambda m: []) -> int:
    """Each model measured in turn, its markdown row printed as soon as it is done (its
    ``notes`` below it, on stderr); its JSON line appended whole (a full disk, a kill);
    the table so far written whole to ``--markdown``: a long run leaves what it measured."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    print("\n".join(lines), flush=True)
    for path in args.models:
        m = measure_one(path)
        lines.append(row_of(m))
        print(lines[-1], flush=True)
        for note in notes(m):
            print(f"    {note}", file=sys.stderr)
        if args.json:
            append_json_line(args.json, m)
        if args.markdown:
            write_whole({args.markdown: ("\n".join(lines) + "\n").encode()})
    return 0


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__)
    p.add_argument("--log")
    p.add_argument("--exact", action="store_true")
    args = p.parse_args(argv)
    return tabulate(args, COLUMNS,
                    lambda path: measure(path, args.hw, args.log, args.exact, args.seed), row,
                    notes=lambda m: [f"CPU: {reason}" for reason in m["cpu_reasons"]])


if __name__ == "__main__":
    sys.exit(main())
