"""The fixed-point requantization per output channel (per-channel weight scales, as
``quantize_static(..., per_channel=True)`` makes them): each channel's digits, all channels
the same count, the shifts per-channel operands (the ``shift`` input's planes) and the
rounding and zero point in each channel's bias; every accumulator of every channel within
one step of the exact rounding, one VTA pass (``vtatune.deploy.runtime._fixed_point``)."""

import numpy as np
import pytest

from vtatune.deploy import DeployError, Requantization, channel_fixed_point, fixed_point
from vtatune.workloads import SHIFTS

RNG = np.random.default_rng(41)
ZERO_POINTS = [-128, -5, 0, 90]


def _layer(low: float, high: float, n: int = 16) -> tuple[float, ...]:
    """A layer's per-channel multipliers (float32 scales), log-uniform in [low, high], one
    of them a power of two and two equal."""
    m = np.exp2(RNG.uniform(np.log2(low), np.log2(high), n))
    m[0], m[1] = 2.0 ** np.floor(np.log2(high)), m[2]
    return tuple(float(np.float32(v)) for v in m)


LAYERS = [_layer(2 ** -9, 2 ** -7), _layer(2 ** -16, 2 ** -10), _layer(2 ** -6, 2 ** -3),
          _layer(2 ** -14, 2 ** -4)]


def _exact(x0: np.ndarray, m: np.ndarray, zp: int, low: int) -> np.ndarray:
    """round(x0 * m) + zp, clipped (ties either way: the bound allows either)."""
    return np.clip(np.floor(x0 * m + 0.5) + zp, low, 127)


@pytest.mark.parametrize("scales", LAYERS, ids=lambda s: f"{min(s):.2g}-{max(s):.2g}")
def test_every_channel_is_within_one_step(scales):
    """Every channel's accumulators from -X to X (past X its output saturates) and far
    beyond, for each zero point and with a ReLU, through the epilogue with its shift
    planes and fused bias: within one step of the exact rounding, most exact."""
    m = np.array(scales)
    for zp in ZERO_POINTS:
        for relu in (False, True):
            r = Requantization(acc_scale=scales[0], out_scale=1.0, zero_point=zp, relu=relu,
                               channel_scales=scales, reduction=4608)
            fixed = r.channel_fixed_point
            assert fixed is not None and fixed.bound < 1 and r.planes == 1 and r.on_vta
            assert r.channel_shifts is None and r.fixed_point is None
            d = fixed.digits
            assert {len(f.digits) for f in fixed.channels} == {d}
            (epilogue,) = r.epilogues(bias=True)
            assert epilogue.shift_planes == d and epilogue.saves == (d > 1)
            reach = int(300 / m.min())
            x0 = np.arange(-reach, reach + 1, max(1, reach // 100_000), dtype=np.int64)
            x0 = np.concatenate([x0, RNG.integers(-(1 << 29), 1 << 29, 1000)])[:, None]
            shifts = r.shift_values.reshape(d, 1, -1)
            tensors = {"bias": r.fused_bias(np.zeros(len(scales), np.int64))[None, :],
                       **dict(zip(SHIFTS, shifts, strict=False))}
            got = epilogue.apply(np.broadcast_to(x0, (len(x0), len(scales))), tensors)
            want = _exact(x0, m[None, :], zp, r.low)
            assert np.abs(got - want).max() <= 1, (zp, relu, fixed)
            assert (got == want).mean() > 0.5


def test_channels_needing_fewer_digits_take_as_many_as_the_most():
    """A power of two (one digit) among channels that need four: its digit split (the
    same multiplier, a gap of 0) or a closer sum of four, whichever bounds better; the
    shift planes: the Horner gaps from the smallest digit up, then the largest digit."""
    scales = (2.0 ** -9, 0.00492607, 0.0031)
    fixed = channel_fixed_point(scales, 3)
    alone = [fixed_point(m, 3) for m in scales]
    d = max(len(f.digits) for f in alone)
    assert fixed.digits == d > len(alone[0].digits)
    assert all(f.bound < 1 for f in fixed.channels)
    for f in fixed.channels:
        e = f.digits
        assert all(b >= a for a, b in zip(e, e[1:], strict=False))
    planes = fixed.shifts()
    assert planes.shape == (d, 3)
    for c, f in enumerate(fixed.channels):
        e = f.digits
        assert planes[:, c].tolist() == [e[i] - e[i - 1] for i in range(d - 1, 0, -1)] + [e[0]]
    # 2^-9 has no closer sum of distinct digits: its smallest digit split (2^-9 = 2^-10 +
    # 2^-10, then 2^-10 = 2^-11 + 2^-11...), the same sum, a first Horner gap of 0
    split = fixed.channels[0]
    assert d == 4 and split.digits == (10, 11, 12, 12) and planes[0, 0] == 0
    assert split.approximation == 2.0 ** -9
    assert [o.describe() for o in fixed.ops()] == [
        "save", *[s for j in range(d - 1) for s in (f"shr({SHIFTS[j]})", "add(saved)")],
        f"shr({SHIFTS[d - 1]})"]
    assert channel_fixed_point((2.0 ** -9, 1.5), 0) is None  # one channel has no design


def test_requantization_per_channel_chooses_one_pass():
    """Per-channel multipliers not all powers of two: one pass with the shift planes;
    all powers of two: the one shift per channel; exact, an unknown reduction: the CPU."""
    base = dict(acc_scale=4e-4, out_scale=0.03, zero_point=3, relu=True, reduction=576)
    r = Requantization(**base, channel_scales=(4e-4, 5e-4, 4e-4))
    fixed = r.channel_fixed_point
    assert r.on_vta and r.planes == 1 and r.needs_bias(False)
    assert r.shift_values.shape == (fixed.digits, 3)
    assert r.describe().startswith(f"on VTA: x{4e-4 / 0.03:.6g}..{5e-4 / 0.03:.6g} per "
                                   f"channel as {fixed.digits} powers of two each")
    assert r.fused_bias(np.array([0, 100, 0, 0], np.int32)).tolist() == [
        *(fixed.offsets + [0, 100, 0]).tolist(), 0]  # a padded channel: no offset
    pow2 = Requantization(**{**base, "out_scale": 2.0 ** -4},
                          channel_scales=(2.0 ** -8, 2.0 ** -9))
    assert pow2.channel_shifts == (4, 5) and pow2.channel_fixed_point is None
    assert pow2.shift_values.tolist() == [4, 5]
    for other in (dict(exact=True), dict(reduction=0)):
        cpu = Requantization(**{**base, **other}, channel_scales=(4e-4, 5e-4))
        assert cpu.channel_fixed_point is None and not cpu.on_vta and cpu.planes > 1
        assert cpu.shift_values is None


def test_a_channel_bias_that_could_overflow_is_refused():
    r = Requantization(acc_scale=4e-4, out_scale=0.03, zero_point=0, relu=False,
                       reduction=4608, channel_scales=(4e-4, 5e-4))
    r.fused_bias(np.array([0, 1 << 28], np.int64))
    with pytest.raises(DeployError, match="could overflow VTA's fixed-point requantization"):
        r.fused_bias(np.array([0, 1 << 30], np.int64))
