"""The timing model holds to VTA's RTL on every record of the tsim reference.

The goal of issue 13: mean absolute error at most 1%, every program of at least 10,000
cycles within 3%, Spearman at least 0.995 within every workload and bias setting, the best
schedule agreeing on every workload, every micro-benchmark within 2% or 2 cycles. The data
is the repository's ``tests/data/`` (``$VTATUNE_SHARED_DATA`` overrides): it is part of the
checkout, so these tests never skip, and the first test below fails if it is missing.

The codesign reference (issue 26: VTA shapes 1x8x32 on a 64-bit bus and stock 1x16 on the
64- and 128-bit bus) is held to its own goal: mean absolute error at most 0.2%, every program
of at least 10,000 cycles within 1%, the best schedule agreeing per workload, bias and
hardware. On a 128-bit bus the 1x16 output element fits one beat: the RTL's wide store unit,
which the model before it charged as the narrow one (up to +8.7%).
"""

from __future__ import annotations

import hashlib
import subprocess
import sys

import pytest

from tests._data import DATA, ROOT
from vtatune.fidelity import (
    CODESIGN,
    CODESIGN_GOAL,
    DATA_ENV,
    HW_DIR,
    REFERENCE,
    REPO_DATA,
    Comparison,
    ReferenceDataError,
    compare,
    data_dir,
    format_report,
    goal_failures,
    load_reference,
    summarize,
)

#: What the repository's copy holds, besides its README.md and SHA256SUMS.
COPIED = {"fsim_reference.jsonl", REFERENCE, CODESIGN, "tvm014_resnet18_deployed.json",
          HW_DIR, "tsim_micro"}


def test_the_reference_data_is_in_the_repository(monkeypatch):
    """Without the environment variable the data is the checkout's own copy, every file of
    it as copied (SHA256SUMS), every program and hardware the references name present, and
    the README saying what each entry is."""
    monkeypatch.delenv(DATA_ENV, raising=False)
    repo = data_dir(ROOT)
    assert repo == ROOT / REPO_DATA
    sums = {}
    for line in (repo / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ", 1)
        sums[name] = digest
    files = {p.relative_to(repo).as_posix() for p in repo.rglob("*") if p.is_file()}
    assert files - {"README.md", "SHA256SUMS"} == set(sums)
    assert {name.split("/")[0] for name in sums} == COPIED
    for name, digest in sums.items():
        assert hashlib.sha256((repo / name).read_bytes()).hexdigest() == digest, name
    named = {r["program"] for r in load_reference(repo) if r["operator"] == "micro"} | \
        {f"{HW_DIR}/{r['hw']}.json" for r in load_reference(repo, CODESIGN)}
    assert named <= set(sums) and len(named) == 99 + 3
    readme = (repo / "README.md").read_text()
    assert [entry for entry in sorted(COPIED) if f"`{entry}" not in readme] == []


def test_the_environment_variable_names_another_copy(monkeypatch, tmp_path):
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    assert data_dir(ROOT) == tmp_path
    with pytest.raises(ReferenceDataError, match=f"{REFERENCE}: no such file"):
        load_reference(data_dir(ROOT))


def test_bench_fidelity_reads_the_repositorys_copy(monkeypatch):
    """The README's fidelity figures come from ``scripts/bench_fidelity.py`` with no
    argument: in a clone it scores the copy here (the codesign reference, the shorter)."""
    monkeypatch.delenv(DATA_ENV, raising=False)
    done = subprocess.run([sys.executable, "scripts/bench_fidelity.py", "--reference",
                           "codesign"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"95 records of {ROOT / REPO_DATA / CODESIGN} "), done.stdout


@pytest.fixture(scope="module")
def scored():
    return compare(load_reference(DATA), DATA)


@pytest.fixture(scope="module")
def codesign():
    return compare(load_reference(DATA, CODESIGN), DATA)


def test_every_reference_record_meets_the_goal(scored):
    assert len(scored) >= 200  # 126 lowered programs and 99 micro-benchmarks today
    assert goal_failures(scored) == [], format_report(scored)


def test_micro_benchmarks_are_exact(scored):
    """Each single-mechanism program costs what the RTL counted, to the cycle: the rules,
    not just their sum, are the RTL's."""
    micro = [r for r in scored if r.micro]
    assert micro and [r.record["program"] for r in micro if r.cycles != r.rtl] == []


def _row(workload, rtl, model, bias=False, op="conv2d"):
    return Comparison({"workload": workload, "bias": bias, "operator": op, "tsim_cycles": rtl,
                   "cli": "x", "program": "p.bin" if op == "micro" else None}, model)


def test_the_goal_check_names_each_way_to_miss_it():
    rows = [_row("a", 20_000, 30_500), _row("a", 30_000, 29_000), _row("a", 40_000, 40_000),
            _row("m", 100, 103, op="micro")]
    fails = goal_failures(rows)
    assert fails == [
        "mean absolute error 18.61% > 1%",
        "a bias=0 (record 1): model 30500 vs RTL 20000 (52.50%)",
        "a bias=0 (record 2): model 29000 vs RTL 30000 (3.33%)",
        "micro-benchmark p.bin: model 103 vs RTL 100",
        "a bias=False: Spearman 0.5000 < 0.995",
        "a bias=False: the model's best schedule is not the RTL's",
    ]
    s = summarize(rows)[("a", False)]
    assert (s.count, s.low, s.high) == (3, 20_000 / 30_500, 30_000 / 29_000)


def test_every_codesign_record_meets_its_goal(codesign):
    assert len(codesign) >= 95
    assert {r.record["hw"] for r in codesign} >= {"1x8x32", "1x16", "1x16-128"}
    assert goal_failures(codesign, CODESIGN_GOAL) == [], format_report(codesign, CODESIGN_GOAL)


def test_codesign_goal_holds_on_each_hardware(codesign):
    """Each configuration on its own: the one-beat store (1x16 on 128 bits) as close as
    the shapes whose element spans several beats."""
    for hw in ("1x8x32", "1x16", "1x16-128"):
        rows = [r for r in codesign if r.record["hw"] == hw]
        assert rows and goal_failures(rows, CODESIGN_GOAL) == [], (hw, format_report(
            rows, CODESIGN_GOAL))
        assert summarize(rows)[("all", None)].mae <= CODESIGN_GOAL.max_mae


def test_the_codesign_goal_names_workloads_per_hardware():
    rows = [Comparison({"workload": "w", "bias": False, "operator": "conv2d", "hw": hw,
                    "tsim_cycles": rtl}, model)
            for hw, rtl, model in (("a", 20_000, 20_100), ("a", 30_000, 30_000),
                                   ("b", 20_000, 20_000), ("b", 30_000, 19_000))]
    assert goal_failures(rows, CODESIGN_GOAL) == [
        "mean absolute error 9.29% > 0.2%",
        "w [b] bias=0 (record 4): model 19000 vs RTL 30000 (36.67%)",
        "w [b] bias=False: the model's best schedule is not the RTL's",
    ]
    assert set(summarize(rows)) == {("w [a]", False), ("w [b]", False), ("all", None)}
    report = format_report(rows, CODESIGN_GOAL)
    assert "hardware a: 2 programs, MAE 0.250%, largest error 0.500%, best schedule agrees " \
        "on 1 of 1 workloads" in report
