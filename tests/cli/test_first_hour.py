"""What a new user meets in the first hour (issue 12): bad input refused in one line, help
pages, the Python API's names and quiet, pandas frames, progress output, program checks."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import vtatune
from vtatune.cli import main
from vtatune.errors import ScheduleError, VtatuneError, WorkloadError

pytestmark = pytest.mark.usefixtures("compiled_engines")  # exact CLI output: no first-run notice

ROOT = Path(__file__).resolve().parents[2]
GEMM_LOG = ROOT / "logs" / "gemm-pynq.jsonl"


def run_cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.startswith("vtatune: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# --- 5 and 13: one line and exit 2, nothing left behind ---------------------------------
@pytest.mark.parametrize("seed", ["-1", "99999999999"])
def test_bad_seed_is_one_line_and_leaves_no_journal(seed, tmp_path, capsys):
    for argv in (["gemm"], ["conv2d", "--network", "resnet18"], ["network", "resnet18"]):
        code, _, err = run_cli(capsys, *argv, "--seed", seed, "--log", tmp_path / "g.jsonl")
        assert code == 2
        assert f"seed must be in 0..4294967295, got {seed}" in one_error_line(err)
        assert list(tmp_path.iterdir()) == []


def test_api_bad_seed_raises_vtatunes_error(tmp_path):
    with pytest.raises(VtatuneError, match="seed must be an integer"):
        vtatune.tune("gemm", seed=-1, log=tmp_path / "g.jsonl")
    with pytest.raises(VtatuneError, match="seed must be an integer"):
        vtatune.tune_network("resnet18", "pynq", seed=2**32, log=tmp_path / "n.jsonl")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("make, log, message", [
    (lambda d: (d / "f").write_text("x"), "f/x.jsonl", "f is a file, not a directory"),
    (lambda d: (d / "dir").mkdir(), "dir", "it is a directory"),
    (lambda d: (d / "bin").write_bytes(bytes(range(256)) * 8), "bin",
     "is not a vtatune log"),
])
def test_log_targets_refused_before_anything_is_written(make, log, message, tmp_path,
                                                        capsys):
    make(tmp_path)
    before = {p: p.read_bytes() if p.is_file() else None for p in tmp_path.rglob("*")}
    for argv in (["gemm"], ["conv2d", "--network", "resnet18"]):
        code, _, err = run_cli(capsys, *argv, "--trials", "2", "--log", tmp_path / log)
        assert code == 2 and message in one_error_line(err)
    after = {p: p.read_bytes() if p.is_file() else None for p in tmp_path.rglob("*")}
    assert after == before  # no journal beside it, no byte appended


def test_timeline_with_unknown_format_is_one_line(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    code, _, err = run_cli(capsys, "simulate", "vadd", "--elements", "64", "--timeline",
                           tmp_path / "x.txt")
    assert code == 2 and "cannot write timeline" in one_error_line(err)
    assert "Format 'txt' is not supported" in err


def test_closed_pipe_ends_quietly_with_141(tmp_path, monkeypatch, capsys):
    class ClosedPipe:
        def __init__(self) -> None:
            self._f = open(tmp_path / "out", "w")  # noqa: SIM115  (a real descriptor)

        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self) -> None:
            raise BrokenPipeError(32, "Broken pipe")

        def fileno(self) -> int:
            return self._f.fileno()

    pipe = ClosedPipe()
    monkeypatch.setattr(sys, "stdout", pipe)
    assert main(["best", str(GEMM_LOG)]) == 141


def test_piped_to_head_has_no_traceback():
    done = subprocess.run(f"{sys.executable} -m vtatune --help | head -1", shell=True,
                          capture_output=True, text=True, cwd=ROOT)
    assert done.stdout.startswith("usage: vtatune") and "Traceback" not in done.stderr


@pytest.mark.parametrize("content, message", [
    (b"", "has no ok record to replay"),
    (b"\x00\xff garbage\n" * 20, "is not a vtatune log (none of its 20 lines is a record)")])
def test_replay_without_ok_records_exits_2(content, message, tmp_path, capsys):
    log = tmp_path / "l.jsonl"
    log.write_bytes(content)
    code, out, err = run_cli(capsys, "replay", log)
    assert code == 2 and message in one_error_line(err)
    assert "identical" not in out


# --- 6: nonsense refused up front, with the reason ---------------------------------------
@pytest.mark.parametrize("argv, message", [
    (["conv2d", "--pad", "100"], "LOAD INP: field y_pad_0=100 does not fit 4 bits (max 15); "
                                 "the input's pad of 100 rows (pad_field)"),
    (["conv2d", "--height", "100000", "--width", "100000", "--trials", "2"],
     "the tensors do not fit the DRAM an instruction addresses (field_width)"),
    (["conv2d", "--workload", "C2", "--height", "14"],
     "give --workload or shape flags, not both (--workload C2 with --height)"),
    (["gemm", "--height", "14"], "unrecognized arguments: --height 14"),
])
def test_impossible_or_mixed_tuning_input_is_refused(argv, message, tmp_path, capsys):
    code, _, err = run_cli(capsys, *argv, "--log", tmp_path / "t.jsonl")
    assert code == 2 and message in one_error_line(err)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv, message", [
    (["simulate", "gemm", "--elements", "64"], "--elements applies to vadd, not gemm"),
    (["simulate", "vadd", "--height", "14"], "vadd takes --elements, not --workload or shape"),
])
def test_simulate_flags_that_do_not_apply_are_refused(argv, message, capsys):
    code, _, err = run_cli(capsys, *argv)
    assert code == 2 and message in one_error_line(err)


def test_no_legal_config_is_decided_from_the_template():
    from search_spaces import get_template
    from simulator.hardware import DEFAULT
    from vtatune.workloads import WORKLOADS, Conv2dWorkload

    assert get_template(Conv2dWorkload(1, 14, 14, 256, 256, 3, 100, 1), DEFAULT
                        ).no_legal_config().rule == "pad_field"
    for wl in (WORKLOADS["conv2d"]["resnet18.C2"], WORKLOADS["gemm"]["dense128"]):
        assert get_template(wl, DEFAULT).no_legal_config() is None


# --- 7: program files are checked --------------------------------------------------------
@pytest.fixture(scope="module")
def program_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("build")
    assert main(["build", "gemm", "--workload", "dense128", "--log", str(GEMM_LOG),
                 "--out", str(out)]) == 0
    return out


def test_bit_flipped_program_bin_is_refused(program_dir, tmp_path, capsys):
    data = bytearray((program_dir / "program.bin").read_bytes())
    code, _, _ = run_cli(capsys, "simulate", "--program", program_dir / "program.bin")
    assert code == 0
    for bit in (8 * (len(data) - 3), 8 * (len(data) // 2) + 5):  # a micro-op, an instruction
        flipped = bytearray(data)
        flipped[bit // 8] ^= 1 << (bit % 8)
        (tmp_path / "p.bin").write_bytes(flipped)
        code, _, err = run_cli(capsys, "simulate", "--program", tmp_path / "p.bin")
        assert code == 2
        assert "differ from the SHA-256 stored when vtatune wrote it" in one_error_line(err)


def test_edited_program_json_differs_from_its_expected_block(program_dir, tmp_path, capsys):
    d = json.loads((program_dir / "program.json").read_text())
    d["instructions"][3]["y_size"] += 1  # a LOAD that now moves one more row
    (tmp_path / "p.json").write_text(json.dumps(d))
    code, out, err = run_cli(capsys, "simulate", "--program", tmp_path / "p.json")
    assert code == 1
    assert "the simulation differs from the file's expected block" in err
    code, out, err = run_cli(capsys, "simulate", "--program", program_dir / "program.json")
    assert code == 0 and err == ""


# --- 8: the Python API takes the CLI's names, knob dicts, and is quiet --------------------
@pytest.mark.parametrize("name, operator, wl_name", [
    ("resnet18.C8", "conv2d", "resnet18.C8"), ("C8", "conv2d", "resnet18.C8"),
    ("dense128", "gemm", "dense128"), ("gemm", "gemm", "tutorial"),
    ("conv2d:tutorial", "conv2d", "tutorial"),
])
def test_workload_names_as_the_cli_takes_them(name, operator, wl_name):
    from vtatune.workloads import resolve

    wl, _ = resolve(name)
    assert (wl.operator, wl.name) == (operator, wl_name)


def test_shared_name_alone_is_ambiguous():
    from vtatune.workloads import resolve

    with pytest.raises(WorkloadError, match="ambiguous: say 'conv2d:tutorial' or"):
        resolve("tutorial")


def test_tune_by_name_is_quiet(tmp_path, capfd):
    r = vtatune.tune("dense128", trials=2, seed=0, log=tmp_path / "d.jsonl")
    assert (r.workload.name, r.trials) == ("dense128", 2)
    out, err = capfd.readouterr()
    assert out == "" and "[I " not in err and "A new study created" not in err


def test_build_takes_a_dict_of_knobs():
    b = vtatune.build("C8", schedule={"tile_h": 14, "tile_co": 4})
    assert (b.schedule.tile_h, b.schedule.tile_co) == (14, 4)
    assert b.provenance.describe() == "given schedule"
    with pytest.raises(ScheduleError, match="unknown schedule knob 'tile_hx'"):
        vtatune.build("C8", schedule={"tile_hx": 14})
    with pytest.raises(ScheduleError, match="a schedule is a Schedule, a dict of knobs"):
        vtatune.build("C8", schedule=14)


# --- 10: help pages -----------------------------------------------------------------------
COMMANDS = ("simulate", "conv2d", "gemm", "build", "replay", "best", "analyze", "export",
            "import", "deploy")


def help_of(capsys, *argv) -> str:
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--help"])
    assert exc.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_a_man_page(command, capsys):
    text = help_of(capsys, command)
    examples = text.split("examples:\n")[1].splitlines()
    assert len([e for e in examples if e.startswith("  python ")]) >= 2
    assert re.search(r"usage: vtatune " + command, text)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_argument_says_what_it_is(command):
    import argparse

    from vtatune.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for action in sub.choices[command]._actions:
        assert action.help, (command, action.dest)


def test_tune_help_shows_shape_flags_defaults_and_presets(capsys):
    conv = " ".join(help_of(capsys, "conv2d").split())  # argparse wraps lines
    assert "[--height N]" in conv and "[--pad N]" in conv  # in the usage line
    assert "(default: 200)" in conv and "(default: guided)" in conv
    assert "(default: full)" in conv and "drawn at random and printed" in conv
    assert "sim (sim 1x16_i8w8a32_15_15_18_17" in conv and "'sim' is TVM's" in conv
    gemm = help_of(capsys, "gemm")
    assert "--height" not in gemm and "resnet18" not in gemm and "dense128" in gemm


def test_positionals_and_options_have_help(capsys):
    assert "simulation processes (default: 1)" in help_of(capsys, "replay")
    export = help_of(capsys, "export")
    assert "record format" in export and "the file to write" in export
    assert "one or more vtatune logs" in export


# --- 11: progress with tqdm, and the compile notice ---------------------------------------
def test_progress_is_tqdm_with_the_best_so_far(tmp_path):
    from tqdm import tqdm

    from vtatune.tuning import Progress

    with open(tmp_path / "err", "w") as stream:
        p = Progress("C8", 20, stream=stream)
        assert isinstance(p._bar, tqdm)
        for i in range(1, 21):
            p.update(i, 1000 - i)
        p.close()
    text = (tmp_path / "err").read_text()
    assert "20/20" in text and "best=980" in text


@pytest.fixture
def uncached_engine(tmp_path, monkeypatch):
    """A marked function numba has not compiled (no cache): the state of a first run."""
    import simulator
    from simulator import jit as _jit

    module = tmp_path / "fresh_engine.py"
    module.write_text("from simulator.jit import njit\n\n\n@njit()\ndef twice(x):\n"
                      "    return 2 * x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import fresh_engine

    monkeypatch.setattr(_jit, "_PENDING", {"fresh_engine": _jit._PENDING.pop("fresh_engine")})
    monkeypatch.setattr(simulator, "engines_to_compile", lambda: ["fresh_engine.twice"])
    yield fresh_engine
    _jit.on_first_compile(None)
    sys.modules.pop("fresh_engine", None)


@pytest.mark.parametrize("argv", [["network", "resnet18", "--list"], ["gemm", "--trials", "0"],
                                  ["conv2d", "--network", "resnet18", "--workload", "C2"],
                                  ["simulate", "gemm", "--elements", "64"],
                                  ["design", "--network", "resnet18", "--board", "pynq",
                                   "--jobs", "0"]])
def test_no_compile_notice_on_runs_that_compile_nothing(argv, uncached_engine, capsys):
    code, _, err = run_cli(capsys, *argv)
    assert "compiling" not in err
    assert code == 0 or err.count("\n") == 1


def test_compile_notice_right_before_numba_compiles(uncached_engine, capsys):
    assert main(["simulate", "vadd", "--elements", "64"]) == 0  # installs the notice
    assert "compiling" not in capsys.readouterr().err
    assert uncached_engine.twice(21) == 42  # a compilation (no cache): the notice, once
    assert uncached_engine.twice(2.5) == 5.0  # another signature: compiled, not said again
    err = capsys.readouterr().err
    assert err == "vtatune: compiling the engines (once after install, about 7-10 s)...\n"


#: Commands run one after another in a fresh process: the tuner, then build (its C source
#: replays the stream through the command queue) and a vector add (a queue without windowed
#: loads), as a first hour runs them.
_FIRST_HOUR = (["conv2d", "--workload", "C11", "--trials", "3", "--seed", "1", "--quiet"],
               ["build", "conv2d", "--workload", "C11"],
               ["simulate", "vadd", "--elements", "64"])


def test_later_commands_run_the_engines_the_tuner_compiled(tmp_path):
    """Issue 35, item 16: ``build`` after ``conv2d`` compiled the executor again (a queue
    without windowed loads passed writable window tables, the tuner's are read-only) and
    said "compiling the engines" a second time; and constants at compiled call sites made
    numba compile a helper once per value. Every engine is compiled (or loaded) once."""
    code = ("import json, sys\n"
            "from vtatune.cli import main\n"
            "from simulator.jit import specializations\n"
            f"for argv in {list(_FIRST_HOUR)!r}:\n"
            "    argv = argv + (['--out', sys.argv[1] + '/b'] if argv[0] == 'build' else\n"
            "                   ['--log', sys.argv[1] + '/t.jsonl'] if argv[0] == 'conv2d'\n"
            "                   else [])\n"
            "    assert main(argv) == 0, argv\n"
            "print(json.dumps(specializations()))\n")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                         text=True, cwd=ROOT, check=True)
    counts = json.loads(out.stdout.splitlines()[-1])
    assert {"vtatune.lowering._runtime._execute", "vtatune.lowering._runtime._append",
            "vtatune.lowering._emit._place", "simulator.timing._events._engine",
            "vtatune.tuning.cost_model._skeleton"} <= counts.keys()
    # (0: loaded inside a cached caller's code, never compiled on its own)
    assert {name: n for name, n in counts.items() if n > 1} == {}


def after_a_main_command(tmp_path: Path, probe: str) -> str:
    """The last line ``probe`` prints in a fresh process after a main command (a 3-trial
    conv2d tuning) ran there."""
    code = ("import sys\n"
            "from vtatune.cli import main\n"
            "assert main(['conv2d', '--trials', '3', '--seed', '1', '--quiet',\n"
            "             '--log', sys.argv[1] + '/t.jsonl']) == 0\n" + probe + "\n")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True,
                         text=True, cwd=ROOT, check=True)
    return out.stdout.splitlines()[-1]


def test_the_main_command_imports_no_database_driver_nor_scipy_linalg(tmp_path):
    """A warm main command takes about 1 s: SQLAlchemy (imported to classify the exception
    a new study's first read raises) and scipy.linalg (numba's BLAS probe, when SciPy is
    installed) were 0.3-0.5 s and 0.25-0.4 s of it; the libraries other commands' options
    name (``network``'s, ``design``'s, ``run``'s runtime: the parser registered every
    command) about 0.1 s (issue 41 item 14)."""
    probe = ("print(sorted(m for m in ('sqlalchemy', 'scipy.linalg', 'pandas',\n"
             "                         'vtatune.networks', 'vtatune.design', 'vtatune.autotvm',\n"
             "                         'vtatune.deploy.runtime', 'simulator.resources')\n"
             "             if m in sys.modules))")
    assert after_a_main_command(tmp_path, probe) == "[]"


def test_a_warm_main_command_loads_its_engines_without_numbas_whole_target(tmp_path):
    """numba's cache loader initialised its whole CPU target (every typing and lowering
    registry, 0.2-0.3 s of CPU) before loading each cached engine; only compiling needs it
    (issue 41 item 14). The engines are cached (the session's fixture compiled them)."""
    probe = ("from simulator import jit\n"
             "print(jit._target_ready, 'numba.np.npyimpl' in sys.modules,\n"
             "      sum(len(d.signatures) for d in jit._COMPILED.values()) > 0)")
    assert after_a_main_command(tmp_path, probe) == "False False True"


def test_a_compilation_still_finds_numbas_whole_target(tmp_path):
    """A cache miss after light loads compiles as before: the compile event initialises
    the target first (a new engine, compiled in a fresh process)."""
    (tmp_path / "fresh_engine.py").write_text(
        "import numpy as np\n\nfrom simulator.jit import njit\n\n\n"
        "@njit(cache=False)\ndef total(a):\n    return np.sum(a * 2)\n")
    code = ("import numpy as np\n"
            "from simulator import jit\n"
            "from vtatune.scoring import score\n"
            "from vtatune.workloads import get_workload\n"
            "from search_spaces import get_template\n"
            "from simulator.hardware import DEFAULT\n"
            "wl = get_workload('gemm', 'tutorial')\n"
            "t = get_template(wl, DEFAULT)\n"
            "score(wl, t.to_schedule(t.default_config()), DEFAULT)\n"
            "before = jit._target_ready\n"
            "import fresh_engine\n"
            "print(before, fresh_engine.total(np.arange(4)), jit._target_ready)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, env=env, check=True)
    assert out.stdout.splitlines()[-1] == "False 12 True"


def test_a_helper_is_compiled_once_whatever_constants_it_is_called_with(tmp_path,
                                                                        monkeypatch):
    """numba types a constant argument at a compiled call site by its value and compiled
    the helper once per value (the executor's ``_append`` ten times on the first run)."""
    from simulator import jit as _jit

    (tmp_path / "constants_engine.py").write_text(
        "import enum\n\nfrom simulator.jit import njit\n\n\n"
        "class Stage(enum.IntEnum):\n    LOAD = 1\n    STORE = 3\n\n\n"
        "@njit()\ndef helper(out, stage, value):\n    out[stage] += value\n\n\n"
        "@njit()\ndef caller(out, n):\n    helper(out, 0, 1)\n    helper(out, 1, n)\n"
        "    helper(out, Stage.STORE, 0)\n    helper(out, Stage.LOAD, n)\n    return out\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import constants_engine
    import numpy as np

    try:
        assert constants_engine.caller(np.zeros(4, np.int64), 5).tolist() == [1, 10, 0, 0]
        counts = _jit.specializations()
        assert (counts["constants_engine.helper"], counts["constants_engine.caller"]) == (1, 1)
    finally:
        sys.modules.pop("constants_engine", None)


def test_engines_to_compile_reads_numbas_cache_index(tmp_path, monkeypatch):
    from simulator import jit as _jit

    module = tmp_path / "engine.py"
    module.write_text("def kernel(x):\n    return x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import engine

    lazy = _jit._Lazy.__new__(_jit._Lazy)
    lazy.py_func, lazy.options = engine.kernel, {"cache": True}
    monkeypatch.setattr(_jit, "_PENDING", {"engine": [lazy]})  # this module alone
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    assert _jit.engines_to_compile() == ["engine.kernel"]
    tag = f"py{sys.version_info.major}{sys.version_info.minor}"
    (tmp_path / "__pycache__").mkdir(exist_ok=True)
    (tmp_path / "__pycache__" / f"engine.kernel-1.{tag}.nbi").write_bytes(b"")
    assert _jit.engines_to_compile() == []


# --- 12: pandas ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mixed_frame():
    from vtatune.records.analysis import read_log

    return read_log([ROOT / "logs" / "resnet18-pynq.jsonl", GEMM_LOG])


def test_knob_columns_are_int64_across_operators(mixed_frame):
    df = mixed_frame
    for knob in ("tile_h", "tile_w", "h_nthread", "tile_co", "oc_nthread"):
        assert str(df[knob].dtype) == "Int64", knob
    assert df.loc[df.operator == "gemm", "tile_h"].isna().all()


def test_workload_names_are_qualified_where_operators_share_them(mixed_frame):
    names = set(mixed_frame.workload)
    assert "gemm:tutorial" in names and "tutorial" not in names
    assert {"resnet18.C8", "dense128"} <= names


def test_summary_is_in_natural_order_with_the_operator(mixed_frame):
    from vtatune.records.analysis import summary

    s = summary(mixed_frame, default=False)
    assert list(s.workload) == [*(f"resnet18.C{i}" for i in range(2, 12)), "dense128",
                                "gemm:tutorial"]
    assert list(s.operator) == ["conv2d"] * 10 + ["gemm"] * 2


def test_best_so_far_keeps_the_problem_columns(mixed_frame):
    from vtatune.records.analysis import best_so_far

    curve = best_so_far(mixed_frame)
    assert {"workload", "operator", "hw_model", "bias"} <= set(curve.columns)
    last = curve.groupby("workload").best_cycles.last()
    assert last["dense128"] == mixed_frame.query("workload == 'dense128'").cycles.min()


# --- 4: the README's regeneration commands start from a fresh file ------------------------
def test_readme_regeneration_commands_remove_the_tracked_logs_first():
    from tests.test_readme import PAGE_BLOCKS

    block = next(code for blocks in PAGE_BLOCKS.values() for _, lang, code, _ in blocks
                 if lang == "sh" and "--log logs/resnet18-pynq.jsonl" in code
                 and "--trials" in code)
    lines = block.splitlines()
    removed = set(lines[0].split()[2:]) if lines[0].startswith("rm -f ") else set()
    written = set(re.findall(r"--log (\S+)", block))
    assert written and written <= removed


# --- 2: a partial benchmark run leaves the published report alone -------------------------
@pytest.mark.slow
def test_partial_bench_search_does_not_touch_the_published_report(tmp_path):
    published = [ROOT / "README.md", ROOT / "docs" / "search.md",
                 *(ROOT / "scripts" / "results").glob("*.*")]
    before = {p: p.read_bytes() for p in published}
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "bench_search.py"),
                           "--layers", "gemm.dense128", "--samplers", "random", "--seeds", "1",
                           "--trials", "5", "--jobs", "1", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert {p: p.read_bytes() for p in published} == before
    assert {"runs.jsonl", "layers.csv", "search_quality.md"} <= {p.name for p in
                                                                 tmp_path.iterdir()}


# --- issue 27 (second pass), 9: bruteforce runs AutoTVM's space to its end ---------------
@pytest.mark.parametrize("trials", [28, 40])
def test_bruteforce_ends_normally_when_autotvms_space_is_used_up(trials, tmp_path, capsys):
    from search_spaces import get_template
    from simulator.hardware import DEFAULT
    from vtatune.workloads import WORKLOADS

    template = get_template(WORKLOADS["gemm"]["dense128"], DEFAULT, space="autotvm")
    legal = [template.to_schedule(c) for c in template.legal_configs()]
    log = tmp_path / "bf.jsonl"
    code, out, err = run_cli(capsys, "gemm", "--workload", "dense128", "--space", "autotvm",
                             "--sampler", "bruteforce", "--trials", trials, "--log", log,
                             "--quiet")
    assert code == 0 and "Traceback" not in err, err
    from vtatune.records import read_records
    from vtatune.schedule import Schedule

    tuned = [Schedule.from_dict(r["schedule"]) for _, r in read_records(log)]
    assert sorted(map(repr, tuned)) == sorted(map(repr, legal))  # each legal config once
    assert f"all {len(legal)} legal configs of the space were tuned" in out


# --- 27.10: a file that holds no record is refused in one line by every reader -----------
GARBAGE = {"binary": bytes(range(256)) * 16, "text": b"\x00\xff garbage\n" * 20}


@pytest.mark.parametrize("kind", [*GARBAGE, "empty"])
def test_build_refuses_a_log_without_records(kind, tmp_path, capsys):
    log = tmp_path / "l.jsonl"
    log.write_bytes(GARBAGE.get(kind, b""))
    code, _, err = run_cli(capsys, "build", "gemm", "--workload", "dense128", "--log", log,
                           "--out", tmp_path / "out")
    assert code == 2 and err.count("\n") == 1
    assert f"{log} is not a vtatune log" in one_error_line(err)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("kind", GARBAGE)
@pytest.mark.parametrize("argv", [["replay"], ["best"], ["analyze", "--no-default"],
                                  ["export", "-o", "x.log"], ["import", "-o", "x.jsonl"]])
def test_readers_refuse_a_file_without_records_in_one_line(argv, kind, tmp_path, capsys):
    path = tmp_path / "l.jsonl"
    path.write_bytes(GARBAGE[kind])
    code, out, err = run_cli(capsys, argv[0], path,
                             *(tmp_path / a if a.startswith("x.") else a for a in argv[1:]))
    assert code == 2 and err.count("\n") == 1 and out == ""
    assert [p.name for p in tmp_path.iterdir()] == ["l.jsonl"]  # nothing written
    what = "an AutoTVM log" if argv[0] == "import" else "a vtatune log"
    assert f"{path} is not {what}" in one_error_line(err)



# --- 27.13: a network's log resumes any of its layers; a later run keeps the seed; wall ---
def test_resume_accepts_a_log_that_holds_the_workload_after_others(tmp_path, capsys):
    from simulator.hardware import DEFAULT
    from tests._logs import record, write_log
    from vtatune.schedule import tutorial_schedule
    from vtatune.tuning import TunerError, check_log_belongs
    from vtatune.workloads import WORKLOADS

    c2, c8, c11 = (WORKLOADS["conv2d"][f"resnet18.C{i}"] for i in (2, 8, 11))
    log = write_log(tmp_path / "r18.jsonl", [record(w, tutorial_schedule(w, DEFAULT), DEFAULT,
                                                    0, study=w.name) for w in (c2, c11)])
    check_log_belongs(log, [c11], DEFAULT, False)  # the second record is C11's
    with pytest.raises(TunerError, match="cannot resume: .* holds resnet18.C2, resnet18.C11 "
                                         "on pynq_1x16_i8w8a32_15_15_18_17, not resnet18.C8"):
        check_log_belongs(log, [c8], DEFAULT, False)
    code, out, err = run_cli(capsys, "conv2d", "--workload", "C11", "--log", log, "--resume",
                             "--trials", 2, "--quiet")
    assert code == 0 and out.splitlines()[1].split()[:2] == ["resnet18.C11", "2"], err


def test_a_later_run_without_resume_keeps_the_studys_seed(tmp_path):
    from vtatune.records import read_records
    from vtatune.tuning import tune

    def pair(log):
        first = tune("C8", trials=10, sampler="random", seed=5, log=log)
        later = tune("C8", trials=20, sampler="random", log=log)
        assert first.seed == later.seed == 5 and later.new_trials == 10
        assert {r["seed"] for _, r in read_records(log)} == {5}
        return later, [r["config"] for _, r in read_records(log)]

    later, configs = pair(tmp_path / "a.jsonl")
    # The later run's sampler does not replay the first run's draws (all repeats, before).
    assert later.duplicate_asks <= 1
    assert pair(tmp_path / "b.jsonl")[1] == configs  # and the pair of runs reproduces


def test_network_table_reports_the_commands_wall_time(tmp_path, capsys):
    import time

    t0 = time.perf_counter()
    code, out, _ = run_cli(capsys, "conv2d", "--network", "resnet18", "--trials", 1, "--seed", 0,
                           "--log", tmp_path / "n.jsonl", "--quiet")
    elapsed = time.perf_counter() - t0
    assert code == 0
    wall = float(re.search(r"; ([\d.]+) s wall, ", out).group(1))
    assert wall <= elapsed + 0.05  # one clock, not the sum of ten studies' spans
    build = next(line for line in out.splitlines() if line.startswith("build "))
    assert "build conv2d --workload resnet18.C" in build and "likewise the other 9" in build


# --- 27.14: the next steps after tuning are printed, and they run -------------------------
def test_the_printed_next_steps_run(tmp_path, monkeypatch, capsys):
    import shlex

    monkeypatch.chdir(tmp_path)
    code, out, _ = run_cli(capsys, "gemm", "--workload", "dense128", "--hw", "ultra96",
                           "--bias", "--trials", 3, "--seed", 0, "--log", "runs/d.jsonl",
                           "--quiet")
    assert code == 0
    steps = {line.split()[0]: shlex.split(line, comments=True)[1:]
             for line in out.splitlines()[-3:]}
    assert list(steps) == ["replay", "build", "export"]
    for step, argv in steps.items():
        assert argv[:3] == ["python", "-m", "vtatune"]
        code, done, err = run_cli(capsys, *argv[3:])
        assert code == 0, (step, err)
        if step == "build":  # the tuned record, on the hardware and with the bias it had
            assert "from       runs/d.jsonl:" in done
            assert "hardware   ultra96_" in done and "--bias" in argv
    assert (tmp_path / "build" / "dense128" / "program.bin").is_file()
    assert (tmp_path / "runs" / "d.autotvm.log").is_file()


@pytest.mark.parametrize("command", ["conv2d", "gemm", "group_conv2d", "conv2d_transpose",
                                     "build"])
def test_help_explains_every_token_of_a_schedules_line(command, capsys):
    from vtatune.schedule import Schedule

    line = Schedule(tile_b=1, tile_h=7, tile_w=14, tile_co=2, tile_ci=1, oc_nthread=2,
                    h_nthread=2, reuse=True, tvm_strict=True).short()
    text = help_of(capsys, command)
    notation = text.split(f"{line}:\n")[1].splitlines()
    keys = " ".join(row[:21].strip() for row in notation if row.startswith("  ")
                    and not row.startswith("   "))
    assert keys.split() == line.split()  # each token has its line, in order


# --- 27.15: every command's help reads well ------------------------------------------------
def all_commands():
    import argparse

    from vtatune.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices


@pytest.mark.parametrize("command", sorted(all_commands()))
def test_every_command_reads_well(command, capsys):
    parser = all_commands()[command]
    formatter = parser._get_formatter()
    for action in parser._actions:
        assert action.help, (command, action.dest)
        text = formatter._expand_help(action)
        assert len(re.findall(r"\(default", text)) <= 1, (command, text)  # said once
        assert not re.search(r"\(default \w", text), (command, text)  # "(default: x)" form
    page = help_of(capsys, command)
    description = page.split("\n\n")[1]
    assert max(map(len, description.splitlines())) <= 79  # wrapped
    examples = page.split("examples:\n")[1].split("\n\n")[0].splitlines()
    assert len([e for e in examples if e.startswith("  python ")]) >= 2
    assert all(len(e) <= 79 or "#" in e or "'" in e for e in examples), examples


def test_design_help_names_the_networks_it_takes(capsys):
    from vtatune.networks import NETWORKS

    text = " ".join(help_of(capsys, "design").split())
    assert f"--network NAME|MODEL.onnx a catalogue network ({', '.join(NETWORKS)}) or an ONNX" \
        in text
