"""``deploy`` and ``network`` place the same layers for the same reasons on the same file,
with one function (:func:`vtatune.deploy.placement`), and count the same: every example
model of ``vtatune.deploy.models``, quantized as ``vtatune.deploy.quantize`` does and as
onnxruntime's ``quantize_static`` does with its defaults, listed by ``network --list
--json`` and deployed, each conv, dense, batch_matmul and add layer either on VTA as the
same workload in as many passes or on the CPU with the same reason; the share of the
model's multiply-accumulates on VTA the same, and at most 1; and with one log, the VTA
cycles ``network`` counts are the cycles deploy runs."""

from __future__ import annotations

import json
import sys
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import pytest

pytest.importorskip("tvm")
pytest.importorskip("onnxruntime")

from tests._calibration import seeded_reader  # noqa: E402
from vtatune.builds import FallbackWarning  # noqa: E402
from vtatune.cli import main  # noqa: E402
from vtatune.deploy import deploy, models, normalizing_ops, quantize  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

#: The layers both place, by the name each side gives them.
KIND = {"conv2d": "conv2d", "nn.conv2d": "conv2d", "conv2d_transpose": "conv2d_transpose",
        "nn.conv2d_transpose": "conv2d_transpose", "dense": "matmul",
        "batch_matmul": "matmul", "matmul": "matmul", "add": "add"}

MODELS = {
    "conv_residual": lambda: models.conv_residual(channels=32),
    "grouped_conv": lambda: models.grouped_conv(channels=32, groups=2),
    "grouped_conv_8": lambda: models.grouped_conv(channels=32, groups=4),  # 2 merged
    "grouped_conv_4": lambda: models.grouped_conv(channels=40, groups=10),  # 4, padded
    "depthwise": lambda: models.grouped_conv(channels=32, groups=32),  # the CPU's
    "transposed_conv": lambda: models.transposed_conv(32, 32, size=4, conv_first=True),
    "mlp": models.mlp,
    "mlp_1000": lambda: models.mlp(classes=1000),
    "resnet18": lambda: models.resnet18(classes=1000, size=32),
    "dense_rows": lambda: models.dense_rows(relu=True),
    "attention": models.attention,
    "attention_17": lambda: models.attention(seq=17),  # ViT's 16 patches + CLS
    "encoder_block": models.encoder_block,
    "classifier": models.classifier,
    "convnext_stage": models.convnext_stage,  # depthwise convs, GELU's adds, layer scale
}


def _shape_of(description: str) -> str:
    return description.split(", epilogue")[0].split(" (")[0]


def network_list(path, hw, capsys):
    """``network PATH --list --json``: what the command line places."""
    capsys.readouterr()
    assert main(["network", str(path), "--list", "--json", "--hw", hw]) == 0
    return json.loads(capsys.readouterr().out)


def network_verdicts(listed):
    """Per VTA layer (by name) its workload's shapes and passes; the CPU layers' reasons."""
    vta = {x["name"]: (KIND[x["operator"]], x["workload"], x["passes"])
           for x in listed["layers"] if x["on"] == "vta"}
    cpu = Counter((KIND[x["operator"]], x["reason"]) for x in listed["layers"]
                  if x["on"] == "cpu")
    return vta, cpu


def _input(model):
    t = model.graph.input[0].type.tensor_type
    return np.zeros([d.dim_value for d in t.shape.dim],
                    onnx.helper.tensor_dtype_to_np_dtype(t.elem_type))  # BERT: int64 tokens


def deploy_run(model, hw, log=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FallbackWarning)
        return deploy(model, hw=hw, input=_input(model), log=log)


def _shapes(call):
    """A call's workload without its operator (a batch_matmul's: without its heads)."""
    text = _shape_of(call.workload)
    return text.split(" ", 2 if call.op == "batch_matmul" else 1)[-1]


def deploy_verdicts(r):
    vta = {c.layer: (KIND[c.op], _shapes(c), c.passes) for c in r.offloaded if c.op in KIND}
    cpu = Counter((KIND[c.op], c.reason) for c in r.cpu_ops if c.op in KIND and c.reason)
    return vta, cpu


def _ort_quantized(float_model, tmp_path):
    """``quantize_static`` (QDQ) with its default options: asymmetric activations."""
    from onnxruntime.quantization import QuantFormat, quantize_static

    inp = float_model.graph.input[0]
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    onnx.save(float_model, str(tmp_path / "float.onnx"))
    quantize_static(tmp_path / "float.onnx", tmp_path / "ort.onnx",
                    seeded_reader(inp.name, shape, n=2), quant_format=QuantFormat.QDQ)
    return onnx.load(str(tmp_path / "ort.onnx"))


def _quantized(name, quantizer, tmp_path):
    float_model = MODELS[name]()
    if quantizer == "onnxruntime":
        return _ort_quantized(float_model, tmp_path)
    shape = [d.dim_value for d in float_model.graph.input[0].type.tensor_type.shape.dim]
    calibration = np.random.default_rng(0).standard_normal((2, *shape)).astype(np.float32)
    return quantize(float_model, calibration)


#: sim runs residual adds on VTA (pynq leaves them to the CPU): the models with adds
CASES = [(name, hw) for name in sorted(MODELS) for hw in ("pynq", "sim")
         if hw == "pynq" or name in ("conv_residual", "convnext_stage", "resnet18")]
