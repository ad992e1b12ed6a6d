"""VTA's exact one-pass requantization (``vtatune.deploy.runtime._exact_fixed_point``):
every accumulator rounded as exact arithmetic rounds, checked on the breakpoints and beyond;
and deploy's choice of it (``_exactness``): by default for a model that normalizes."""

import json
import subprocess
import sys
import warnings
from fractions import Fraction

import numpy as np
import pytest

pytest.importorskip("tvm")

from vtatune.builds import FallbackWarning  # noqa: E402
from vtatune.deploy import (  # noqa: E402
    IN_PASS,
    Requantization,
    deploy,
    exact_fixed_point,
    models,
    normalizing_ops,
    placement,
    resolve_exact,
)
from vtatune.deploy.runtime import rounding_breakpoints  # noqa: E402

RNG = np.random.default_rng(44)
# scales as quantize_static makes them: the multiplier s_in * s_w / s_out from 2^-16 to 1/8
SCALES = [(float(np.float32(m * o)), float(np.float32(o)))
          for m, o in zip(np.exp2(RNG.uniform(-16, -3, 12)), np.exp2(RNG.uniform(-7, -3, 12)),
                          strict=True)]
ZERO_POINTS = [-128, -61, 0, 3, 127]


def _exact(x: np.ndarray, m: Fraction, zp: int, low: int) -> np.ndarray:
    """clip(round_half_even(x m) + zp): Python's round of a Fraction, element by element."""
    return np.clip([round(int(v) * m) + zp for v in x], low, 127)


def _points(m: Fraction, zp: int, low: int) -> np.ndarray:
    """Each breakpoint and its neighbours, random values between, and accumulators far
    beyond (up to the int32 an int8 GEMM of 4,608 products with a bias reaches)."""
    t = rounding_breakpoints(m, zp, low)
    if not len(t):  # a ReLU at the zero point 127: no level to reach
        t = np.array([0])
    near = (t[:, None] + np.arange(-2, 3)).ravel()
    between = RNG.integers(t[0] - 50, t[-1] + 50, 400)
    far = np.array([-(1 << 30), -(1 << 27), t[0] - 10**6, t[-1] + 10**6, 1 << 27, 1 << 30])
    return np.concatenate([near, between, far]).astype(np.int64)


@pytest.mark.parametrize("scales", SCALES, ids=lambda s: f"{s[0] / s[1]:.3g}")
def test_every_accumulator_rounds_as_exact_arithmetic(scales):
    """For each zero point, with and without a ReLU: a design, and its outputs (the epilogue
    VTA runs, its clamp bounds the shift input's planes) equal exact arithmetic's on every
    breakpoint, around them and far beyond."""
    acc_scale, out_scale = scales
    m = Fraction(acc_scale) / Fraction(out_scale)
    for zp in ZERO_POINTS:
        for relu in (False, True):
            r = Requantization(acc_scale=acc_scale, out_scale=out_scale, zero_point=zp,
                               relu=relu, exact=True, reduction=4608)
            f = r.exact_fixed_point
            assert f is not None and r.on_vta and r.planes == 1, (scales, zp, relu)
            x = _points(m, zp, r.low)
            want = _exact(x, m, zp, r.low)
            assert (f.apply(x) == want).all(), (scales, zp, relu, f)
            (epilogue,) = r.epilogues(bias=True)
            planes = r.shift_input(1)
            got = epilogue.apply(x, {"bias": r.fused_bias(np.zeros(1, np.int64)),
                                     "shift": planes[0], "shift1": planes[1]})
            assert (got == want).all(), (scales, zp, relu, epilogue.describe())


