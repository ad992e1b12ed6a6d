"""One placement, one count, and how far each engine is from exact arithmetic, on real
exports (issues 39.4/39.5, 41.4/41.6).

    python scripts/placement_agreement.py MODEL.onnx ... [--hw pynq] [--trials 1]
        [--out scripts/results/placement_agreement.jsonl]

For each quantized ONNX model: ``network``'s placement (what ``network --list`` prints:
:func:`vtatune.deploy.placed_network`) against ``deploy``'s report, layer for layer (the
same comparison as ``tests/networks/test_placement_agreement.py``); both shares of the
model's multiply-accumulates on VTA; a log tuned by ``network`` (``--trials`` per task) and
the VTA cycles ``network`` counts with it against the cycles deploy runs with it; and the
output (one seeded random input) against TVM's CPU build, onnxruntime and exact arithmetic
(``--check``'s three references), in quantization steps, with the references against each
other. A model deploy refuses is one line saying why. One JSON object per model is
appended to ``--out`` (whole lines), and a line per model is printed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import warnings
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vtatune.builds import FallbackWarning  # noqa: E402
from vtatune.deploy import (  # noqa: E402
    DeployError,
    agreement,
    compile_model,
    load_model,
    output_step,
    placed_network,
    random_input,
    references,
)
from vtatune.networks import network_from_logs, tune_network  # noqa: E402


def _verdicts_network(net):
    cpu = {c.name for c in net.cpu}
    tasks = {n: t for t in net.tasks for n in t.layers}
    vta = Counter((x.operator, replace(tasks[x.name].workload, name="").describe()
                   .split(", epilogue")[0].split(" ", 1)[1])
                  for x in net.layers if x.name not in cpu and x.name in tasks)
    return vta, Counter(c.reason for c in net.cpu)


def _verdicts_deploy(result):
    vta = Counter()
    for c in result.offloaded:
        text = c.workload.split(", epilogue")[0].split(" (")[0]
        if c.op == "batch_matmul":
            text = text.split(" ", 1)[1]
        vta[(c.op, text.split(" ", 1)[1])] += 1
    layers = ("nn.conv2d", "nn.conv2d_transpose", "matmul", "add")
    cpu = Counter(c.reason for c in result.cpu_ops if c.reason and c.op in layers)
    return vta, cpu


def measure(path: str, hw: str, trials: int) -> dict:
    out: dict = {"model": Path(path).name, "hw": hw}
    t0 = time.perf_counter()
    try:
        net = placed_network(path, hw)
    except DeployError as exc:
        out["refused"] = str(exc)
        return out
    out["network_seconds"] = round(time.perf_counter() - t0, 2)
    out["network_share"] = net.vta_mac_share
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore", FallbackWarning)
        log = str(Path(tmp) / "log.jsonl")
        counted = 0
        if net.tunable:  # no VTA layer: nothing to tune or count
            tune_network(net, trials_per_task=trials, seed=0, log=log)
            counted = network_from_logs(net, [log]).vta_cycles
        compiled = compile_model(path, hw=hw, log=log if net.tunable else None)
        x = random_input(compiled.input_shape, compiled.input_dtype, 0)
        result = compiled.run(x)
    out.update(model_macs=result.model_macs, vta_macs=result.vta_macs,
               deploy_share=result.vta_mac_share, network_cycles=counted,
               deploy_cycles=result.vta_cycles,
               passes=sum(c.passes for c in result.offloaded), layers=len(result.offloaded))
    nv, dv = _verdicts_network(net), _verdicts_deploy(result)
    out["same_vta_layers"] = nv[0] == dv[0]
    out["same_cpu_reasons"] = nv[1] == dv[1]
    proto, _ = load_model(path)
    try:
        step = output_step(proto)
    except DeployError as exc:
        out["check"] = str(exc)
        return out
    refs = {}
    for engine in ("tvm", "onnxruntime", "exact"):
        try:
            refs[engine] = references(proto, x[None], engine)[0]
        except Exception as exc:  # noqa: BLE001 - a reference that cannot run: its line
            lines = [s for s in str(exc).splitlines() if s.strip()]
            refs[engine] = lines[0] if lines else type(exc).__name__
    pairs = [("vta", e) for e in refs] + [("tvm", "onnxruntime"), ("tvm", "exact"),
                                          ("onnxruntime", "exact")]
    arrays = {"vta": result.output, **refs}
    out["check"] = {}
    for a, b in pairs:
        if isinstance(arrays[a], str) or isinstance(arrays[b], str):
            out["check"][f"{a}~{b}"] = arrays[a] if isinstance(arrays[a], str) else arrays[b]
            continue
        ag = agreement(arrays[a], np.asarray(arrays[b], np.float32), step)
        out["check"][f"{a}~{b}"] = {"exact": round(ag.share, 4), "max_steps": ag.max_steps}
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="+")
    p.add_argument("--hw", default="pynq")
    p.add_argument("--trials", type=int, default=1)
    p.add_argument("--out", default=str(ROOT / "scripts/results/placement_agreement.jsonl"))
    args = p.parse_args()
    for path in args.models:
        t0 = time.perf_counter()
        d = measure(path, args.hw, args.trials)
        d["seconds"] = round(time.perf_counter() - t0, 1)
        with open(args.out, "a", encoding="utf-8") as f:
            f.write(json.dumps(d) + "\n")
        print(json.dumps(d), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
