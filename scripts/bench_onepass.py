"""One VTA pass per layer (issue 38 item 3): per model, VTA's cycles with the fixed-point
requantization on VTA (one pass a layer) against ``--exact`` (the CPU requantizes: a pass
per accumulator byte), and how far the fixed point is from the exact rounding, over every
element of every offloaded layer.

    python scripts/bench_onepass.py MODEL.onnx ... [--hw pynq] [--log LOG] [--tune N]
        [--json OUT.jsonl]

Each model is deployed twice on one seeded random input: with ``--exact``, where the CPU
reassembles each layer's int32 accumulators from its byte passes (captured here, every
element of every layer), and with default flags (one pass where the fixed point applies).
On the captured accumulators the fixed-point epilogue VTA runs (``Epilogue.apply``, which
the simulator equals bit for bit: ``tests/lowering/test_fixed_point_epilogue.py``) is
compared with the exact rounding of the real multiply (float64): the largest distance in
steps and the share of elements exact. The default deploy's output is checked against TVM's
CPU build (steps, top-1 for classifiers). ``--tune N`` tunes what the log lacks or whose
schedule no longer fits (the copy of the tile the fixed point keeps) into a copy of
``--log`` under runs/, for both deploys.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np

from vtatune.records import append_json_line

COLUMNS = ("model", "layers", "one pass", "digits", "extra ALU ops", "cycles one-pass",
           "of which the fixed point", "cycles --exact", "x", "max steps (layers)",
           "exact share (layers)", "vs TVM steps", "top-1", "seconds")


def _input(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(0, 100, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _captured_layers(model, hw, log, x):
    """The ``--exact`` deploy's cycles and, per layer the CPU requantized, its
    Requantization and reassembled accumulators (bias included)."""
    from vtatune.deploy import Requantization, compile_model

    seen = []
    finish = Requantization.finish

    def capture(self, planes, packed_shape=None):
        acc = planes[-1].astype(np.int64) << 8 * (len(planes) - 1)
        for j, plane in enumerate(planes[:-1]):
            acc += plane.view(np.uint8).astype(np.int64) << 8 * j
        seen.append((self, acc, packed_shape))
        return finish(self, planes, packed_shape)

    Requantization.finish = capture
    try:
        r = compile_model(model, hw=hw, log=log, exact=True).run(x)
    finally:
        Requantization.finish = finish
    return r, seen


def _layer_errors(seen):
    """Over every element of the layers VTA now requantizes with the fixed point: the
    largest distance in steps from the exact rounding, elements, exact elements."""
    from vtatune.workloads import SHIFTS

    def spread(values, packed_shape, dtype):
        """Per-channel values over a packed output (N/B, C/c, ..., c): channel cb * c + ci;
        padded channels 0."""
        cb, c = packed_shape[1], packed_shape[-1]
        out = np.zeros(cb * c, dtype)
        out[:len(values)] = values
        shape = [1] * len(packed_shape)
        shape[1], shape[-1] = cb, c
        return out.reshape(shape)

    worst, n, exact = 0, 0, 0
    for req, acc, packed_shape in seen:
        one = replace(req, exact=False)
        fixed = one.fixed_point
        channel = one.channel_fixed_point
        if fixed is None and channel is None:
            continue
        (epilogue,) = one.epilogues(bias=True)
        if channel is not None:  # per channel, over the packed output layout
            tensors = {"bias": spread(channel.offsets, packed_shape, np.int64),
                       **{SHIFTS[j]: spread(p, packed_shape, np.int64)
                          for j, p in enumerate(channel.shifts())}}
            m = spread(one.multipliers, packed_shape, np.float64)
            # the model's channels, not those padded to whole blocks (cut off)
            real = np.broadcast_to(spread(np.ones(len(one.multipliers), bool), packed_shape,
                                          bool), acc.shape)
        else:
            tensors, m = {"bias": np.int64(fixed.offset)}, float(one.multipliers[0])
            real = np.ones(acc.shape, bool)
        got = epilogue.apply(acc, tensors).astype(np.int64)
        want = np.clip(np.floor(acc * m + 0.5) + one.zero_point, one.low, 127)
        d = np.abs(got - want)[real]
        worst, n, exact = max(worst, int(d.max())), n + d.size, exact + int((d == 0).sum())
    return worst, n, exact


def _alu_cost(b) -> dict:
    """What the fixed point's ALU instructions cost a layer: its one pass against the same
    schedule with a shift for its multiplier (``add(bias) shr(e1) clip``, what a
    power-of-two multiplier runs), by the timing model (the first program's, times a
    batch_matmul's heads)."""
    from simulator.timing import time_program
    from vtatune.lowering import lower
    from vtatune.workloads import Epilogue, EpilogueOp

    low = b.programs.passes[0]
    e = low.workload.epilogue
    fixed = b.requant.fixed_point
    last = EpilogueOp("shr", fixed.digits[0]) if fixed else EpilogueOp("shr", tensor="shift")
    shift = Epilogue((e.ops[0], last, e.ops[-1]))
    short = lower(replace(low.workload, epilogue=shift), low.schedule, low.hw, bias=low.bias)
    one, base = (time_program(x.program, low.hw).cycles for x in (low, short))
    heads = len(b.programs.passes)  # a batch_matmul's heads, each its own program
    return {"layer": b.layer.name, "digits": _digits(_fixed(b.requant)),
            "cycles": one * heads, "shift_cycles": base * heads,
            "extra_cycles": (one - base) * heads}


def _fixed(requant):
    """The layer's fixed point, per tensor or per channel (or None)."""
    return requant.fixed_point or requant.channel_fixed_point


def _digits(fixed) -> int:
    """Powers of two a channel (per tensor: the layer)."""
    return fixed.digits if isinstance(fixed.digits, int) else len(fixed.digits)


def measure(path: Path, hw: str, log: str | None, seed: int) -> dict:
    import onnx

    from vtatune.deploy import agreement, compile_model, model_input, output_step, reference

    proto = onnx.load(str(path))
    _, shape, dtype = model_input(proto)
    x = _input(shape, dtype, seed)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exact_run, seen = _captured_layers(proto, hw, log, x)
        compiled = compile_model(proto, hw=hw, log=log)
        r = compiled.run(x)
    seconds = time.perf_counter() - t0
    ref = reference(proto, x, "tvm")
    a = agreement(r.output, ref, output_step(proto))
    worst, n, exact = _layer_errors(seen)
    built = [b for region in compiled.regions.values() for b in region.built
             if _fixed(b.requant) is not None]
    fixed = [_fixed(b.requant) for b in built]
    alu_cost = [_alu_cost(b) for b in built]
    top1 = None
    if r.output.ndim == 2 and r.output.shape[-1] >= 10:
        top1 = bool(np.argmax(r.output) == np.argmax(ref))
    return {
        "model": path.name, "hw": hw, "log": log,
        "layers": len(r.offloaded),
        # a batch_matmul runs a pass a head
        "one_pass": sum(c.requantization.startswith("on VTA") for c in r.offloaded),
        "digits": sorted({_digits(f) for f in fixed}),
        "extra_alu_ops": sorted({len(f.ops()) + 2 * ("save" in [o.op for o in f.ops()])
                                 for f in fixed}),
        "cycles_one_pass": r.vta_cycles, "cycles_exact": exact_run.vta_cycles,
        "passes_one_pass": sum(c.passes for c in r.offloaded),
        "passes_exact": sum(c.passes for c in exact_run.offloaded),
        "layer_max_steps": worst, "layer_elements": n, "layer_exact": exact,
        "vs_tvm": {"max_steps": a.max_steps, "exact": a.exact, "elements": a.elements},
        "top1_equal": top1, "seconds": round(seconds, 1),
        "alu_cost": alu_cost,
        "alu_cost_total": sum(c["extra_cycles"] for c in alu_cost),
        "per_layer": [{"layer": c.layer, "passes": c.passes, "cycles": c.cycles,
                       "source": c.source, "requantization": c.requantization}
                      for c in r.offloaded],
    }


def _row(d: dict) -> str:
    share = d["layer_exact"] / d["layer_elements"] if d["layer_elements"] else float("nan")
    cells = (d["model"], d["layers"], d["one_pass"], d["digits"], d["extra_alu_ops"],
             f"{d['cycles_one_pass']:,}", f"{d['alu_cost_total']:,}",
             f"{d['cycles_exact']:,}",
             f"{d['cycles_exact'] / d['cycles_one_pass']:.2f}", d["layer_max_steps"],
             f"{share:.2%} of {d['layer_elements']:,}", d["vs_tvm"]["max_steps"],
             {True: "equal", False: "differs", None: "-"}[d["top1_equal"]], d["seconds"])
    return "| " + " | ".join(str(c) for c in cells) + " |"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+", type=Path)
    ap.add_argument("--hw", default="pynq")
    ap.add_argument("--log", default=None)
    ap.add_argument("--tune", type=int, default=0, help="trials per workload to tune first")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for path in args.models:
        log = args.log
        if args.tune:
            from vtatune.deploy import compile_model

            log = f"runs/bench_onepass-{args.hw}.jsonl"
            Path(log).parent.mkdir(parents=True, exist_ok=True)
            if args.log and not Path(log).exists():
                shutil.copy(args.log, log)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                compile_model(str(path), hw=args.hw, log=log if Path(log).exists() else None,
                              tune_trials=args.tune, tune_log=log)
        d = measure(path, args.hw, log, args.seed)
        d["tune"] = args.tune
        print(_row(d), flush=True)
        if args.json:  # a line each model, whole or not at all
            append_json_line(args.json, d)
    return 0


if __name__ == "__main__":
    sys.exit(main())
