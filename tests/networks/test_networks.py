"""Networks: the catalogue, TVM's packing decisions, task schedulers and network tuning."""

import json
import math
from pathlib import Path

import pytest

from simulator.hardware import DEFAULT, PRESETS, HardwareConfig
from vtatune.errors import VtatuneError
from vtatune.networks import (
    DEPLOYED_SHIFT,
    NETWORKS,
    Layer,
    Network,
    NetworkError,
    Task,
    group_merge,
    load_network,
    network_from_logs,
    place,
    tasks_of,
    tune_network,
)
from vtatune.networks.schedulers import Gradient, RoundRobin, TaskState, get_scheduler, objective
from vtatune.records import read_records
from vtatune.workloads import (
    WORKLOADS,
    Conv2dWorkload,
    GemmWorkload,
    GroupConv2dWorkload,
    deployed,
    epilogue_name,
)

pytestmark = pytest.mark.usefixtures("compiled_engines")  # exact CLI output: no first-run notice

# ResNet-18's offloaded layers and how often each occurs (VTA notes, section 10).
RESNET18_COUNTS = {"C2": 4, "C3": 1, "C4": 1, "C5": 3, "C6": 1, "C7": 1, "C8": 3, "C9": 1,
                   "C10": 1, "C11": 3}


def test_resnet18_tasks_are_the_benchmark_layers_with_their_counts():
    net = load_network("resnet18", "pynq", tasks="autotvm")  # AutoTVM's ten tasks
    assert {t.name: t.multiplicity for t in net.tasks} == \
        {f"resnet18.{k}": v for k, v in RESNET18_COUNTS.items()}
    for t in net.tasks:
        assert t.workload == WORKLOADS["conv2d"][t.name]
        assert t.skip == ""
    adds = [(f"layer{s}.{b}.add", "residual add: TVM v0.14 runs ALU-only kernels on VTA for "
             "the sim and intelfocl targets only") for s in range(1, 5) for b in range(2)]
    assert [(c.name, c.reason) for c in net.cpu] == [
        ("conv1", "3 input channels are not a multiple of BLOCK_IN 16 (the first convolution "
                  "stays on the CPU)"), *adds,
        ("fc", "1000 output channels are not a multiple of BLOCK_OUT 16")]


@pytest.mark.parametrize("name, tasks, vta_layers, cpu", [
    # (the ResNets' residual adds: on the CPU for pynq)
    ("resnet18", 10, 19, 10), ("resnet34", 10, 35, 18), ("resnet50", 22, 52, 18),
    ("mobilenet_v1", 9, 13, 15), ("yolov3_tiny", 9, 10, 3)])
def test_catalogue_sizes(name, tasks, vta_layers, cpu):
    # Counted from the papers' architectures: ResNet-50 has 53 convolutions (52 on VTA,
    # the 7x7 stem on the CPU) and an FC; MobileNet v1 13 depthwise + 13 pointwise + stem.
    net = load_network(name, DEFAULT, tasks="autotvm")
    assert (len(net.tasks), net.vta_layers, len(net.cpu)) == (tasks, vta_layers, cpu)
    assert len({t.workload.key() for t in net.tasks}) == len(net.tasks)


def test_resnet50_bottleneck_shapes():
    net = load_network("resnet50")
    by_shape = {(t.workload.height, t.workload.in_channels, t.workload.out_channels,
                 t.workload.kernel, t.workload.stride): t.multiplicity for t in net.tasks}
    # Stage 1: conv3 (64->256) and the downsample have one shape: one task, two per block 0.
    assert by_shape[(56, 64, 256, 1, 1)] == 4
    assert by_shape[(14, 256, 256, 3, 1)] == 5      # stage 3, blocks 1..5
    assert by_shape[(28, 256, 256, 3, 2)] == 1      # v1.5: stage 3 strides in its 3x3
    assert by_shape[(7, 2048, 512, 1, 1)] == 2