QUANTIZERS = ("vtatune", "onnxruntime")


def _sampled(cases):
    """Every (model, hardware) once in the default suite, by the two quantizers in turn on
    each hardware (each quantizer on each); the other quantizer's case in the full sweep
    (``-m slow``): 16 cases of 32, about 2 s each."""
    turn = Counter()
    for name, hw in cases:
        for quantizer in QUANTIZERS:
            default = quantizer == QUANTIZERS[turn[hw] % 2]
            yield pytest.param(name, quantizer, hw, id=f"{name}-{hw}-{quantizer}",
                               marks=() if default else pytest.mark.slow)
        turn[hw] += 1


@pytest.mark.parametrize(("name", "quantizer", "hw"), list(_sampled(CASES)))
def test_deploy_and_network_place_the_same_layers_for_the_same_reasons(name, quantizer, hw,
                                                                       tmp_path, capsys):
    model = _quantized(name, quantizer, tmp_path)
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    listed = network_list(path, hw, capsys)
    assert listed["placement"] == "deploy" and listed["layers"], "no layer placed"
    r = deploy_run(model, hw)
    assert deploy_verdicts(r) == network_verdicts(listed)
    assert listed["vta_mac_share"] == r.vta_mac_share <= 1
    assert r.model_macs == sum(x["macs"] for x in listed["layers"])


def test_where_deploy_refuses_network_says_why(tmp_path, capsys):
    """A float model (deploy asks for a quantized one): network places it by its reader,
    and says why deploy would not run it."""
    path = tmp_path / "float.onnx"
    onnx.save(models.conv_residual(channels=32), str(path))
    listed = network_list(path, "pynq", capsys)
    assert any(n.startswith("deploy does not run this model (float.onnx is a float model: "
                            "VTA runs 8-bit integers.") for n in listed["notes"])


@pytest.mark.parametrize("name", ["conv_residual", "attention_17", "convnext_stage"])
def test_one_count_network_counts_the_cycles_deploy_runs(name, tmp_path, capsys):
    """onnxruntime's calibrated scales: VTA's fixed-point requantization (its copy of the
    tile), zero-point borders, rows and channels padded; ``network`` tunes a log, reads it
    back, and counts what deploy runs with it, cycle for cycle."""
    model = _quantized(name, "onnxruntime", tmp_path)
    path, log = tmp_path / f"{name}.onnx", tmp_path / "net.jsonl"
    onnx.save(model, str(path))
    assert main(["network", str(path), "--trials-per-task", "2", "--seed", "0", "--log",
                 str(log), "--quiet", "--json"]) == 0
    capsys.readouterr()
    assert main(["network", str(path), "--trials-per-task", "0", "--log", str(log),
                 "--json"]) == 0
    counted = json.loads(capsys.readouterr().out)
    r = deploy_run(model, "pynq", log=str(log))
    assert all(c.source == "log" for c in r.offloaded)
    assert all("shifts and adds" in c.requantization for c in r.offloaded)  # the fixed point
    # exact where the model normalizes (the attention's softmax, the stage's LayerNorm)
    assert all((" exactly (" in c.requantization) == bool(normalizing_ops(model))
               for c in r.offloaded)
    assert counted["vta_cycles"] == r.vta_cycles


@pytest.mark.slow
@pytest.mark.parametrize("name", ["bert", "vit"])
def test_the_same_on_transformers_exports(name, tmp_path, capsys):
    """BERT and ViT as torch exports them, quantized symmetric by ``quantize_static``
    (``scripts/quantized_models.py``; needs torch and transformers)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    sys.path.insert(0, str(ROOT / "scripts"))
    import quantized_models

    quantized_models.export(name, tmp_path)
    path = tmp_path / f"{name}.symmetric.onnx"
    listed = network_list(path, "pynq", capsys)
    assert sum(x["on"] == "vta" for x in listed["layers"]) >= 12
    r = deploy_run(onnx.load(str(path)), "pynq")
    assert deploy_verdicts(r) == network_verdicts(listed)
    assert listed["vta_mac_share"] == r.vta_mac_share <= 1


def test_model_macs_counts_what_onnx_shape_inference_leaves_unknown():
    """A MatMul after a Reshape to a computed shape (torch exports attention's head split
    so): ONNX shape inference, which does not propagate the shape's values, leaves its
    shapes unknown; TVM's import knows them, and every MAC is counted."""
    from onnx import TensorProto, helper

    from vtatune.deploy import model_macs

    w = helper.make_tensor("w", TensorProto.FLOAT, [32, 64], [0.0] * 2048)
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Slice", ["s", "zero", "two"], ["lead"]),
             helper.make_node("Concat", ["lead", "minus_one"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["r"]),
             helper.make_node("MatMul", ["r", "w"], ["y"])]
    consts = [helper.make_tensor(n, TensorProto.INT64, [1], [v])
              for n, v in (("zero", 0), ("two", 2), ("minus_one", -1))]
    graph = helper.make_graph(nodes, "reshaped", [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 32])], [
        helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w, *consts])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    inferred = onnx.shape_inference.infer_shapes(model)
    r = next(v for v in inferred.graph.value_info if v.name == "r")
    assert not all(d.HasField("dim_value") for d in r.type.tensor_type.shape.dim)
    assert model_macs(model) == 16 * 32 * 64
