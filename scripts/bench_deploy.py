"""How long deploying an int8 ResNet-18 with today's TVM takes, and how close its output is
to TVM's CPU build and onnxruntime's: import, partition, build (codegen + relax.build) and
one inference, with the shipped tuned log, on the functional VTA.

    python scripts/bench_deploy.py [--hw pynq] [--log logs/resnet18-pynq.jsonl]
        [--calibration 4] [--float-scales] [--exact] [--torch] [--inferences N]
        [--out FILE.json] [--bundle DIR]
    python scripts/bench_deploy.py --load DIR [--processes 5]
    python scripts/bench_deploy.py --serve DIR [DIR ...] [--processes 3] [--inputs 100]
        [--out FILE.json]

The model: ResNet-18 v1 (torchvision's shapes) built with onnx.helper and seeded random
weights (vtatune.deploy.models.resnet18), or torchvision's own resnet18 exported when
``--torch`` is given and torch is installed; quantized by onnxruntime's quantize_static in
QDQ format on ``--calibration`` seeded random inputs, with power-of-two scales (what VTA
requantizes by a shift) unless ``--float-scales``. Quantizing is preparation, timed apart.

Prints the seconds of each step and of the whole (the target: under 60 s), the functional
VTA's share of it (the offloaded programs' functional runs and their timing, measured by a
Device that times the simulated one), the VTA cycles and milliseconds at the board's clock,
and the output's agreement with TVM's CPU build and with onnxruntime (share of exact
elements, largest difference in quantization steps); ``--exact`` deploys a second time
with the requantization on the CPU wherever VTA's half-up rounding could differ (VTA runs
such layers once per accumulator byte) and reports that run too. ``--inferences N`` runs the
built model N more times, on N other seeded random inputs, and prints the seconds of one
inference (least, median, mean; the first inference of a build also decodes each VTA program
once) and the functional VTA's share. The machine is shared: the load average is printed
beside the figures.

``--bundle DIR`` saves the (default) build as a bundle in DIR and reports its size (in all
and by part) and, from three fresh processes each, the seconds ``vtatune.deploy.load``
takes (checksums, programs decoded, constants uploaded, regions registered, TVM's VM
created), the process's whole start (Python, imports, load) and whether the loaded model's
output equals the building process's. ``--load DIR`` only times loading the bundle DIR (no
build, no run) in ``--processes`` fresh processes: the runtime's imports and ``load``.

``--serve DIR ...`` times bundles serving (issue 40, item 4), each figure with the load
average beside it and the CPU seconds (which depend less on the load) beside the wall ones:
in ``--processes`` fresh processes the runtime's imports, ``load()`` and the first three
inferences (the first reads each program decoded; the others run them); one input from the
command line (``python -m vtatune.deploy.runtime DIR --input x.npy``, and ``python -m
vtatune run``), the whole process; and ``--inputs`` seeded random inputs (an .npy of N x the
input's shape) through one ``python -m vtatune run`` process. ``--tree DIR``: the fresh
processes run another checkout's vtatune (a figure from before a change; ``--inputs 0``
when its ``run`` takes one input).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from simulator.hardware import HardwareConfig  # noqa: E402
from vtatune.deploy import (  # noqa: E402
    SimulatedDevice,
    agreement,
    compile_model,
    models,
    output_step,
    quantize,
    reference,
)


class TimedDevice(SimulatedDevice):
    """The simulated VTA, with the wall time its runs take."""

    def __init__(self, hw: HardwareConfig) -> None:
        super().__init__(hw)
        self.seconds = 0.0

    def run(self, program, tensors):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        try:
            return super().run(program, tensors)
        finally:
            self.seconds += time.perf_counter() - t0


def torchvision_resnet18(path: Path) -> object:
    import onnx
    import torch
    import torchvision

    torch.manual_seed(0)
    net = torchvision.models.resnet18(weights=None).eval()
    torch.onnx.export(net, torch.randn(1, 3, 224, 224), str(path), opset_version=17,
                      input_names=["x"], output_names=["y"], dynamo=False)
    return onnx.load(str(path))


def one_deploy(model, x, hw, log, exact):  # type: ignore[no-untyped-def]
    device = TimedDevice(hw)
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = compile_model(model, hw=hw, log=log, exact=exact, device=device)
        result = compiled.run(x)
    total = time.perf_counter() - t0
    return compiled, result, total, device.seconds, [str(w.message) for w in caught]


def inferences(compiled, device, n, rng):  # type: ignore[no-untyped-def]
    """Seconds of ``n`` inferences of a built model on seeded random inputs (each: in all,
    functional VTA)."""
    runs = []
    for _ in range(n):
        x = rng.standard_normal(compiled.input_shape).astype(np.float32)
        device.seconds = 0.0
        t0 = time.perf_counter()
        compiled.run(x)
        runs.append((time.perf_counter() - t0, device.seconds))
    return runs


#: Run in a fresh process: load the bundle, run it once on the input, compare.
_LOAD = """
import sys, time
t0 = time.perf_counter()
import numpy as np
from vtatune.deploy.runtime import load
t1 = time.perf_counter()
model = load(sys.argv[1])
t2 = time.perf_counter()
same = bool(np.array_equal(model.run(np.load(sys.argv[2])).output, np.load(sys.argv[3])))
print(t1 - t0, t2 - t1, same)
"""


#: Run in a fresh process: import the runtime, load the bundle; the seconds of each.
_LOAD_ONLY = """
import sys, time
t0 = time.perf_counter()
from vtatune.deploy.runtime import load
t1 = time.perf_counter()
load(sys.argv[1])
print(t1 - t0, time.perf_counter() - t1)
"""


def load_only(path: Path, processes: int) -> int:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    print(f"loading {path} in {processes} fresh processes; load average "
          f"{os.getloadavg()[0]:.1f}")
    for _ in range(processes):
        out = subprocess.run([sys.executable, "-c", _LOAD_ONLY, str(path)], capture_output=True,
                             text=True, check=True, env=env).stdout.split()
        print(f"  runtime imports {float(out[0]):.3f} s, load {float(out[1]):.3f} s")
    return 0


def bundle_figures(compiled, result, x, path: Path, processes: int = 3) -> dict:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    compiled.save(path)
    save_s = time.perf_counter() - t0
    parts: dict[str, int] = {}
    for f in path.rglob("*"):
        if f.is_file():
            part = f.relative_to(path).parts[0]
            parts[part] = parts.get(part, 0) + f.stat().st_size
    np.save(path.parent / "bench_x.npy", x)
    np.save(path.parent / "bench_y.npy", result.output)
    loads = []
    for _ in range(processes):
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-c", _LOAD, str(path),
                              str(path.parent / "bench_x.npy"), str(path.parent / "bench_y.npy")],
                             capture_output=True, text=True, check=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout.split()
        loads.append({"import_seconds": float(out[0]), "load_seconds": float(out[1]),
                      "process_seconds": time.perf_counter() - t0, "same_output": out[2] == "True"})
    return {"bytes": sum(parts.values()), "bytes_by_part": parts, "save_seconds": save_s,
            "fresh_processes": loads}


#: Run in a fresh process: the runtime's imports, load() and three inferences, each timed
#: in wall and CPU seconds (JSON).
_SERVE = """
import json, sys, time
w, c = [time.perf_counter()], [time.process_time()]
def lap():
    w.append(time.perf_counter()); c.append(time.process_time())
