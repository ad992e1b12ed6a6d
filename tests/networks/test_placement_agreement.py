"""``deploy`` and ``network`` place the same layers for the same reasons on the same file:
every example model of ``vtatune.deploy.models``, quantized as ``vtatune.deploy.quantize``
does and as onnxruntime's ``quantize_static`` does with its defaults, read by ``network``
(``load_network``: an ONNX model is placed as deploy runs it) and deployed, each conv,
dense and batch_matmul layer either on VTA as the same workload or on the CPU with the same
reason."""

from __future__ import annotations

import sys
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest

pytest.importorskip("tvm")
pytest.importorskip("onnxruntime")

from simulator.hardware import HardwareConfig  # noqa: E402
from vtatune.builds import FallbackWarning  # noqa: E402
from vtatune.deploy import deploy, models, quantize  # noqa: E402
from vtatune.networks import CpuLayer, Layer, load_network, place  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

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
    "classifier": models.classifier,
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
        placed = place(layer, hw, pad_channels=net.placement == "deploy")
        if isinstance(placed, str):
            out.append((KIND[layer.operator], "CPU", placed))
        else:
            heads = f"{layer.heads}x " if layer.operator == "batch_matmul" else ""
            out.append((KIND[layer.operator], "VTA", heads + _shape_of(placed.describe())))
    return Counter(out)


def deploy_verdicts(model, hw):
    t = model.graph.input[0].type.tensor_type
    x = np.zeros([d.dim_value for d in t.shape.dim],
                 onnx.helper.tensor_dtype_to_np_dtype(t.elem_type))  # BERT takes int64 tokens
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FallbackWarning)
        r = deploy(model, hw=hw, input=x)
    out = [(KIND[c.op], "VTA", _shape_of(c.workload)) for c in r.offloaded if c.op in KIND]
    out += [(KIND[c.op], "CPU", c.reason) for c in r.cpu_ops if c.op in KIND and c.reason]
    return Counter(out)


def _ort_quantized(float_model, tmp_path):
    """``quantize_static`` (QDQ) with its default options: asymmetric activations."""
    from onnxruntime.quantization import QuantFormat, quantize_static

    inp = float_model.graph.input[0]
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    rng = np.random.default_rng(0)
    samples = iter([{inp.name: rng.standard_normal(shape).astype(np.float32)}
                    for _ in range(2)])

    class Reader:
        def get_next(self):
            return next(samples, None)

    onnx.save(float_model, str(tmp_path / "float.onnx"))
    quantize_static(tmp_path / "float.onnx", tmp_path / "ort.onnx", Reader(),
                    quant_format=QuantFormat.QDQ)
    return onnx.load(str(tmp_path / "ort.onnx"))


@pytest.mark.parametrize("quantizer", ["vtatune", "onnxruntime"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_deploy_and_network_place_the_same_layers_for_the_same_reasons(name, quantizer,
                                                                       tmp_path):
    float_model = MODELS[name]()
    if quantizer == "onnxruntime":
        model = _ort_quantized(float_model, tmp_path)
    else:
        shape = [d.dim_value for d in float_model.graph.input[0].type.tensor_type.shape.dim]
        calibration = np.random.default_rng(0).standard_normal((2, *shape)).astype(np.float32)
        model = quantize(float_model, calibration)
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    by_network = network_verdicts(path, HardwareConfig.resolve("pynq"))
    assert by_network, "no layer read"
    assert deploy_verdicts(model, "pynq") == by_network


@pytest.mark.slow
@pytest.mark.parametrize("name", ["bert", "vit"])
def test_the_same_on_transformers_exports(name, tmp_path):
    """BERT and ViT as torch exports them, quantized symmetric by ``quantize_static``
    (``scripts/quantized_models.py``; needs torch and transformers)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    sys.path.insert(0, str(ROOT / "scripts"))
    import quantized_models

    quantized_models.export(name, tmp_path)
    path = tmp_path / f"{name}.symmetric.onnx"
    by_network = network_verdicts(path, HardwareConfig.resolve("pynq"))
    assert sum(n for (_, where, _), n in by_network.items() if where == "VTA") >= 12
    assert deploy_verdicts(onnx.load(str(path)), "pynq") == by_network
