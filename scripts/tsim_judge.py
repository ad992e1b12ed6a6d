"""VTA's RTL as the judge: vtatune's programs run on TVM v0.14's tsim driver
(``libvta_tsim.so`` with a verilated ``libvta_hw.so``, through
:class:`vtatune.deploy.DriverDevice`) against vtatune's functional VTA and timing model:
outputs bit-identical, the RTL's own cycle count (``vta.tsim.profiler_status``) against the
timing model's.

Two modes:

- kernels (default): ``scripts/fsim_judge.py``'s lowered kernels (each with its default
  schedule and random legal ones), each run on the RTL and on
  :class:`~vtatune.deploy.SimulatedDevice`; ``--record FILE`` writes per case the program's
  and output's sha256, the RTL's and the timing model's cycles (JSONL: the test data of
  ``tests/deploy/test_tsim_judge.py``);
- ``--bundle DIR``: a saved model run whole by ``python -m vtatune run DIR --json`` twice,
  on ``--device sim`` and on the RTL (one process each: tsim is one simulation per
  process), the outputs compared bit for bit, the RTL's cycles per layer and in all against
  the timing model's, and the RTL run's wall time.

Usage:
    python scripts/tsim_judge.py DRIVER[:HARDWARE] [--schedules N] [--record FILE]
    python scripts/tsim_judge.py DRIVER[:HARDWARE] --bundle DIR [--input X.npy]
        [--out RESULT.json]

DRIVER: ``scripts/tvm014/build_libvta_tsim.sh``'s ``libvta_tsim.so``; HARDWARE:
``scripts/tvm014/build_libvta_hw.py``'s ``libvta_hw.so`` (by default the one next to the
driver), whose ``vta_config.json`` says which hardware it is. Prints one line per case or
layer and a summary; exit 1 when an output differs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import fsim_judge  # noqa: E402
import numpy as np  # noqa: E402

from simulator.hardware import HardwareConfig  # noqa: E402
from vtatune.deploy import DeployError, DriverDevice, SimulatedDevice  # noqa: E402
from vtatune.deploy.runtime import end_process  # noqa: E402
from vtatune.records import write_whole  # noqa: E402

__all__ = ["RECORD", "bundle_judge", "kernel_judge", "percent"]

RECORD = ROOT / "tests" / "deploy" / "data" / "tsim_driver" / "cases.jsonl"


def percent(counted: int, model: int) -> float:
    """The RTL's cycles against the timing model's, in per cent of the model's."""
    return 100 * (counted - model) / model if model else 0.0


