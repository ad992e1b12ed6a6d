"""VTA's own drivers on the two ALU forms an exact one-pass requantization needs: a ``shr``
by a negative immediate (a left shift) and ``min`` / ``max`` reading a per-channel plane of
the ``shift`` input (a clamp with int32 bounds).

Each case is a lowered GEMM or conv run on the driver (TVM v0.14's ``libvta_fsim.so``, or
``libvta_tsim.so`` with a verilated ``libvta_hw.so``: the RTL) and on vtatune's functional
VTA (:class:`~vtatune.deploy.SimulatedDevice`); the outputs are compared bit for bit with
each other and with :meth:`Epilogue.apply` (``reference_output``), fsim's counters with
:func:`simulator.functional.count`, the RTL's cycles with the timing model's. The cases:

- ``exact``: the epilogue ``add(bias) min(shift) max(shift1) shr(-4) add(3) save shr(2)
  add(saved) shr(9) clip(-128,127)`` on a GEMM and a conv, default and random legal
  schedules (``random_operands``' bounds), and once with bounds anywhere in int32 (the left
  shift wraps);
- ``left``: ``add(bias) shr(-k) shr(s)`` for k in 1, 4, 13, 24, 31 and s in 0, 8, 16, 24
  (the int8 store keeps byte s / 8 of the shifted word), a bias over all of int32;
- ``tensor_negative`` (no epilogue may do this: a shr's plane is refused outside 0..31): a
  SHR reading a plane of negative amounts -1..-31 (and 0). Reported: which semantics each
  driver follows, fsim's (``x << -s``, what vtatune's functional simulator does) or the
  RTL's (TensorAlu.scala shifts a register operand right by its low 5 bits:
  ``x >> (s & 31)``). Expected to differ between the two drivers; not counted as a failure.

Usage:
    python scripts/alu_forms_judge.py DRIVER[:HARDWARE] [--schedules N]

DRIVER: ``libvta_fsim.so`` or ``libvta_tsim.so`` (HARDWARE: tsim's ``libvta_hw.so``, by
default the one next to the driver). Prints one line per case and a summary; exit 1 when a
legal case differs anywhere.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import fsim_judge  # noqa: E402
import numpy as np  # noqa: E402
import tsim_judge  # noqa: E402

from search_spaces import default_schedule  # noqa: E402
from simulator.functional import count  # noqa: E402
from simulator.hardware import HardwareConfig  # noqa: E402
from vtatune.deploy import DeployError, SimulatedDevice  # noqa: E402
from vtatune.deploy.runtime import end_process  # noqa: E402
from vtatune.lowering import lower, packed_inputs  # noqa: E402
from vtatune.workloads import (  # noqa: E402
    Conv2dWorkload,
    Epilogue,
    EpilogueOp,
    GemmWorkload,
    Operands,
    random_operands,
    reference_output,
    unpack_output,
)

__all__ = ["EXACT", "Probe", "probes"]

EXACT = Epilogue((EpilogueOp("add", tensor="bias"), EpilogueOp("min", tensor="shift"),
                  EpilogueOp("max", tensor="shift1"), EpilogueOp("shr", -4),
                  EpilogueOp("add", 3), EpilogueOp("save"), EpilogueOp("shr", 2),
                  EpilogueOp("add", tensor="saved"), EpilogueOp("shr", 9),
                  EpilogueOp("clip", -128, hi=127)))


@dataclass(frozen=True)
class Probe:
    """A case and what its unpacked output must be under each semantics named (``apply``:
    Epilogue.apply's, the one a legal case is judged by)."""

    case: fsim_judge.Case
    workload: object
    expected: dict[str, np.ndarray]


def _wrap32(x: np.ndarray) -> np.ndarray:
    return (x + (1 << 31)) % (1 << 32) - (1 << 31)


def _probe(name: str, wl, schedule, hw: HardwareConfig, ops: Operands,
           expected: dict[str, np.ndarray] | None = None) -> Probe:
    program = lower(wl, schedule, hw, bias=ops.bias is not None).program
    case = fsim_judge.Case(name, program, packed_inputs(wl, ops, hw), hw)
    return Probe(case, wl, expected if expected is not None
                 else {"apply": reference_output(wl, ops)})


def probes(hw: HardwareConfig, n_schedules: int) -> Iterator[Probe]:
    """The cases on ``hw`` (channels: whole blocks of its tensor core)."""
    rng = np.random.default_rng(0)
    ci, co = max(64, 4 * hw.block_in), max(32, 2 * hw.block_out)
    gemm = GemmWorkload(max(4, hw.batch), ci, co)
    row = GemmWorkload(hw.batch, ci, co)
    # exact: random operands' bounds (a min's plane 0..2^12, a max's -2^12..0)
    conv = Conv2dWorkload(hw.batch, 8, 8, max(ci // 2, hw.block_out), co, 3, 1, 1)
    for k, base in enumerate((gemm, conv)):
        wl = replace(base, epilogue=EXACT)
        for label, schedule in fsim_judge._schedules(wl, hw, True, n_schedules, seed=k):  # noqa: SLF001
            ops = random_operands(wl, True, seed=k)
            yield _probe(f"exact/{base.operator}/{label}", wl, schedule, hw, ops)
    # exact with bounds anywhere in int32: the clamp passes values whose x 16 wraps
    wl = replace(gemm, epilogue=EXACT)
    ops = random_operands(wl, True, seed=9)
    wide = np.stack([rng.integers(0, 1 << 31, co), rng.integers(-(1 << 31), 1, co)])
    ops = replace(ops, bias=rng.integers(-(1 << 31), 1 << 31, co).astype(np.int32),
                  shift=wide.astype(np.int32))
    yield _probe("exact/gemm/int32_bounds", wl, default_schedule(wl, hw, True), hw, ops)
    # left: byte s / 8 of (acc + bias) << k
    for k in (1, 4, 13, 24, 31):
        for s in (0, 8, 16, 24):
            wl = replace(row, epilogue=Epilogue((
                EpilogueOp("add", tensor="bias"), EpilogueOp("shr", -k), EpilogueOp("shr", s))))
            ops = random_operands(wl, True, seed=k * 32 + s)
            ops = replace(ops, bias=rng.integers(-(1 << 31), 1 << 31, co).astype(np.int32))
            yield _probe(f"left/shr(-{k})_shr({s})", wl, default_schedule(wl, hw, True), hw,
                         ops)
    # tensor_negative: a SHR reading negative amounts (bypassing the epilogue's check)
    wl = replace(row, epilogue=Epilogue((
        EpilogueOp("add", tensor="bias"), EpilogueOp("shr", tensor="shift"))))
    ops = random_operands(wl, True, seed=1)
    amounts = -(np.arange(co, dtype=np.int64) % 32)  # 0, -1, ..., -31 (again)
    ops = replace(ops, bias=rng.integers(-(1 << 31), 1 << 31, co).astype(np.int32),
                  shift=amounts.astype(np.int32))
    x = _wrap32(ops.data.astype(np.int64) @ ops.weight.astype(np.int64).T + ops.bias)

    def byte(v):
        return (v & 0xFF).astype(np.uint8).view(np.int8)

    yield _probe("tensor_negative/shr(shift=0..-31)", wl, default_schedule(wl, hw, True), hw,
                 ops, {"fsim: x << -s": byte(_wrap32(x << -amounts)),
                       "RTL: x >> (s & 31)": byte(x >> (amounts & 31))})


def _judge(device, probe: Probe, tsim: bool) -> tuple[bool | None, str]:
    """(whether the case is right, its line): None for the illegal case (only reported)."""
    case = probe.case
    try:
        got = fsim_judge._run(device, case)  # noqa: SLF001 - the judges' way to run a case
    except DeployError as exc:
        return False, f"refused: {exc}"
    ours = fsim_judge._run(SimulatedDevice(case.hw), case)  # noqa: SLF001
    unpacked = unpack_output(probe.workload, got)
    matches = [name for name, want in probe.expected.items()
               if np.array_equal(unpacked, want)]
    same_sim = bool(np.array_equal(got, ours))
    line = (f"driver output {'equal' if same_sim else 'DIFFERS from'} vtatune's simulator; "
            f"matches {', '.join(matches) or 'NONE of ' + ', '.join(probe.expected)}")
    if tsim:
        rtl, model = int(device.counters["cycle_count"]), SimulatedDevice(case.hw).cycles(
            case.program)
        line += f"; RTL {rtl:,} cycles, model {model:,} ({tsim_judge.percent(rtl, model):+.3f} %)"
        same_counters = True
    else:
        same_counters = dict(device.counters) == count(case.program, case.hw).as_dict()
        line += f"; counters {'equal' if same_counters else 'DIFFER'}"
    if "apply" not in probe.expected:
        return None, line
    return same_sim and matches == ["apply"] and same_counters, line


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("spec", metavar="DRIVER[:HARDWARE]")
    p.add_argument("--schedules", type=int, default=4,
                   help="random schedules per exact kernel besides the default one")
    args = p.parse_args(argv)
    try:
        device = tsim_judge._device(args.spec)  # noqa: SLF001
    except DeployError as exc:
        print(f"alu_forms_judge: {exc}", file=sys.stderr)
        return 2
    tsim = device.cycle_counter == "RTL"
    right = wrong = 0
    reported: list[str] = []
    for probe in probes(device.hw, args.schedules):
        ok, line = _judge(device, probe, tsim)
        print(f"{probe.case.name:<58} {line}", flush=True)
        if ok is None:
            reported.append(line)
        elif ok:
            right += 1
        else:
            wrong += 1
    print(f"{right + wrong} legal cases on {device.name}: {right} right (output equal to "
          f"vtatune's simulator and to Epilogue.apply{'' if tsim else ', counters equal'}), "
          f"{wrong} not; load {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 1 if wrong else 0


if __name__ == "__main__":
    status = main()
    end_process(status)  # tsim's exit hook leaves with it
    sys.exit(status)
