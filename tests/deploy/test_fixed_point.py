"""The fixed-point requantization VTA runs in one pass (``vtatune.deploy.runtime.
_fixed_point``): every accumulator within one step of the exact rounding of the real
multiply, measured over every accumulator that can be unsaturated and beyond; the fewest
digits; the byte passes where it cannot bound its error or with ``exact``."""

import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from simulator.hardware import PRESETS
from vtatune.builds import FallbackWarning
from vtatune.deploy import DeployError, LayerBuilder, Requantization, fixed_point
from vtatune.workloads import Conv2dWorkload

RNG = np.random.default_rng(38)
# multipliers as quantize_static makes them (s_in * s_w / s_out), from 2^-17 to 1/8
MULTIPLIERS = [float(np.float32(m)) for m in np.exp2(RNG.uniform(-17, -3, 24))]
ZERO_POINTS = [-128, -61, 0, 3, 127]


def _exact(x0: np.ndarray, m: float, zp: int, low: int) -> np.ndarray:
    """round(x0 * m) + zp, clipped: the real-valued requantization (ties either way: the
    bound allows either)."""
    return np.clip(np.floor(x0 * m + 0.5) + zp, low, 127)


def _outputs(r: Requantization, x0: np.ndarray) -> np.ndarray:
    (epilogue,) = r.epilogues(bias=True)
    return epilogue.apply(x0, {"bias": r.fused_bias(np.zeros(1, np.int64))}).astype(np.int64)


@pytest.mark.parametrize("m", MULTIPLIERS, ids=lambda m: f"{m:.3g}")
def test_every_accumulator_is_within_one_step(m):
    """Every x0 from -X to X (X: past it the output saturates) and a margin beyond, for
    each zero point and with a ReLU: within one step of the exact rounding, and most of
    them exact."""
    for zp in ZERO_POINTS:
        for relu in (False, True):
            r = Requantization(acc_scale=m, out_scale=1.0, zero_point=zp, relu=relu,
                               reduction=4608)
            f = r.fixed_point
            assert f is not None and f.bound < 1 and r.planes == 1
            reach = int(300 / m)
            x0 = np.arange(-reach, reach + 1, max(1, reach // 400_000), dtype=np.int64)
            x0 = np.concatenate([x0, RNG.integers(-(1 << 29), 1 << 29, 1000)])
            got = _outputs(r, x0)
            want = _exact(x0, m, zp, r.low)
            assert np.abs(got - want).max() <= 1, (m, zp, relu, f)
            assert (got == want).mean() > 0.5


def test_the_fewest_digits_meet_the_bound():
    """The design takes the fewest powers of two whose bound is below one step; a tighter
    tolerance needs more; a power of two is one digit; 1 and more has no design (no right
    shift to round with)."""
    for m in MULTIPLIERS:
        f = fixed_point(m, 0)
        tighter = fixed_point(m, 0, tolerance=f.bound / 4)
        assert tighter is None or len(tighter.digits) >= len(f.digits)
        assert abs(f.approximation - m) <= m / 64
    assert fixed_point(2.0 ** -9, 0).digits == (9,)
    assert fixed_point(0.00492607, 3).digits == (8, 10, 15)
    assert fixed_point(0.2, 0).bound < 1 and fixed_point(1.5, 0) is None


def test_requantization_chooses_one_pass_or_the_byte_passes():
    m = 4e-4 / 0.03
    one = Requantization(acc_scale=4e-4, out_scale=0.03, zero_point=3, relu=True,
                         reduction=576)
    (epilogue,) = one.epilogues(bias=True)
    assert one.on_vta and one.planes == 1 and one.needs_bias(False)
    assert epilogue.saves and epilogue.ops[-1].describe() == "clip(3,127)"
    assert one.describe().startswith(f"on VTA: x{m:.6g} as 2^-7+2^-8+")
    assert one.describe().endswith("of a step), zero point 3, ReLU")
    # exact: VTA's exact fixed point, still one pass (test_exact_fixed_point.py)
    exact = replace(one, exact=True)
    assert exact.fixed_point is None and exact.exact_fixed_point is not None
    assert exact.on_vta and exact.planes == 1 and " exactly (" in exact.describe()
    # an unknown or too large reduction, a large multiplier: the CPU
    # (per channel: test_channel_fixed_point.py)
    for other in (dict(reduction=0), dict(reduction=1 << 17), dict(acc_scale=0.045)):
        r = Requantization(**{**dict(acc_scale=4e-4, out_scale=0.03, zero_point=3,
                                     relu=True, reduction=576), **other})
        assert r.fixed_point is None and not r.on_vta and r.planes > 1, other
        assert r.describe().startswith("on the CPU")
    # the rounding and the zero point ride in the bias
    assert one.fused_bias(np.array([0, 100], np.int32)).tolist() == \
        [one.fixed_point.offset, 100 + one.fixed_point.offset]


def test_a_bias_that_could_overflow_is_refused():
    r = Requantization(acc_scale=4e-4, out_scale=0.03, zero_point=0, relu=False,
                       reduction=4608)
    r.fused_bias(np.array([1 << 28], np.int64))
    with pytest.raises(DeployError, match="could overflow VTA's fixed-point requantization: "
                                          "deploy with --exact"):
        r.fused_bias(np.array([1 << 30], np.int64))


def test_a_logged_schedule_the_copy_no_longer_fits_is_tuned_again(tmp_path):
    """The copy of the tile takes room in the accumulator buffer: the log's best schedule
    for ResNet-18's C6 (tuned with the benchmark epilogue, 4 threads) no longer lowers, so
    the layer falls back to the default schedule, saying why; with tuning asked, deploy
    tunes it again instead of falling back (as it tunes what the log lacks)."""
    hw, log = PRESETS["pynq"], Path(__file__).resolve().parents[2] / "logs/resnet18-pynq.jsonl"
    r = Requantization(acc_scale=4e-4, out_scale=0.03, zero_point=0, relu=True,
                       reduction=128 * 9)
    (epilogue,) = r.epilogues(bias=True)
    wl = replace(Conv2dWorkload(1, 28, 28, 128, 256, 3, 1, 2), epilogue=epilogue)
    with LayerBuilder(hw, log) as builder, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fallback = builder.programs(wl, (epilogue,), True)
    said = [str(w.message) for w in caught if issubclass(w.category, FallbackWarning)]
    assert fallback.source == "fallback" and len(said) == 1
    assert "(with the copy of the tile a fixed-point requantization keeps)" in said[0]
    builder = LayerBuilder(hw, log, 2, tmp_path / "tuned.jsonl")
    assert not builder.known(wl, True)  # a record, but one that does not lower
    builder.tune([(wl, True, 1)])
    with builder:
        tuned = builder.programs(wl, (epilogue,), True)
    assert tuned.source == "tuned" and tuned.passes[0].workload.epilogue == epilogue
