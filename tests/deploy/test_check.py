"""``--check``: the exact reference (the quantized graph in float64) rounds as exact
arithmetic does where both float32 engines round the other way, ties to even as the model
defines them; a reference that cannot run is one line and exit status 3, the run's own
result printed and its output saved all the same."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("tvm")
ort = pytest.importorskip("onnxruntime")

import onnx  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

from vtatune.cli import main  # noqa: E402
from vtatune.deploy import (  # noqa: E402
    ENGINES,
    agreement,
    check_outputs,
    deploy,
    float64_model,
    models,
    output_step,
    quantize,
    reference,
    references,
)

pytestmark = pytest.mark.filterwarnings("ignore::vtatune.builds.FallbackWarning")


def _requantize(first: float, second: float, n: int = 5):
    """``x -> Q(first) -> DQ -> Q(second) -> DQ``: a value requantized, as a QDQ graph
    passes one from a layer to the next."""
    inits = [helper.make_tensor("s1", TensorProto.FLOAT, [], [first]),
             helper.make_tensor("s2", TensorProto.FLOAT, [], [second]),
             helper.make_tensor("z", TensorProto.INT8, [], [0])]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s1", "z"], ["q1"]),
             helper.make_node("DequantizeLinear", ["q1", "s1", "z"], ["f1"]),
             helper.make_node("QuantizeLinear", ["f1", "s2", "z"], ["q2"]),
             helper.make_node("DequantizeLinear", ["q2", "s2", "z"], ["y"])]
    graph = helper.make_graph(nodes, "requantize",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def test_the_exact_reference_rounds_as_exact_arithmetic_where_float32_does_not():
    """6.5 quantized at 0.1 is 65; 65 x 0.1 is 6.5000000969... exactly (0.1 is the float32
    0.100000001490116), which rounds to 7; in float32 it is 6.5, a tie, which both float32
    engines round to even, 6."""
    model = _requantize(0.1, 1.0, n=1)
    x = np.array([[6.5]], np.float32)
    assert reference(model, x, "exact").tolist() == [[7.0]]
    assert reference(model, x, "onnxruntime").tolist() == [[6.0]]
    assert reference(model, x, "tvm").tolist() == [[6.0]]


def test_the_exact_reference_rounds_exact_ties_to_even():
    model = _requantize(1.0, 2.0)
    x = np.array([[1.0, 3.0, 5.0, -1.0, -3.0]], np.float32)  # x / 2: exact ties
    assert reference(model, x, "exact").tolist() == [[0.0, 4.0, 4.0, 0.0, -4.0]]
    assert float64_model(model).graph.output[0].type.tensor_type.elem_type == \
        TensorProto.DOUBLE


def test_with_power_of_two_scales_exact_is_what_exact_requantization_gives():
    """``--exact`` requantizes as TVM does, and with power-of-two scales float32 is exact:
    all three references and VTA agree element for element; VTA's own rounding (ties up)
    is within one step of each."""
    rng = np.random.default_rng(0)
    model = quantize(models.conv_residual(channels=32),
                     rng.standard_normal((4, 1, 32, 8, 8)).astype(np.float32))
    x = rng.standard_normal((1, 32, 8, 8)).astype(np.float32)
    exact = deploy(model, hw="pynq", input=x, exact=True).output
    vta = deploy(model, hw="pynq", input=x).output
    # each engine's reference built once for both outputs (check_outputs builds it per call)
    refs = {engine: references(model, x[None], engine) for engine in ENGINES}
    assert set(refs) == {"tvm", "onnxruntime", "exact"}
    step = output_step(model)
    for engine, ref in refs.items():
        a = agreement(exact[None], ref, step)
        assert (engine, a.exact) == (engine, a.elements)
        a = agreement(vta[None], ref, step)
        assert a.max_steps == 1 and a.exact < a.elements


@pytest.fixture(scope="module")
def mlp_and_cache(tmp_path_factory):
    """The quantized MLP, and the tuning cache its deploys here share: the first tunes its
    two layers, the others read them from the log (what they check is --check; the tuning
    is test_default_tuning's)."""
    d = tmp_path_factory.mktemp("mlp")
    rng = np.random.default_rng(0)
    path = d / "mlp_int8.onnx"
    onnx.save(quantize(models.mlp(), rng.standard_normal((4, 1, 64)).astype(np.float32)),
              path)
    return path, d / "cache"


@pytest.fixture
def mlp_file(mlp_and_cache, monkeypatch):
    path, cache = mlp_and_cache
    monkeypatch.setenv("VTATUNE_CACHE_DIR", str(cache))
    return path


def _failing_onnxruntime(monkeypatch):
    """onnxruntime failing at run time as it does on a T5-encoder export."""
    def run(self, *args, **kwargs):
        raise ort.capi.onnxruntime_pybind11_state.InvalidArgument(
            "[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : Non-zero status code returned while "
            "running Gather node. Name:'/block.0/Gather' Status Message: indices element out "
            "of data bounds, idx=40 must be within the inclusive range [-32,31]\n(more)")

    monkeypatch.setattr(ort.InferenceSession, "run", run)


def test_a_reference_that_fails_is_one_line_and_exit_status_3(mlp_file, monkeypatch,
                                                              capsys, tmp_path):
    _failing_onnxruntime(monkeypatch)
    out_file = tmp_path / "y.npy"
    status = main(["deploy", str(mlp_file), "--check", "--output", str(out_file)])
    out, err = capsys.readouterr()
    assert status == 3 and "Traceback" not in out + err
    lines = out.splitlines()
    assert "against onnxruntime: could not run: [ONNXRuntimeError] : 2 : INVALID_ARGUMENT : " \
           "Non-zero status code returned while running Gather node. Name:'/block.0/Gather' " \
           "Status Message: indices element out of data bounds, idx=40 must be within the " \
           "inclusive range [-32,31]" in lines
    assert any(line.startswith("against TVM (CPU only): 16/16 elements exact")
               or line.startswith("against TVM (CPU only): 15/16") for line in lines)
    assert any(line.startswith("against exact arithmetic (float64): ") for line in lines)
    assert lines[0].startswith("mlp_int8.onnx on pynq") and out_file.is_file()


def test_json_gives_the_failed_reference_its_error(mlp_file, monkeypatch, capsys):
    _failing_onnxruntime(monkeypatch)
    status = main(["deploy", str(mlp_file), "--check", "--json", "--output",
                   str(mlp_file.with_suffix(".npy"))])
    check = json.loads(capsys.readouterr().out)["check"]
    assert status == 3
    assert check["onnxruntime"]["error"].endswith("inclusive range [-32,31]")
    assert check["tvm"]["max_steps"] <= 1 and check["exact"]["max_steps"] <= 1


def test_without_a_failure_check_exits_0_and_help_says_the_statuses(mlp_file, capsys):
    assert main(["deploy", str(mlp_file), "--check", "--output",
                 str(mlp_file.with_suffix(".npy"))]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["deploy", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "Exit status: 0; 2 on bad input; 3 when --check could not run a reference" in text


def test_the_exact_reference_computes_a_transformer_block():
    """LayerNorm, softmax and GELU's erf in float64 as they are (ONNX's reference
    implementation computes LayerNormalization in its input's type). Against onnxruntime's
    float32 (TVM's float32 build would cost a second LLVM build of the block: 5-7 s)."""
    rng = np.random.default_rng(0)
    model = quantize(models.encoder_block(),
                     rng.standard_normal((4, 1, 32, 32)).astype(np.float32))
    ops = {n.op_type for n in float64_model(model).graph.node}
    assert {"LayerNormalization", "Erf"} <= ops
    x = rng.standard_normal((1, 32, 32)).astype(np.float32)
    [exact] = check_outputs(model, x[None], reference(model, x, "onnxruntime")[None],
                            engines=("exact",))
    assert exact.agreement.max_steps <= 1 and exact.agreement.share > 0.99


def test_the_tvm_reference_is_the_same_built_with_or_without_llvms_optimizer():
    """A reference of one or two inputs is built with LLVM's optimizer off (its compiling
    costs more than its run), of more with it on: the same outputs."""
    rng = np.random.default_rng(2)
    model = quantize(models.encoder_block(), rng.standard_normal((4, 1, 32, 32)).astype(np.float32))
    xs = rng.standard_normal((3, 1, 32, 32)).astype(np.float32)
    optimized = references(model, xs, "tvm")
    assert np.array_equal(references(model, xs[:1], "tvm"), optimized[:1])