def _sha(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def _device(spec: str, hw: HardwareConfig | None = None) -> DriverDevice:
    driver, _, hardware = spec.partition(":")
    hw_lib = Path(hardware) if hardware else Path(driver).with_name("libvta_hw.so")
    config = hw_lib.with_name("vta_config.json")
    if hw is None:
        hw = HardwareConfig.from_json(config if config.is_file()
                                      else Path(driver).with_name("vta_config.json"))
    return DriverDevice(driver, hw, hardware=hardware or None)


def kernel_judge(spec: str, n_schedules: int) -> tuple[list[dict], bool]:
    """Every kernel case on the RTL and on vtatune: one record per case, and whether every
    output is identical."""
    device = _device(spec)
    records, same = [], True
    for case in fsim_judge.kernel_cases(n_schedules, device.hw):
        model = SimulatedDevice(case.hw).cycles(case.program)
        record = {"case": case.name, "program": fsim_judge.program_sha256(case.program),
                  "inputs": fsim_judge.inputs_sha256(case.inputs), "model_cycles": model}
        try:
            got = fsim_judge._run(device, case)  # noqa: SLF001 - the judges' way to run a case
        except DeployError as exc:  # what the RTL cannot run, refused before it runs
            print(f"{case.name:<48} refused: {exc}", flush=True)
            records.append({**record, "refused": str(exc)})
            continue
        rtl = int(device.counters["cycle_count"])
        want = fsim_judge._run(SimulatedDevice(case.hw), case)  # noqa: SLF001
        equal = bool(np.array_equal(got, want))
        same &= equal
        print(f"{case.name:<48} {'equal' if equal else 'DIFFERS'}  RTL {rtl:>9,}  model "
              f"{model:>9,}  {percent(rtl, model):+7.3f} %", flush=True)
        records.append({**record, "output": _sha(got), "equal": equal, "rtl_cycles": rtl})
    return records, same


def _run_json(bundle: Path, device: str, x: Path | None, out: Path) -> tuple[dict, float]:
    cmd = [sys.executable, "-m", "vtatune", "run", str(bundle), "--device", device, "--json",
           "--output", str(out)] + (["--input", str(x)] if x is not None else [])
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {done.returncode}: {done.stderr.strip()}")
    return json.loads(done.stdout.strip().splitlines()[-1]), seconds


def bundle_judge(spec: str, bundle: Path, x: Path | None) -> dict:
    """The bundle run whole on ``sim`` and on the RTL: outputs, cycles per layer and in all,
    wall times."""
    with tempfile.TemporaryDirectory() as tmp:
        sim, sim_s = _run_json(bundle, "sim", x, Path(tmp) / "sim.npy")
        rtl, rtl_s = _run_json(bundle, f"libvta:{spec}", x, Path(tmp) / "rtl.npy")
        identical = bool(np.array_equal(np.load(Path(tmp) / "sim.npy"),
                                        np.load(Path(tmp) / "rtl.npy")))
    layers = []
    for s, r in zip(sim["offloaded"], rtl["offloaded"], strict=True):
        layers.append({"layer": r["layer"], "workload": r["workload"], "passes": r["passes"],
                       "rtl_cycles": r["cycles"], "model_cycles": r["model_cycles"],
                       "sim_cycles": s["cycles"]})
    load = os.getloadavg()
    return {"bundle": str(bundle), "device": rtl["device"], "hw": rtl["hw"],
            "identical": identical, "output_sha256": rtl["output_sha256"],
            "rtl_cycles": rtl["vta_cycles"], "model_cycles": rtl["vta_model_cycles"],
            "sim_cycles": sim["vta_cycles"],
            "percent": percent(rtl["vta_cycles"], rtl["vta_model_cycles"]),
            "rtl_wall_s": round(rtl_s, 1), "sim_wall_s": round(sim_s, 1),
            "load_after": [round(v, 2) for v in load], "layers": layers}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("spec", metavar="DRIVER[:HARDWARE]")
    p.add_argument("--schedules", type=int, default=4,
                   help="random schedules per kernel besides the default one")
    p.add_argument("--record", type=Path, help="write the kernel cases' results (JSONL)")
    p.add_argument("--bundle", type=Path, help="judge a saved model whole instead")
    p.add_argument("--input", type=Path, help="the bundle's input (default: seeded random)")
    p.add_argument("--out", type=Path, help="write the bundle's result (JSON)")
    args = p.parse_args(argv)
    if args.bundle is None:
        records, same = kernel_judge(args.spec, args.schedules)
        ran = [r for r in records if "refused" not in r]
        worst = max(ran, key=lambda r: abs(percent(r["rtl_cycles"], r["model_cycles"])))
        rtl = sum(r["rtl_cycles"] for r in ran)
        model = sum(r["model_cycles"] for r in ran)
        print(f"{len(records)} kernel cases on the RTL ({args.spec}): {len(ran)} ran, "
              f"{sum(r['equal'] for r in ran)} outputs identical, {len(records) - len(ran)} "
              f"refused; cycles in all RTL {rtl:,}, model {model:,} "
              f"({percent(rtl, model):+.3f} %); largest difference {worst['case']} "
              f"{percent(worst['rtl_cycles'], worst['model_cycles']):+.3f} %")
        if args.record is not None:
            write_whole({args.record: "".join(json.dumps(r) + "\n" for r in records).encode()})
        return 0 if same else 1
    result = bundle_judge(args.spec, args.bundle, args.input)
    for r in result["layers"]:
        print(f"{r['layer']:<12} {r['workload'][:44]:<44} RTL {r['rtl_cycles']:>11,}  model "
              f"{r['model_cycles']:>11,}  {percent(r['rtl_cycles'], r['model_cycles']):+7.3f} %")
    print(f"{result['bundle']} on {result['device']}: output "
          f"{'identical to' if result['identical'] else 'DIFFERS from'} --device sim's; VTA "
          f"cycles RTL {result['rtl_cycles']:,}, timing model {result['model_cycles']:,} "
          f"({result['percent']:+.3f} %); wall {result['rtl_wall_s']} s on the RTL, "
          f"{result['sim_wall_s']} s on sim (load {result['load_after']})")
    if args.out is not None:
        write_whole({args.out: (json.dumps(result, indent=1) + "\n").encode()})
    return 0 if result["identical"] else 1


if __name__ == "__main__":
    status = main()
    end_process(status)  # tsim's exit hook leaves with it
    sys.exit(status)
