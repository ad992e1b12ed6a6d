"""The test models of issues 33, 38 and 39, as a new user makes them: torchvision CNNs and
transformers encoders/decoders with random weights, exported by torch and quantized by
onnxruntime 1.32 the ways its documentation offers.

    python scripts/quantized_models.py [--out DIR] [--models NAME ...] [--forms FORM ...]

Needs torch, torchvision and transformers (not vtatune's dependencies: install them in a
scratch environment, e.g. ``python -m venv --system-site-packages /tmp/venv &&
/tmp/venv/bin/pip install torch torchvision transformers``).

Writes ``DIR/<model>.float.onnx`` (opset 17) and ``DIR/<model>.<form>.onnx`` for each form:
``default`` (``quantize_static``'s default options: QDQ, asymmetric int8 activations,
per-tensor weights), ``per_channel`` (QDQ, ``per_channel=True``), ``symmetric`` (QDQ,
``ActivationSymmetric`` and ``WeightSymmetric``), ``qoperator`` (``quantize_static`` with
``quant_format=QOperator``: QLinearConv, QLinearMatMul, QGemm...) and ``dynamic``
(``quantize_dynamic``'s defaults: DynamicQuantizeLinear + MatMulInteger / ConvInteger).
Weights are as the libraries initialize them under a fixed seed; each BatchNorm gets seeded
random statistics and affine parameters (so folded biases are non-zero); calibration is 8
seeded random samples. ``DIR/README.txt`` lists every file there (model, form, input).
Without ``--models``, the ``default`` form of the issue-38 set is written first, then the
rest; a file already in DIR is kept (the exports are seeded: the same bytes again).
Prints one line per file written.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Model:
    """How one test model is made: ``build`` returns the torch module in eval mode;
    ``shape`` and ``kind`` are its input's (``tokens``: int64 ids below ``VOCABULARY``)."""

    build: Callable[[], Any]
    shape: tuple[int, ...]
    kind: str
    about: str


FORMS: dict[str, dict[str, Any]] = {
    "default": {},
    "per_channel": {"per_channel": True},
    "symmetric": {"extra_options": {"ActivationSymmetric": True, "WeightSymmetric": True}},
    "qoperator": {"quant_format": "QOperator"},
    "dynamic": {},
}
#: The forms ``export`` writes unless told (those of issue 33).
VARIANTS = ("default", "per_channel", "symmetric")
#: BERT's sequence length and ViT's image size (the small issue-33 encoders).
SEQUENCE, IMAGE = 32, 32
VOCABULARY = 1000
CALIBRATION_SAMPLES = 8


