"""Transformers' layers on VTA: a MatMul of [..., S, K] activations by a [K, N] weight runs as
a dense layer of the folded rows (its int32 bias fused), attention's activation-by-activation
MatMuls run per (batch, head) with the second operand packed at run time; softmax, LayerNorm
and GELU stay on the CPU. Each output checked against TVM's CPU build and onnxruntime."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("tvm")
pytest.importorskip("onnxruntime")

from simulator.hardware import DEFAULT  # noqa: E402
from tests._calibration import seeded_reader  # noqa: E402
from vtatune.builds import FallbackWarning  # noqa: E402
from vtatune.deploy import (  # noqa: E402
    agreement,
    deploy,
    models,
    output_step,
    quantize,
    reference,
)
from vtatune.networks import Layer, place  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::vtatune.builds.FallbackWarning")


def _shape(model):
    return [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]


def _quantized(float_model, seed=0):
    shape = _shape(float_model)
    rng = np.random.default_rng(seed)
    calibration = rng.standard_normal((4, *shape)).astype(np.float32)
    return quantize(float_model, calibration), rng.standard_normal(shape).astype(np.float32)


def _deploy(**kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FallbackWarning)
        return deploy(**kwargs)


def _agree(result, model, x, exact):
    step = output_step(model)
    for ref in ("tvm", "onnxruntime"):
        a = agreement(result.output, reference(model, x, ref), step)
        if exact:
            assert a.exact == a.elements, (ref, a.describe())
        assert a.max_steps <= 1, (ref, a.describe())


def test_a_3d_matmul_with_its_int32_bias_is_one_dense_layer_of_the_folded_rows():
    model = models.dense_rows_qdq(seq=16, features=32, out=64)
    x = np.random.default_rng(1).standard_normal((1, 16, 32)).astype(np.float32)
    r = _deploy(model=model, input=x, exact=True)
    # [1, 16, 32] x [32, 64]: 16 rows; the bias add fused (no add left on the CPU)
    assert [c.workload.split(",")[0] for c in r.offloaded] == ["gemm 16x32 * 32x64"]
    assert "add(bias)" in r.offloaded[0].workload
    assert [c.op for c in r.cpu_ops if c.by == "tvm"] == ["quantize", "dequantize"]
    assert r.output.shape == (1, 16, 64)
    _agree(r, model, x, exact=True)
    d = _deploy(model=model, input=x)  # VTA requantizes: ties within one step
    assert d.offloaded[0].requantization == "on VTA: shift 8" and d.offloaded[0].passes == 1
    _agree(d, model, x, exact=False)


def test_leading_axes_fold_into_rows_as_network_reads_them():
    model = models.dense_rows_qdq(seq=16, features=32, out=64)
    r = _deploy(model=model, input=np.zeros((1, 16, 32), np.float32))
    want = place(Layer("", "dense", 16, 32, 64, quantized=True), DEFAULT)
    assert r.offloaded[0].workload.split(",")[0] == want.describe().split(",")[0]


def test_a_bias_quantized_apart_from_its_matmul_stays_a_cpu_add():
    """onnxruntime requantizes a MatMul's output to int8 before the Add of its bias (an int8
    tensor at its own scale): the MatMul runs on VTA, the add on the CPU with its reason."""
    model, x = _quantized(models.dense_rows(seq=16, features=32, out=64, relu=True))
    r = _deploy(model=model, input=x, exact=True)
    assert [c.workload.split(",")[0] for c in r.offloaded] == ["gemm 16x32 * 32x64"]
    assert [(c.op, c.reason) for c in r.cpu_ops if c.op == "add"] == [
        ("add", "broadcasting add [1, 16, 64] + [64]")]
    _agree(r, model, x, exact=True)


def _ort_default(float_model, tmp_path):
    """quantize_static with its default options: asymmetric activations, calibrated
    scales."""
    import onnx
    from onnxruntime.quantization import QuantFormat, quantize_static

    shape = _shape(float_model)
    onnx.save(float_model, tmp_path / "float.onnx")
    quantize_static(tmp_path / "float.onnx", tmp_path / "int8.onnx", seeded_reader("x", shape),
                    quant_format=QuantFormat.QDQ)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    return onnx.load(tmp_path / "int8.onnx"), x


def test_attention_runs_its_activation_matmuls_on_vta_per_head():
    model, x = _quantized(models.attention(seq=32, hidden=32, heads=2))
    r = _deploy(model=model, input=x, exact=True)
    # Q, K, V projections, Q.K^T and P.V per head (2 heads of 16), the output projection
    assert [(c.op, c.workload.split(",")[0]) for c in r.offloaded] == [
        ("dense", "gemm 32x32 * 32x32")] * 3 + [
        ("batch_matmul", "2x gemm 32x16 * 16x32"), ("batch_matmul", "2x gemm 32x32 * 32x16"),
        ("dense", "gemm 32x32 * 32x32")]
    # the second operand packed as the weight on the CPU, once per call; softmax on the CPU
    host = [c.op for c in r.cpu_ops if c.by == "vtatune"]
    assert host.count("pack_weight") == 2
    assert [c.op for c in r.cpu_ops if c.op == "nn.softmax"] == ["nn.softmax"]
    assert not any(c.reason for c in r.cpu_ops if c.op == "matmul")
    _agree(r, model, x, exact=True)


def test_attention_with_zero_points_on_both_operands_is_exact(tmp_path):
    """onnxruntime's defaults: both operands of Q.K^T and P.V have zero points (the softmax
    output's is -128); their corrections are a bias of per-row and per-column sums, so the
    integer core stays exact. The model normalizes (softmax): by default VTA requantizes
    each layer exactly in its one pass (VTA's exact fixed point), as with --exact:
    bit-exact; --no-exact: the fixed point, each element within one step, which the softmax
    between the two products can grow."""
    model, x = _ort_default(models.attention(seq=32, hidden=32, heads=2), tmp_path)
    r = _deploy(model=model, input=x)
    bmm = [c for c in r.offloaded if c.op == "batch_matmul"]
    assert len(bmm) == 2 and all("zero point" in c.requantization for c in bmm)
    assert len(r.offloaded) == 6 and [c.passes for c in bmm] == [2, 2]  # a pass a head
    assert all(" exactly (" in c.requantization for c in r.offloaded)
    _agree(r, model, x, exact=True)
    assert _deploy(model=model, input=x, exact=True).output.tobytes() == r.output.tobytes()
    d = _deploy(model=model, input=x, exact=False)
    assert [c.passes for c in d.offloaded if c.op == "batch_matmul"] == [2, 2]
    assert all(c.requantization.startswith("on VTA: x") and "within" in c.requantization
               for c in d.offloaded)


def test_an_encoder_block_leaves_softmax_layernorm_and_gelu_to_the_cpu():
    model, x = _quantized(models.encoder_block(seq=32, hidden=32, heads=2, intermediate=64))
    r = _deploy(model=model, input=x, exact=True)
    assert [c.op for c in r.offloaded] == ["dense"] * 3 + ["batch_matmul"] * 2 + ["dense"] * 3
    cpu = {c.op for c in r.cpu_ops if c.by == "tvm"}
    assert {"nn.softmax", "nn.layer_norm", "erf"} <= cpu and "matmul" not in cpu
    _agree(r, model, x, exact=True)


def test_rows_that_are_not_whole_batch_blocks_are_padded_with_zeros():
    """17 rows on a BATCH 4 core: 3 zero rows pad the GEMM to 20, their outputs dropped;
    the report says so."""
    model = models.dense_rows_qdq(seq=17, features=32, out=64)
    x = np.random.default_rng(2).standard_normal((1, 17, 32)).astype(np.float32)
    r = _deploy(model=model, input=x, hw="4x8", exact=True)
    assert [c.workload for c in r.offloaded] == [  # --exact: ties to even (two floors)
        "gemm 20x32 * 32x64, epilogue add(bias) save shr(9) shr(-9) add(saved) add(255) "
        "shr(9) clip(-128,127) (17 rows padded with zeros to 20)"]
    assert r.output.shape == (1, 17, 64)
    _agree(r, model, x, exact=True)
    d = _deploy(model=model, input=x, hw="4x8")
    _agree(d, model, x, exact=False)


def test_a_batch_matmul_workload_larger_than_its_matrices_reads_zeros():
    """ViT's 17-row heads (16 patches and the class token) make Q.K^T's output and P.V's
    input channels 17: placed as GEMMs padded to whole blocks, the operands are packed with
    zeros beyond the matrices and the outputs cropped, exactly."""
    model, x = _quantized(models.attention(seq=17, hidden=32, heads=2))
    r = _deploy(model=model, input=x, exact=True)
    assert [c.workload.split(",")[0] for c in r.offloaded if c.op == "batch_matmul"] == [
        "2x gemm 17x16 * 16x32", "2x gemm 17x32 * 32x16"]
    _agree(r, model, x, exact=True)
