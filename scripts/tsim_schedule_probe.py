"""One GEMM schedule at a time on VTA's RTL (tsim) against vtatune's functional simulator:
which tile shapes the RTL computes differently (an open finding of issue 39's stop 44:
BERT-small's FFN down projection, ``gemm 128x2048 * 2048x512`` tiled
``b1 h16 w1 co8 ci128 vt1x1``, whose input and weight tiles fill the INP (2,048 entries)
and WGT (1,024) buffers of pynq together, differs on 2% of its outputs; the same workload
filling either buffer alone does not; fsim agrees with the simulator on all).

    python scripts/tsim_schedule_probe.py DRIVER[:HARDWARE]

Each case: random operands (seed 1), the epilogue ``add(bias) shr(9) clip(-128,127)``, the
program lowered once and run on the driver and on :class:`SimulatedDevice`; prints per case
``equal`` or how many output elements differ, and the buffer entries its tiles take.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import fsim_judge  # noqa: E402
import tsim_judge  # noqa: E402

from vtatune.deploy import SimulatedDevice  # noqa: E402
from vtatune.deploy.runtime import end_process  # noqa: E402
from vtatune.lowering import lower, packed_inputs  # noqa: E402
from vtatune.schedule import Schedule  # noqa: E402
from vtatune.workloads import Epilogue, EpilogueOp, GemmWorkload, random_operands  # noqa: E402

EPILOGUE = Epilogue((EpilogueOp("add", tensor="bias"), EpilogueOp("shr", 9),
                     EpilogueOp("clip", -128, hi=127)))
#: (rows, K, N, tile_h, tile_co, tile_ci): rows=spatial, vt1x1, bchw, [ci,h,co,w,kh,kw].
CASES = ((128, 2048, 512, 16, 8, 128), (128, 2048, 512, 16, 8, 64),
         (128, 2048, 512, 8, 8, 128), (128, 2048, 512, 32, 8, 64),
         (128, 2048, 512, 16, 4, 128), (128, 1024, 512, 32, 8, 64))


def main(argv: list[str]) -> int:
    device = tsim_judge._device(argv[0])  # noqa: SLF001 - the judges' way to open a driver
    hw = device.hw
    differing = 0
    for rows, k, n, h, co, ci in CASES:
        wl = replace(GemmWorkload(rows, k, n), epilogue=EPILOGUE)
        sched = Schedule(tile_h=h, tile_co=co, tile_ci=ci, outer_order="bchw",
                         gemm_order="ci,h,co,w,kh,kw", store="tile", reuse=True,
                         rows="spatial")
        ops = random_operands(wl, True, seed=1)
        case = fsim_judge.Case("probe", lower(wl, sched, hw, bias=True).program,
                               packed_inputs(wl, ops, hw), hw)
        got = fsim_judge._run(device, case)  # noqa: SLF001
        ours = fsim_judge._run(SimulatedDevice(hw), case)  # noqa: SLF001
        diff = int((got != ours).sum())
        differing += diff > 0
        print(f"gemm {rows}x{k} * {k}x{n} {sched.short():<58} INP {h * ci:>5}/{hw.inp_depth} "
              f"WGT {co * ci:>5}/{hw.wgt_depth}: "
              f"{'equal' if not diff else f'{diff} of {got.size} elements DIFFER'}",
              flush=True)
    return 1 if differing else 0


if __name__ == "__main__":
    status = main(sys.argv[1:])
    end_process(status)
    sys.exit(status)
