"""Workload shapes: output sizes, MAC counts, keys and validation of every operator."""

from __future__ import annotations

import itertools
import os
import pickle
import subprocess
import sys

import pytest

from simulator.hardware import DEFAULT, HardwareConfig
from vtatune.errors import WorkloadError
from vtatune.workloads import (
    WORKLOADS,
    Conv2dTransposeWorkload,
    Conv2dWorkload,
    Epilogue,
    GroupConv2dWorkload,
    deployed,
    get_workload,
)


def _scatter_size(h: int, k: int, p: int, s: int, op: int) -> int:
    """Rows a transposed conv writes, counted by scattering (independent of the formula)."""
    rows = {i * s + d - p for i in range(h) for d in range(k)}  # cropped by p at the top
    return max(rows) + 1 - p + op  # and at the bottom; output padding extends it


@pytest.mark.parametrize("h,k,p,s,op", [(4, 4, 1, 2, 0), (8, 3, 1, 2, 1), (5, 3, 0, 1, 0),
                                        (7, 5, 2, 3, 2), (1, 1, 0, 1, 0)])
def test_transpose_output_size_matches_scatter(h, k, p, s, op):
    t = Conv2dTransposeWorkload(1, h, h + 1, 16, 16, k, p, s, op)
    assert t.out_height == _scatter_size(h, k, p, s, op)
    assert t.out_width == _scatter_size(h + 1, k, p, s, op)


def test_transpose_macs_count_the_dilated_windows():
    t = WORKLOADS["conv2d_transpose"]["dcgan.CT2"]  # 8x8x512 -> 16x16x256, k4
    assert (t.out_height, t.out_width) == (16, 16)
    assert t.macs == 16 * 16 * 256 * 512 * 4 * 4


def test_group_conv_shapes_and_macs():
    g = GroupConv2dWorkload(2, 28, 28, 256, 128, 3, 1, 2, 8)
    assert (g.out_height, g.out_width) == (14, 14)
    assert (g.group_in_channels, g.group_out_channels) == (32, 16)
    assert g.macs == 2 * 128 * 14 * 14 * 32 * 9
    # groups=1 is a plain conv2d: same output and MACs
    c = Conv2dWorkload(2, 28, 28, 256, 128, 3, 1, 2)
    g1 = GroupConv2dWorkload(2, 28, 28, 256, 128, 3, 1, 2, 1)
    assert (g1.out_height, g1.out_width, g1.macs) == (c.out_height, c.out_width, c.macs)


def test_keys_and_shape_args_name_every_field():
    g = GroupConv2dWorkload(1, 7, 7, 64, 64, 3, 1, 1, 4, "x")
    assert g.key() == ("group_conv2d.batch1.height7.width7.in_channels64.out_channels64."
                       "kernel3.pad1.stride1.groups4")
    assert g.shape_args() == dict(batch=1, height=7, width=7, in_channels=64, out_channels=64,
                                  kernel=3, pad=1, stride=1, groups=4)
    t = Conv2dTransposeWorkload(1, 4, 4, 32, 16, 4, 1, 2, 1)
    assert t.key() == ("conv2d_transpose.batch1.height4.width4.in_channels32.out_channels16."
                       "kernel4.pad1.stride2.output_padding1")
    assert Conv2dTransposeWorkload(**t.shape_args()) == t
    assert GroupConv2dWorkload(**g.shape_args(), name="x") == g
    assert t.describe() == "conv2d_transpose 1x32x4x4 -> 16, k4 p1 s2 op1"
    assert g.describe() == "x group_conv2d 1x64x7x7 -> 64, k3 p1 s1 g4"


