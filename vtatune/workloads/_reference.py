"""The operators' numpy reference: what a VTA run must compute, bit for bit, on unpacked
(NCHW / OIHW / row-major) int8 operands.

Example:
    >>> from vtatune.workloads import WORKLOADS
    >>> wl = WORKLOADS["gemm"]["dense128"]
    >>> ops = random_operands(wl, bias=True)
    >>> reference_output(wl, ops).shape, reference_output(wl, ops).dtype
    ((128, 128), dtype('int8'))
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vtatune.workloads._epilogue import BENCHMARK, SHIFTS, Epilogue
from vtatune.workloads._operators import (
    AddWorkload,
    Conv2dTransposeWorkload,
    Conv2dWorkload,
    GemmWorkload,
    GroupConv2dWorkload,
    Workload,
)


def _wrap32(x: np.ndarray) -> np.ndarray:
    return (x & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


def _conv_acc(data: np.ndarray, kernel: np.ndarray, k: int, p: int, s: int, oh: int,
              ow: int) -> np.ndarray:
    """The (float64, exact) accumulators of a cross-correlation: NCHW data, OIHW kernel."""
    x = np.pad(data.astype(np.float64), ((0, 0), (0, 0), (p, p), (p, p)))
    win = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(2, 3))
    win = win[:, :, ::s, ::s][:, :, :oh, :ow]
    # float64 is exact here: |sum| < 2^14 * CI * K * K < 2^53.
    return np.einsum("nchwij,ocij->nohw", win, kernel.astype(np.float64), optimize=True)


def _finish(acc: np.ndarray, bias: np.ndarray | None, epilogue: Epilogue,
            channel_axis_shape: tuple[int, ...] = (1, -1, 1, 1),
            shift: np.ndarray | None = None) -> np.ndarray:
    """int32 accumulators (wrapping) -> ``epilogue`` (with a per-channel ``bias`` when one is
    given: the benchmark epilogue gains it; and the per-channel ``shift`` it reads) ->
    int8."""
    channel = {"bias": bias}
    if shift is not None:  # (channels,) or (planes, channels): plane j is SHIFTS[j]
        planes = shift.reshape(-1, shift.shape[-1])
        channel.update(zip(SHIFTS, planes, strict=False))
    tensors = {name: v.reshape(channel_axis_shape) for name, v in channel.items()
               if v is not None}
    return epilogue.with_bias(bias is not None).apply(_wrap32(acc.astype(np.int64)), tensors)


def conv2d_reference(data: np.ndarray, kernel: np.ndarray, wl: Conv2dWorkload,
                     bias: np.ndarray | None = None, shift: np.ndarray | None = None
                     ) -> np.ndarray:
    """NCHW int8 data, OIHW int8 kernel, per-channel int32 bias (and shift, when the
    epilogue reads one) -> NCHW int8 output."""
    return _finish(_conv_acc(data, kernel, wl.kernel, wl.pad, wl.stride, wl.out_height,
                             wl.out_width), bias, wl.epilogue, shift=shift)


def group_conv2d_reference(data: np.ndarray, kernel: np.ndarray, wl: GroupConv2dWorkload,
                           bias: np.ndarray | None = None, shift: np.ndarray | None = None
                           ) -> np.ndarray:
    """NCHW int8 data, (CO, CI / groups, K, K) int8 kernel -> NCHW int8 output: group g's
    output channels convolve group g's input channels only."""
    ci, co = wl.group_in_channels, wl.group_out_channels
    acc = np.concatenate([
        _conv_acc(data[:, g * ci:(g + 1) * ci], kernel[g * co:(g + 1) * co], wl.kernel,
                  wl.pad, wl.stride, wl.out_height, wl.out_width)
        for g in range(wl.groups)], axis=1)
    return _finish(acc, bias, wl.epilogue, shift=shift)


def conv2d_transpose_reference(data: np.ndarray, kernel: np.ndarray,
                               wl: Conv2dTransposeWorkload,
                               bias: np.ndarray | None = None,
                               shift: np.ndarray | None = None) -> np.ndarray:
    """NCHW int8 data, IOHW int8 kernel (ONNX ConvTranspose's and PyTorch's layout) ->
    NCHW int8 output, computed by its definition: input pixel (i, j) adds
    ``data[i, j] * kernel[:, :, a, b]`` to output pixel (i * stride + a - pad,
    j * stride + b - pad); output_padding adds rows and columns at the bottom and right."""
    n, s, k, p = wl.batch, wl.stride, wl.kernel, wl.pad
    full_h = max((wl.height - 1) * s + k, p + wl.out_height)
    full_w = max((wl.width - 1) * s + k, p + wl.out_width)
    acc = np.zeros((n, wl.out_channels, full_h, full_w))
    x, w = data.astype(np.float64), kernel.astype(np.float64)
    for a in range(k):
        for b in range(k):
            acc[:, :, a:a + (wl.height - 1) * s + 1:s, b:b + (wl.width - 1) * s + 1:s] += \
                np.einsum("nchw,co->nohw", x, w[:, :, a, b], optimize=True)
    return _finish(acc[:, :, p:p + wl.out_height, p:p + wl.out_width], bias, wl.epilogue,
                   shift=shift)


def gemm_reference(data: np.ndarray, weight: np.ndarray, bias: np.ndarray | None = None,
                   epilogue: Epilogue = BENCHMARK, shift: np.ndarray | None = None
                   ) -> np.ndarray:
    """(N, I) int8 times (O, I) int8 -> (N, O) int8 with the fused epilogue."""
    acc = (data.astype(np.float64) @ weight.astype(np.float64).T).astype(np.int64)
    return _finish(acc, bias, epilogue, (1, -1), shift)


