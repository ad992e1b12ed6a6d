"""A batch of inputs: ``deploy --input`` with N x the input shape or a folder of .npy files,
the outputs saved N x the output shape, ``--check`` over all of them (elements and top-1)."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("tvm")
pytest.importorskip("onnxruntime")

import onnx  # noqa: E402

from vtatune.cli import main  # noqa: E402
from vtatune.deploy import (  # noqa: E402
    DeployError,
    check_outputs,
    compile_model,
    input_batch,
    models,
    output_sha256,
    quantize,
    reference,
    references,
    top1,
)

pytestmark = pytest.mark.filterwarnings("ignore::vtatune.builds.FallbackWarning")

N = 5


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    """An int8 MLP (input 1x64, 16 class scores), a batch of inputs as one array and as a
    folder (file names sorted otherwise than written), and each input's output run alone."""
    d = tmp_path_factory.mktemp("deploy_batch")
    rng = np.random.default_rng(0)
    model = quantize(models.mlp(), rng.standard_normal((4, 1, 64)).astype(np.float32))
    path = d / "mlp_int8.onnx"
    onnx.save(model, path)
    xs = rng.standard_normal((N, 1, 64)).astype(np.float32)
    np.save(d / "batch.npy", xs)
    folder = d / "inputs"
    folder.mkdir()
    for i, x in enumerate(xs):  # written last to first: the order is the names'
        np.save(folder / f"x{i:02d}.npy", x)
    compiled = compile_model(path)
    alone = np.stack([compiled.run(x).output for x in xs])
    return {"model": path, "dir": d, "xs": xs, "batch": d / "batch.npy", "folder": folder,
            "alone": alone}


def _run(capsys, *argv):
    status = main(["deploy", *map(str, argv)])
    out, err = capsys.readouterr()
    return status, out, err


def test_a_batch_array_runs_each_input_and_saves_n_outputs(mlp, capsys, tmp_path):
    status, out, _ = _run(capsys, mlp["model"], "--input", mlp["batch"],
                          "--output", tmp_path / "y.npy")
    assert status == 0
    saved = np.load(tmp_path / "y.npy")
    assert saved.shape == (N, 1, 16)
    np.testing.assert_array_equal(saved, mlp["alone"])
    assert f"output {N}x1x16 float32 saved to" in out and f"{N} inputs run in" in out


def test_a_folder_is_a_batch_in_the_order_of_the_names(mlp, capsys, tmp_path):
    status, out, _ = _run(capsys, mlp["model"], "--input", mlp["folder"],
                          "--output", tmp_path / "y.npy", "--json")
    assert status == 0
    d = json.loads(out)
    assert d["inputs"] == N and d["output_shape"] == [N, 1, 16] and "output" not in d
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), mlp["alone"])
    assert d["output_sha256"] == output_sha256(np.asarray(mlp["alone"], np.float32))
    status, out, _ = _run(capsys, mlp["model"], "--input", mlp["folder"],
                          "--output", tmp_path / "y.npy", "--json-values")
    np.testing.assert_array_equal(np.array(json.loads(out)["output"], np.float32),
                                  mlp["alone"])


def test_one_input_still_saves_the_output_shape(mlp, capsys, tmp_path):
    np.save(tmp_path / "x.npy", mlp["xs"][2])
    status, _, _ = _run(capsys, mlp["model"], "--input", tmp_path / "x.npy",
                        "--output", tmp_path / "y.npy")
    assert status == 0
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), mlp["alone"][2])


def test_check_covers_every_output_of_the_batch(mlp, capsys, tmp_path):
    status, out, _ = _run(capsys, mlp["model"], "--input", mlp["batch"], "--check", "--json",
                          "--output", tmp_path / "y.npy")
    assert status == 0
    check = json.loads(out)["check"]
    refs = {e: references(mlp["model"], mlp["xs"], e) for e in ("tvm", "onnxruntime")}
    for engine, ref in refs.items():
        c = check[engine]
        assert c["inputs"] == N and c["elements"] == N * 16
        assert c["exact"] == int((np.abs(ref - mlp["alone"]) < 1e-6).sum())
        want_top1 = int((ref.reshape(N, -1).argmax(1) == mlp["alone"].reshape(N, -1).argmax(1))
                        .sum())
        assert c["top1"] == want_top1
    status, out, _ = _run(capsys, mlp["model"], "--input", mlp["batch"], "--check",
                          "--output", tmp_path / "y.npy")
    assert f"top-1 the same on {check['tvm']['top1']}/{N} inputs" in out


def test_references_of_a_batch_are_each_inputs_reference(mlp):
    for engine in ("tvm", "onnxruntime"):
        refs = references(mlp["model"], mlp["xs"], engine)
        assert refs.shape == (N, 1, 16)
        np.testing.assert_array_equal(refs[3], reference(mlp["model"], mlp["xs"][3], engine))