def test_every_catalogue_entry_has_a_source():
    for spec in NETWORKS.values():
        assert spec.source


@pytest.mark.parametrize("layer, reason", [
    (Layer("dw", "conv2d", 1, 64, 64, 56, 56, (3, 3), (1, 1, 1, 1), groups=64),
     "depthwise convolution (1 input channel per group; VTA needs multiples of BLOCK_IN 16)"),
    (Layer("c", "conv2d", 1, 64, 64, 56, 56, (1, 7), (0, 3, 0, 3)),
     "non-square kernel 1x7 (VTA's templates take square kernels)"),
    (Layer("c", "conv2d", 1, 64, 64, 56, 56, (3, 3), (0, 0, 1, 1)),
     "asymmetric padding 0,0,1,1 (VTA's templates pad all sides alike)"),
    (Layer("c", "conv2d", 1, 64, 64, 56, 56, (3, 3), (2, 2, 2, 2), dilation=(2, 2)),
     "dilation 2 (VTA's templates do not dilate)"),
    (Layer("c", "conv2d", 1, 64, 64, 56, 56, (3, 3), (1, 1, 1, 1), (1, 2)),
     "stride 1x2 (VTA's templates take one stride)"),
    (Layer("c", "conv2d", 1, 64, 255, 13, 13),
     "255 output channels are not a multiple of BLOCK_OUT 16"),
    (Layer("g", "conv2d", 1, 64, 64, 56, 56, (3, 3), (1, 1, 1, 1), groups=8),
     "8 input channels per group are not a multiple of BLOCK_IN 16"),
    (Layer("fc", "dense", 1, 100, 1024), "100 input channels are not a multiple of BLOCK_IN 16"),
    (Layer("p", "maxpool", 1, 64, 64), "maxpool has no VTA template"),
])
def test_cpu_reasons(layer, reason):
    assert place(layer, DEFAULT) == reason


def test_deploy_merges_groups_of_fewer_channels_than_a_block():
    """As deploy runs a model (``pad_channels``): k neighbouring groups as one of whole
    blocks (RegNet's 13 groups of 8 as 7 of 16, the last padded), k at most 4; the
    depthwise conv's 16 stays on the CPU, saying why."""
    epi = deployed(DEPLOYED_SHIFT, False)
    regnet = Layer("g", "conv2d", 1, 104, 104, 28, 28, (3, 3), (1, 1, 1, 1), groups=13)
    assert place(regnet, DEFAULT, "g", pad_channels=True) == GroupConv2dWorkload(
        1, 28, 28, 112, 112, 3, 1, 1, 7, "g", epi)
    assert place(regnet, DEFAULT) == "8 input channels per group are not a multiple of " \
        "BLOCK_IN 16"  # TVM v0.14's graph packing: not merged
    dw = Layer("dw", "conv2d", 1, 64, 64, 56, 56, (3, 3), (1, 1, 1, 1), groups=64)
    assert place(dw, DEFAULT, pad_channels=True) == (
        "depthwise convolution (1 input channel per group): VTA would run 16 groups merged "
        "into one of 16 input channels, 16x its MACs (deploy merges at most 4)")
    assert place(dw, DEFAULT, "dw", pad_channels=True, max_merge=16) == GroupConv2dWorkload(
        1, 56, 56, 64, 64, 3, 1, 1, 4, "dw", epi)
    # all groups in one: a plain conv (its weight block-diagonal)
    assert place(Layer("g", "conv2d", 1, 8, 8, 8, 8, (3, 3), (1, 1, 1, 1), groups=2), DEFAULT,
                 "g", pad_channels=True) == Conv2dWorkload(1, 8, 8, 16, 16, 3, 1, 1, "g", epi)
    in32, out32 = HardwareConfig(log_block_in=5), HardwareConfig(log_block_out=5)
    assert [group_merge(8, 8, hw) for hw in (DEFAULT, in32, out32)] == [2, 4, 4]
    assert [group_merge(c, c, DEFAULT) for c in (1, 2, 4, 8, 16, 24, 32)] == \
        [16, 8, 4, 2, 1, 2, 1]


