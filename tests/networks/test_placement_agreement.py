"""``deploy`` and ``network`` place the same layers for the same reasons on the same file:
every example model of ``vtatune.deploy.models`` (quantized as ``vtatune.deploy.quantize``
does), read by ``network`` (``load_network`` and ``place``) and deployed, each conv, dense
and batch_matmul layer either on VTA as the same workload or on the CPU with the same
reason."""

from __future__ import annotations

import warnings
from collections import Counter

import numpy as np
import onnx
import pytest

pytest.importorskip("tvm")
pytest.importorskip("onnxruntime")

from vtatune.builds import FallbackWarning  # noqa: E402
from vtatune.deploy import deploy, models, quantize  # noqa: E402
from vtatune.networks import CpuLayer, Layer, load_network, place  # noqa: E402

#: The layer kinds that multiply (what both place), by the name each side gives them.
KIND = {"conv2d": "conv2d", "nn.conv2d": "conv2d", "conv2d_transpose": "conv2d_transpose",
        "nn.conv2d_transpose": "conv2d_transpose", "dense": "matmul",
        "batch_matmul": "matmul", "matmul": "matmul"}

MODELS = {
    "conv_residual": lambda: models.conv_residual(channels=32),
    "grouped_conv": lambda: models.grouped_conv(channels=32, groups=2),
    "grouped_conv_8": lambda: models.grouped_conv(channels=32, groups=4),
    "transposed_conv": lambda: models.transposed_conv(32, 32, size=4, conv_first=True),
    "mlp": models.mlp,
    "mlp_1000": lambda: models.mlp(classes=1000),
    "resnet18": lambda: models.resnet18(classes=1000, size=32),
    "dense_rows": lambda: models.dense_rows(relu=True),
    "attention": models.attention,
    "attention_17": lambda: models.attention(seq=17),  # ViT's 16 patches + CLS
    "encoder_block": models.encoder_block,
}


def _shape_of(description: str) -> str:
    return description.split(", epilogue")[0]


def network_verdicts(path, hw):
    net = load_network(str(path), hw)
    out = []
    for layer in net.layers:
        if isinstance(layer, CpuLayer) and layer.operator in KIND:
            out.append((KIND[layer.operator], "CPU", layer.reason))
        if not isinstance(layer, Layer) or layer.operator not in KIND:
            continue
        placed = place(layer, hw)
        if isinstance(placed, str):
            out.append((KIND[layer.operator], "CPU", placed))
        else:
            heads = f"{layer.heads}x " if layer.operator == "batch_matmul" else ""
            out.append((KIND[layer.operator], "VTA", heads + _shape_of(placed.describe())))
    return Counter(out)


def deploy_verdicts(model, hw):
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FallbackWarning)
        r = deploy(model, hw=hw, input=np.zeros(shape, np.float32))
    out = [(KIND[c.op], "VTA", _shape_of(c.workload)) for c in r.offloaded if c.op in KIND]
    out += [(KIND[c.op], "CPU", c.reason) for c in r.cpu_ops if c.op in KIND and c.reason]
    return Counter(out)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_deploy_and_network_place_the_same_layers_for_the_same_reasons(name, tmp_path):
    float_model = MODELS[name]()
    shape = [d.dim_value for d in float_model.graph.input[0].type.tensor_type.shape.dim]
    calibration = np.random.default_rng(0).standard_normal((2, *shape)).astype(np.float32)
    model = quantize(float_model, calibration)
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    hw = "pynq"
    from simulator.hardware import HardwareConfig

    config = HardwareConfig.resolve(hw)
    by_network = network_verdicts(path, config)
    assert by_network, "no layer read"
    assert deploy_verdicts(model, hw) == by_network
