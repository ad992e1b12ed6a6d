"""The CPU a model's CPU part is compiled for (``compile_model(cpu_target=...)``, ``deploy
--cpu-target``): the names and strings it takes and those it refuses (one line, exit 2),
a board's bundle cross-compiled into an ARM/AArch64 library (when the toolchain is
installed; its absence is refused naming the package), the manifest's record of it, and
``run`` refusing a bundle whose CPU part this machine cannot run."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tvm")
pytest.importorskip("onnxruntime")

import onnx  # noqa: E402

from vtatune.cli import main  # noqa: E402
from vtatune.deploy import (  # noqa: E402
    CpuTarget,
    DeployError,
    compile_model,
    load,
    models,
    quantize,
    resolve_cpu_target,
)

ROOT = Path(__file__).resolve().parents[2]
#: ELF's e_machine of each architecture, and whether it is a 64-bit ELF.
ELF_MACHINE = {"arm": (0x28, False), "aarch64": (0xB7, True), "x86_64": (0x3E, True)}
#: The cross compilers and their Debian packages.
CROSS_COMPILERS = {"arm": ("arm-linux-gnueabihf-g++", "g++-arm-linux-gnueabihf"),
                   "aarch64": ("aarch64-linux-gnu-g++", "g++-aarch64-linux-gnu"),
                   "x86_64": ("x86_64-linux-gnu-g++", "g++-x86-64-linux-gnu")}
PYNQ = {"kind": "llvm", "mtriple": "armv7l-linux-gnueabihf", "mcpu": "cortex-a9",
        "mattr": ["+neon"], "mfloat-abi": "hard"}
ULTRA96 = {"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mcpu": "cortex-a53"}
BOARDS = {"pynq": PYNQ, "de10nano": PYNQ, "ultra96": ULTRA96}


def host_arch() -> str:
    return resolve_cpu_target().arch


#: A board whose CPU is not this machine's (what "another CPU" means here).
FOREIGN = next(b for b in ("pynq", "ultra96") if resolve_cpu_target(b).arch != host_arch())


def _elf(path: Path) -> tuple[int, bool]:
    """A shared library's ELF e_machine and whether it is a 64-bit ELF."""
    head = path.read_bytes()[:20]
    assert head[:4] == b"\x7fELF"
    little = head[5] == 1
    return struct.unpack("<H" if little else ">H", head[18:20])[0], head[4] == 2


def _installed(board: str) -> bool:
    cross = resolve_cpu_target(board).cross_compiler
    return cross is None or shutil.which(cross[0]) is not None


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    d = tmp_path_factory.mktemp("cpu")
    model = quantize(models.mlp(), np.ones((2, 1, 64), np.float32))
    onnx.save(model, d / "mlp_int8.onnx")
    return d / "mlp_int8.onnx"


# --- resolution -------------------------------------------------------------------------------
@pytest.mark.parametrize(("spec", "name", "triple", "arch"), [
    ("pynq", "pynq", "armv7l-linux-gnueabihf", "arm"),
    ("de10nano", "de10nano", "armv7l-linux-gnueabihf", "arm"),
    ("ultra96", "ultra96", "aarch64-linux-gnu", "aarch64"),
    ('{"kind": "llvm", "mtriple": "aarch64-linux-gnu"}', "custom", "aarch64-linux-gnu",
     "aarch64"),
    ("llvm -mtriple=armv7a-linux-gnueabihf -mattr=+neon,+vfp3", "custom",
     "armv7a-linux-gnueabihf", "arm"),
    ("llvm -mtriple=x86_64-linux-gnu", "custom", "x86_64-linux-gnu", "x86_64"),
])
def test_boards_and_tvm_targets_resolve_to_their_triple_and_architecture(spec, name, triple,
                                                                         arch):
    cpu = resolve_cpu_target(spec)
    assert (cpu.name, cpu.triple, cpu.arch) == (name, triple, arch)
    assert cpu.runs_here == (arch == host_arch())
    assert cpu.cross_compiler == (None if cpu.runs_here else CROSS_COMPILERS[arch])


def test_a_boards_target_is_its_cpu_and_the_old_string_form_is_converted():
    assert {b: resolve_cpu_target(b).target for b in BOARDS} == BOARDS
    old = resolve_cpu_target("llvm -mtriple=armv7l-linux-gnueabihf -mcpu=cortex-a9 "
                             "-mattr=+neon -mfloat-abi=hard")
    assert old.target == BOARDS["pynq"]


def test_the_host_is_this_machine_by_default():
    for cpu in (resolve_cpu_target(), resolve_cpu_target("host"), resolve_cpu_target(None)):
        assert (cpu.name, cpu.target, cpu.arch, cpu.runs_here) == (
            "host", "llvm", host_arch(), True)
        assert cpu.fcompile() is None  # TVM's default: this machine's compiler


