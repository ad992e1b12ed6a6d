"""Requantization: VTA's fused shift (one epilogue, half up) and the CPU's part from the
accumulator's bytes, against numpy's definitions of each."""

from __future__ import annotations

import numpy as np
import pytest

from vtatune.deploy import Requantization


def _tvm_quantize(acc: np.ndarray, acc_scale: float, out_scale: float, zp: int,
                  low: int) -> np.ndarray:
    """R.quantize of the float value acc * acc_scale, as TVM legalizes it (true division,
    round half to even)."""
    f = acc.astype(np.float32) * np.float32(acc_scale)
    return np.clip(np.rint(f / np.float32(out_scale)) + zp, low, 127).astype(np.int8)


def test_a_power_of_two_multiplier_is_one_fused_epilogue():
    r = Requantization(acc_scale=2.0**-12, out_scale=2.0**-3, zero_point=5, relu=True)
    assert (r.shift, r.on_vta, r.planes, r.low) == (9, True, 1, 5)
    (epilogue,) = r.epilogues(bias=True)
    assert epilogue.describe() == "add(bias) shr(9) add(5) clip(5,127)"
    rng = np.random.default_rng(0)
    acc = rng.integers(-(1 << 18), 1 << 18, 20000)
    bias = rng.integers(-(1 << 12), 1 << 12, 20000)
    got = epilogue.apply(acc, {"bias": r.fused_bias(bias)})
    want = np.clip(np.floor((acc + bias) / 512 + 0.5) + 5, 5, 127)  # half up
    np.testing.assert_array_equal(got, want)
    # TVM rounds ties to even: the two differ exactly on the ties whose quotient is even
    tvm = _tvm_quantize(acc + bias, 2.0**-12, 2.0**-3, 5, 5)
    v = acc + bias
    bad_ties = (v % 512 == 256) & ((v // 512) % 2 == 0) & (want > 5) & (want < 127)
    np.testing.assert_array_equal(got != tvm, bad_ties)
    assert np.abs(got.astype(int) - tvm).max() == 1


def test_an_add_rounds_by_an_immediate():
    r = Requantization(acc_scale=0.25, out_scale=0.5, zero_point=0, relu=False,
                       rounding="imm")
    assert r.epilogues(bias=False)[0].describe() == "add(1) shr(1) clip(-128,127)"
    assert r.fused_bias(np.array([3], np.int32)).tolist() == [3]


@pytest.mark.parametrize("multiplier, planes", [(3.0, 1), (0.9, 2), (1e-3, 3), (1e-9, 4)])
def test_other_multipliers_go_to_the_cpu_byte_by_byte(multiplier, planes):
    r = Requantization(acc_scale=multiplier * 0.05, out_scale=0.05, zero_point=-3,
                       relu=False)
    assert r.shift is None and not r.on_vta and r.planes == planes
    epilogues = r.epilogues(bias=True)
    assert len(epilogues) == planes
    assert epilogues[-1].describe().endswith("clip(-128,127)")
    rng = np.random.default_rng(planes)
    acc = np.concatenate([rng.integers(-(1 << 31), 1 << 31, 5000),
                          rng.integers(-(1 << 16), 1 << 16, 5000),
                          rng.integers(-300, 300, 5000)])
    bias = rng.integers(-1000, 1000, acc.size)
    v = acc + bias
    v = v[(v >= -(1 << 31)) & (v < 1 << 31)]
    b = bias[: v.size]
    a = v - b
    planes_out = [e.apply(a, {"bias": b}) for e in epilogues]
    want = _tvm_quantize(v, r.acc_scale, r.out_scale, -3, -128)
    # float32(acc) is exact below 2^24; beyond, the output saturates either way
    np.testing.assert_array_equal(r.finish(planes_out), want)


def test_exact_moves_every_rounding_shift_to_the_cpu():
    assert Requantization(2.0**-10, 2.0**-2, 0, False, exact=True).shift is None
    assert Requantization(2.0**-4, 2.0**-4, 0, False, exact=True).shift == 0  # no rounding
    assert Requantization(2.0**-2, 2.0**-4, 0, False).shift is None  # a left shift: x4