def test_batch_must_be_a_multiple_of_BATCH():
    hw = PRESETS["4x8"]
    layer = Layer("c", "conv2d", 1, 64, 64, 56, 56, (3, 3), (1, 1, 1, 1))
    assert place(layer, hw) == "batch 1 is not a multiple of BATCH 4"
    assert place(Layer("c", "conv2d", 4, 64, 64, 56, 56, (3, 3), (1, 1, 1, 1)), hw, "x") == \
        Conv2dWorkload(4, 56, 56, 64, 64, 3, 1, 1, "x", deployed(DEPLOYED_SHIFT, False))
    net = load_network("resnet18", hw, batch=4, tasks="autotvm")
    assert len(net.tasks) == 11 and all(t.workload.batch == 4 for t in net.tasks)
    # BLOCK_OUT 8 divides 1000: the FC runs on VTA as a GEMM.
    assert net.tasks[-1].workload == GemmWorkload(4, 512, 1000, "resnet18.T11")


def test_block_size_decides_per_hardware():
    # yolov3-tiny's 16 -> 32 conv fits BLOCK_IN 16 but not 32.
    on16 = load_network("yolov3_tiny", "pynq")
    on32 = load_network("yolov3_tiny", "1x32")
    assert len(on32.tasks) == len(on16.tasks) - 1
    assert on32.cpu[1].reason == "16 input channels are not a multiple of BLOCK_IN 32"


def test_dense_that_fits_is_a_gemm_task():
    layers = [Layer("fc1", "dense", 1, 1024, 1024), Layer("fc2", "dense", 1, 1024, 1024),
              Layer("fc3", "dense", 1, 1024, 1000)]
    tasks, cpu, _ = tasks_of(layers, DEFAULT, "mlp")
    assert [(t.workload, t.multiplicity, t.layers) for t in tasks] == \
        [(GemmWorkload(1, 1024, 1024, "mlp.T1", deployed(DEPLOYED_SHIFT, False)), 2,
          ("fc1", "fc2"))]
    assert [c.name for c in cpu] == ["fc3"]


def test_unknown_network_is_one_error():
    with pytest.raises(NetworkError, match="unknown network 'resnet9' \\(known: resnet18"):
        load_network("resnet9")


# --- schedulers ----------------------------------------------------------------------------

def test_round_robin_skips_dead_tasks():
    tasks = [TaskState(1, 1) for _ in range(4)]
    rr = RoundRobin()
    assert [rr.pick(tasks) for _ in range(5)] == [0, 1, 2, 3, 0]
    tasks[1].dead = tasks[2].dead = "converged"
    assert [rr.pick(tasks) for _ in range(3)] == [3, 0, 3]


def test_gradient_is_ansors_formula():
    # Task a: weight 2, best 400 after 4 rounds (history 1000, 700, 500, 400);
    # backward = (400 - 1000) / 3 = -200; forward = 400 - 400/4 - 400 = -100;
    # gradient = 2 * (0.2 * -200 + 0.8 * -100) = -240.
    a = TaskState(2, 10**6)
    for best in (1000, 700, 500, 400):
        a.record_round(4, best)
    b = TaskState(1, 10**6)      # only 3 rounds: no backward term; forward = -1500/3 = -500
    for best in (2000, 1500, 1500):
        b.record_round(4, best)
    g = Gradient()
    assert g.gradient([a, b], 0) == pytest.approx(-240.0)
    assert g.gradient([a, b], 1) == pytest.approx(0.8 * -500)
    assert g.pick([a, b]) == 1
    b.dead = "converged"
    assert g.pick([a, b]) == 0
    assert objective([a, b]) == 2 * 400 + 1500