@pytest.mark.parametrize("make,message", [
    (lambda: GroupConv2dWorkload(1, 8, 8, 48, 64, 3, 1, 1, 32),
     "in_channels 48 is not divisible by groups 32"),
    (lambda: GroupConv2dWorkload(1, 8, 8, 64, 48, 3, 1, 1, 32),
     "out_channels 48 is not divisible by groups 32"),
    (lambda: GroupConv2dWorkload(1, 8, 8, 64, 64, 3, 1, 1, 0),
     "groups must be a positive integer, got 0"),
    (lambda: GroupConv2dWorkload(1, 2, 2, 64, 64, 5, 0, 1, 2),
     "kernel 5 with pad 0 does not fit a 2x2 input"),
    (lambda: Conv2dTransposeWorkload(1, 4, 4, 16, 16, 4, 1, 2, 2),
     "output_padding 2 must be smaller than stride 2"),
    (lambda: Conv2dTransposeWorkload(1, 4, 4, 16, 16, 4, -1, 2, 0),
     "pad must be a non-negative integer, got -1"),
    (lambda: Conv2dTransposeWorkload(1, 4, 4, 16, 16, 4, 1, 2, True),
     "output_padding must be a non-negative integer, got True"),
    (lambda: Conv2dTransposeWorkload(1, 1, 1, 16, 16, 3, 2, 1, 0),
     "kernel 3 with pad 2 does not fit a 1x1 input"),
])
def test_bad_shapes_are_rejected_with_the_rule(make, message):
    with pytest.raises(WorkloadError) as exc:
        make()
    assert str(exc.value) == message


def test_hardware_check_names_the_block():
    hw = DEFAULT  # BLOCK 16
    GroupConv2dWorkload(1, 8, 8, 512, 512, 3, 1, 1, 32).check(hw)  # 16 per group
    with pytest.raises(WorkloadError, match=r"^in_channels per group 8 is not a multiple of "
                                            r"BLOCK_IN 16"):
        GroupConv2dWorkload(1, 8, 8, 512, 512, 3, 1, 1, 64).check(hw)
    with pytest.raises(WorkloadError, match=r"^out_channels per group 8 is not a multiple"):
        GroupConv2dWorkload(1, 8, 8, 1024, 512, 3, 1, 1, 64).check(hw)
    with pytest.raises(WorkloadError, match=r"^in_channels 24 is not a multiple of BLOCK_IN"):
        Conv2dTransposeWorkload(1, 4, 4, 24, 16, 4, 1, 2, 0).check(hw)
    with pytest.raises(WorkloadError, match=r"^pad 4 exceeds kernel - 1 = 3"):
        Conv2dTransposeWorkload(1, 8, 8, 16, 16, 4, 4, 3, 0).check(hw)


def test_named_workloads_run_on_every_preset_block():
    for op in ("group_conv2d", "conv2d_transpose"):
        for wl in WORKLOADS[op].values():
            for name in ("pynq", "ultra96"):
                try:
                    hw = HardwareConfig.resolve(name)
                except Exception:  # noqa: BLE001 - preset names differ per checkout
                    continue
                if hw.block_in <= 16 and hw.block_out <= 16:
                    wl.check(hw)
    assert get_workload("group_conv2d", "D3").groups == 8
    assert get_workload("conv2d_transpose", "CT1").name == "dcgan.CT1"
    with pytest.raises(WorkloadError, match="unknown operator 'deconv' \\(known: conv2d, gemm, "
                                            "group_conv2d, conv2d_transpose\\)"):
        get_workload("deconv", "x")


def test_output_size_formula_over_a_grid():
    # Every small transposed shape: the formula agrees with scattering.
    for h, k, s in itertools.product((1, 2, 5), (1, 2, 3, 4), (1, 2, 3)):
        for p, op in itertools.product(range(k), range(s)):
            if _scatter_size(h, k, p, s, op) < 1:
                continue
            t = Conv2dTransposeWorkload(1, h, h, 16, 16, k, p, s, op)
            assert t.out_height == _scatter_size(h, k, p, s, op)


def test_an_epilogue_hashed_here_is_found_by_value_in_another_process():
    """An epilogue remembers its hash (the lowering's caches hash it several times per
    schedule), but a process that unpickles it (a ``--jobs`` worker) hashes its strings with
    another seed: the hash must not travel with it."""
    epilogue = deployed(8, relu=True)
    assert hash(epilogue) == hash(Epilogue(epilogue.ops))  # remembered, equal by value
    probe = ("import pickle, sys\n"
             "from vtatune.workloads import Epilogue\n"
             "e = pickle.loads(sys.stdin.buffer.read())\n"
             "print({Epilogue(e.ops): 'found'}.get(e, 'missing'))\n")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", probe], input=pickle.dumps(epilogue),
                         capture_output=True, env=env, check=True).stdout
    assert out.decode().strip() == "found"
