"""What a new user met in the first hour, third pass (issue 35): the help's build example
builds from its log, commands to paste name the hardware file as given, and optional
packages are checked before any work."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import pytest

from simulator.hardware import PRESETS, HardwareConfig
from vtatune.cli import main

pytestmark = pytest.mark.usefixtures("compiled_engines")  # exact CLI output: no first-run notice

ROOT = Path(__file__).resolve().parents[2]


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def help_examples(capsys, command: str) -> list[str]:
    """The shell examples of ``command --help``, continuation lines joined."""
    with pytest.raises(SystemExit):
        main([command, "--help"])
    page = capsys.readouterr().out
    lines = page.split("examples:\n")[1].split("\n\n")[0].replace("\\\n", " ").splitlines()
    return [" ".join(line.split()) for line in lines]


# --- item 2: the help's example builds from the log; a fallback names the epilogues -------
def test_the_build_examples_conv_builds_from_its_log(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)  # the example's log path is the repository's
    example = next(e for e in help_examples(capsys, "build") if " build conv2d " in e)
    argv = shlex.split(example)[3:]
    argv[argv.index("--out") + 1] = str(tmp_path / "c11")
    code, out, err = run_cli(capsys, *argv)
    assert code == 0 and err == ""
    assert "from       logs/resnet18-pynq.jsonl:" in out


def test_a_fallback_names_the_epilogues_the_log_has_for_the_shapes(capsys, monkeypatch,
                                                                   tmp_path):
    monkeypatch.chdir(ROOT)
    code, out, err = run_cli(capsys, "build", "conv2d", "--workload", "C11", "--log",
                             "logs/resnet18-pynq.jsonl", "--out", tmp_path / "c11")
    assert code == 0 and "from       fallback" in out
    assert err.splitlines() == [
        "vtatune: warning: vtatune.build: no ok record for resnet18.C11 on "
        f"{PRESETS['pynq'].target_model} in logs/resnet18-pynq.jsonl (it has records for its "
        "shapes with --epilogue deployed); using the default schedule"]


# --- item 3: a hardware file is named by its path as given, quoted -------------------------
def test_commands_to_paste_name_the_vta_config_beside_the_log(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    folder = Path("my designs") / "x"
    folder.mkdir(parents=True)
    config = {**PRESETS["pynq"].to_dict(), "LOG_ACC_BUFF_SIZE": 16}  # no preset's
    (folder / "vta_config.json").write_text(json.dumps(config))
    log = folder / "g.jsonl"
    assert run_cli(capsys, "gemm", "--hw", folder / "vta_config.json", "--trials", 3,
                   "--seed", 0, "--log", log, "--quiet")[0] == 0
    code, out, _ = run_cli(capsys, "export", log, "-o", tmp_path / "g.autotvm.log", "--json")
    assert code == 0
    command = json.loads(out.splitlines()[0])["tune_command"]
    assert "--hw 'my designs/x/vta_config.json' " in command
    argv = shlex.split(command)
    assert HardwareConfig.resolve(argv[argv.index("--hw") + 1]) == \
        HardwareConfig.from_dict(config)
    code, out, _ = run_cli(capsys, "best", log)
    assert code == 0 and "--hw 'my designs/x/vta_config.json' " in out


# --- item 7: optional packages, checked before any work in every command ------------------
def _no_work(*args, **kwargs):
    pytest.fail("the command started its work before checking its optional packages")


@pytest.mark.parametrize("argv, missing, handler, message", [
    (["design", "--network", "resnet18", "--board", "ultra96", "--plot", "f.png"],
     "matplotlib", "design.cmd_design", "--plot needs matplotlib: pip install 'vtatune[plot]'"),
    (["network", "resnet18", "--plot", "f.png"], "matplotlib", "network.cmd_network",
     "--plot needs matplotlib: pip install 'vtatune[plot]'"),
    (["simulate", "gemm", "--timeline", "t.png"], "matplotlib", "simulate.run",
     "--timeline needs matplotlib: pip install 'vtatune[plot]'"),
    (["network", "model.onnx", "--list"], "onnx", "network.cmd_network",
     "reading model.onnx needs onnx: pip install 'vtatune[onnx]'"),
    (["deploy", "model.onnx"], "tvm", "deploy.cmd_deploy",
     "deploy needs tvm: pip install -e '.[tvm]'"),
    (["deploy", "model.onnx", "--check"], "onnxruntime", "deploy.cmd_deploy",
     "deploy --check needs onnxruntime: pip install -e '.[tvm]'"),
])
def test_a_missing_optional_package_is_refused_before_any_work(argv, missing, handler,
                                                              message, monkeypatch, capsys):
    module, name = handler.split(".")
    monkeypatch.setitem(sys.modules, missing, None)  # importlib finds no such package
    monkeypatch.setattr(f"vtatune.cli.{module}.{name}", _no_work)
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == ""
    assert err == f"vtatune: error: {message}\n"


# --- item 17: a JSON error reads once ("starting at at line 1" before) --------------------
@pytest.mark.parametrize("argv, text, message", [
    (["simulate", "gemm", "--hw", "{path}"], '{"TARGET": "pynq',
     "{path}: not valid JSON (Unterminated string starting at: line 1 column 12)"),
    (["simulate", "gemm", "--schedule", '{{"tile_b": "x'], None,
     "schedule is not valid JSON (Unterminated string starting at: column 12)"),
    (["simulate", "--program", "{path}"], '{"format": "vtatune.program',
     "{path}: not valid JSON (Unterminated string starting at: line 1 column 12)"),
])
def test_json_errors_say_where_once(argv, text, message, tmp_path, capsys):
    path = tmp_path / "bad.json"
    if text is not None:
        path.write_text(text)
    code, out, err = run_cli(capsys, *(a.format(path=path) for a in argv))
    assert code == 2 and err == f"vtatune: error: {message.format(path=path)}\n"


def test_analyze_help_names_the_module_that_has_its_tables(capsys):
    with pytest.raises(SystemExit):
        main(["analyze", "--help"])
    page = " ".join(capsys.readouterr().out.split())
    assert "The same tables as vtatune.records.analysis.summary / read_log." in page
    from vtatune.records import analysis

    assert callable(analysis.summary) and callable(analysis.read_log)


def test_the_shipped_runtime_header_names_where_it_is():
    from vtatune.builds import header_path

    header = header_path()
    where = re.search(r"Shipped with vtatune \(([^)]+)\)", header.read_text()).group(1)
    assert (ROOT / where).resolve() == header.resolve()


# --- item 1: studies keyed by the workload's key, never its name --------------------------
def test_one_layer_tuned_with_two_epilogues_into_one_log(tmp_path, capsys):
    """The study of ``--workload C11`` was named after the layer: tuned with the deployed
    epilogue, then the benchmark one, into one log, the second was refused (``study
    conv2d.resnet18.C11... belongs to ...epi_addbias..., not ...``)."""
    log = tmp_path / "c11.jsonl"
    for epilogue in ("deployed", "benchmark"):
        code, out, err = run_cli(capsys, "conv2d", "--workload", "C11", "--epilogue", epilogue,
                                 "--trials", 1, "--seed", 0, "--log", log, "--quiet")
        assert code == 0, err
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert len({r["workload"]["key"] for r in records}) == 2
    assert {r["study"] for r in records} == {
        f"{r['workload']['key']}.{PRESETS['pynq'].target_model}.full" for r in records}
