"""ResNet-18 deployed whole (slow): the layers VTA runs are those ``network`` places on VTA
(one placement rule: the model's file read as deploy runs it, the stem's 3 channels and the
classifier's 1000 padded to whole blocks), each with the shipped log's schedule (tuned on the
catalogue's TVM v0.14 placement: the two padded layers fall back); exact against TVM's CPU
build and onnxruntime when the CPU requantizes; torchvision's own export when torch is
installed."""

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


#: The layers the shipped log lacks: the stem and the classifier, padded to whole blocks.
PADDED = ["conv2d 1x16x224x224 -> 64, k7 p3 s2", "gemm 1x512 * 512x1008"]


def _check_resnet18(float_model, tmp_path):
    import onnx

    rng = np.random.default_rng(0)
    model = quantize(float_model, rng.standard_normal((2, 1, 3, 224, 224)).astype(np.float32))
    x = rng.standard_normal((1, 3, 224, 224)).astype(np.float32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FallbackWarning)
        exact = compile_model(model, hw="pynq", log=LOG, exact=True).run(x)
    # the layers network places on VTA from the same file, as many times as it has them
    onnx.save(model, str(tmp_path / "resnet18_int8.onnx"))
    net = load_network(tmp_path / "resnet18_int8.onnx", "pynq")
    want = Counter({_shape(replace(t.workload, name="").describe()): t.multiplicity
                    for t in net.tasks})
    assert Counter(_shape(c.workload) for c in exact.offloaded) == want
    assert sorted(_shape(c.workload) for c in exact.offloaded if c.source != "log") == PADDED
    assert len([w for w in caught if issubclass(w.category, FallbackWarning)]) == len(PADDED)
    reasons = {c.reason for c in exact.cpu_ops
               if c.op in ("nn.conv2d", "matmul", "add") and c.reason}
    # the residual adds (pynq runs no ALU-only kernel)
    assert reasons == {layer.reason for layer in net.cpu}
    assert exact.vta_mac_share == 1.0
    step = output_step(model)
    for engine in ("tvm", "onnxruntime"):
        a = agreement(exact.output, reference(model, x, engine), step)
        assert a.exact == a.elements, (engine, a.describe())
    return model, x, exact


def test_resnet18_built_with_onnx_helper(tmp_path):
    model, x, exact = _check_resnet18(models.resnet18(), tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FallbackWarning)
        fast = compile_model(model, hw="pynq", log=LOG).run(x)
    assert [c.passes for c in fast.offloaded] == [1] * 21  # VTA requantizes: one pass each
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
    _check_resnet18(onnx.load(str(path)), tmp_path)
