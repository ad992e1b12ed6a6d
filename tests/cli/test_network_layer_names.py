"""``network --list --json``'s per-layer passes read step names ``<layer>[#<head>][/<pass>]``
whose layer names may hold ``/`` and ``#`` themselves (ONNX node names, as a QOperator
model's layers are named by the ONNX reader): it crashed with a ValueError on them."""

from vtatune.cli.network import _layer_and_pass

LAYERS = {"conv2d_1", "/model/encoder/layer.0/attention/self/query/MatMul_quant",
          "/model/blocks/3", "matmul_2"}


def test_plain_passes_and_heads():
    assert _layer_and_pass("conv2d_1", LAYERS) == ("conv2d_1", 0)
    assert _layer_and_pass("conv2d_1/2", LAYERS) == ("conv2d_1", 2)
    assert _layer_and_pass("matmul_2#3", LAYERS) == ("matmul_2", 0)
    assert _layer_and_pass("matmul_2#3/1", LAYERS) == ("matmul_2", 1)


def test_onnx_node_names_with_slashes():
    name = "/model/encoder/layer.0/attention/self/query/MatMul_quant"
    assert _layer_and_pass(name, LAYERS) == (name, 0)
    assert _layer_and_pass(name + "/1", LAYERS) == (name, 1)
    # a layer whose own name ends in digits after a slash is that layer, pass 0
    assert _layer_and_pass("/model/blocks/3", LAYERS) == ("/model/blocks/3", 0)
    assert _layer_and_pass("/model/blocks/3/1", LAYERS) == ("/model/blocks/3", 1)
