"""Where attention's second operand is packed: the CPU's time to pack one head's operands
(the data and the weight tiles of Q.K^T and P.V, and the zero points' bias) against VTA's
time for that head's GEMM (timing model, at the board's clock).

    python scripts/bench_batch_matmul.py [--seq 32] [--hidden 128] [--heads 2] [--hw pynq]

VTA cannot pack the operand itself: its loads move whole tiles of contiguous elements, and
a weight tile (BLOCK_OUT rows of BLOCK_IN elements) of a row-major activation is strided
(K's) or transposed within the tile (V's: the weight of P.V is V^T), which no VTA load,
store, ALU or GEMM instruction can produce. The alternative to measure is therefore only
how much of a head's time the CPU's packing is. Prints one row per matmul.
"""

from __future__ import annotations

import argparse
import sys
import timeit
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from simulator.hardware import HardwareConfig  # noqa: E402
from vtatune.builds import FallbackWarning  # noqa: E402
from vtatune.deploy import deploy, models, quantize  # noqa: E402
from vtatune.lowering import pack_data, pack_matrix, pack_weight  # noqa: E402
from vtatune.workloads import GemmWorkload  # noqa: E402


def pack_seconds(m: int, k: int, n: int, hw: HardwareConfig, repeat: int = 200) -> float:
    """The CPU's time to pack one head: data, weight (the operand transposed into tiles)
    and a zero points' bias matrix, best of ``repeat``."""
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (m, k), dtype=np.int8)
    w = rng.integers(-128, 128, (k, n), dtype=np.int8)
    wl = GemmWorkload(m, k, n)

    def once() -> None:
        pack_data(wl, x, hw)
        pack_weight(wl, np.ascontiguousarray(w.T), hw)
        acc = -3 * x.sum(1, dtype=np.int64)[:, None] - 5 * w.sum(0, dtype=np.int64)[None, :]
        pack_matrix(acc.astype(np.int32), hw.batch, hw.block_out)

    return min(timeit.repeat(once, number=1, repeat=repeat))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--hw", default="pynq")
    args = parser.parse_args(argv)
    hw = HardwareConfig.resolve(args.hw)
    float_model = models.attention(seq=args.seq, hidden=args.hidden, heads=args.heads)
    rng = np.random.default_rng(0)
    shape = (1, args.seq, args.hidden)
    model = quantize(float_model, rng.standard_normal((4, *shape)).astype(np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FallbackWarning)
        r = deploy(model, hw=hw, input=rng.standard_normal(shape).astype(np.float32))
    d = args.hidden // args.heads
    shapes = {"batch_matmul_1": (args.seq, d, args.seq), "batch_matmul_2": (args.seq, args.seq, d)}
    print(f"{'matmul':<16}{'per head: M x K x N':<22}{'VTA (timing model)':>20}"
          f"{'CPU packing':>14}{'share':>8}")
    for call in r.offloaded:
        if call.op != "batch_matmul":
            continue
        m, k, n = shapes[call.layer]
        vta = call.cycles / args.heads / (hw.clock_mhz * 1e6)
        cpu = pack_seconds(m, k, n, hw)
        print(f"{call.layer:<16}{f'{m} x {k} x {n}':<22}{vta * 1e6:>17.1f} us"
              f"{cpu * 1e6:>11.1f} us{cpu / (cpu + vta):>8.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