def test_the_program_clamps_multiplies_shifts_left_and_multiplies():
    """Clamp, times the odd factor (left shifts and adds of a copy), the guard bits, the
    step, the digits (right shifts and adds of a second copy), the last shift: its cost
    the timing model's cycles of those steps."""
    f = exact_fixed_point(4e-4, 0.03, zero_point=3, low=-128)
    ops = [o.describe() for o in f.ops()]
    bits = [i for i in range(f.factor.bit_length()) if f.factor >> i & 1]
    factor_steps = ["save"] + [s for i in range(len(bits) - 1, 0, -1)
                               for s in (f"shr({bits[i - 1] - bits[i]})", "add(saved)")]
    assert f.factor > 1 and bits[0] == 0  # odd
    assert ops[:2 + len(factor_steps)] == ["min(shift)", "max(shift1)", *factor_steps]
    rest = ops[2 + len(factor_steps):]
    assert rest[:2] == [f"shr({-f.guard_bits})", f"add({f.step})"] and rest[2] == "save"
    assert rest[3:] == [s for i in range(len(f.digits) - 1, 0, -1) for s in (
        f"shr({f.digits[i] - f.digits[i - 1]})", "add(saved)")] + [
        f"shr({f.digits[0] + f.guard_bits})"]
    # the bias add 2, each step 1 (a tensor operand 2), a copy 4 (three steps), the clip 2
    tensor_ops = sum(o.tensor is not None for o in f.ops())
    assert f.alu_cycles == 2 + len(ops) + tensor_ops + 3 * ops.count("save") + 2
    lo, hi = f.bounds
    assert f.planes(3).tolist() == [[hi] * 3, [lo] * 3] and lo < 0 < hi
    # the clamp leaves room for the factor and the guard bits: no sum reaches 2^31
    assert (max(-lo, hi) * f.factor << f.guard_bits) * 2 < 1 << 31
    assert f.check_bias(np.array([10**6]), 4608)
    assert not f.check_bias(np.array([2**31 - 2**22]), 4608)  # with 4,608 int8 products


def test_a_power_of_two_rounds_ties_to_even_as_two_floors():
    """x * 2^-k is half-way at every 2^k-th accumulator and rounds to even: up, then down,
    which no single floor follows. Rounded exactly (--exact, or a model that normalizes):
    ``floor((x + 2^(k-1)) / 2^(k+1)) + floor((x + 3 2^(k-1) - 1) / 2^(k+1))``, one pass;
    otherwise VTA's shift, ties half up."""
    assert exact_fixed_point(2.0 ** -12, 2.0 ** -5, zero_point=0, low=-128) is None
    for k in (1, 7, 15):
        for exact in (True, IN_PASS):
            for zp, relu in ((0, False), (-5, True), (7, False)):
                r = Requantization(acc_scale=2.0 ** -(k + 5), out_scale=2.0 ** -5,
                                   zero_point=zp, relu=relu, exact=exact, reduction=576)
                assert r.even_shift == k and r.on_vta and r.planes == 1 and r.shift is None
                (epilogue,) = r.epilogues(bias=True)
                ties = (np.arange(-300, 300) << k) + (1 << (k - 1))
                x = np.concatenate([ties, ties + 1, ties - 1, RNG.integers(-2**23, 2**23, 999)])
                want = np.clip(np.rint(x / 2.0 ** k) + zp, r.low, 127)
                got = epilogue.apply(x, {"bias": r.fused_bias(np.zeros(1, np.int64))})
                assert (got == want).all(), (k, exact, zp, relu)
    kw = dict(acc_scale=2.0 ** -12, out_scale=2.0 ** -5, zero_point=0, relu=False,
              reduction=576)
    assert Requantization(**kw).shift == 7 and Requantization(**kw).even_shift is None
    assert Requantization(**kw, exact=True).describe() == (
        "on VTA: shift 7, ties to even as exact arithmetic rounds (two floors)")
    # beyond 15 the step leaves the immediates, an ALU-only add keeps no copy of its tile:
    # the CPU with --exact
    far = Requantization(**{**kw, "acc_scale": 2.0 ** -21}, exact=True)
    add = Requantization(**kw, exact=True, rounding="imm")
    assert far.even_shift is add.even_shift is None and not far.on_vta and not add.on_vta


def test_a_normalizing_model_with_power_of_two_scales_is_bit_exact_with_every_engine():
    """vtatune's quantize (power-of-two scales: TVM's float32 is exact too): by default the
    attention's layers round ties to even on VTA, and the output is TVM's, onnxruntime's
    and exact arithmetic's, bit for bit."""
    from vtatune.deploy import agreement, output_step, quantize, reference

    float_model = models.attention(seq=16, hidden=32, heads=2)
    shape = [d.dim_value for d in float_model.graph.input[0].type.tensor_type.shape.dim]
    rng = np.random.default_rng(3)
    model = quantize(float_model, rng.standard_normal((4, *shape)).astype(np.float32))
    x = rng.standard_normal(shape).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FallbackWarning)
        r = deploy(model=model, input=x)
    assert all("ties to even" in c.requantization for c in r.offloaded) and all(
        c.passes == (2 if c.op == "batch_matmul" else 1) for c in r.offloaded)
    for engine in ("tvm", "onnxruntime", "exact"):
        a = agreement(r.output, reference(model, x, engine), output_step(model))
        assert a.exact == a.elements, (engine, a.describe())


