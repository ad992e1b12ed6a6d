"""How long listing an ONNX model takes: ``load_network`` on a VGG-11-shaped float model
(torchvision's layer shapes, 133 M zero weights: a 531 MB file), built here with
onnx.helper (no download, no torch).

    python scripts/bench_onnx_read.py [--repeat 3] [--external]

Prints the median wall time of ``load_network(path, "pynq")`` over ``--repeat`` runs (each
in this process, after one untimed run that imports and compiles what placement needs),
with the layers found. ``--external`` also times the same model saved with its weights in
an external-data file that is then deleted (only shapes are needed). The file lives in a
temporary directory, removed at the end. The machine is shared: the load average is
printed beside the figure.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from vtatune.networks import load_network  # noqa: E402

# torchvision's vgg11: 3x3 convs (pad 1) with 2x2 max pools ("M"), then 3 dense layers.
VGG11 = [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"]


def vgg11_model():
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits, x, channels = [], [], "input", 3
    for i, v in enumerate(VGG11):
        y = f"t{i}"
        if v == "M":
            nodes.append(helper.make_node("MaxPool", [x], [y], kernel_shape=[2, 2],
                                          strides=[2, 2]))
        else:
            w = f"conv{i}.weight"
            inits.append(numpy_helper.from_array(np.zeros((v, channels, 3, 3), np.float32), w))
            nodes += [helper.make_node("Conv", [x, w], [f"{y}c"], pads=[1, 1, 1, 1],
                                       name=f"conv{i}"),
                      helper.make_node("Relu", [f"{y}c"], [y])]
            channels = v
        x = y
    nodes.append(helper.make_node("Flatten", [x], ["flat"]))
    x = "flat"
    for i, (k, n) in enumerate(((512 * 7 * 7, 4096), (4096, 4096), (4096, 1000))):
        w = f"fc{i}.weight"
        inits.append(numpy_helper.from_array(np.zeros((n, k), np.float32), w))
        nodes.append(helper.make_node("Gemm", [x, w], [f"fc{i}"], transB=1, name=f"fc{i}"))
        x = f"fc{i}"
    graph = helper.make_graph(
        nodes, "main_graph",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 224, 224])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 1000])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def timed(path: Path, repeat: int) -> tuple[float, str]:
    net = load_network(path, "pynq")
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        load_network(path, "pynq")
        times.append(time.perf_counter() - t0)
    return statistics.median(times), f"{net.vta_layers} on VTA, {len(net.cpu)} on the CPU"


def main() -> None:
    import onnx

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--external", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model = vgg11_model()
        inline = Path(tmp) / "vgg11.onnx"
        onnx.save(model, str(inline))
        rows = [("inline weights", inline)]
        if args.external:
            external = Path(tmp) / "vgg11_external.onnx"
            onnx.save(model, str(external), save_as_external_data=True,
                      location="vgg11_external.data")
            (Path(tmp) / "vgg11_external.data").unlink()
            rows.append(("external data, file deleted", external))
        del model
        print(f"| VGG-11 ({inline.stat().st_size / 1e6:.0f} MB file) | load_network, median "
              f"of {args.repeat} | layers | load average |")
        print("|---|---|---|---|")
        for label, path in rows:
            seconds, layers = timed(path, args.repeat)
            print(f"| {label} | {seconds:.2f} s | {layers} | {os.getloadavg()[0]:.1f} |")


if __name__ == "__main__":
    main()