def test_check_outputs_counts_what_differs(mlp):
    """An output moved by one step in one element, and another whose top class changed."""
    outputs = mlp["alone"].copy()
    ref = references(mlp["model"], mlp["xs"], "tvm")
    assert np.array_equal(outputs, ref)  # the MLP is exact
    step = float(np.min(np.diff(np.unique(ref))))
    outputs[0, 0, 3] += step
    second = ref[1, 0].argsort()[-2]  # the second best class of input 1 becomes the top
    outputs[1, 0, second] = ref[1, 0].max() + step
    [c] = check_outputs(mlp["model"], mlp["xs"], outputs, engines=("tvm",))
    assert (c.agreement.exact, c.agreement.elements) == (N * 16 - 2, N * 16)
    assert c.agreement.max_steps >= 1
    assert c.top1 == N - 1


def test_top1_takes_the_first_of_equal_scores_and_only_class_vectors():
    a = np.array([[[1.0, 3.0, 3.0]], [[0.0, 0.0, 2.0]]])
    b = np.array([[[1.0, 2.0, 3.0]], [[5.0, 0.0, 2.0]]])
    assert top1(a, a) == 2
    assert top1(a, b) == 0  # input 0: class 1 (first of the equal 3.0s) against class 2
    assert top1(np.zeros((1, 1, 3)), np.array([[[0.0, 0.0, -1.0]]])) == 1  # both class 0
    assert top1(np.zeros((1, 1, 3)), np.array([[[0.0, 1.0, 1.0]]])) == 0
    assert top1(np.zeros((2, 1, 4, 4)), np.zeros((2, 1, 4, 4))) is None  # not a class vector
    assert top1(np.zeros((2, 1, 1)), np.zeros((2, 1, 1))) is None  # a single score
    with pytest.raises(DeployError, match=r"outputs of shapes \[2, 1, 3\] and \[1, 1, 3\]"):
        top1(a, a[:1])


def test_input_batch_tells_one_input_from_n():
    x = np.zeros((1, 64), np.float32)
    batch, is_batch = input_batch(x, (1, 64), np.dtype(np.float32))
    assert batch.shape == (1, 1, 64) and not is_batch
    batch, is_batch = input_batch(np.zeros((3, 1, 64)), (1, 64), np.dtype(np.float32))
    assert batch.shape == (3, 1, 64) and batch.dtype == np.float32 and is_batch
    with pytest.raises(DeployError, match=r"input of shape \[3, 1, 32\]: the model takes"):
        input_batch(np.zeros((3, 1, 32)), (1, 64), np.dtype(np.float32))


@pytest.mark.parametrize("case, message", [
    ("empty", "is a folder with no .npy file (each one input): the model takes [1, 64] "
              "float32 (input x)"),
    ("mixed", "x1.npy: input of shape [1, 32] (each file is one input): the model takes "
              "[1, 64] float32 (input x)"),
    ("wrong", "x0.npy: input of shape [1, 32] (each file is one input): the model takes "
              "[1, 64] float32 (input x)"),
    ("none", "an empty batch of inputs [0, 1, 64]"),
])
def test_a_bad_batch_is_one_line_and_exit_2(mlp, capsys, tmp_path, case, message):
    target = tmp_path / case
    target.mkdir()
    if case == "mixed":
        np.save(target / "x0.npy", np.zeros((1, 64), np.float32))
        np.save(target / "x1.npy", np.zeros((1, 32), np.float32))
    elif case == "wrong":
        np.save(target / "x0.npy", np.zeros((1, 32), np.float32))
    elif case == "none":
        target = tmp_path / "none.npy"
        np.save(target, np.zeros((0, 1, 64), np.float32))
    status, _, err = _run(capsys, mlp["model"], "--input", target)
    lines = [ln for ln in err.splitlines() if not ln.startswith("vtatune: warning")]
    assert status == 2 and len(lines) == 1 and lines[0].startswith("vtatune: error: ")
    assert message in lines[0]


@pytest.mark.parametrize("which", ["mlp", "conv_residual"])
def test_tvms_cpu_build_is_scheduled_without_changing_an_output(mlp, which):
    """The reference (and a deployed model's CPU part) is TVM's CPU build with each sum's
    innermost output loop vectorized: the same outputs, bit for bit, as relax.build's
    unscheduled one."""
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    rng = np.random.default_rng(1)
    if which == "mlp":
        model, shape = onnx.load(mlp["model"]), (1, 64)
    else:
        shape = (1, 16, 8, 8)
        model = quantize(models.conv_residual(channels=16),
                         rng.standard_normal((4, *shape)).astype(np.float32))
    xs = rng.standard_normal((3, *shape)).astype(np.float32)
    name = model.graph.input[0].name
    plain = relax.VirtualMachine(relax.build(from_onnx(model, shape_dict={name: list(shape)}),
                                             target="llvm"), tvm.cpu())
    want = np.stack([plain["main"](tvm.runtime.tensor(x)).numpy() for x in xs])
    np.testing.assert_array_equal(references(model, xs, "tvm"), want)