def test_gradient_similarity_group_bounds_the_forward_guess():
    # Same tag: the slower task is expected to reach 1/beta of the group's best rate.
    fast, slow = TaskState(1, 1000, "t"), TaskState(1, 1000, "t")
    fast.record_round(4, 10.0)     # 100 macs/cycle
    for _ in range(4):             # 1 mac/cycle, flat: the average-round guess is 750,
        slow.record_round(4, 1000.0)  # 1/beta of the group's 100 macs/cycle is 20 cycles
    g = Gradient()
    assert g.gradient([fast, slow], 1) == pytest.approx(0.8 * (20.0 - 1000.0))


def test_gradient_ties_are_seeded():
    tasks = [TaskState(1, 1) for _ in range(5)]
    picks = [Gradient(seed=3).pick(tasks) for _ in range(3)]
    assert len(set(picks)) == 1


def test_unknown_scheduler():
    with pytest.raises(VtatuneError, match="unknown task scheduler 'greedy'"):
        get_scheduler("greedy")


def test_flat_means_no_gain_over_the_window():
    t = TaskState(1, 1)
    for best in (5, 4, 4, 4):
        t.record_round(1, best)
    assert not t.flat(3) and t.flat(2)


# --- tuning --------------------------------------------------------------------------------

def small_network(hw=DEFAULT):
    layers = [Layer("a", "dense", 16, 64, 64), Layer("b", "dense", 16, 64, 64),
              Layer("c", "conv2d", 1, 32, 32, 8, 8, (3, 3), (1, 1, 1, 1)),
              Layer("d", "dense", 16, 32, 48)]
    tasks, cpu, _ = tasks_of(layers, hw, "small")
    return Network("small", "test", hw, tasks, cpu)


def test_tune_network_spends_the_budget_in_one_log(tmp_path):
    net = small_network()
    log = tmp_path / "small.jsonl"
    r = tune_network(net, trials=18, scheduler="round-robin", round_trials=3, warmup_trials=3,
                     patience=None, seed=1, log=log)
    assert r.stopped == "budget spent" and r.trials == 18
    assert [t.trials for t in r.tasks] == [6, 6, 6]
    studies = {rec["study"] for _, rec in read_records(log)}
    assert studies == {t.result.study for t in r.tasks} and len(studies) == 3
    assert r.total_cycles == sum(t.task.multiplicity * t.best_cycles for t in r.tasks)
    assert r.total_ms == pytest.approx(r.total_cycles / (DEFAULT.clock_mhz * 1e3))
    assert [n for n, _ in r.history] == list(range(3, 19, 3))
    d = json.loads(json.dumps(r.as_dict()))
    assert d["network"] == "small" and d["total_cycles"] == r.total_cycles
    assert [(t["operator"], t["multiplicity"], t["trials"]) for t in d["tasks"]] == \
        [("gemm", 2, 6), ("conv2d", 1, 6), ("gemm", 1, 6)]
    assert d["tasks"][0]["shape"] == {"batch": 16, "in_channels": 64, "out_channels": 64}


def test_every_task_first_gets_its_warm_up_round(tmp_path):
    r = tune_network(small_network(), trials=30, scheduler="round-robin", round_trials=2,
                     warmup_trials=5, patience=None, seed=0, log=tmp_path / "w.jsonl")
    assert [n for n, _ in r.history] == [5, 10, 15, 17, 19, 21, 23, 25, 27, 29, 30]
    # the warm-up round is at most the budget's share of a task, at least a round
    r = tune_network(small_network(), trials=9, scheduler="round-robin", round_trials=2,
                     warmup_trials=8, patience=None, seed=0, log=tmp_path / "x.jsonl")
    assert [n for n, _ in r.history][:3] == [3, 6, 9]
    r = tune_network(small_network(), trials=12, scheduler="round-robin", round_trials=2,
                     warmup_trials=1, patience=None, seed=0, log=tmp_path / "y.jsonl")
    assert [n for n, _ in r.history][:3] == [2, 4, 6]


