"""The CPU part's build kept in the deploy cache (``_cpu_build``): a model built again
loads its library instead of compiling it, with the same outputs; a different module
(another weight) is another library; a cache that cannot be written leaves the build in
memory; the least recently used libraries go first."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest

pytest.importorskip("tvm")
pytest.importorskip("onnxruntime")

from onnx import numpy_helper  # noqa: E402

from vtatune.deploy import (  # noqa: E402
    _cpu_build,
    compile_model,
    models,
    quantize,
    resolve_cpu_target,
)
from vtatune.deploy.runtime._tvm import run_main  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
X = np.random.default_rng(0).standard_normal((1, 16, 8, 8)).astype(np.float32)


@pytest.fixture(scope="module")
def model():
    calibration = np.random.default_rng(1).standard_normal((4, 1, 16, 8, 8))
    return quantize(models.conv_residual(), calibration.astype(np.float32))


def _compiled(model):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return compile_model(model, hw="pynq", tune_trials=0)


def _libraries():
    folder = _cpu_build.cache_dir() / _cpu_build.CACHE_FOLDER
    return sorted(folder.glob(f"*{_cpu_build.SUFFIX}")) if folder.is_dir() else []


def _add_one(value: float = 1.0):
    import tvm
    from tvm.script import relax as R

    @R.function
    def main(x: R.Tensor((4,), dtype="float32")):
        return R.add(x, R.const(value, "float32"))

    return tvm.IRModule({"main": main})


def test_a_module_built_again_is_loaded_from_the_cache():
    first = _cpu_build.build_cpu(_add_one(), resolve_cpu_target())
    [library] = _libraries()
    assert first.library == library and first.executable is not None
    again = _cpu_build.build_cpu(_add_one(), resolve_cpu_target())
    assert again == _cpu_build.CpuBuild(None, library)
    x = np.arange(4, dtype=np.float32)
    assert np.array_equal(run_main(again.vm(), x), x + 1)
    assert np.array_equal(run_main(first.vm(), x), x + 1)


def test_loading_libraries_one_after_another_prints_nothing(capfd):
    """tvm_ffi says an exported library loaded after another overrides a system-library
    symbol (unoptimized ones, as --check's references are built, at least); nobody reads
    that symbol (each VM runs its own module): not a user's notice."""
    unoptimized = resolve_cpu_target('{"kind": "llvm", "opt-level": 0}')
    builds = [_cpu_build.build_cpu(_add_one(v), unoptimized) for v in (1.0, 2.0, 3.0)]
    capfd.readouterr()
    x = np.zeros(4, np.float32)
    assert [run_main(b.vm(), x)[0] for b in builds] == [1.0, 2.0, 3.0]
    assert capfd.readouterr().err == ""


def test_a_damaged_library_in_the_cache_is_built_again():
    first = _cpu_build.build_cpu(_add_one(5.0), resolve_cpu_target())
    first.library.write_bytes(b"not a library")
    again = _cpu_build.build_cpu(_add_one(5.0), resolve_cpu_target())
    assert again.executable is not None and again.library == first.library
    x = np.zeros(4, np.float32)
    assert run_main(again.vm(), x).tolist() == [5.0] * 4
    assert _cpu_build.build_cpu(_add_one(5.0), resolve_cpu_target()).executable is None


@pytest.mark.slow
def test_a_model_deployed_again_loads_its_cpu_part_from_the_cache(model, tmp_path):
    """Across processes (the region symbols the CPU part calls are the same in a fresh
    process): the second deploy builds no library."""
    onnx.save(model, tmp_path / "m.onnx")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for _ in range(2):
        subprocess.run([sys.executable, "-m", "vtatune", "deploy", str(tmp_path / "m.onnx"),
                        "--tune", "0", "--output", str(tmp_path / "y.npy")], env=env,
                       check=True, capture_output=True)
    assert len(_libraries()) == 1  # the second found the first's


def test_another_weight_is_another_library(model):
    _compiled(model)
    other = onnx.ModelProto()
    other.CopyFrom(model)
    # a float initializer the CPU computes with (the input's quantize scale, say)
    init = next(i for i in other.graph.initializer
                if i.data_type == onnx.TensorProto.FLOAT and "scale" in i.name)
    init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init) * 2, init.name))
    _compiled(other)
    assert len(_libraries()) == 2


def test_a_cache_that_cannot_be_written_leaves_the_build_in_memory(model, tmp_path,
                                                                   monkeypatch):
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv("VTATUNE_CACHE_DIR", str(blocked))
    compiled = _compiled(model)
    assert compiled.cpu_build.library is None and compiled.cpu_build.executable is not None
    assert compiled.run(X).output.shape == (1, 16, 8, 8)
    compiled.save(tmp_path / "bundle")  # exported from memory
    assert (tmp_path / "bundle" / "cpu.so").stat().st_size > 0


def test_the_least_recently_used_libraries_go_first_and_a_killed_build_with_them(
        tmp_path, monkeypatch):
    folder = tmp_path / "cpu"
    folder.mkdir()
    for age, name in enumerate(("c", "b", "a")):  # a oldest
        path = folder / f"{name}{_cpu_build.SUFFIX}"
        path.write_bytes(b"x" * 100)
        os.utime(path, (1000 - age, 1000 - age))
    monkeypatch.setattr(_cpu_build, "CACHE_BYTES", 250)
    killed, building = folder / ".build-killed", folder / ".build-now"  # half-written
    for half in (killed, building):
        half.mkdir()
        (half / "lib.so").write_bytes(b"x")
    os.utime(killed, (0, 0))
    _cpu_build._prune(folder, keep=folder / f"a{_cpu_build.SUFFIX}")
    assert sorted(p.name for p in folder.iterdir()) == [".build-now", "a.so", "c.so"]
