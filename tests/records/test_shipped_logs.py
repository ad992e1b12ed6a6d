"""The tuned logs shipped in logs/ replay (best record per workload x hardware).

The shipped logs are named here, never globbed: a user's run (``runs/`` by default, or any
``--log logs/...``) must not become a test case.
"""

from pathlib import Path

import pytest

from vtatune.cli import main
from vtatune.records import best_records, read_records

pytestmark = pytest.mark.usefixtures("compiled_engines")  # exact CLI output: no first-run notice

LOG_DIR = Path(__file__).resolve().parents[2] / "logs"
#: Every shipped log and the workloads its best records cover.
SHIPPED = {
    **{f"resnet18-{hw}.jsonl": {f"resnet18.C{i}" for i in range(2, 12)}
       for hw in ("pynq", "ultra96")},
    **{f"gemm-{hw}.jsonl": {"tutorial", "dense128"} for hw in ("pynq", "ultra96")},
}


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_log_replays(name, capsys):
    log = LOG_DIR / name
    assert main(["replay", str(log), "--best"]) == 0, capsys.readouterr().err
    best = best_records(read_records(log))
    assert {b.record["workload"]["name"] for b in best} == SHIPPED[name]
    assert all(b.record["hw"]["config"] and b.record["workload"]["shape"] for b in best)


def test_default_logs_are_not_shipped_logs():
    """The tuner's default log goes to runs/ (git-ignored), never into logs/."""
    from simulator.hardware import DEFAULT
    from vtatune.tuning import RUNS_DIR, default_log_path
    from vtatune.workloads import WORKLOADS

    path = default_log_path(WORKLOADS["conv2d"]["tutorial"], DEFAULT)
    assert path.parent == RUNS_DIR == Path("runs")
    ignored = (Path(__file__).resolve().parents[2] / ".gitignore").read_text().split()
    assert "/runs/" in ignored


@pytest.mark.parametrize("hw", ["pynq", "ultra96"])
def test_shipped_network_logs_serve_every_layers_build(hw):
    """The ResNet-18 logs are a network's (`conv2d --network resnet18`): each task's build,
    with the epilogue it was tuned with, takes its record; none falls back."""
    from vtatune.builds import build
    from vtatune.networks import load_network

    net = load_network("resnet18", hw)
    log = LOG_DIR / f"resnet18-{hw}.jsonl"
    provenances = {t.name: build(t.workload, net.hw, log=log)
                   .provenance for t in net.tunable}
    assert len(provenances) == 10
    assert all(p.source == "log" and p.log == str(log) for p in provenances.values()), provenances
