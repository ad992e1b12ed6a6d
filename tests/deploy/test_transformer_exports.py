"""Transformers as a new user makes them (slow; needs torch and transformers, which are not
vtatune's dependencies): a BERT-style encoder and a small ViT from transformers' configs
with random weights, exported by torch and quantized by onnxruntime's ``quantize_static``
(``scripts/quantized_models.py``), deployed on pynq and checked against TVM's CPU build and
onnxruntime."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("tvm")
pytest.importorskip("onnxruntime")

from vtatune.builds import FallbackWarning  # noqa: E402
from vtatune.deploy import agreement, deploy, output_step, reference  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import quantized_models  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """name -> directory of its float and quantized exports (made once)."""
    out = tmp_path_factory.mktemp("exports")
    for name in ("bert", "vit"):
        quantized_models.export(name, out)
    return out


def _run(path, x):
    import onnx

    model = onnx.load(str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FallbackWarning)
        r = deploy(model, hw="pynq", input=x)
    step = output_step(model)
    checks = [agreement(r.output, reference(model, x, ref), step) for ref in
              ("tvm", "onnxruntime")]
    return r, checks


@pytest.mark.parametrize("variant", ["default", "symmetric"])
def test_bert_runs_every_matmul_on_vta_exactly(exported, variant):
    tokens = np.random.default_rng(0).integers(0, 1000, (1, quantized_models.SEQUENCE))
    r, checks = _run(exported / f"bert.{variant}.onnx", tokens)
    # per layer: Q, K, V, Q.K^T, P.V (2 heads), output projection, the MLP's two (Gemm)
    assert [c.op for c in r.offloaded] == (["dense"] * 3 + ["batch_matmul"] * 2
                                           + ["dense"] * 3) * 2
    assert not any(c.reason for c in r.cpu_ops if c.op == "matmul")
    for a in checks:  # calibrated float scales: the CPU requantizes, the integer core exact
        assert a.exact == a.elements, a.describe()


def test_vit_runs_its_projections_on_vta_and_its_17_row_heads_on_the_cpu(exported):
    x = np.random.default_rng(0).standard_normal(
        (1, 3, quantized_models.IMAGE, quantized_models.IMAGE)).astype(np.float32)
    r, checks = _run(exported / "vit.symmetric.onnx", x)
    assert [c.op for c in r.offloaded] == ["dense"] * 12
    assert sorted(c.reason for c in r.cpu_ops if c.op == "matmul") == [
        "17 input channels are not a multiple of BLOCK_IN 16"] * 2 + [
        "17 output channels are not a multiple of BLOCK_OUT 16"] * 2
    for a in checks:
        assert a.max_steps <= 2, a.describe()
