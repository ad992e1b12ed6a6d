"""numpy reference for the operators, packing to VTA layouts, and bit-exact verification.

Example:
    >>> from simulator.hardware import DEFAULT
    >>> from vtatune.workloads import WORKLOADS
    >>> from vtatune.schedule import tutorial_schedule
    >>> from vtatune.lowering import lower
    >>> wl = WORKLOADS["gemm"]["tutorial"]
    >>> verify(lower(wl, tutorial_schedule(wl), DEFAULT)).ok
    True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from simulator.functional import RunResult, run
from simulator.hardware import HardwareConfig

from .workloads import Conv2dWorkload, GemmWorkload, Workload

SHIFT = 8


def epilogue(acc: np.ndarray, bias: np.ndarray | None, out_width: int = 8) -> np.ndarray:
    """int32 accumulate -> arithmetic shift right 8 -> (+ bias) -> clip [0, 127] -> int8."""
    x = (acc.astype(np.int64) >> SHIFT)
    x = _wrap32(x)
    if bias is not None:
        x = _wrap32(x.astype(np.int64) + bias.astype(np.int64))
    hi = (1 << (out_width - 1)) - 1
    return np.clip(x, 0, hi).astype(np.int8)


def _wrap32(x: np.ndarray) -> np.ndarray:
    return (x & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


def conv2d_reference(data: np.ndarray, kernel: np.ndarray, wl: Conv2dWorkload,
                     bias: np.ndarray | None = None) -> np.ndarray:
    """NCHW int8 data, OIHW int8 kernel, per-channel int32 bias -> NCHW int8 output."""
    p, s, k = wl.pad, wl.stride, wl.kernel
    x = np.pad(data.astype(np.float64), ((0, 0), (0, 0), (p, p), (p, p)))
    win = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(2, 3))
    win = win[:, :, ::s, ::s][:, :, : wl.out_height, : wl.out_width]
    # float64 is exact here: |sum| < 2^14 * CI * K * K < 2^53.
    acc = np.einsum("nchwij,ocij->nohw", win, kernel.astype(np.float64), optimize=True)
    acc = _wrap32(acc.astype(np.int64))
    b = None if bias is None else bias.reshape(1, -1, 1, 1)
    return epilogue(acc, b)


def gemm_reference(data: np.ndarray, weight: np.ndarray,
                   bias: np.ndarray | None = None) -> np.ndarray:
    """(N, I) int8 times (O, I) int8 -> (N, O) int8 with the fused epilogue."""
    acc = _wrap32((data.astype(np.float64) @ weight.astype(np.float64).T).astype(np.int64))
    return epilogue(acc, None if bias is None else bias.reshape(1, -1))


# --- packing ------------------------------------------------------------------------------
def pack_conv_data(x: np.ndarray, hw: HardwareConfig) -> np.ndarray:
    n, c, h, w = x.shape
    return x.reshape(n // hw.batch, hw.batch, c // hw.block_in, hw.block_in, h, w) \
        .transpose(0, 2, 4, 5, 1, 3).copy()


def pack_conv_kernel(k: np.ndarray, hw: HardwareConfig) -> np.ndarray:
    o, i, kh, kw = k.shape
    return k.reshape(o // hw.block_out, hw.block_out, i // hw.block_in, hw.block_in, kh, kw) \
        .transpose(0, 2, 4, 5, 1, 3).copy()


def unpack_conv_output(y: np.ndarray) -> np.ndarray:
    nb, cob, oh, ow, b, bo = y.shape
    return y.transpose(0, 4, 1, 5, 2, 3).reshape(nb * b, cob * bo, oh, ow)


def pack_matrix(m: np.ndarray, rows_block: int, cols_block: int) -> np.ndarray:
    r, c = m.shape
    return m.reshape(r // rows_block, rows_block, c // cols_block, cols_block) \
        .transpose(0, 2, 1, 3).copy()


def unpack_matrix(m: np.ndarray) -> np.ndarray:
    rb, cb, r, c = m.shape
    return m.transpose(0, 2, 1, 3).reshape(rb * r, cb * c)


def pack_bias(bias: np.ndarray, batch: int, hw: HardwareConfig) -> np.ndarray:
    """Per-output-channel bias (CO,) -> (N/B, CO/BO, B, BO), the same for every batch row."""
    full = np.broadcast_to(bias.astype(np.int32), (batch, bias.size))
    return pack_matrix(np.ascontiguousarray(full), hw.batch, hw.block_out)


@dataclass(frozen=True)
class Operands:
    """Unpacked operands of one run."""

    data: np.ndarray
    weight: np.ndarray
    bias: np.ndarray | None


def random_operands(workload: Workload, bias: bool, seed: int = 0) -> Operands:
    rng = np.random.default_rng(seed)
    conv = workload.as_conv()
    if isinstance(workload, GemmWorkload):
        data = rng.integers(-128, 128, (workload.batch, workload.in_channels), dtype=np.int8)
        weight = rng.integers(-128, 128, (workload.out_channels, workload.in_channels),
                              dtype=np.int8)
    else:
        data = rng.integers(-128, 128, (conv.batch, conv.in_channels, conv.height, conv.width),
                            dtype=np.int8)
        weight = rng.integers(-128, 128, (conv.out_channels, conv.in_channels, conv.kernel,
                                          conv.kernel), dtype=np.int8)
    b = rng.integers(-(1 << 12), 1 << 12, conv.out_channels, dtype=np.int32) if bias else None
    return Operands(data, weight, b)


def packed_inputs(workload: Workload, ops: Operands, hw: HardwareConfig) -> dict[str, np.ndarray]:
    if isinstance(workload, GemmWorkload):
        inputs = {"data": pack_matrix(ops.data, hw.batch, hw.block_in),
                  "weight": pack_matrix(ops.weight, hw.block_out, hw.block_in)}
    else:
        inputs = {"data": pack_conv_data(ops.data, hw), "weight": pack_conv_kernel(ops.weight, hw)}
    if ops.bias is not None:
        inputs["bias"] = pack_bias(ops.bias, workload.batch, hw)
    return inputs


def reference_output(workload: Workload, ops: Operands) -> np.ndarray:
    if isinstance(workload, GemmWorkload):
        return gemm_reference(ops.data, ops.weight, ops.bias)
    return conv2d_reference(ops.data, ops.weight, workload, ops.bias)


def unpack_output(workload: Workload, packed: np.ndarray) -> np.ndarray:
    if isinstance(workload, GemmWorkload):
        return unpack_matrix(packed)
    return unpack_conv_output(packed)


@dataclass(frozen=True)
class Verification:
    ok: bool
    mismatches: int
    run: RunResult


def verify(lowered, seed: int = 0) -> Verification:
    """Run ``lowered`` on random data and compare bit-exactly with the numpy reference."""
    wl, hw = lowered.workload, lowered.hw
    ops = random_operands(wl, lowered.bias, seed)
    result = run(lowered.program, hw, packed_inputs(wl, ops, hw))
    got = unpack_output(wl, result.machine.read_tensor(lowered.program, "output"))
    want = reference_output(wl, ops)
    mismatches = int(np.count_nonzero(got != want))
    return Verification(mismatches == 0, mismatches, result)