def test_architecture_names_are_one_each():
    arches = [resolve_cpu_target(f"llvm -mtriple={t}-linux-gnu").arch
              for t in ("x86_64", "amd64", "aarch64", "arm64", "armv7l", "armv7a", "thumbv7",
                        "arm")]
    assert arches == ["x86_64", "x86_64", "aarch64", "aarch64", "arm", "arm", "arm", "arm"]
    assert host_arch() in ("x86_64", "aarch64", "arm")


@pytest.mark.parametrize(("spec", "error"), [
    ("pynqq", "unknown --cpu-target 'pynqq': host, pynq, de10nano, ultra96, or a TVM llvm "
              "target (e.g. '{\"kind\": \"llvm\", \"mtriple\": \"aarch64-linux-gnu\", "
              "\"mcpu\": \"cortex-a53\"}')"),
    ("cuda", "unknown --cpu-target 'cuda'"),
    ('{"kind": "cuda"}', "--cpu-target {\"kind\": \"cuda\"}: a cuda target; the CPU part is "
                         "compiled by LLVM (an llvm target)"),
    ("{kind", "--cpu-target {kind: not JSON"),
    ("[1]", "unknown --cpu-target '[1]'"),
    ('{"kind": "llvm", "bogus": 1}', "--cpu-target {\"kind\": \"llvm\", \"bogus\": 1}: Unknown "
                                     "config option 'bogus'"),
    ("llvm mtriple", "--cpu-target llvm mtriple: 'mtriple' is not -key=value"),
    ("llvm -mtriple=riscv64-linux-gnu", "--cpu-target llvm -mtriple=riscv64-linux-gnu: no cross "
                                        "compiler is known for riscv64 (arm, aarch64, x86_64)"),
])
def test_a_bad_target_is_refused_in_one_line(spec, error, mlp, capsys):
    with pytest.raises(DeployError) as info:
        resolve_cpu_target(spec)
    assert str(info.value).startswith(error)
    assert "\n" not in str(info.value)
    # on the command line: before anything is built, one line, exit 2
    assert main(["deploy", str(mlp), "--cpu-target", spec]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"vtatune: error: {error}") and err.count("\n") == 1


# --- building for another CPU -----------------------------------------------------------------
def test_a_missing_cross_compiler_is_refused_naming_its_package(mlp, monkeypatch, capsys):
    cpu = resolve_cpu_target(FOREIGN)
    compiler, package = cpu.cross_compiler
    monkeypatch.setattr(shutil, "which", lambda name: None)
    want = (f"the CPU part for {cpu.describe()} is linked by {compiler}, which is not "
            f"installed: apt-get install {package}")
    with pytest.raises(DeployError) as info:
        compile_model(mlp, cpu_target=FOREIGN)
    assert str(info.value) == want
    assert main(["deploy", str(mlp), "--cpu-target", FOREIGN, "--save",
                 str(mlp.parent / "never.bundle")]) == 2
    assert capsys.readouterr().err == f"vtatune: error: {want}\n"
    assert not (mlp.parent / "never.bundle").exists()