def test_in_pass_falls_back_to_the_fixed_point_where_no_exact_design_exists():
    """Per-channel multipliers (no exact design per channel): IN_PASS rounds within a step
    on VTA, --exact on the CPU."""
    kw = dict(acc_scale=4e-4, out_scale=0.03, zero_point=3, relu=False, reduction=576,
              channel_scales=(4e-4, 5e-4))
    assert Requantization(**kw, exact=IN_PASS).channel_fixed_point is not None
    assert not Requantization(**kw, exact=True).on_vta
    one = Requantization(acc_scale=4e-4, out_scale=0.03, zero_point=3, relu=False,
                         reduction=576, exact=IN_PASS)
    assert one.exact_fixed_point is not None and one.fixed_point is None


def _ops(*names):
    import onnx
    from onnx import TensorProto, helper

    nodes = [helper.make_node(n, ["x"], [f"y{i}"]) for i, n in enumerate(names)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 4])], [helper.make_tensor_value_info(
            "y0", TensorProto.FLOAT, [1, 4])])
    return onnx.helper.make_model(graph)


def test_a_model_that_normalizes_rounds_exactly_by_default():
    assert normalizing_ops(models.encoder_block(seq=8, hidden=16, heads=2,
                                                intermediate=32)) == (
        "LayerNormalization", "Softmax")
    assert normalizing_ops(models.conv_residual(channels=16)) == ()
    assert normalizing_ops(_ops("ReduceMean", "Sqrt", "Div")) == ("ReduceMean/Sqrt",)
    assert normalizing_ops(_ops("ReduceMean")) == ()  # a mean pooling normalizes nothing
    attention = models.attention(seq=8, hidden=16, heads=2)
    assert resolve_exact(None, attention) == IN_PASS
    assert resolve_exact(None, models.mlp()) is False
    assert resolve_exact(False, attention) is False and resolve_exact(True, models.mlp())


def test_deploy_and_placement_round_a_normalizing_model_alike():
    """``network``'s placement resolves the default as deploy does: the same epilogues."""
    from vtatune.deploy import quantize

    float_model = models.attention(seq=16, hidden=16, heads=2)
    shape = [d.dim_value for d in float_model.graph.input[0].type.tensor_type.shape.dim]
    calibration = np.random.default_rng(0).standard_normal((4, *shape)).astype(np.float32)
    model = quantize(float_model, calibration, power_of_two=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FallbackWarning)
        r = deploy(model=model, input=calibration[0])
    placed = [x.plan.epilogues[0].describe() for x in placement(model).layers
              if x.plan is not None]
    assert placed and all("min(shift) max(shift1) " in e for e in placed)
    assert [c.workload.split("epilogue ")[1] for c in r.offloaded] == placed
    no = [x.plan.epilogues[0] for x in placement(model, exact=False).layers if x.plan]
    assert not any(o.tensor == "shift" for e in no for o in e.ops)


def test_the_command_says_how_it_rounds(tmp_path):
    import onnx

    from vtatune.deploy import quantize

    float_model = models.attention(seq=16, hidden=16, heads=2)
    shape = [d.dim_value for d in float_model.graph.input[0].type.tensor_type.shape.dim]
    calibration = np.random.default_rng(0).standard_normal((4, *shape)).astype(np.float32)
    path = tmp_path / "attention.onnx"
    onnx.save(quantize(float_model, calibration, power_of_two=False), path)

    def run(*flags):
        p = subprocess.run([sys.executable, "-m", "vtatune", "deploy", str(path), "--tune", "0",
                            "--output", str(tmp_path / "y.npy"), *flags],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        return p.stdout

    assert ("rounding: exact where VTA can in its one pass, the model normalizing (Softmax: a "
            "step off would be amplified)") in run()
    assert "rounding: within one step of exact arithmetic, one pass a layer" in run("--no-exact")
    assert json.loads(run("--json"))["exact"] == IN_PASS