@dataclass(frozen=True)
class Operands:
    """Unpacked operands of one run: ``shift`` (int32 0..31 per output channel) where the
    epilogue shifts each channel by its own amount."""

    data: np.ndarray
    weight: np.ndarray
    bias: np.ndarray | None
    shift: np.ndarray | None = None


def operand_shapes(workload: Workload) -> dict[str, tuple[int, ...]]:
    """The unpacked operands' shapes: data NCHW (gemm: (N, I)); weight OIHW (gemm: (O, I);
    group_conv2d: (O, I / groups, K, K); conv2d_transpose: IOHW); bias and shift one per
    output channel."""
    wl = workload
    if isinstance(wl, AddWorkload):  # the two operands, NCHW; no bias
        shape = (wl.batch, wl.channels, wl.height, wl.width)
        return {"data": shape, "weight": shape, "bias": (wl.channels,)}
    if isinstance(wl, GemmWorkload):
        shapes = {"data": (wl.batch, wl.in_channels),
                  "weight": (wl.out_channels, wl.in_channels)}
    else:
        k = wl.kernel
        if isinstance(wl, Conv2dTransposeWorkload):
            weight = (wl.in_channels, wl.out_channels, k, k)
        elif isinstance(wl, GroupConv2dWorkload):
            weight = (wl.out_channels, wl.group_in_channels, k, k)
        else:
            weight = (wl.out_channels, wl.in_channels, k, k)
        shapes = {"data": (wl.batch, wl.in_channels, wl.height, wl.width), "weight": weight}
    planes = wl.epilogue.shift_planes
    shift = (planes, wl.out_channels) if planes > 1 else (wl.out_channels,)
    return {**shapes, "bias": (wl.out_channels,), "shift": shift}


def random_operands(workload: Workload, bias: bool, seed: int = 0) -> Operands:
    """Seeded random int8 data and weights, an int32 bias when ``bias`` or the workload's
    epilogue reads one, and a shift (0..31 per channel) when the epilogue reads one (its
    planes a ``min`` or ``max`` reads: bounds, :func:`_draw_bounds`)."""
    bias = bias or workload.epilogue.bias
    rng = np.random.default_rng(seed)
    shapes = operand_shapes(workload)
    data = rng.integers(-128, 128, shapes["data"], dtype=np.int8)
    if getattr(workload, "rhs_bits", 8) == 32:  # an int32 operand of an ALU-only add
        weight = rng.integers(-(1 << 12), 1 << 12, shapes["weight"], dtype=np.int32)
    else:
        weight = rng.integers(-128, 128, shapes["weight"], dtype=np.int8)
    b = rng.integers(-(1 << 12), 1 << 12, shapes["bias"], dtype=np.int32) if bias else None
    # drawn last: the other operands are those of the same workload without a shift
    shift = (rng.integers(0, 32, shapes["shift"], dtype=np.int32)
             if workload.epilogue.shift_planes else None)
    if shift is not None:
        _draw_bounds(workload.epilogue, shift.reshape(-1, shift.shape[-1]), rng)
    return Operands(data, weight, b, shift)


#: How far from 0 :func:`random_operands` draws a clamp's per-channel bounds: well inside
#: the accumulators' range (sums of ~100 int8 products: ~2^15), so the clamp cuts many and
#: a cut value tells its channel's bound (a bound read from another channel's place shows).
BOUND_RANGE = 1 << 12


def _draw_bounds(epilogue: Epilogue, planes: np.ndarray, rng: np.random.Generator) -> None:
    """Redraw in place the shift planes no ``shr`` reads (a ``min``'s or ``max``'s
    per-channel bounds): a plane only ``min`` reads 0..BOUND_RANGE, one only ``max`` reads
    -BOUND_RANGE..0, so a clamp's interval holds 0 and both of its ends cut."""
    for j, name in enumerate(SHIFTS[:planes.shape[0]]):
        ops = {o.op for o in epilogue.ops if o.tensor == name}
        if "shr" in ops:
            continue
        lo = 0 if ops == {"min"} else -BOUND_RANGE
        hi = 0 if ops == {"max"} else BOUND_RANGE
        planes[j] = rng.integers(lo, hi + 1, planes.shape[1], dtype=np.int32)


def elementwise_reference(lhs: np.ndarray, rhs: np.ndarray, wl: AddWorkload) -> np.ndarray:
    """An ALU-only add (or product) of two NCHW tensors, widened to int32, then its
    epilogue, as VTA's ALU computes it."""
    acc = lhs.astype(np.int64)
    acc = acc + rhs if wl.alu_op == "add" else acc * rhs
    return _finish(acc, None, wl.epilogue)


def reference_output(workload: Workload, ops: Operands) -> np.ndarray:
    if isinstance(workload, AddWorkload):
        return elementwise_reference(ops.data, ops.weight, workload)
    if isinstance(workload, GemmWorkload):
        return gemm_reference(ops.data, ops.weight, ops.bias, workload.epilogue, ops.shift)
    if isinstance(workload, GroupConv2dWorkload):
        return group_conv2d_reference(ops.data, ops.weight, workload, ops.bias, ops.shift)
    if isinstance(workload, Conv2dTransposeWorkload):
        return conv2d_transpose_reference(ops.data, ops.weight, workload, ops.bias, ops.shift)
    return conv2d_reference(ops.data, ops.weight, workload, ops.bias, ops.shift)
