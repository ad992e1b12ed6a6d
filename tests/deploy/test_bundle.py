"""Bundles: a compiled model saved (``CompiledModel.save``, ``deploy --save``) and run in a
fresh process (``vtatune.deploy.load``, ``vtatune run``) with no ONNX file, no log and no
code generation: the same output, the manifest's contents, the refusals (one line, exit 2),
whole-or-nothing writing, and the runtime's imports (none of the compiler's)."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tvm")
pytest.importorskip("onnxruntime")

import onnx  # noqa: E402

from simulator.hardware import DEFAULT, HardwareConfig  # noqa: E402
from tests._bundles import fresh  # noqa: E402
from vtatune import __version__  # noqa: E402
from vtatune.cli import main  # noqa: E402
from vtatune.deploy import (  # noqa: E402
    TVM_VERSION,
    DeployError,
    SimulatedDevice,
    compile_model,
    device_from_spec,
    load,
    model_macs,
    models,
    quantize,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A conv then a transposed conv, requantized exactly (--exact: ties to even on VTA,
    one pass a layer, a dilation between them), built from its file, run once and saved."""
    d = tmp_path_factory.mktemp("bundle")
    rng = np.random.default_rng(0)
    float_model = models.transposed_conv(32, 32, size=4, conv_first=True)
    model = quantize(float_model, rng.standard_normal((4, 1, 32, 4, 4)).astype(np.float32))
    onnx.save(model, d / "model.onnx")
    x = rng.standard_normal((1, 32, 4, 4)).astype(np.float32)
    np.save(d / "x.npy", x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = compile_model(d / "model.onnx", hw="pynq", exact=True)
    result = compiled.run(x)
    compiled.save(d / "model.bundle")
    return {"dir": d, "bundle": d / "model.bundle", "x": d / "x.npy", "compiled": compiled,
            "result": result}


def test_a_bundle_runs_in_a_fresh_process_as_it_ran_where_it_was_built(built, tmp_path):
    out = tmp_path / "y.npy"
    proc = fresh("-m", "vtatune", "run", str(built["bundle"]), "--input", str(built["x"]),
                 "--output", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    want = built["result"]
    assert np.array_equal(np.load(out), want.output)
    assert np.load(out).dtype == want.output.dtype
    got = json.loads(proc.stdout)
    assert got["offloaded"] == [c.as_dict() for c in want.offloaded]
    assert got["cpu_ops"] == [c.as_dict() for c in want.cpu_ops]
    assert got["vta_cycles"] == want.vta_cycles
    assert [c["op"] for c in got["cpu_ops"] if c["by"] == "vtatune"] == [
        "pack", "dilate", "unpack"]
    assert got["bundle"] == str(built["bundle"]) and got["output_file"] == str(out)


def test_the_manifest_says_what_the_bundle_holds(built):
    bundle, compiled = built["bundle"], built["compiled"]
    m = json.loads((bundle / "manifest.json").read_text())
    assert (m["format"], m["version"], m["vtatune"], m["tvm"]) == (
        "vtatune.bundle", 3, __version__, TVM_VERSION)
    model_file = (built["dir"] / "model.onnx").read_bytes()
    assert m["model"] == {"name": "model.onnx",
                          "sha256": hashlib.sha256(model_file).hexdigest(),
                          "macs": model_macs(compiled.model), "float_macs": 0}
    assert m["hw"] == {"model": DEFAULT.target_model, "config": DEFAULT.to_dict()}
    assert m["input"] == {"name": "x", "shape": [1, 32, 4, 4], "dtype": "float32"}
    assert m["output"] == {"shape": list(built["result"].output.shape), "dtype": "float32"}
    # every file but the manifest, each with its SHA-256
    on_disk = {p.relative_to(bundle).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
               for p in bundle.rglob("*") if p.is_file() and p.name != "manifest.json"}
    assert m["files"] == on_disk
    assert "cpu.so" in on_disk
    # each layer: its schedule (the knobs) and where it came from, its programs, constants
    built_layers = [b for r in compiled.regions.values() for b in r.built]
    layers = [layer for r in m["regions"] for layer in r["layers"]]
    assert [x["name"] for x in layers] == ["conv2d_1", "conv2d_transpose_1"]
    for entry, b in zip(layers, built_layers, strict=True):
        assert entry["schedule"] == b.programs.passes[0].schedule.to_dict()
        assert entry["source"] == "fallback"
        assert entry["provenance"] == b.programs.describe()
        assert entry["programs"] == [f"programs/{entry['name']}.{j}.bin"
                                     for j in range(len(b.programs.passes))]
        assert len(entry["programs"]) == b.requant.planes == 1  # VTA requantizes
        assert entry["requantization"]["exact"] is True
        packed = np.load(bundle / entry["weight"])
        assert np.array_equal(packed, compiled.device.download(b.weight))
    assert [op.get("region") for op in m["main"] if "region" in op] == list(compiled.regions)


def _copy(built, tmp_path) -> Path:
    return Path(shutil.copytree(built["bundle"], tmp_path / "copy.bundle"))


def _edit_manifest(key, value):
    def edit(bundle: Path) -> None:
        m = json.loads((bundle / "manifest.json").read_text())
        m[key] = value
        (bundle / "manifest.json").write_text(json.dumps(m))
    return edit


def _flip_byte(name, offset=-1):
    def flip(bundle: Path) -> None:
        data = bytearray((bundle / name).read_bytes())
        data[offset] ^= 0x01
        (bundle / name).write_bytes(bytes(data))
    return flip


@pytest.mark.parametrize("damage, args, message", [
    (None, ["--hw", "ultra96"], f"built for {DEFAULT.target_model}, not for "
                                "ultra96_1x16_i8w8a32_15_15_18_17"),
    (_edit_manifest("vtatune", "0.0.1"), [], f"saved by vtatune 0.0.1 with TVM {TVM_VERSION}, "
                                             f"this is vtatune {__version__} with TVM "
                                             f"{TVM_VERSION}: save it again with these"),
    (_edit_manifest("tvm", "0.26.0"), [], f"saved by vtatune {__version__} with TVM 0.26.0, "
                                          f"this is vtatune {__version__} with TVM "
                                          f"{TVM_VERSION}: save it again with these"),
    (_flip_byte("programs/conv2d_transpose_1.0.bin"), [],
     "programs/conv2d_transpose_1.0.bin is damaged (its SHA-256 is not the manifest's): save "
     "the bundle again"),
    (_flip_byte("cpu.so", 100), [],
     "cpu.so is damaged (its SHA-256 is not the manifest's): save the bundle again"),
    (_flip_byte("constants/conv2d_1.weight.npy"), [],
     "constants/conv2d_1.weight.npy is damaged (its SHA-256 is not the manifest's): save the "
     "bundle again"),
    (lambda b: (b / "constants" / "conv2d_1.bias.npy").unlink(), [],
     "cannot read constants/conv2d_1.bias.npy (No such file or directory)"),
    (lambda b: (b / "manifest.json").write_text("{"), [], "manifest.json is damaged ("),
    (lambda b: (b / "manifest.json").unlink(), [], "no manifest.json (not a vtatune bundle)"),
], ids=["other-hw", "other-vtatune", "other-tvm", "program", "cpu-library", "weight",
        "missing", "manifest", "no-manifest"])
def test_a_bundle_of_other_hardware_versions_or_damaged_is_refused_in_one_line(
        built, tmp_path, capsys, damage, args, message):
    bundle = _copy(built, tmp_path)
    if damage is not None:
        damage(bundle)
    status = main(["run", str(bundle), "--input", str(built["x"]),
                   "--output", str(tmp_path / "y.npy"), *args])
    err = capsys.readouterr().err
    assert status == 2
    assert err.count("\n") == 1
    assert err.startswith(f"vtatune: error: bundle {bundle}: {message}")
    assert not (tmp_path / "y.npy").exists()


def test_deploy_save_writes_a_bundle_that_run_runs_alike(built, tmp_path, capsys):
    bundle, y_deploy, y_run = tmp_path / "cli.bundle", tmp_path / "a.npy", tmp_path / "b.npy"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["deploy", str(built["dir"] / "model.onnx"), "--input", str(built["x"]),
                     "--output", str(y_deploy), "--save", str(bundle)]) == 0
    assert f"bundle saved to {bundle}" in capsys.readouterr().out
    proc = fresh("-m", "vtatune", "run", str(bundle), "--input", str(built["x"]), "--output",
                 str(y_run))
    assert proc.returncode == 0, proc.stderr
    assert np.array_equal(np.load(y_run), np.load(y_deploy))
    assert f"saved to {y_run}" in proc.stdout


def test_saving_and_running_a_bundle_print_nothing(tmp_path, capfd):
    """TVM 0.27's relax executable writes a notice on stderr for each constant it saves or
    loads (here the CPU's depthwise conv, which VTA does not run)."""
    rng = np.random.default_rng(0)
    model = quantize(models.grouped_conv(channels=32, groups=32),
                     rng.standard_normal((4, 1, 32, 8, 8)).astype(np.float32))
    compiled = compile_model(model, hw="pynq")
    assert compiled.regions == {}  # a bundle of the CPU's part alone
    capfd.readouterr()
    compiled.save(tmp_path / "cpu.bundle")
    assert capfd.readouterr() == ("", "")
    proc = fresh("-m", "vtatune", "run", str(tmp_path / "cpu.bundle"), "--output",
                 str(tmp_path / "y.npy"))
    assert (proc.returncode, proc.stderr) == (0, "")
    assert np.array_equal(np.load(tmp_path / "y.npy"), compiled.run().output)


def _full_after(monkeypatch, n):
    """The disk fills after ``n`` files written whole (as tests/design inject it)."""
    real, calls = os.open, []

    def full(path, flags, *args, **kwargs):
        name = os.path.basename(path)
        if name.startswith(".") and name.endswith(".tmp"):
            calls.append(path)
            if len(calls) > n:
                raise OSError(errno.ENOSPC, "No space left on device")
        return real(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", full)
    return calls


def test_a_bundle_is_written_whole_or_not_at_all(built, tmp_path, monkeypatch):
    compiled = built["compiled"]
    target = tmp_path / "new.bundle"
    calls = _full_after(monkeypatch, 3)
    with pytest.raises(DeployError) as exc:
        compiled.save(target)
    assert str(exc.value) == f"cannot write the bundle {target}: No space left on device"
    assert len(calls) == 4
    assert list(tmp_path.iterdir()) == []  # no bundle, no half of one, no temporary left
    # a bundle already there stays as it was
    monkeypatch.undo()
    compiled.save(target)
    before = {p: p.read_bytes() for p in target.rglob("*") if p.is_file()}
    _full_after(monkeypatch, 2)
    with pytest.raises(DeployError, match="No space left on device"):
        compiled.save(target)
    monkeypatch.undo()
    assert {p: p.read_bytes() for p in target.rglob("*") if p.is_file()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["new.bundle"]
    # and is replaced by a whole new one
    compiled.save(target)
    assert [p.name for p in tmp_path.iterdir()] == ["new.bundle"]


def test_a_directory_that_is_not_a_bundle_is_not_overwritten(built, tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(DeployError, match=f"^{tmp_path} exists and is not a bundle: not "
                                          "overwritten"):
        built["compiled"].save(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_device_specs(built, tmp_path, capsys):
    assert device_from_spec("sim", DEFAULT).hw == DEFAULT
    with pytest.raises(DeployError, match=r"^unknown device 'fpga' \(known: sim, libvta:PATH\)$"):
        device_from_spec("fpga", DEFAULT)
    assert main(["run", str(built["bundle"]), "--device", "fpga"]) == 2
    assert capsys.readouterr().err == ("vtatune: error: unknown device 'fpga' (known: sim, "
                                       "libvta:PATH)\n")
    ultra96 = SimulatedDevice(HardwareConfig.resolve("ultra96"))
    with pytest.raises(DeployError, match=f"^bundle {built['bundle']}: built for "
                                          f"{DEFAULT.target_model}, the device is "
                                          f"{ultra96.hw.target_model}$"):
        load(built["bundle"], device=ultra96)
    missing = tmp_path / "nowhere.bundle"
    assert main(["run", str(missing)]) == 2
    assert capsys.readouterr().err == f"vtatune: error: bundle {missing}: not found\n"


def test_run_writes_exactly_the_output_named_checked_first_and_checks_its_seed(built,
                                                                              tmp_path,
                                                                              capsys):
    """As deploy: the file named, no ".npy" added; a directory refused before the bundle
    is even loaded (in this process the load would be refused: its regions are here); a
    negative seed one line, exit 2."""
    assert main(["run", str(built["bundle"]), "--output", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (f"vtatune: error: --output {tmp_path} is a directory: "
                                       f"name the file (e.g. {tmp_path / 'y.npy'})\n")
    proc = fresh("-m", "vtatune", "run", str(built["bundle"]), "--input", str(built["x"]),
                 "--output", str(tmp_path / "y.out"))
    assert proc.returncode == 0, proc.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["y.out"]
    assert np.array_equal(np.load(tmp_path / "y.out"), built["result"].output)
    proc = fresh("-m", "vtatune", "run", str(built["bundle"]), "--seed", "-1")
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == "vtatune: error: seed must be an integer in 0..4294967295, got -1\n"


#: What a board's runtime must not need: the compiler and its dependencies.
COMPILER = ("vtatune.lowering", "vtatune.tuning", "vtatune.builds", "vtatune.records",
            "vtatune.scoring", "vtatune.networks", "search_spaces", "optuna", "onnx", "tvm")
_STAND_IN = '''
import sys
import numpy as np
from simulator.hardware import HardwareConfig
from vtatune.deploy.runtime import Buffer, Device, load, read_manifest

class StandIn(Device):
    """A driver's stand-in: buffers in host memory; runs no program (zeros out)."""
    name = "stand-in"

    def __init__(self, hw):
        self.hw = hw

    def alloc(self, shape, dtype):
        return Buffer(tuple(shape), np.dtype(dtype), np.zeros(int(np.prod(shape)), dtype))

    def upload(self, array):
        a = np.array(array, order="C")
        return Buffer(a.shape, a.dtype, a.reshape(-1))

    def download(self, buffer):
        return buffer.handle.reshape(buffer.shape).copy()

    def run(self, program, tensors):
        return 7

bundle = sys.argv[1]
hw = HardwareConfig.from_dict(read_manifest(bundle)["hw"]["config"])
device = StandIn(hw) if sys.argv[2] == "stand-in" else sys.argv[2]
result = load(bundle, device=device).run(np.load(sys.argv[3]))
print(result.output.shape, result.vta_cycles)
print(" ".join(sorted(sys.modules)))
'''


@pytest.mark.parametrize("device", ["stand-in", "sim"])
def test_loading_and_running_a_bundle_imports_none_of_the_compiler(built, tmp_path, device):
    script = tmp_path / "board.py"
    script.write_text(_STAND_IN)
    proc = fresh(str(script), str(built["bundle"]), device, str(built["x"]))
    assert proc.returncode == 0, proc.stderr
    shape, modules = proc.stdout.splitlines()
    passes = sum(c.passes for c in built["result"].offloaded)
    want = built["result"].vta_cycles if device == "sim" else 7 * passes
    assert shape == f"{built['result'].output.shape} {want}"
    imported = modules.split()
    assert "vtatune.deploy.runtime" in imported and "tvm_ffi" in imported  # it ran
    compiler = sorted(m for m in imported
                      if any(m == c or m.startswith(c + ".") for c in COMPILER))
    assert compiler == []
    # nor numba: a bundle's passes run untimed (their cycles are the bundle's record)
    assert "numba" not in imported


def test_a_bundle_whose_regions_this_process_holds_is_refused(built, tmp_path, capsys):
    """Built here, its regions' symbols are this process's: loading it here would take them
    over from the compiled model (TVM's function registry is one per process)."""
    symbols = list(built["compiled"].regions)
    assert main(["run", str(built["bundle"]), "--input", str(built["x"]),
                 "--output", str(tmp_path / "y.npy")]) == 2
    err = capsys.readouterr().err
    assert err == (f"vtatune: error: bundle {built['bundle']}: its regions ({', '.join(symbols)})"
                   " are registered in this process already (the model was built or loaded "
                   "here): load it in another process\n")
    assert np.array_equal(built["compiled"].run(np.load(built["x"])).output,
                          built["result"].output)


@pytest.mark.slow
def test_an_int8_resnet18_bundle_runs_alike_in_a_fresh_process(tmp_path):
    """The shipped log's schedules, VTA requantizing (one pass a layer): the bundle's output
    and every call's cycles equal the building process's."""
    rng = np.random.default_rng(0)
    model = quantize(models.resnet18(),
                     rng.standard_normal((2, 1, 3, 224, 224)).astype(np.float32))
    x = rng.standard_normal((1, 3, 224, 224)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    compiled = compile_model(model, hw="pynq", log=ROOT / "logs" / "resnet18-pynq.jsonl")
    want = compiled.run(x)
    compiled.save(tmp_path / "resnet18.bundle")
    proc = fresh("-m", "vtatune", "run", str(tmp_path / "resnet18.bundle"), "--input",
                 str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy"), "--json")
    assert proc.returncode == 0, proc.stderr
    assert np.array_equal(np.load(tmp_path / "y.npy"), want.output)
    got = json.loads(proc.stdout)
    assert got["offloaded"] == [c.as_dict() for c in want.offloaded]
    # the stem and the classifier, padded to whole blocks, are not in the shipped log
    assert len(got["offloaded"]) == 21
    assert [c["source"] for c in got["offloaded"]].count("log") == 19
