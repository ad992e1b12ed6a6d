"""The test models of issue 33, as a new user makes them: torchvision's ResNet-18, ResNet-50
and MobileNet-v2 and transformers' BERT and ViT encoders with random weights, exported by
torch and quantized by onnxruntime's ``quantize_static`` in QDQ format three ways.

    python scripts/quantized_models.py [--out DIR] [--models NAME ...]

Needs torch, torchvision and transformers (not vtatune's dependencies: install them in a
scratch environment, e.g. ``python -m venv --system-site-packages /tmp/venv &&
/tmp/venv/bin/pip install torch torchvision transformers``).

Writes ``DIR/<model>.float.onnx`` (opset 17) and ``DIR/<model>.<variant>.onnx`` for each
variant: ``default`` (``quantize_static``'s default options: asymmetric int8 activations,
per-tensor weights), ``per_channel`` (``per_channel=True``)
and ``symmetric`` (``ActivationSymmetric`` and ``WeightSymmetric``). Weights are as the
libraries initialize them under a fixed seed; each BatchNorm gets seeded random statistics
and affine parameters (so folded biases are non-zero); calibration is 8 seeded random
samples. Prints one line per file written.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

MODELS = ("resnet18", "resnet50", "mobilenet_v2", "bert", "vit")
VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "per_channel": {"per_channel": True},
    "symmetric": {"extra_options": {"ActivationSymmetric": True, "WeightSymmetric": True}},
}
#: BERT's sequence length and ViT's image size.
SEQUENCE, IMAGE = 32, 32
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


def _torchvision(name: str) -> tuple[Any, tuple[int, ...], str]:
    import torch
    import torchvision

    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None)
    _random_batchnorm(model, seed=1)
    return model.eval(), (1, 3, 224, 224), "float"


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


def _bert() -> tuple[Any, tuple[int, ...], str]:
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=512, max_position_embeddings=SEQUENCE,
                        vocab_size=1000, attn_implementation="eager")
    return _hidden(BertModel(config, add_pooling_layer=False)), (1, SEQUENCE), "tokens"


def _vit() -> tuple[Any, tuple[int, ...], str]:
    import torch
    from transformers import ViTConfig, ViTModel

    torch.manual_seed(0)
    config = ViTConfig(image_size=IMAGE, patch_size=8, hidden_size=128, num_hidden_layers=2,
                       num_attention_heads=2, intermediate_size=512,
                       attn_implementation="eager")
    return _hidden(ViTModel(config, add_pooling_layer=False)), (1, 3, IMAGE, IMAGE), "float"


BUILDERS: dict[str, Callable[[], tuple[Any, tuple[int, ...], str]]] = {
    "resnet18": lambda: _torchvision("resnet18"),
    "resnet50": lambda: _torchvision("resnet50"),
    "mobilenet_v2": lambda: _torchvision("mobilenet_v2"),
    "bert": _bert,
    "vit": _vit,
}


def _samples(shape: tuple[int, ...], kind: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "tokens":
        return rng.integers(0, 1000, shape, dtype=np.int64)
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


def export(name: str, out: Path) -> list[Path]:
    """``name`` exported and quantized the three ways into ``out``; the files written."""
    import onnx
    import torch
    from onnxruntime.quantization import QuantFormat, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    model, shape, kind = BUILDERS[name]()
    example = torch.from_numpy(_samples(shape, kind, seed=100))
    float_path = out / f"{name}.float.onnx"
    torch.onnx.export(model, (example,), str(float_path), opset_version=17,
                      input_names=["input"], output_names=["output"], dynamo=False)
    onnx.checker.check_model(onnx.load(str(float_path)))
    prepared = out / f"{name}.prepared.onnx"
    quant_pre_process(str(float_path), str(prepared), skip_symbolic_shape=True)
    written = [float_path]
    for variant, options in VARIANTS.items():
        path = out / f"{name}.{variant}.onnx"
        quantize_static(str(prepared), str(path), _reader("input", shape, kind),
                        quant_format=QuantFormat.QDQ, **options)
        written.append(path)
    prepared.unlink()
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("runs/quantized_models"))
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.models:
        for path in export(name, args.out):
            print(path, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
