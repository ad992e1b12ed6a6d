"""A bundle that serves (issue 40, item 4) and the first hour's refusals of ``deploy`` and
``run`` (issue 41, items 1-3): many inputs in one ``run`` process (an .npy of N x the input
shape, a folder of .npy files), each input's time and JSON line; the inputs a model takes
and one line for anything else (``ModelInput``, shared by deploy and run); ``--save``
refused before the build; Ctrl-C during an inference "vtatune: interrupted", exit 130."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tvm")
pytest.importorskip("onnxruntime")

import onnx  # noqa: E402

from tests._bundles import fresh  # noqa: E402
from tests._stock import stock_schedules  # noqa: E402
from vtatune.cli import main  # noqa: E402
from vtatune.deploy import (  # noqa: E402
    DeployError,
    ModelInput,
    compile_model,
    models,
    output_sha256,
    quantize,
)

ROOT = Path(__file__).resolve().parents[2]
N = 3
TAKES = "the model takes [1, 64] float32 (input x)"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """An int8 MLP (input x: 1x64 float32) saved as a bundle, N inputs as one array and as
    a folder, and each one's output where the model was built."""
    d = tmp_path_factory.mktemp("serve")
    rng = np.random.default_rng(0)
    model = quantize(models.mlp(), rng.standard_normal((4, 1, 64)).astype(np.float32))
    onnx.save(model, d / "mlp.onnx")
    xs = rng.standard_normal((N, 1, 64)).astype(np.float32)
    np.save(d / "batch.npy", xs)
    (d / "inputs").mkdir()
    for i, x in enumerate(xs):
        np.save(d / "inputs" / f"x{i}.npy", x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = compile_model(d / "mlp.onnx")
    want = [compiled.run(x) for x in xs]
    compiled.save(d / "mlp.bundle")
    return {"dir": d, "model": d / "mlp.onnx", "bundle": d / "mlp.bundle", "xs": xs,
            "want": want}


# --- many inputs in one process ---------------------------------------------------------------
@pytest.mark.parametrize("command", [("-m", "vtatune", "run"), ("-m", "vtatune.deploy.runtime")])
def test_run_serves_a_batch_in_one_process_a_json_line_each(served, tmp_path, command):
    out = tmp_path / "y.npy"
    proc = fresh(*command, str(served["bundle"]), "--input", str(served["dir"] / "batch.npy"),
                 "--output", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    want = served["want"]
    assert np.array_equal(np.load(out), np.stack([r.output for r in want]))
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [d["input"] for d in lines] == list(range(N))
    assert [d["output_sha256"] for d in lines] == [output_sha256(r.output) for r in want]
    assert [d["vta_cycles"] for d in lines] == [r.vta_cycles for r in want]
    assert all(d["seconds"]["run"] > 0 and d["output_file"] == str(out) for d in lines)
    assert "input_file" not in lines[0]


def test_run_serves_a_folder_and_reports_each_inputs_time(served, tmp_path):
    out = tmp_path / "y.npy"
    proc = fresh("-m", "vtatune", "run", str(served["bundle"]), "--input",
                 str(served["dir"] / "inputs"), "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    assert np.array_equal(np.load(out), np.stack([r.output for r in served["want"]]))
    lines = proc.stdout.splitlines()
    assert lines[0] == served["want"][0].report().splitlines()[0]
    timed = [ln.split(":")[0] for ln in lines if ln.startswith("input ")]
    assert timed == [f"input {i} (x{i}.npy)" for i in range(N)]
    assert lines[-1].startswith(f"output {N}x1x16 float32 saved to {out}; load ")
    assert f"; {N} inputs in " in lines[-1] and "each (median)" in lines[-1]


# --- inputs: what the model takes, one line for anything else ---------------------------------
X = ModelInput("x", (1, 64), np.dtype(np.float32))


@pytest.mark.parametrize("given, message", [
    (np.zeros((1, 64), np.int64), "input of dtype int64"),
    (np.full((1, 64), np.nan, np.float32), "input holding NaN"),
    (np.full((1, 64), np.inf), "input holding infinity"),
    (np.zeros((1, 32), np.float32), "input of shape [1, 32]"),
    (np.zeros((0, 1, 64), np.float32), "an empty batch of inputs [0, 1, 64]"),
])
def test_an_input_the_model_does_not_take_is_refused_saying_what_it_takes(given, message):
    with pytest.raises(DeployError) as err:
        X.batch(given)
    assert str(err.value) == f"{message}: {TAKES}"


def test_inputs_of_the_same_kind_are_cast_and_integers_must_fit():
    assert X.check(np.zeros((1, 64), np.float64)).dtype == np.float32
    ids = ModelInput("ids", (1, 4), np.dtype(np.int64))
    assert ids.check(np.arange(4, dtype=np.int32).reshape(1, 4)).dtype == np.int64
    with pytest.raises(DeployError, match=r"^input of dtype float32: the model takes "
                                          r"\[1, 4\] int64 \(input ids\)$"):
        ids.check(np.zeros((1, 4), np.float32))
    small = ModelInput("q", (2,), np.dtype(np.uint8))
    with pytest.raises(DeployError, match=r"^input of values -1\.\.300, beyond uint8: the "
                                          r"model takes \[2\] uint8 \(input q\)$"):
        small.check(np.array([-1, 300]))


def _bad_input(tmp_path: Path, case: str) -> tuple[Path, str]:
    """A bad ``--input`` and the refusal's text before what the model takes."""
    p = tmp_path / case
    if case == "npz":
        p = tmp_path / "x.npz"
        np.savez(p, x=np.zeros((1, 64), np.float32))
        return p, f"--input {p} is a zip archive (an .npz?), not an .npy file: save the " \
                  "input alone with numpy.save"
    if case == "text":
        p = tmp_path / "x.npy"
        p.write_text("0.5 0.25\n")
        return p, f"--input {p} is not in NumPy's .npy format (numpy.save writes it)"
    if case == "objects":
        p = tmp_path / "x.npy"
        np.save(p, np.array([{"a": 1}], dtype=object), allow_pickle=True)
        return p, f"--input {p} is no array of numbers in NumPy's .npy format (Object " \
                  "arrays cannot be loaded when allow_pickle=False)"
    if case == "missing":
        return p, f"cannot read --input {p} (No such file or directory)"
    p.mkdir()
    if case == "empty":
        return p, f"--input {p} is a folder with no .npy file (each one input)"
    np.save(p / "x0.npy", np.zeros((1, 64), np.float32))
    (p / "notes.txt").write_text("x0 is zeros\n")
    (p / "more.npy").mkdir()
    (p / ".hidden").write_text("")  # hidden files are not inputs
    return p, f"--input {p} holds other things than .npy files (more.npy/, notes.txt): " \
              "each .npy file is one input"


CASES = ["npz", "text", "objects", "missing", "empty", "mixed"]


@pytest.mark.parametrize("case", CASES)
def test_a_bad_input_file_or_folder_is_one_line(tmp_path, case):
    path, message = _bad_input(tmp_path, case)
    with pytest.raises(DeployError) as err:
        X.read(path)
    assert str(err.value) == f"{message}: {TAKES}"


@pytest.mark.parametrize("command", ["deploy", "run"])
@pytest.mark.parametrize("case", ["npz", "text", "empty", "mixed", "int64", "nan"])
def test_deploy_and_run_refuse_a_bad_input_before_any_work(served, tmp_path, capsys,
                                                           monkeypatch, command, case):
    """In this process the bundle's load would be refused (its regions are here) and the
    build is made to fail: the input's refusal comes first."""
    if case in ("int64", "nan"):
        path = tmp_path / "x.npy"
        np.save(path, np.zeros((1, 64), np.int64) if case == "int64"
                else np.full((1, 64), np.nan, np.float32))
        message = "input of dtype int64" if case == "int64" else "input holding NaN"
    else:
        path, message = _bad_input(tmp_path, case)
    monkeypatch.setattr("vtatune.deploy.compile_model", _no_build)
    target = served["model"] if command == "deploy" else served["bundle"]
    assert main([command, str(target), "--input", str(path),
                 "--output", str(tmp_path / "y.npy")]) == 2
    assert capsys.readouterr().err == f"vtatune: error: {message}: {TAKES}\n"


def _no_build(*args, **kwargs):
    raise AssertionError("the model was built")


# --- --save checked first ---------------------------------------------------------------------
@pytest.mark.parametrize("case", ["full", "file", "proc"])
def test_deploy_save_is_checked_before_the_build(served, tmp_path, capsys, monkeypatch, case):
    target = {"full": tmp_path / "full", "file": tmp_path / "file",
              "proc": Path("/proc/vtatune.bundle")}[case]
    if case == "full":
        target.mkdir()
        (target / "keep.txt").write_text("mine\n")
        message = f"{target} exists and is not a bundle: not overwritten (give a new directory)"
    elif case == "file":
        target.write_text("mine\n")
        message = f"{target} exists and is not a bundle: not overwritten (give a new directory)"
    else:
        message = f"cannot write the bundle {target}: No such file or directory"
    monkeypatch.setattr("vtatune.deploy.compile_model", _no_build)
    assert main(["deploy", str(served["model"]), "--save", str(target),
                 "--output", str(tmp_path / "y.npy")]) == 2
    assert capsys.readouterr().err == f"vtatune: error: {message}\n"
    assert not list(tmp_path.glob(".*probe*"))  # the probe is gone
    if case == "full":
        assert [p.name for p in target.iterdir()] == ["keep.txt"]


# --- Ctrl-C -----------------------------------------------------------------------------------
_INTERRUPTED = '''
import sys, time
from pathlib import Path
from vtatune.deploy.runtime import SimulatedDevice

run = SimulatedDevice.run

def slow(self, program, tensors):  # mid-inference, inside the function TVM's VM calls
    Path(sys.argv[1]).touch()
    time.sleep(60)
    return run(self, program, tensors)

SimulatedDevice.run = slow
if sys.argv[2] == "runtime":
    from vtatune.deploy.runtime._command import main
    raise SystemExit(main(sys.argv[3:]))
from vtatune.cli import main
raise SystemExit(main(sys.argv[2:]))
'''


@pytest.mark.parametrize("command", ["run", "runtime", "deploy"])
def test_ctrl_c_during_an_inference_is_one_line_and_exit_130(served, tmp_path, command):
    script, marker = tmp_path / "interrupted.py", tmp_path / "running"
    script.write_text(_INTERRUPTED)
    target = served["model"] if command == "deploy" else served["bundle"]
    argv = [str(script), str(marker), command, str(target), "--output", str(tmp_path / "y.npy")]
    if command == "runtime":
        argv = [str(script), str(marker), "runtime", *argv[3:]]
    proc = subprocess.Popen([sys.executable, *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        deadline = time.monotonic() + 240
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), proc.communicate()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    err_lines = [ln for ln in err.splitlines() if not ln.startswith("vtatune: warning")]
    assert (proc.returncode, err_lines) == (130, ["vtatune: interrupted"]), err


# --- the first inference: programs kept decoded, no timing ----------------------------------
_NO_DECODING = '''
import json, sys
import numpy as np
import simulator.functional
from vtatune.deploy.runtime import load

def refused(*args):
    raise AssertionError("a program was decoded")

simulator.functional.decode = refused if sys.argv[2] == "kept" else simulator.functional.decode
model = load(sys.argv[1])
results = [model.run(x) for x in np.load(sys.argv[3])]
print(json.dumps({"outputs": [r.output.tolist() for r in results],
                  "cycles": [r.vta_cycles for r in results],
                  "adjusted": model.device.token_adjustments,
                  "modules": sorted(m for m in ("numba", "ml_dtypes", "simulator.timing")
                                    if m in sys.modules)}))
'''


@pytest.mark.parametrize("kept", [True, False], ids=["kept", "as-before"])
def test_a_loaded_bundle_decodes_no_program_and_times_none(served, tmp_path, kept):
    """Each program is kept decoded beside it (read back, never decoded: the bundle's
    first inference is not a decoding); a bundle without them, as vtatune wrote them
    before, decodes them on its first inference, alike. Neither times a program (the
    bundle records each pass's cycles) nor imports numba or ml_dtypes."""
    import shutil

    bundle = Path(shutil.copytree(served["bundle"], tmp_path / "copy.bundle"))
    manifest = json.loads((bundle / "manifest.json").read_text())
    programs = sorted(n for n in manifest["files"] if n.endswith(".bin"))
    assert sorted(n for n in manifest["files"] if n.endswith(".decoded")) == [
        n.replace(".bin", ".decoded") for n in programs]
    if not kept:
        for name in list(manifest["files"]):
            if name.endswith(".decoded"):
                del manifest["files"][name]
                (bundle / name).unlink()
        (bundle / "manifest.json").write_text(json.dumps(manifest))
    script = tmp_path / "serve.py"
    script.write_text(_NO_DECODING)
    proc = fresh(str(script), str(bundle), "kept" if kept else "decode",
                 str(served["dir"] / "batch.npy"))
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    want = served["want"]
    assert got["outputs"] == [r.output.tolist() for r in want]
    assert got["cycles"] == [r.vta_cycles for r in want]
    assert got["adjusted"] == 0  # the programs run in the order they were lowered for
    assert got["modules"] == []


def test_tokens_left_are_the_timing_models():
    """What an untimed device counts a program leaves in the FIFOs (the next one's tokens)
    is what the timing model counts, on a chain of attention's programs (which carry
    tokens from one to the next)."""
    from simulator.timing import time_program
    from vtatune.deploy.runtime import tokens_left

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = quantize(models.attention(), np.random.default_rng(1).standard_normal(
            (2, 1, 32, 32)).astype(np.float32))
        with stock_schedules():  # streams that leave tokens
            compiled = compile_model(model)
    programs = [p for region in compiled.regions.values() for layer in region.layers
                for p in layer.passes]
    assert any(tokens_left(p) != (0, 0, 0, 0) for p in programs)
    for p in programs:
        assert tokens_left(p) == tuple(int(t) for t in time_program(p, compiled.hw).tokens_out)
