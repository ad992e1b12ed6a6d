"""The deployed network against TVM v0.14's own deployment of ResNet-18 and ResNet-50 (fsim):
every VTA function's counters, in execution order, for the sim target (convs and residual
adds on VTA) and pynq (adds on the CPU), with a tuned AutoTVM log applied and with none
(TVM's fallback configs); TVM's own streams timed; and how a log is applied. The references:
tests/networks/data/README.md."""

import json
from pathlib import Path

import pytest

from simulator.hardware import PRESETS
from tests._data import DEPLOYED
from vtatune.cli import main
from vtatune.networks import load_network, network_from_logs, schedules_from_logs
from vtatune.schedule import tvm_fallback

DATA = Path(__file__).resolve().parent / "data"
LOG = DATA / "resnet18-f4385aa.autotvm.log"  # what TVM applied (exported at f4385aa)
REFERENCES = {(model, case): ref for model in ("resnet18", "resnet50") for case, ref in
              json.loads((DATA / f"tvm014_{model}.json").read_text())["cases"].items()}


def _vta_nodes(result):
    return [(k.step, k.counters) for k in result.deployed.kernels]


@pytest.mark.parametrize(("model", "case"), [
    pytest.param(*key, id="-".join(key),
                 # ResNet-50: 68 VTA functions, about 40 s
                 marks=[pytest.mark.slow] if key[0] == "resnet50" else [])
    for key in sorted(REFERENCES)])
def test_every_vta_function_counts_as_tvms_fsim(model, case):
    target, schedules = case.split("-")
    ref = REFERENCES[model, case]
    r = network_from_logs(model, [LOG] if schedules == "vtatunelog" else [], target)
    got = _vta_nodes(r)
    assert len(got) == len(ref["vta_nodes"])
    for (step, counters), node in zip(got, ref["vta_nodes"], strict=True):
        assert ("add" in step) == node["relay_ops"].startswith("cast"), (step, node)
        assert counters == node["counters"], (step, node["relay_ops"])
    assert r.deployed.counters == ref["whole_network_fsim"]
    # a conv falls back where TVM's AutoTVM did (ResNet-50's convs the ResNet-18 log lacks);
    # an add always (the log has no add.vta record)
    source = dict(r.sources)
    assert [source[k.task] == "fallback" for k in r.deployed.kernels] == \
        [node.get("autotvm_fallback", True) for node in ref["vta_nodes"]]


def test_sim_streams_time_as_tvms_own():
    """The reference (tests/data/tvm014_resnet18_deployed.json) times TVM's own instruction
    stream of each function (with vtatune's timing model): ours, built from the same
    configs, takes the same cycles."""
    ref = json.loads(DEPLOYED.read_text())
    r = network_from_logs("resnet18", [LOG], "sim")
    nodes = [n for n in ref["nodes"] if n["device"] == "VTA"]
    assert r.deployed.counters == ref["whole_network_fsim"]
    diffs = [k.cycles - n["tvm_stream_cycles"] for k, n in zip(r.deployed.kernels, nodes,
                                                               strict=True)]
    # conv+ReLU kernels after an add: TVM's stream was timed with one primed token,
    # ours with the token the add leaves; a few cycles apart
    assert max(map(abs, diffs)) <= 5 and sum(d == 0 for d in diffs) >= len(diffs) // 2
    assert abs(r.vta_cycles - sum(n["tvm_stream_cycles"] for n in nodes)) <= 10


def test_a_log_applies_as_apply_history_best(tmp_path):
    net = load_network("resnet18", "sim")
    applied = schedules_from_logs(net, [LOG])
    # pynq records apply to sim (same VTA configuration); the best record per key
    assert applied["resnet18.C2"].source == f"{LOG}:10"
    assert applied["resnet18.A1"].source == "fallback"
    assert applied["resnet18.A1"].schedule == tvm_fallback(
        next(t.workload for t in net.tasks if t.name == "resnet18.A1"), net.hw)
    # an exact-target record wins over a faster one of another target of the same config
    line = LOG.read_text().splitlines()[9]
    sim_line = line.replace("-model=pynq_", "-model=sim_")
    record = json.loads(sim_line)
    record["result"][0] = [1.0]  # far slower than the pynq record
    mine = tmp_path / "sim.log"
    mine.write_text(json.dumps(record) + "\n")
    both = schedules_from_logs(net, [LOG, mine])
    assert both["resnet18.C2"].source == f"{mine}:1"
    # another board of the same VTA configuration takes them; another configuration never
    ultra96 = schedules_from_logs(load_network("resnet18", "ultra96"), [LOG])
    assert ultra96["resnet18.C2"].source == f"{LOG}:10"
    other = schedules_from_logs(load_network("resnet18", PRESETS["4x8"], batch=4), [LOG])
    assert other and all(a.source == "fallback" for a in other.values())


def test_cli_reports_a_log_as_deployed(capsys):
    assert main(["network", "resnet18", "--hw", "sim", "--trials-per-task", "0",
                 "--log", str(LOG), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    r = network_from_logs("resnet18", [LOG], "sim")
    assert d["vta_counters"] == r.deployed.counters and d["vta_cycles"] == r.vta_cycles
    sources = {t["name"]: t["schedule_source"] for t in d["tasks"]}
    assert sources["resnet18.A1"] == "fallback"
    assert sources["resnet18.C8"].startswith(f"{LOG}:")
