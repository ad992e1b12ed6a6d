"""The command line: outputs, exit codes, one-line errors."""

import json
import subprocess
import sys

import pytest

from vtatune.cli import main

pytestmark = pytest.mark.usefixtures("compiled_engines")  # exact CLI output: no first-run notice


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_simulate_gemm_tutorial_json(capsys):
    code, out, _ = run_cli(capsys, "simulate", "gemm", "--json", "--verify")
    report = json.loads(out)
    assert code == 0
    assert report["verified"] is True
    assert report["instructions"]["total"] == 142
    assert report["counters"]["gemm_counter"] == 4096
    assert set(report) >= {"workload", "schedule", "hw", "counters", "instructions"}
    assert set(report["counters"]) == {
        "inp_load_nbytes", "wgt_load_nbytes", "acc_load_nbytes", "uop_load_nbytes",
        "out_store_nbytes", "gemm_counter", "alu_counter"}


def test_simulate_reference_point_matches_fsim(capsys, fsim_reference):
    d = next(x for x in fsim_reference if "counters" in x and "bias" in x["name"]
             and x["operator"] == "conv2d")
    w = d["workload"]
    flags = []
    for k in ("batch", "height", "width", "in_channels", "out_channels", "kernel", "pad",
              "stride"):
        flags += [f"--{k.replace('_', '-')}", str(w[k])]
    code, out, _ = run_cli(capsys, "simulate", "conv2d", *flags, "--bias", "--json",
                           "--schedule", json.dumps({"autotvm": d["schedule"]["knobs"]}))
    assert code == 0
    assert json.loads(out)["counters"] == d["counters"]


def test_simulate_readable_summary(capsys):
    code, out, _ = run_cli(capsys, "simulate", "conv2d", "--workload", "resnet18.C11",
                           "--verify")
    assert code == 0
    assert "gemm_counter" in out and "verified   yes" in out


def test_vadd(capsys):
    code, out, _ = run_cli(capsys, "simulate", "vadd", "--elements", "256", "--verify",
                           "--json")
    report = json.loads(out)
    assert code == 0 and report["verified"] and report["counters"]["alu_counter"] == 16


@pytest.mark.parametrize("argv, message", [
    (["simulate", "conv2d", "--workload", "C99"], "unknown conv2d workload 'C99'"),
    (["simulate", "gemm", "--in-channels", "100"], "in_channels 100 is not a multiple"),
    (["simulate", "conv2d", "--schedule", "{bad"], "schedule is not valid JSON"),
    (["simulate", "conv2d", "--hw", "nosuch"], "unknown hardware 'nosuch'"),
    (["simulate", "conv2d", "--bogus"], "unrecognized arguments: --bogus"),
    (["simulate", "gemm", "--height", "3"], "--height does not apply to gemm"),
    (["simulate", "vadd", "--elements", "100"], "elements must be a positive multiple"),
    (["simulate", "conv2d", "--schedule", '{"tile_h": 14, "tile_w": 14, "tile_ci": 16}'],
     "INP buffer has 32768 B"),
])
def test_bad_input_one_line_exit_2(capsys, argv, message):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_module_entry_point():
    proc = subprocess.run([sys.executable, "-m", "vtatune", "simulate", "vadd", "--json"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["instructions"]["total"] == 8