def test_resume_continues_the_network_without_resimulating(tmp_path):
    net = small_network()
    log = tmp_path / "small.jsonl"
    first = tune_network(net, trials=9, round_trials=3, patience=None, seed=1, log=log)
    lines = sum(1 for _ in read_records(log))
    second = tune_network(net, trials=15, round_trials=3, patience=None, resume=True, log=log)
    assert first.trials == 9 and second.trials == 15
    assert sum(t.result.new_trials for t in second.tasks) == 6
    ok = [rec for _, rec in read_records(log) if rec["status"] == "ok"]
    assert len(ok) == 15 and sum(1 for _ in read_records(log)) >= lines + 6
    assert {(rec["study"], json.dumps(rec["config"], sort_keys=True)) for rec in ok}.__len__() \
        == 15  # nothing simulated twice


def test_exhausted_tasks_die_and_the_run_stops(tmp_path):
    # Two tiny GEMMs: their whole legal spaces are smaller than the budget.
    layers = [Layer("a", "dense", 1, 16, 16), Layer("b", "dense", 1, 32, 16)]
    tasks, _, _ = tasks_of(layers, DEFAULT, "tiny")
    r = tune_network(Network("tiny", "test", DEFAULT, tasks, ()), trials=500, patience=None,
                     seed=0, log=tmp_path / "t.jsonl")
    assert r.stopped == "every task exhausted"
    assert all(t.dead == "exhausted" for t in r.tasks)
    assert r.trials == sum(t.result.legal_space or t.trials for t in r.tasks) < 500


def test_skipped_tasks_are_reported_not_tuned(tmp_path):
    net = small_network()
    skipped = Task(net.tasks[1].workload, 1, ("c",), "not tunable yet: no template")
    net = Network("small", "test", DEFAULT, (net.tasks[0], skipped), ())
    r = tune_network(net, trials_per_task=2, seed=0, log=tmp_path / "s.jsonl")
    assert [(t.trials, t.skipped) for t in r.tasks] == \
        [(2, ""), (0, "not tunable yet: no template")]
    assert r.total_cycles == r.tasks[0].network_cycles


@pytest.mark.parametrize("kwargs, message", [
    ({"trials": 0}, "trials must be a positive integer, got 0"),
    ({"trials": 4, "trials_per_task": 2}, "give trials"),
    ({"round_trials": 0}, "round_trials must be a positive integer"),
    ({"warmup_trials": 0}, "warmup_trials must be a positive integer"),
    ({"scheduler": "x"}, "unknown task scheduler 'x'"),
    # issue 35, item 8: a budget below one trial a task left tasks untuned, warm-up ignored
    ({"trials": 2}, "a budget of 2 trials is smaller than the 3 tunable tasks of small: "),
])
def test_bad_arguments(tmp_path, kwargs, message):
    with pytest.raises(VtatuneError, match=message):
        tune_network(small_network(), log=tmp_path / "x.jsonl", **kwargs)


def test_converged_task_stops_taking_trials(tmp_path):
    net = small_network()
    r = tune_network(net, trials=300, round_trials=2, patience=1, seed=0,
                     log=tmp_path / "c.jsonl")
    assert r.stopped.startswith("every task")
    for t in r.tasks:
        assert t.dead in ("converged", "exhausted")
        h = [v for _, v in r.history]
        assert all(math.isfinite(v) for v in h[len(r.tasks) - 1:])
    assert r.trials < 300


# --- command line --------------------------------------------------------------------------