def test_a_build_for_another_cpu_is_saved_not_run(mlp, tmp_path, capsys):
    what = (f"vtatune: error: --cpu-target {FOREIGN} builds for "
            f"{resolve_cpu_target(FOREIGN).describe()}, not this machine's CPU: ")
    assert main(["deploy", str(mlp), "--cpu-target", FOREIGN]) == 2
    assert capsys.readouterr().err == what + (
        "nothing can run here; give --save DIR to write the bundle and run it on the board "
        "(python -m vtatune.deploy.runtime DIR --device libvta:PATH)\n")
    assert main(["deploy", str(mlp), "--cpu-target", FOREIGN, "--save", str(tmp_path / "b"),
                 "--output", str(tmp_path / "y.npy"), "--check"]) == 2
    assert capsys.readouterr().err == what + (
        "it is saved, not run here (--output, --check would run it): run the bundle on the "
        "board\n")
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("board", ["pynq", "ultra96"])
def test_a_boards_bundle_holds_a_library_for_its_cpu(board, mlp, tmp_path, capsys):
    if not _installed(board):
        compiler, package = resolve_cpu_target(board).cross_compiler
        pytest.skip(f"{compiler} is not installed (apt-get install {package})")
    cpu = resolve_cpu_target(board)
    bundle = tmp_path / f"{board}.bundle"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["deploy", str(mlp), "--cpu-target", board, "--save", str(bundle),
                     "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["cpu"] == cpu.as_dict() and out["bundle"] == str(bundle)
    assert _elf(bundle / "cpu.so") == ELF_MACHINE[cpu.arch]
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["cpu"] == {"name": board, "target": BOARDS[board],
                               "triple": cpu.triple, "arch": cpu.arch}
    if cpu.runs_here:
        return
    want = (f"bundle {bundle}: its CPU part is compiled for {cpu.describe()}, this machine is "
            f"{host_arch()}: run it there, or save it again with --cpu-target host")
    with pytest.raises(DeployError) as info:
        load(bundle)
    assert str(info.value) == want
    proc = subprocess.run([sys.executable, "-m", "vtatune", "run", str(bundle)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert (proc.returncode, proc.stderr, proc.stdout) == (2, f"vtatune: error: {want}\n", "")


def test_compiled_for_another_cpu_the_model_refuses_to_run_here(mlp):
    if not _installed(FOREIGN):
        pytest.skip("no cross compiler: compile_model refuses first (tested above)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = compile_model(mlp, cpu_target=FOREIGN)
    cpu = resolve_cpu_target(FOREIGN)
    assert compiled.cpu_target == cpu and compiled.vm is None
    with pytest.raises(DeployError, match=rf"^mlp_int8\.onnx is built for {FOREIGN} "
                                          rf"\({cpu.triple}\), not this machine's CPU: save "
                                          "it and run the bundle there$"):
        compiled.run()


# --- this machine's bundle --------------------------------------------------------------------
def test_a_host_bundle_records_this_machines_cpu_and_run_refuses_it_elsewhere(mlp, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = compile_model(mlp)
    host = resolve_cpu_target()
    assert compiled.cpu_target == host
    bundle = compiled.save(tmp_path / "host.bundle")
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["cpu"] == {"name": "host", "target": "llvm", "triple": host.triple,
                               "arch": host_arch()}
    assert _elf(bundle / "cpu.so") == ELF_MACHINE[host_arch()]
    # the same bundle, as if it had been built for a board: refused before anything loads
    other = CpuTarget("ultra96" if host_arch() != "aarch64" else "pynq", {}, "t-riple",
                      "aarch64" if host_arch() != "aarch64" else "arm")
    manifest["cpu"] = other.as_dict()
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    for command in (["vtatune", "run"], ["vtatune.deploy.runtime"]):
        proc = subprocess.run([sys.executable, "-m", *command, str(bundle)],
                              capture_output=True, text=True, cwd=ROOT, timeout=300)
        assert (proc.returncode, proc.stdout) == (2, "")
        assert proc.stderr == (f"vtatune: error: bundle {bundle}: its CPU part is compiled for "
                               f"{other.name} (t-riple), this machine is {host_arch()}: run it "
                               "there, or save it again with --cpu-target host\n")


#: What a board's command must not import: vtatune's compiler and command line, Optuna,
#: onnx, TVM's compiler.
COMPILER = ("vtatune.lowering", "vtatune.tuning", "vtatune.builds", "vtatune.records",
            "vtatune.scoring", "vtatune.networks", "vtatune.cli", "search_spaces", "optuna",
            "onnx", "tvm", "pandas")
_BOARD = """
import runpy, sys
sys.argv = ["vtatune.deploy.runtime", *sys.argv[1:]]
try:
    runpy.run_module("vtatune.deploy.runtime", run_name="__main__")
except SystemExit as exit:
    print(exit.code)
print(" ".join(sorted(sys.modules)))
"""


@pytest.mark.parametrize("device", ["sim", "libvta"])
def test_the_runtimes_own_command_runs_a_bundle_as_vtatune_run_does(device, mlp, tmp_path):
    """``python -m vtatune.deploy.runtime``: a board's command, without vtatune's command
    line (which imports every command's modules); through VTA's driver (``libvta``: the
    library ``VTATUNE_LIBVTA`` names, TVM v0.14's fsim) without numba either."""
    library = os.environ.get("VTATUNE_LIBVTA")
    if device == "libvta" and not library:
        pytest.skip("VTATUNE_LIBVTA names no libvta (docs/deploy.md: building the fsim one)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = compile_model(mlp)
    x = np.random.default_rng(1).standard_normal((1, 64)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    want = compiled.run(x)
    bundle = compiled.save(tmp_path / "mlp.bundle")
    (tmp_path / "board.py").write_text(_BOARD)
    spec = "sim" if device == "sim" else f"libvta:{library}"
    proc = subprocess.run([sys.executable, str(tmp_path / "board.py"), str(bundle), "--input",
                           str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy"),
                           "--device", spec, "--json"], capture_output=True, text=True,
                          cwd=ROOT, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    printed, status, modules = proc.stdout.splitlines()
    assert status == "0"
    assert np.array_equal(np.load(tmp_path / "y.npy"), want.output)
    got = json.loads(printed)
    assert got["vta_cycles"] == want.vta_cycles and got["bundle"] == str(bundle)
    imported = modules.split()
    assert "vtatune.deploy.runtime" in imported and "tvm_ffi" in imported
    assert sorted(m for m in imported
                  if any(m == c or m.startswith(c + ".") for c in COMPILER)) == []
    # nor numba: a bundle's passes run untimed on the simulated device (their cycles are
    # the bundle's record), and the driver needs none
    assert "numba" not in imported


def test_the_runtimes_own_command_refuses_bad_arguments_in_one_line():
    proc = subprocess.run([sys.executable, "-m", "vtatune.deploy.runtime"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == ("vtatune: error: the following arguments are required: DIR\n")
