"""ResNet-18 deployed whole (slow): the layers VTA runs are those ``network`` places on VTA
(one placement rule), each with the shipped log's schedule; exact against TVM's CPU build and
onnxruntime when the CPU requantizes; torchvision's own export when torch is installed."""

from __future__ import annotations

import warnings
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tvm")
pytest.importorskip("onnxruntime")

from vtatune.builds import FallbackWarning  # noqa: E402
from vtatune.deploy import (  # noqa: E402
    agreement,
    compile_model,
    models,
    output_step,
    quantize,
    reference,
)
from vtatune.networks import load_network  # noqa: E402

pytestmark = pytest.mark.slow

LOG = Path(__file__).resolve().parents[2] / "logs" / "resnet18-pynq.jsonl"


def _shape(describe: str) -> str:
    return describe.split(", epilogue")[0]


def _check_resnet18(float_model):
    rng = np.random.default_rng(0)
    model = quantize(float_model, rng.standard_normal((2, 1, 3, 224, 224)).astype(np.float32))
    x = rng.standard_normal((1, 3, 224, 224)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)  # every offloaded layer is in the log
        exact = compile_model(model, hw="pynq", log=LOG, exact=True).run(x)
    # the layers network places on VTA, as many times as the network has them
    net = load_network("resnet18", "pynq")
    want = Counter({_shape(replace(t.workload, name="").describe()): t.multiplicity
                    for t in net.tasks})
    assert Counter(_shape(c.workload) for c in exact.offloaded) == want
    assert {c.source for c in exact.offloaded} == {"log"}
    reasons = {c.reason for c in exact.cpu_ops
               if c.op in ("nn.conv2d", "matmul", "add") and c.reason}
    # the first conv, the classifier, the residual adds (pynq runs no ALU-only kernel)
    assert reasons == {layer.reason for layer in net.cpu}
    step = output_step(model)
    for engine in ("tvm", "onnxruntime"):
        a = agreement(exact.output, reference(model, x, engine), step)
        assert a.exact == a.elements, (engine, a.describe())
    return model, x, exact


def test_resnet18_built_with_onnx_helper():
    model, x, exact = _check_resnet18(models.resnet18())
    fast = compile_model(model, hw="pynq", log=LOG).run(x)
    assert [c.passes for c in fast.offloaded] == [1] * 19  # VTA requantizes: one pass each
    assert all(c.passes > 1 for c in exact.offloaded)  # the accumulators' bytes to the CPU
    for engine in ("tvm", "onnxruntime"):  # half-up against half-to-even, 19 layers deep
        a = agreement(fast.output, reference(model, x, engine), output_step(model))
        assert a.max_steps <= 2, (engine, a.describe())


def test_torchvision_resnet18_export(tmp_path):
    torch = pytest.importorskip("torch")
    torchvision = pytest.importorskip("torchvision")
    import onnx

    torch.manual_seed(0)
    net = torchvision.models.resnet18(weights=None).eval()
    path = tmp_path / "resnet18.onnx"
    try:
        torch.onnx.export(net, torch.randn(1, 3, 224, 224), str(path), opset_version=17,
                          input_names=["x"], output_names=["y"], dynamo=False)
    except TypeError:  # a torch without the dynamo switch exports with TorchScript anyway
        torch.onnx.export(net, torch.randn(1, 3, 224, 224), str(path), opset_version=17,
                          input_names=["x"], output_names=["y"])
    _check_resnet18(onnx.load(str(path)))