def cli(capsys, *argv):
    from vtatune.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_lists_the_catalogue_and_a_network(capsys):
    code, out, _ = cli(capsys, "network")
    assert code == 0 and [line.split()[0] for line in out.splitlines()] == list(NETWORKS)
    code, out, _ = cli(capsys, "network", "mobilenet_v1", "--list")
    assert code == 0
    net = load_network("mobilenet_v1")
    macs = sum(x.macs for x in net.layers)
    on_cpu = sum(c.macs for c in net.cpu)
    share = f"{100 * (macs - on_cpu) / macs:.1f} %"
    assert f"13 layers on VTA in 9 tasks ({share} of the multiply-accumulates), 15 on the CPU" \
        in out
    assert "placement as TVM v0.14's graph packing places it" in out
    assert "  block1.dw   conv2d 1x32x112x112 -> 32, k3 p1 s1 g32: depthwise convolution" in out
    code, out, _ = cli(capsys, "network", "resnet18", "--list", "--json", "--space", "autotvm")
    d = json.loads(out)
    assert {t["name"]: t["multiplicity"] for t in d["tasks"]} == \
        {f"resnet18.{k}": v for k, v in RESNET18_COUNTS.items()}
    assert d["cpu"][-1] == {"name": "fc", "operator": "dense", "shape": "dense 1x512 -> 1000",
                            "reason": "1000 output channels are not a multiple of BLOCK_OUT 16",
                            "quantized": False}


