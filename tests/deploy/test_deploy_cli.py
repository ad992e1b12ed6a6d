"""``python -m vtatune deploy``: what it prints and saves, and bad input in one line with
exit status 2."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tvm")
pytest.importorskip("onnxruntime")

import onnx  # noqa: E402

from vtatune.cli import main  # noqa: E402
from vtatune.deploy import models, quantize  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::vtatune.builds.FallbackWarning")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("deploy_cli")
    rng = np.random.default_rng(0)
    float_model = models.mlp()
    calibration = rng.standard_normal((4, 1, 64)).astype(np.float32)
    paths = {"float": d / "mlp.onnx", "int8": d / "mlp_int8.onnx", "cal": d / "cal.npy",
             "x": d / "x.npy", "bad_x": d / "bad_x.npy", "junk": d / "junk.onnx",
             "ultra96_log": Path(__file__).resolve().parents[2] / "logs" /
             "resnet18-ultra96.jsonl"}
    onnx.save(float_model, paths["float"])
    onnx.save(quantize(float_model, calibration), paths["int8"])
    np.save(paths["cal"], calibration)
    np.save(paths["x"], rng.standard_normal((1, 64)).astype(np.float32))
    np.save(paths["bad_x"], np.zeros((1, 32), np.float32))
    paths["junk"].write_bytes(b"not a model")
    paths["empty"] = d / "empty.jsonl"
    paths["empty"].touch()
    return paths


def _run(capsys, *argv):
    status = main(["deploy", *map(str, argv)])
    out, err = capsys.readouterr()
    return status, out, err


def test_json_names_every_offloaded_call_and_saves_the_output(files, capsys, tmp_path):
    out_file = tmp_path / "y.npy"
    status, out, _ = _run(capsys, files["int8"], "--input", files["x"], "--output", out_file,
                          "--json", "--check")
    assert status == 0
    d = json.loads(out)
    # tuned by default (issue 38): each workload no log holds
    assert [(c["layer"], c["op"], c["source"]) for c in d["offloaded"]] == [
        ("dense_1", "dense", "tuned"), ("dense_2", "dense", "tuned")]
    assert {"workload", "schedule", "provenance", "requantization", "passes", "cycles"} <= \
        set(d["offloaded"][0])
    assert d["vta_cycles"] == sum(c["cycles"] for c in d["offloaded"])
    assert [c["op"] for c in d["cpu_ops"]] == ["quantize", "pack", "unpack", "dequantize"]
    assert [c["by"] for c in d["cpu_ops"]] == ["tvm", "vtatune", "vtatune", "tvm"]
    assert d["check"]["tvm"]["max_steps"] <= 1 and d["check"]["onnxruntime"]["max_steps"] <= 1
    # issue 35, item 13: the output as its shape, dtype, checksum and file; no values
    saved = np.load(out_file)
    assert "output" not in d and d["output_file"] == str(out_file)
    assert (d["output_shape"], d["output_dtype"]) == ([1, 16], "float32") == \
        (list(saved.shape), str(saved.dtype))
    assert d["output_sha256"] == hashlib.sha256(saved.astype("<f4").tobytes()).hexdigest()


def test_json_values_adds_the_outputs_values(files, capsys, tmp_path):
    out_file = tmp_path / "y.npy"
    status, out, _ = _run(capsys, files["int8"], "--input", files["x"], "--output", out_file,
                          "--json-values")
    d = json.loads(out)
    assert status == 0 and d["output_file"] == str(out_file)
    np.testing.assert_array_equal(np.load(out_file), np.array(d["output"], np.float32))
    assert d["output_sha256"] == hashlib.sha256(np.load(out_file).tobytes()).hexdigest()


def test_the_output_goes_to_exactly_the_file_named(files, capsys, tmp_path):
    """Issue 35, item 4: ``--output y.out`` wrote ``y.out.npy`` and reported ``y.out``."""
    out_file = tmp_path / "y.out"
    status, out, _ = _run(capsys, files["int8"], "--output", out_file)
    assert status == 0 and f"saved to {out_file};" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["y.out"]
    assert np.load(out_file).shape == (1, 16)


@pytest.fixture
def no_build(monkeypatch):
    """A deploy that reaches the build fails the test: what is refused, is refused first."""
    import vtatune.deploy

    def build(*args, **kwargs):
        pytest.fail("the model was built before its output file was checked")

    monkeypatch.setattr(vtatune.deploy, "compile_model", build)


@pytest.mark.parametrize("make, output, message", [
    (lambda d: (d / "dir").mkdir(), "dir", "--output {d}/dir is a directory: name the file"),
    (lambda d: (d / "f").write_text("x"), "f/y.npy", "cannot write --output {d}/f/y.npy: "),
])
def test_an_output_it_cannot_write_is_refused_before_the_build(
        files, capsys, tmp_path, no_build, make, output, message):
    """Issue 35, items 4 and 12: a directory became ``dir.npy``; an unwritable place was
    found after the whole model ran, and the report was lost."""
    make(tmp_path)
    status, out, err = _run(capsys, files["int8"], "--output", tmp_path / output)
    assert status == 2 and out == ""
    assert err.startswith("vtatune: error: " + message.format(d=tmp_path))
    assert err.count("\n") == 1


def test_the_default_output_is_checked_before_the_build(files, capsys, tmp_path, monkeypatch,
                                                       no_build):
    monkeypatch.chdir(tmp_path)
    Path("runs").write_text("a file where the default output's folder goes")
    status, _, err = _run(capsys, files["int8"])
    assert status == 2 and err.startswith(
        "vtatune: error: cannot write runs/mlp_int8.output.npy (the default --output): ")


def test_tuning_on_the_spot_keys_studies_by_workload_not_layer(files, capsys, tmp_path):
    """Issue 35, item 1: studies named after layers (every model has a ``dense_1``) made the
    second model on a hardware fail; ``--log`` of a new file was refused."""
    log = tmp_path / "new.jsonl"
    second = tmp_path / "wider.onnx"
    rng = np.random.default_rng(1)
    onnx.save(quantize(models.mlp(features=32, hidden=48),
                       rng.standard_normal((4, 1, 32)).astype(np.float32)), second)
    for model in (files["int8"], second):
        status, out, err = _run(capsys, model, "--log", log, "--tune", 1, "--hw", "sim",
                                "--output", tmp_path / "y.npy", "--json")
        assert status == 0, err
        assert [c["source"] for c in json.loads(out)["offloaded"]] == ["tuned", "tuned"]
    records = [json.loads(line) for line in log.read_text().splitlines()]
    studies = {r["study"] for r in records}
    assert len(studies) == 4 and not any("dense_" in s for s in studies)
    # named as every study: operator, shapes and epilogue (the workload's key), hardware,
    # space, bias
    assert studies == {f"{r['workload']['key']}.{r['hw']['model']}.full"
                       + (".bias" if r["bias"] else "") for r in records}
    empty = tmp_path / "empty.jsonl"
    empty.touch()
    status, _, err = _run(capsys, files["int8"], "--log", empty, "--tune", 1, "--hw", "sim",
                          "--output", tmp_path / "y.npy")
    assert status == 0, err
    assert len(empty.read_text().splitlines()) >= 2


def test_the_report_says_what_ran_where(files, capsys, tmp_path):
    status, out, _ = _run(capsys, files["float"], "--calibration", files["cal"], "--hw", "sim",
                          "--output", tmp_path / "y.npy", "--check")
    assert status == 0
    assert "VTA: 2 offloaded layers" in out and "dense_1" in out and "dense_2" in out
    assert "CPU: 2 ops compiled by TVM (quantize x1, dequantize x1)" in out
    assert "at 100 MHz (timing model)" in out
    assert "against TVM (CPU only): 16/16 elements exact" in out or \
        "at most 1 quantization step(s) apart" in out


@pytest.mark.parametrize("args, message", [
    (("float",), "mlp.onnx is a float model: VTA runs 8-bit integers. Quantize it in QDQ "
                 "format"),
    (("int8", "--log", "missing.jsonl"), "log missing.jsonl not found"),
    (("int8", "--log", "ultra96_log"),
     "holds records of ultra96_1x16_i8w8a32_15_15_18_17, none of pynq_1x16_i8w8a32"),
    (("int8", "--input", "bad_x"), r"input of shape [1, 32]: the model takes [1, 64]"),
    (("junk",), "junk.onnx is not a valid ONNX model"),
    (("int8", "--hw", "nosuchboard"), "unknown hardware 'nosuchboard'"),
    (("int8", "--tune", "-1"), "--tune must be at least 0"),
    (("int8", "--seed", "-1"), "--seed must be in 0..4294967295, got -1"),  # issue 35, item 5
    (("int8", "--log", "empty"), "empty"),  # read, not tuned into: nothing to take
])
def test_bad_input_is_one_line_and_exit_2(files, capsys, args, message):
    argv = [files.get(a, a) for a in args]
    status, out, err = _run(capsys, *argv)
    lines = [ln for ln in err.splitlines() if not ln.startswith("vtatune: warning")]
    assert status == 2 and len(lines) == 1 and lines[0].startswith("vtatune: error: ")
    assert message in lines[0]


def test_a_model_tvm_cannot_import_is_refused(capsys, tmp_path):
    h = onnx.helper
    graph = h.make_graph([h.make_node("QuantizeLinear", ["x", "s"], ["q"]),
                          h.make_node("DequantizeLinear", ["q", "s"], ["d"]),
                          h.make_node("Det", ["d"], ["y"])], "unsupported",
                         [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4, 4])],
                         [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [])],
                         [h.make_tensor("s", onnx.TensorProto.FLOAT, [], [0.5])])
    path = tmp_path / "det.onnx"
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), path)
    status, _, err = _run(capsys, path)
    assert status == 2 and "vtatune: error: TVM cannot import the model" in err
