"""SRAM layouts: the accumulator tile as the lowering lays it out. The DRAM layouts (operands
packed as a program reads them, its output unpacked) are numpy-only and live below, in
:mod:`vtatune.workloads` (the deployed runtime packs activations with them); re-exported
here for the lowering's modules."""

from __future__ import annotations

from vtatune.workloads import (
    dilate,
    input_pack,
    output_pack,
    pack_bias,
    pack_conv_data,
    pack_conv_kernel,
    pack_data,
    pack_matrix,
    pack_weight,
    packed_inputs,
    transpose_kernel,
    unpack_conv_output,
    unpack_matrix,
    unpack_output,
)

__all__ = [
    "acc_coefficients", "dilate", "input_pack", "output_pack", "pack_bias", "pack_conv_data",
    "pack_conv_kernel", "pack_data", "pack_matrix", "pack_weight", "packed_inputs",
    "transpose_kernel", "unpack_conv_output", "unpack_matrix", "unpack_output",
]


def acc_coefficients(k: int, tile_co: int, tile_h: int, tile_w: int
                     ) -> tuple[tuple[str, int, int], ...]:
    """The dense ACC tile of one batch row, outer to inner: (axis, extent, ACC stride).
    (co, h, w) when the output is packed by BLOCK_OUT (k = 1); (co // k, h, w, co % k) when
    it is packed by BLOCK_IN = k x BLOCK_OUT (:func:`output_pack`), so that the k blocks of
    a pixel that lie side by side in DRAM lie side by side in ACC too."""
    if k == 1:
        return (("co", tile_co, tile_h * tile_w), ("h", tile_h, tile_w), ("w", tile_w, 1))
    return (("co", tile_co // k, k * tile_h * tile_w), ("h", tile_h, tile_w * k),
            ("w", tile_w, k), ("co%k", k, 1))
