"""The tuned logs shipped in logs/ replay (best record per workload x hardware)."""

from pathlib import Path

import pytest

from vtatune.cli import main
from vtatune.records import best_records, read_records

LOGS = sorted((Path(__file__).resolve().parents[1] / "logs").glob("*.jsonl"))


def test_logs_are_shipped():
    names = {p.name for p in LOGS}
    for hw in ("pynq", "ultra96"):
        assert f"resnet18-{hw}.jsonl" in names and f"gemm-{hw}.jsonl" in names


@pytest.mark.parametrize("log", LOGS, ids=[p.name for p in LOGS])
def test_shipped_log_replays(log, capsys):
    assert main(["replay", str(log), "--best"]) == 0, capsys.readouterr().err
    best = best_records(read_records(log))
    layers = {b.record["workload"]["name"] for b in best}
    if log.name.startswith("resnet18"):
        assert layers == {f"resnet18.C{i}" for i in range(2, 12)}
    else:
        assert layers == {"tutorial", "dense128"}
    assert all(b.record["hw"]["config"] and b.record["workload"]["shape"] for b in best)
