"""DRAM layouts: operands packed as a VTA program reads them, and its output unpacked.

numpy only (no lowering, no numba): the compiler packs weights with it and the deployed
runtime (:mod:`vtatune.deploy.runtime`) packs and unpacks activations with the same code.

Data NCHW -> (N/B, C/c, H, W, B, c) (c = BLOCK_IN, or BLOCK_OUT when BLOCK_OUT > BLOCK_IN:
the previous layer's output layout), kernels OIHW -> (O/BO, I/BI, KH, KW, BO, BI), GEMM
matrices in (rows/block, cols/block, block, block) tiles, the bias (and a per-channel
shift) one int32 per output channel and batch row.

Example:
    >>> import numpy as np
    >>> from simulator.hardware import DEFAULT
    >>> pack_conv_data(np.zeros((1, 32, 4, 4), np.int8), DEFAULT).shape
    (1, 2, 4, 4, 1, 16)
"""

from __future__ import annotations

import numpy as np

from simulator.hardware import HardwareConfig
from vtatune.workloads._operators import (
    AddWorkload,
    Conv2dTransposeWorkload,
    GemmWorkload,
    Workload,
)
from vtatune.workloads._reference import Operands


def pack_conv_data(x: np.ndarray, hw: HardwareConfig) -> np.ndarray:
    """NCHW -> (N/B, C/c, H, W, B, c) with c = BLOCK_IN, or BLOCK_OUT when BLOCK_OUT >
    BLOCK_IN (the previous layer's output layout, which VTA loads: lowering.input_pack)."""
    n, c, h, w = x.shape
    block = hw.block_in * input_pack(hw)
    return x.reshape(n // hw.batch, hw.batch, c // block, block, h, w) \
        .transpose(0, 2, 4, 5, 1, 3).copy()


def dilate(x: np.ndarray, stride: int) -> np.ndarray:
    """NCHW data with ``stride - 1`` zero rows and columns between pixels (topi.nn.dilate):
    what conv2d_transpose_packed reads; the host computes it before VTA runs."""
    n, c, h, w = x.shape
    out = np.zeros((n, c, (h - 1) * stride + 1, (w - 1) * stride + 1), x.dtype)
    out[:, :, ::stride, ::stride] = x
    return out


def transpose_kernel(k: np.ndarray) -> np.ndarray:
    """An IOHW transposed-conv kernel as conv2d_transpose_packed correlates it: OIHW,
    spatially flipped (as TVM's own test packs it: transpose, then np.flip on kh and kw)."""
    return np.ascontiguousarray(k.transpose(1, 0, 2, 3)[:, :, ::-1, ::-1])


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
    """Per-output-channel bias (CO,) -> (N/B, CO/BO, B, BO), the same for every batch row;
    any per-channel tensor (a ``shift``) is packed so; (planes, CO) (a ``shift`` of several
    planes) -> (planes, N/B, CO/BO, B, BO)."""
    if bias.ndim == 2:
        return np.stack([pack_bias(plane, batch, hw) for plane in bias])
    full = np.broadcast_to(bias.astype(np.int32), (batch, bias.size))
    return pack_matrix(np.ascontiguousarray(full), hw.batch, hw.block_out)


def pack_data(workload: Workload, data: np.ndarray, hw: HardwareConfig) -> np.ndarray:
    """A workload's unpacked data operand as its program reads it from DRAM (an ALU-only
    kernel's operands alike; conv2d_transpose: dilated first, as TVM's compute needs)."""
    if isinstance(workload, GemmWorkload):
        return pack_matrix(data, hw.batch, hw.block_in)
    if isinstance(workload, Conv2dTransposeWorkload):
        return pack_conv_data(dilate(data, workload.stride), hw)
    return pack_conv_data(data, hw)


def pack_weight(workload: Workload, weight: np.ndarray, hw: HardwareConfig) -> np.ndarray:
    """A workload's unpacked weight operand (its :func:`~vtatune.workloads.operand_shapes`
    layout) as its program reads it (conv2d_transpose: the kernel flipped; an ALU-only
    kernel's second operand: packed as data)."""
    if isinstance(workload, AddWorkload):
        return pack_conv_data(weight, hw)
    if isinstance(workload, GemmWorkload):
        return pack_matrix(weight, hw.block_out, hw.block_in)
    if isinstance(workload, Conv2dTransposeWorkload):
        return pack_conv_kernel(transpose_kernel(weight), hw)
    return pack_conv_kernel(weight, hw)


def packed_inputs(workload: Workload, ops: Operands, hw: HardwareConfig) -> dict[str, np.ndarray]:
    """The DRAM tensors of a run: operands packed as the program reads them (for
    conv2d_transpose, the input dilated and the kernel flipped as TVM's compute needs)."""
    inputs = {"data": pack_data(workload, ops.data, hw),
              "weight": pack_weight(workload, ops.weight, hw)}
    if not isinstance(workload, AddWorkload):
        for name, values in (("bias", ops.bias), ("shift", ops.shift)):
            if values is not None:
                inputs[name] = pack_bias(values, workload.batch, hw)
    return inputs


def unpack_output(workload: Workload, packed: np.ndarray) -> np.ndarray:
    if isinstance(workload, GemmWorkload):
        return unpack_matrix(packed)
    return unpack_conv_output(packed)


def output_pack(hw: HardwareConfig) -> int:
    """How many BLOCK_OUT-channel blocks lie side by side in one channel block of the output
    tensor in DRAM: ``BLOCK_IN / BLOCK_OUT`` when BLOCK_IN > BLOCK_OUT, else 1.

    A layer's output is the next layer's input, which VTA loads in blocks of BLOCK_IN
    channels (NCHW{BLOCK_IN}c). With BLOCK_IN = k * BLOCK_OUT the store writes straight into
    that layout: output block ``co`` of pixel ``(h, w)`` goes to DRAM element
    ``(co // k) * OH*OW*k + (h*OW + w) * k + co % k`` (in BLOCK_OUT elements). The ACC tile
    is interleaved the same way, (b, co // k, h, w, co % k) (:func:`acc_coefficients`), so
    that a store row is contiguous on both sides: the GEMM micro-ops address it so, and the
    bias add unrolls its innermost loop (co % k) into k micro-ops. With
    BLOCK_OUT > BLOCK_IN no store can split an output element into the next layer's blocks,
    so the output keeps the NCHW{BLOCK_OUT}c layout, and the next layer loads it so
    (:func:`input_pack`)."""
    return hw.block_in // hw.block_out if hw.block_in > hw.block_out else 1


def input_pack(hw: HardwareConfig) -> int:
    """How many BLOCK_IN-channel blocks lie side by side in one channel block of the input
    tensor in DRAM: ``BLOCK_OUT / BLOCK_IN`` when BLOCK_OUT > BLOCK_IN, else 1.

    The previous layer's output is packed by BLOCK_OUT (NCHW{BLOCK_OUT}c, :func:`output_pack`);
    with BLOCK_OUT = k * BLOCK_IN, input block ``ci`` of pixel ``(y, x)`` is DRAM element
    ``(ci // k) * H*W*k + (y*W + x) * k + ci % k`` (in BLOCK_IN elements). The INP tile is
    interleaved the same way, (ci // k, y, x, ci % k): a LOAD row of a window is contiguous
    (its columns and pads scale by k) and the GEMM micro-ops address the tile so."""
    return hw.block_out // hw.block_in if hw.block_out > hw.block_in else 1