from vtatune.deploy.runtime import load
lap()
model = load(sys.argv[1])
lap()
for seed in range(3):
    model.run(None, seed)
    lap()
names = ["imports", "load", "first", "second", "third"]
print(json.dumps({n: {"wall": w[i + 1] - w[i], "cpu": c[i + 1] - c[i]}
                  for i, n in enumerate(names)} | {"numba": "numba" in sys.modules}))
"""


def _timed(argv: list[str], tree: Path = ROOT) -> tuple[float, float, str]:
    """Wall and CPU seconds (its own and its children's) of a fresh process running
    ``tree``'s vtatune, and its stdout."""
    before = os.times()
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, check=True, cwd=tree,
                          env={**os.environ, "PYTHONPATH": str(tree)})  # cwd: first on sys.path
    wall = time.perf_counter() - t0
    after = os.times()
    return wall, (after.children_user - before.children_user
                  + after.children_system - before.children_system), proc.stdout


def serve(bundles: list[Path], processes: int, n_inputs: int, out: str | None,
          tree: Path = ROOT) -> int:
    from vtatune.deploy.runtime import random_input, read_manifest

    report = []
    for path in bundles:
        inp = read_manifest(path)["input"]
        shape, dtype = tuple(inp["shape"]), np.dtype(inp["dtype"])
        tmp = Path(tempfile.mkdtemp(prefix="bench-serve-"))
        np.save(tmp / "x.npy", random_input(shape, dtype, 0))
        if n_inputs:
            np.save(tmp / "xs.npy", np.stack([random_input(shape, dtype, s)
                                              for s in range(n_inputs)]))
        entry: dict = {"bundle": str(path), "tree": str(tree), "fresh": [], "one_input": {}}
        print(f"{path} (input {list(shape)} {dtype})")
        for _ in range(processes):
            load = os.getloadavg()[0]
            t = json.loads(_timed([sys.executable, "-c", _SERVE, str(path)], tree)[2])
            entry["fresh"].append({**t, "load_average": load})
            print(f"  fresh process (load {load:.1f}): " + ", ".join(
                f"{k} {v['wall']:.2f} s ({v['cpu']:.2f} CPU)" for k, v in t.items()
                if k != "numba") + f"; numba imported: {t['numba']}")
        for name, cmd in (("runtime", ["-m", "vtatune.deploy.runtime"]),
                          ("run", ["-m", "vtatune", "run"])):
            entry["one_input"][name] = []
            for _ in range(processes):
                load = os.getloadavg()[0]
                wall, cpu, _ = _timed([sys.executable, *cmd, str(path), "--input",
                                       str(tmp / "x.npy"), "--output", str(tmp / "y.npy")],
                                      tree)
                entry["one_input"][name].append({"wall": wall, "cpu": cpu,
                                                 "load_average": load})
                print(f"  one input, python {' '.join(cmd)} (load {load:.1f}): {wall:.2f} s "
                      f"wall, {cpu:.2f} s CPU")
        if n_inputs:
            load = os.getloadavg()[0]
            wall, cpu, stdout = _timed([sys.executable, "-m", "vtatune", "run", str(path),
                                        "--input", str(tmp / "xs.npy"), "--output",
                                        str(tmp / "ys.npy")], tree)
            entry["inputs"] = {"n": n_inputs, "wall": wall, "cpu": cpu, "load_average": load,
                               "summary": stdout.splitlines()[-1]}
            print(f"  {n_inputs} inputs through one python -m vtatune run (load {load:.1f}): "
                  f"{wall:.1f} s wall, {cpu:.1f} s CPU; {stdout.splitlines()[-1]}")
        shutil.rmtree(tmp)
        report.append(entry)
    if out:
        Path(out).write_text(json.dumps(report, indent=1) + "\n")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hw", default="pynq")
    ap.add_argument("--log", default=str(ROOT / "logs" / "resnet18-pynq.jsonl"))
    ap.add_argument("--calibration", type=int, default=4, metavar="N")
    ap.add_argument("--float-scales", action="store_true")
    ap.add_argument("--exact", action="store_true")
    ap.add_argument("--torch", action="store_true")
    ap.add_argument("--inferences", type=int, default=0, metavar="N")
    ap.add_argument("--out", metavar="FILE.json")
    ap.add_argument("--bundle", metavar="DIR", help="save the build as a bundle here and time "
                                                    "loading it in fresh processes")
    ap.add_argument("--load", metavar="DIR", help="only time loading the bundle DIR")
    ap.add_argument("--processes", type=int, default=5, metavar="N")
    ap.add_argument("--serve", nargs="+", metavar="DIR", help="time these bundles serving")
    ap.add_argument("--inputs", type=int, default=100, metavar="N",
                    help="--serve: inputs through one run process")
    ap.add_argument("--tree", type=Path, default=ROOT, metavar="DIR",
                    help="--serve: the vtatune tree the fresh processes run (another "
                         "checkout: a before figure); default: this one")
    args = ap.parse_args()
    if args.load:
        return load_only(Path(args.load), args.processes)
    if args.serve:
        return serve([Path(p) for p in args.serve], args.processes, args.inputs, args.out,
                     args.tree)
    hw = HardwareConfig.resolve(args.hw)
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    if args.torch:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            float_model = torchvision_resnet18(Path(tmp) / "resnet18.onnx")
        source = "torchvision resnet18 (seeded init), torch.onnx.export"
    else:
        float_model = models.resnet18()
        source = "vtatune.deploy.models.resnet18 (onnx.helper, seeded weights)"
    rng = np.random.default_rng(0)
    calibration = rng.standard_normal((args.calibration, 1, 3, 224, 224)).astype(np.float32)
    model = quantize(float_model, calibration, power_of_two=not args.float_scales)
    prep = time.perf_counter() - t0
    x = rng.standard_normal((1, 3, 224, 224)).astype(np.float32)
    step = output_step(model)
    refs = {engine: reference(model, x, engine) for engine in ("tvm", "onnxruntime")}
    runs = []
    for exact in (False, True) if args.exact else (False,):
        compiled, result, total, vta_s, warned = one_deploy(model, x, hw, args.log, exact)
        checks = {e: agreement(result.output, r, step) for e, r in refs.items()}
        more = inferences(compiled, compiled.device, args.inferences, rng)
        runs.append({
            "exact": exact, "seconds_total": total, "seconds": result.seconds,
            "functional_vta_seconds": vta_s, "functional_vta_share": vta_s / total,
            "offloaded": len(result.offloaded),
            "vta_passes": sum(c.passes for c in result.offloaded),
            "from_log": sum(c.source == "log" for c in result.offloaded),
            "cpu_ops_tvm": sum(c.by == "tvm" for c in result.cpu_ops),
            "cpu_ops_vtatune": sum(c.by == "vtatune" for c in result.cpu_ops),
            "vta_cycles": result.vta_cycles, "vta_ms": result.vta_ms,
            "agreement": {e: {"exact": a.exact, "elements": a.elements, "share": a.share,
                              "max_steps": a.max_steps} for e, a in checks.items()},
            "warnings": warned,
            "inferences": [{"seconds": t, "functional_vta_seconds": v} for t, v in more]})
        if args.bundle and not exact:
            runs[-1]["bundle"] = bundle_figures(compiled, result, x, Path(args.bundle))
    report = {"model": source, "hw": hw.target_model, "log": args.log,
              "power_of_two_scales": not args.float_scales, "prepare_seconds": prep,
              "load_average": load, "runs": runs}
    print(f"ResNet-18 int8 ({source}), {hw.target_model}, log {args.log}; "
          f"{'power-of-two' if not args.float_scales else 'calibrated float'} scales; "
          f"quantizing took {prep:.1f} s; load average {load:.1f}")
    for r in runs:
        s = r["seconds"]
        print(f"\n{'exact (CPU requantization)' if r['exact'] else 'default'}: "
              f"{r['seconds_total']:.1f} s in all (import {s['import']:.2f}, partition "
              f"{s['partition']:.2f}, codegen {s['codegen']:.2f}, build {s['build']:.2f}, "
              f"inference {s['run']:.2f}); functional VTA {r['functional_vta_seconds']:.1f} s "
              f"= {100 * r['functional_vta_share']:.0f} %")
        print(f"  {r['offloaded']} layers offloaded ({r['vta_passes']} VTA passes, "
              f"{r['from_log']} schedules from the log), {r['cpu_ops_tvm']} TVM CPU ops, "
              f"{r['cpu_ops_vtatune']} vtatune host ops; VTA {r['vta_cycles']:,} cycles = "
              f"{r['vta_ms']:.2f} ms")
        for e, a in r["agreement"].items():
            print(f"  against {e}: {a['exact']}/{a['elements']} exact "
                  f"({100 * a['share']:.1f} %), at most {a['max_steps']} step(s) apart")
        if r["inferences"]:
            secs = sorted(i["seconds"] for i in r["inferences"])
            vta = sorted(i["functional_vta_seconds"] for i in r["inferences"])
            print(f"  {len(secs)} more inferences: {secs[0]:.3f} s least, "
                  f"{secs[len(secs) // 2]:.3f} s median, {sum(secs) / len(secs):.3f} s mean; "
                  f"functional VTA {vta[len(vta) // 2]:.3f} s median")
        for w in r["warnings"]:
            print(f"  warning: {w}")
        if "bundle" in r:
            b = r["bundle"]
            parts = ", ".join(f"{k} {v / 1e6:.2f} MB"
                              for k, v in sorted(b["bytes_by_part"].items()))
            print(f"  bundle {args.bundle}: {b['bytes'] / 1e6:.2f} MB ({parts}), saved in "
                  f"{b['save_seconds']:.2f} s")
            for p in b["fresh_processes"]:
                print(f"  fresh process: load {p['load_seconds']:.3f} s (runtime imports "
                      f"{p['import_seconds']:.3f} s; process start to loaded and run "
                      f"{p['process_seconds']:.1f} s); output identical: {p['same_output']}")
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