def _random_batchnorm(model: Any, seed: int) -> None:
    """Seeded random statistics and affine parameters for every BatchNorm, in place."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            n = m.num_features
            m.running_mean.copy_(torch.randn(n, generator=gen) * 0.1)
            m.running_var.copy_(torch.rand(n, generator=gen) * 0.5 + 0.75)
            m.weight.data.copy_(torch.rand(n, generator=gen) * 0.5 + 0.75)
            m.bias.data.copy_(torch.randn(n, generator=gen) * 0.1)


def _torchvision(name: str) -> Any:
    import torch
    import torchvision

    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None)
    _random_batchnorm(model, seed=1)
    return model.eval()


def _hidden(model: Any) -> Any:
    """A transformers model whose output is its last hidden state, a plain tensor (what the
    exporter and the quantizer want)."""
    import torch

    class LastHiddenState(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, x: Any) -> Any:
            return self.model(x).last_hidden_state

    return LastHiddenState().eval()


def _transformers(model_class: str, config_class: str, **config: Any) -> Callable[[], Any]:
    """A builder of ``model_class(config_class(**config))`` (seeded, eager attention),
    returning its last hidden state."""

    def build() -> Any:
        import torch
        import transformers

        torch.manual_seed(0)
        cfg = getattr(transformers, config_class)(attn_implementation="eager", **config)
        model_type = getattr(transformers, model_class)
        extra = {"add_pooling_layer": False} if model_class in (
            "BertModel", "ViTModel") else {}
        model = model_type(cfg, **extra)
        _random_batchnorm(model, seed=1)
        return _hidden(model)

    return build


def _vision(name: str, about: str) -> Model:
    return Model(lambda: _torchvision(name), (1, 3, 224, 224), "float", about)


MODELS: dict[str, Model] = {
    "resnet18": _vision("resnet18", "torchvision ResNet-18"),
    "resnet50": _vision("resnet50", "torchvision ResNet-50"),
    "mobilenet_v2": _vision("mobilenet_v2", "torchvision MobileNet-v2"),
    "densenet121": _vision("densenet121", "torchvision DenseNet-121"),
    "convnext_tiny": _vision("convnext_tiny", "torchvision ConvNeXt-tiny"),
    "bert_small": Model(_transformers(
        "BertModel", "BertConfig", hidden_size=512, num_hidden_layers=4,
        num_attention_heads=8, intermediate_size=2048, max_position_embeddings=128,
        vocab_size=VOCABULARY), (1, 128), "tokens",
        "BERT encoder: 4 layers, hidden 512, 8 heads, FFN 2048, seq 128"),
    "vit_small": Model(_transformers(
        "ViTModel", "ViTConfig", image_size=224, patch_size=16, hidden_size=384,
        num_hidden_layers=4, num_attention_heads=6, intermediate_size=1536),
        (1, 3, 224, 224), "float",
        "ViT-S/16 widths (hidden 384, 6 heads, MLP 1536), 4 layers, 224x224 (197 tokens)"),
    "distilbert": Model(_transformers(
        "DistilBertModel", "DistilBertConfig", dim=256, hidden_dim=1024, n_layers=3,
        n_heads=4, max_position_embeddings=128, vocab_size=VOCABULARY), (1, 128), "tokens",
        "DistilBERT encoder: 3 layers, hidden 256, 4 heads, FFN 1024, seq 128"),
    "efficientnet_b0": _vision("efficientnet_b0", "torchvision EfficientNet-B0"),
    "shufflenet_v2": _vision("shufflenet_v2_x1_0", "torchvision ShuffleNet-v2 x1.0"),
    "regnet_y_400mf": _vision("regnet_y_400mf", "torchvision RegNetY-400MF"),
    "gpt2": Model(_transformers(
        "GPT2Model", "GPT2Config", n_layer=2, n_embd=256, n_head=4, n_positions=64,
        vocab_size=VOCABULARY), (1, 64), "tokens",
        "GPT-2 decoder (causal): 2 layers, hidden 256, 4 heads, seq 64"),
    "t5_encoder": Model(_transformers(
        "T5EncoderModel", "T5Config", d_model=256, d_ff=1024, d_kv=64, num_layers=2,
        num_heads=4, vocab_size=VOCABULARY), (1, 64), "tokens",
        "T5 encoder (relative positions): 2 layers, hidden 256, 4 heads, FFN 1024, seq 64"),
    "mobilevit": Model(_transformers(
        "MobileViTModel", "MobileViTConfig", image_size=256, hidden_sizes=[64, 80, 96],
        neck_hidden_sizes=[16, 16, 24, 48, 64, 80, 320]), (1, 3, 256, 256), "float",
        "MobileViT-XXS widths, 256x256"),
    # the small encoders of issue 33
    "bert": Model(_transformers(
        "BertModel", "BertConfig", hidden_size=128, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=512, max_position_embeddings=SEQUENCE,
        vocab_size=VOCABULARY), (1, SEQUENCE), "tokens",
        "BERT encoder: 2 layers, hidden 128, 2 heads, seq 32"),
    "vit": Model(_transformers(
        "ViTModel", "ViTConfig", image_size=IMAGE, patch_size=8, hidden_size=128,
        num_hidden_layers=2, num_attention_heads=2, intermediate_size=512),
        (1, 3, IMAGE, IMAGE), "float", "ViT encoder: 2 layers, hidden 128, 2 heads, 32x32"),
}
#: The models of issue 38, whose ``default`` form is written first.
ISSUE_38 = ("resnet18", "resnet50", "mobilenet_v2", "densenet121", "convnext_tiny",
            "bert_small", "vit_small", "distilbert")


def _samples(shape: tuple[int, ...], kind: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "tokens":
        return rng.integers(0, VOCABULARY, shape, dtype=np.int64)
    return rng.standard_normal(shape, dtype=np.float32)


def _reader(input_name: str, shape: tuple[int, ...], kind: str) -> Any:
    from onnxruntime.quantization import CalibrationDataReader

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items: Iterator[dict[str, np.ndarray]] = iter(
                {input_name: _samples(shape, kind, seed)}
                for seed in range(CALIBRATION_SAMPLES))

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.items, None)

    return Reader()


def _quantize(form: str, prepared: Path, path: Path, model: Model) -> None:
    from onnxruntime.quantization import QuantFormat, quantize_dynamic, quantize_static

    if form == "dynamic":
        quantize_dynamic(str(prepared), str(path))
        return
    options = dict(FORMS[form])
    quant_format = QuantFormat.from_string(options.pop("quant_format", "QDQ"))
    quantize_static(str(prepared), str(path), _reader("input", model.shape, model.kind),
                    quant_format=quant_format, **options)


def export(name: str, out: Path, forms: tuple[str, ...] = VARIANTS,
           keep: bool = False) -> list[Path]:
    """``name`` exported and quantized in each of ``forms`` into ``out``; the files written
    (with ``keep``, a file already there is kept and not listed)."""
    import onnx
    import torch
    from onnxruntime.quantization.shape_inference import quant_pre_process

    model = MODELS[name]
    float_path = out / f"{name}.float.onnx"
    todo = [f for f in forms if not (keep and (out / f"{name}.{f}.onnx").exists())]
    written = []
    if not (keep and float_path.exists()):
        example = torch.from_numpy(_samples(model.shape, model.kind, seed=100))
        tmp = out / f"{name}.float.tmp.onnx"
        torch.onnx.export(model.build(), (example,), str(tmp), opset_version=17,
                          input_names=["input"], output_names=["output"], dynamo=False)
        onnx.checker.check_model(onnx.load(str(tmp)))
        os.replace(tmp, float_path)
        written.append(float_path)
    if not todo:
        return written
    prepared = out / f"{name}.prepared.onnx"
    quant_pre_process(str(float_path), str(prepared), skip_symbolic_shape=True)
    try:
        for form in todo:
            path = out / f"{name}.{form}.onnx"
            tmp = out / f"{name}.{form}.tmp.onnx"
            _quantize(form, prepared, tmp, model)
            os.replace(tmp, path)
            written.append(path)
    finally:
        prepared.unlink()
    return written


def readme(out: Path) -> str:
    """The text of ``out``'s README.txt: one line per model file there."""
    lines = ["Test models of vtatune's issues 33/38/39, made by scripts/quantized_models.py",
             "(random weights, seeded; calibration: 8 seeded random samples). Input name:",
             "'input'; 'tokens' inputs are int64 ids in [0, 1000). Output: 'output'",
             "(logits for the CNNs, the last hidden state for the transformers).",
             "",
             "file | model | form | input"]
    form_text = {"float": "float32 export (opset 17)",
                 "default": "QDQ, quantize_static defaults",
                 "per_channel": "QDQ, quantize_static per_channel=True",
                 "symmetric": "QDQ, ActivationSymmetric + WeightSymmetric",
                 "qoperator": "QOperator, quantize_static quant_format=QOperator",
                 "dynamic": "dynamic, quantize_dynamic defaults"}
    for name, model in MODELS.items():
        for form, text in form_text.items():
            path = out / f"{name}.{form}.onnx"
            if path.exists():
                dtype = "int64" if model.kind == "tokens" else "float32"
                lines.append(f"{path.name} | {model.about} | {text} | "
                             f"{dtype}{list(model.shape)}")
    return "\n".join(lines) + "\n"


def _write_readme(out: Path) -> None:
    tmp = out / "README.txt.tmp"
    tmp.write_text(readme(out))
    os.replace(tmp, out / "README.txt")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("runs/quantized_models"))
    parser.add_argument("--models", nargs="+", choices=list(MODELS))
    parser.add_argument("--forms", nargs="+", choices=list(FORMS), default=list(FORMS))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    forms = tuple(args.forms)
    if args.models:
        passes = [(name, forms) for name in args.models]
    else:
        first = [(name, ("default",)) for name in ISSUE_38 if "default" in forms]
        passes = first + [(name, forms) for name in MODELS]
    for name, these in passes:
        try:
            written = export(name, args.out, these, keep=True)
        except Exception as e:  # one family failing must not stop the others
            print(f"{name}: failed: {type(e).__name__}: {str(e).splitlines()[0]}",
                  flush=True)
            continue
        _write_readme(args.out)
        for path in written:
            print(path, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