@pytest.mark.parametrize("argv, message", [
    (["network", "resnet9"], "unknown network 'resnet9'"),
    (["network", "resnet18", "--trials", "0"], "--trials must be at least 1, got 0"),
    (["network", "resnet18", "--trials", "4", "--trials-per-task", "2"], "not both"),
    (["network", "resnet18", "--scheduler", "fast"], "invalid choice: 'fast'"),
    (["network", "resnet18", "--list", "--plot", "x.png"], "--plot draws a tuned network"),
    (["network", "resnet18", "--trials", "4", "--warmup", "10"],
     "a budget of 4 trials is smaller than the 10 tunable tasks of resnet18"),
])
def test_cli_bad_input_is_one_line(capsys, argv, message):
    code, out, err = cli(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("vtatune: error: ") and message in err


def test_cli_tunes_reports_and_exports_one_record_per_task(capsys, tmp_path):
    log = tmp_path / "r18.jsonl"
    code, out, _ = cli(capsys, "network", "resnet18", "--trials", "10", "--round", "1",
                       "--seed", "0", "--log", str(log), "--json", "--space", "autotvm")
    assert code == 0
    d = json.loads(out)
    assert d["network"] == "resnet18" and d["trials"] == 10
    assert d["hw"]["model"] == DEFAULT.target_model
    assert all(t["trials"] == 1 and t["best_cycles"] > 0 for t in d["tasks"])
    assert d["total_cycles"] == sum(t["multiplicity"] * t["best_cycles"] for t in d["tasks"])
    assert d["total_ms"] == pytest.approx(d["total_cycles"] / 1e5)
    assert [c["name"] for c in d["cpu"]] == ["conv1", *(f"layer{s}.{b}.add" for s in range(1, 5)
                                                        for b in range(2)), "fc"]
    # the deployed model: every conv with its epilogue, in order; the CPU's work listed
    b = d["vta_breakdown"]
    assert d["vta_cycles"] == b["gemm_kernels"] + b["epilogues"] + b["alu_kernels"]
    assert b["alu_kernels"] == 0 and b["epilogues"] > 0  # pynq: the adds on the CPU
    assert b["gemm_kernels"] == d["total_cycles"]  # AutoTVM's tasks: the benchmark epilogue
    assert d["vta_counters"]["alu_counter"] > 0 and len(d["cpu_ops"]) == 18
    assert d["cpu_ops"][0]["macs"] == 64 * 112 * 112 * 3 * 49
    out_log = tmp_path / "r18.autotvm.log"
    code, _, _ = cli(capsys, "export", str(log), "--format", "autotvm", "-o", str(out_log))
    assert code == 0
    records = [json.loads(line) for line in out_log.read_text().splitlines()]
    assert len(records) == 10
    assert {r["input"][1] for r in records} == {"conv2d_packed.vta"}
    code, out, _ = cli(capsys, "network", "resnet18", "--trials", "12", "--round", "1",
                       "--resume", "--log", str(log), "--space", "autotvm", "--quiet")
    assert code == 0 and "search    12 trials (12 asked" in out
    assert "resnet18.C2" in out and "speed-up" in out and "on the CPU (10 layers):" in out
    # issue 35, item 14: AutoTVM's tasks are tuned on the benchmark epilogue, and say so
    assert out.splitlines()[0].split()[:4] == ["task", "operator", "shape", "epilogue"]
    assert {_epilogue_cell(line) for line in out.splitlines()
            if line.startswith("resnet18.C")} == {"benchmark"}


def _epilogue_cell(row: str) -> str:
    """The epilogue column of a network table's task row (the shape holds spaces: the cell
    after ``s<stride>``)."""
    words = row.split()
    return words[next(i for i, w in enumerate(words) if w[0] == "s" and w[1:].isdigit()) + 1]


def test_cli_from_a_log_draws_its_plot_and_names_the_epilogues(capsys, tmp_path):
    """Issue 35, items 6 and 14: ``--trials-per-task 0 --log L --plot F`` drew nothing and
    said nothing; the table names each task's epilogue (the deployed ones here)."""
    plot = tmp_path / "r18.png"
    code, out, _ = cli(capsys, "network", "resnet18", "--trials-per-task", "0", "--log",
                       str(Path(__file__).parents[2] / "logs" / "resnet18-pynq.jsonl"),
                       "--plot", str(plot))
    assert code == 0 and f"plot      {plot}" in out.splitlines()
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    epilogues = {line.split()[0]: _epilogue_cell(line) for line in out.splitlines()
                 if line.startswith("resnet18.C")}
    net = load_network("resnet18", "pynq")
    assert epilogues == {t.name: epilogue_name(t.workload.epilogue) for t in net.tasks}
    assert set(epilogues.values()) == {"deployed", "deployed-relu"}


def test_tophub_is_compared_on_the_deployed_tasks(tmp_path):
    """Issue 35, item 11: TopHub was looked up with the deployed epilogue in its key, so the
    default space's column was always empty; AutoTVM applies TopHub's records by shape."""
    from vtatune.autotvm import tophub_config
    from vtatune.schedule import from_autotvm
    from vtatune.scoring import score

    r = network_from_logs("resnet18", [], "pynq")
    assert {epilogue_name(t.task.workload.epilogue) for t in r.tasks} == \
        {"deployed", "deployed-relu"}
    for t in r.tasks:
        wl = t.task.workload
        knobs = tophub_config(WORKLOADS["conv2d"][wl.name], PRESETS["pynq"])
        assert knobs is not None
        assert t.tophub_cycles == score(wl, from_autotvm(knobs, wl, r.hw), r.hw).cycles


def test_grouped_and_transposed_tasks_are_tuned(tmp_path):
    layers = [Layer("g", "conv2d", 1, 32, 32, 8, 8, (3, 3), (1, 1, 1, 1), groups=2),
              Layer("t", "conv2d_transpose", 1, 32, 16, 4, 4, (4, 4), (1, 1, 1, 1), (2, 2))]
    tasks, cpu, _ = tasks_of(layers, DEFAULT, "ops")
    assert [(t.operator, t.skip) for t in tasks] == [("group_conv2d", ""),
                                                     ("conv2d_transpose", "")]
    r = tune_network(Network("ops", "test", DEFAULT, tasks, cpu), trials_per_task=3, seed=0,
                     log=tmp_path / "ops.jsonl")
    assert r.trials == 6 and all(t.trials >= 2 and t.best_cycles for t in r.tasks)
    ops = {rec["workload"]["operator"] for _, rec in read_records(tmp_path / "ops.jsonl")}
    assert ops == {"group_conv2d", "conv2d_transpose"}
