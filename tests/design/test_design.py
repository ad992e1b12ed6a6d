"""Hardware/schedule co-design: feasibility reasons, the hardware space, and a tiny search
through the command line."""

import errno
import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from simulator.chisel import decoder_check
from simulator.errors import VTAError
from simulator.hardware import HardwareConfig
from simulator.resources import DEVICES, estimate
from vtatune.cli import main
from vtatune.design import (
    BUFFERS,
    BUILD_FILE,
    KNOB_RANGES,
    SHAPE_KNOBS,
    TVM_STOCK,
    Design,
    InnerResult,
    co_design,
    compute_floor,
    hardware_build,
    infeasibility,
    maximal_configs,
    nearest_feasible,
    pareto_front,
    placed,
    placement_difference,
    runnable_shapes,
    shape_label,
    shapes,
    smallest,
    stock,
    task_reason,
    toolchain,
    vta_layers,
)
from vtatune.networks import network_from_logs

pytestmark = pytest.mark.usefixtures("compiled_engines")  # exact CLI output: no first-run notice

REF = vta_layers(placed("resnet18", stock("pynq")))


def test_feasibility_reasons_name_the_rule_and_numbers():
    pynq = DEVICES["pynq"]
    assert infeasibility(stock("pynq"), pynq, "resnet18", REF) is None
    acc18 = replace(stock("pynq"), log_acc_buff_size=18)
    assert infeasibility(acc18, pynq, "resnet18", REF) == (
        "encoding: micro-op fields need 33 bits (acc 12 + inp 11 + wgt 10), a micro-op has 32")
    big = HardwareConfig(target="pynq", log_block=5, log_inp_buff_size=16,
                         log_wgt_buff_size=18, log_acc_buff_size=18)
    assert infeasibility(big, pynq, "resnet18", REF).startswith(
        "resources: LUT 126755 > 53200 on xc7z020")
    batch2 = replace(stock("ultra96"), log_batch=1)
    assert infeasibility(batch2, DEVICES["ultra96"], "resnet18", REF) == (
        "layer layer1.0.conv1 leaves VTA: batch 1 is not a multiple of BATCH 2")


def test_separate_blocks_feasibility_and_toolchain_label():
    u96 = DEVICES["ultra96"]
    in32 = HardwareConfig(target="ultra96", log_block_in=5, log_block_out=4)
    assert infeasibility(in32, u96, "resnet18", REF) is None
    assert toolchain(stock("ultra96")) == TVM_STOCK
    assert toolchain(in32).startswith("needs a toolchain change: BLOCK_IN 32 != BLOCK_OUT 16")
    out32 = HardwareConfig(target="ultra96", log_block_in=4, log_block_out=5)
    assert infeasibility(out32, u96, "resnet18", REF) is None
    assert "loaded packed by BLOCK_OUT" in toolchain(out32)
    batch2 = replace(in32, log_batch=1)
    assert infeasibility(batch2, u96, "resnet18", REF) == (
        "layout: BATCH 2 with BLOCK_IN 32 != BLOCK_OUT 16: an element's 2 rows are not "
        "contiguous in the other layer's packing")
    found = shapes("resnet18", "ultra96", REF)
    # batch 1 only, most MACs first; the 512-MAC cores precede 1x16
    assert all(lb == 0 for lb, _, _ in found)
    assert found[0] == (0, 6, 6)
    assert found.index((0, 5, 4)) < found.index((0, 4, 4))
    assert found.index((0, 4, 5)) < found.index((0, 4, 4))


def test_maximal_configs_cannot_grow():
    device = DEVICES["ultra96"]
    configs = maximal_configs("ultra96", device, (0, 4, 4))
    assert stock("ultra96") in configs
    for hw in configs:
        assert infeasibility(hw, device, "resnet18", REF) is None
        for knob in BUFFERS:
            try:
                bigger = replace(hw, **{knob: getattr(hw, knob) + 1})
            except VTAError:
                continue
            assert infeasibility(bigger, device, "resnet18", REF), (hw.bitstream, knob)


# pynq's 1x4x64: BLOCK_OUT = 16 x BLOCK_IN, so a 1-pixel pad is 16 input elements, and the
# LOAD's x_pad fields have 4 bits.
PAD_1x4x64 = HardwareConfig(target="pynq", log_block_in=2, log_block_out=6,
                            log_uop_buff_size=10, log_inp_buff_size=15, log_wgt_buff_size=17,
                            log_acc_buff_size=18)
PAD_REASON = ("task resnet18.C2: pad_field: LOAD INP: field x_pad_0=16 does not fit 4 bits "
              "(max 15); the input's pad of 1 column, 16 elements a pixel (the input is packed "
              "by BLOCK_OUT 64 = 16 x BLOCK_IN 4)")


def test_a_task_no_schedule_can_run_makes_the_design_infeasible():
    """The lowering's shape rules are checked for every task before any tuning: the design
    is infeasible naming the first task that fails and the rule."""
    pynq = DEVICES["pynq"]
    assert PAD_1x4x64.bitstream == "1x4x64_i8w8a32_10_15_17_18"
    assert placement_difference(placed("resnet18", PAD_1x4x64), REF) is None  # places fine
    assert task_reason(placed("resnet18", PAD_1x4x64)) == PAD_REASON
    assert infeasibility(PAD_1x4x64, pynq, "resnet18", REF) == PAD_REASON
    # the same rule at the shape's smallest buffers: the pads do not read the buffers
    assert task_reason(placed("resnet18", smallest("pynq", (0, 2, 6)))) == PAD_REASON
    assert task_reason(placed("resnet18", stock("pynq"))) is None


def _fake_tuning(monkeypatch, fail_after_tuning=()):
    """Replace the inner search by one that tunes nothing: each design's VTA time is twice
    its compute floor (so the walk's floor bound acts as with real tuning), and a design of
    ``fail_after_tuning`` is found without a legal schedule, as tuning finds it. Returns the
    list of the bitstreams "tuned", in order."""
    import vtatune.design._search as search_module

    tuned = []

    def tune_tasks(network, hw, trials, seed, logdir):
        tuned.append(hw.bitstream)
        net = placed(network, hw)
        counts = {t.name: t.multiplicity for t in net.tasks if not t.skip}
        if hw.bitstream in fail_after_tuning:
            return InnerResult(dict.fromkeys(counts), counts,
                               f"{next(iter(counts))}: no legal schedule found", 0.0)
        return InnerResult(dict.fromkeys(counts, 1), counts, None, 0.0,
                           2 * compute_floor(net))

    monkeypatch.setattr(search_module, "tune_tasks", tune_tasks)
    return tuned


@pytest.mark.parametrize("limit", [1, 3, 10])
def test_candidates_counts_each_design_tuned_once(tmp_path, monkeypatch, limit):
    """``candidates=N`` tunes N designs besides the stock one: one found infeasible after
    its tuning counts once (it was counted twice: in the results and the infeasible ones),
    one refused before tuning (1x4x64: its pads do not encode) costs no tuning and is no
    candidate."""
    walk = maximal_configs("pynq", DEVICES["pynq"], (0, 4, 4))  # the first shape walked
    first = next(hw.bitstream for hw in walk if hw != stock("pynq"))
    tuned = _fake_tuning(monkeypatch, fail_after_tuning={first})
    r = co_design("resnet18", "pynq", trials_per_task=1, candidates=limit, out=tmp_path)
    assert tuned[0] == stock("pynq").bitstream and tuned[1] == first
    assert len(tuned) == limit + 1 == r.new_evaluations
    assert len(set(tuned)) == len(tuned)
    assert r.infeasible[first] == "resnet18.C2: no legal schedule found"
    assert len(r.evaluated) == limit  # the stock design and the candidates but `first`
    assert PAD_1x4x64.bitstream not in tuned
    if limit == 10:  # the walk reaches 1x4x64 (after 1x16's ten): refused, untuned
        assert r.infeasible[PAD_1x4x64.bitstream] == PAD_REASON
        assert not (tmp_path / "tuning" / PAD_1x4x64.target_model).exists()
    # resumed with a higher limit: the candidates tuned count, only the new ones are tuned
    del tuned[:]
    again = co_design("resnet18", "pynq", trials_per_task=1, candidates=limit + 1,
                      out=tmp_path, resume=True)
    assert len(tuned) == 1 == again.new_evaluations


def test_nsga_tunes_the_candidates_asked_for(tmp_path, monkeypatch):
    tuned = _fake_tuning(monkeypatch)
    r = co_design("resnet18", "pynq", trials_per_task=1, objective="latency-area",
                  candidates=4, out=tmp_path)
    assert len(tuned) == 5 == r.new_evaluations == len(set(tuned))
    assert not any(b.startswith("1x4x64") for b in tuned)


def _design(cycles, hw):
    return Design(hw, estimate(hw), {}, cycles, 100)


def test_nearest_feasible_design_of_any_proposal():
    """NSGA-II's proposals are evaluated as the nearest feasible configuration: a feasible
    proposal is itself, an over-budget one keeps its shape with smaller buffers, and any
    proposal of the knobs' ranges maps to a configuration that can run ResNet-18."""
    import random

    board, device = "pynq", DEVICES["pynq"]
    found, maximal = runnable_shapes("resnet18", board, REF), {}
    # 1x4x64 places ResNet-18's layers but cannot pad their inputs: no proposal maps to it
    assert (0, 2, 6) in shapes("resnet18", board, REF) and (0, 2, 6) not in found
    assert found == [s for s in shapes("resnet18", board, REF) if s != (0, 2, 6)]

    def knobs(hw):
        return {k: getattr(hw, k) for k in (*SHAPE_KNOBS, *BUFFERS)}

    assert nearest_feasible(board, device, knobs(stock(board)), found, maximal) == stock(board)
    huge = {**knobs(stock(board)), **dict.fromkeys(BUFFERS[1:], 22)}
    assert infeasibility(HardwareConfig(target=board, **huge), device, "resnet18", REF)
    fitted = nearest_feasible(board, device, huge, found, maximal)
    assert (fitted.log_batch, fitted.log_block_in, fitted.log_block_out) == (0, 4, 4)
    assert all(getattr(fitted, k) <= huge[k] for k in BUFFERS)
    assert infeasibility(fitted, device, "resnet18", REF) is None
    assert fitted in maximal_configs(board, device, (0, 4, 4))  # as big as it can be
    rng = random.Random(0)
    for _ in range(40):
        proposal = {k: rng.randint(*KNOB_RANGES[k]) for k in (*SHAPE_KNOBS, *BUFFERS)}
        hw = nearest_feasible(board, device, proposal, found, maximal)
        assert hw is not None and infeasibility(hw, device, "resnet18", REF) is None, proposal


def test_pareto_front_keeps_only_undominated():
    small = replace(stock("ultra96"), log_wgt_buff_size=16)
    big, same = stock("ultra96"), replace(stock("ultra96"), log_inp_buff_size=14)
    assert estimate(small).bram < estimate(same).bram < estimate(big).bram
    front = pareto_front([_design(90, big), _design(95, small), _design(90, same)])
    assert [d.hw for d in front] == [same, small]
    assert front[0].speedup == pytest.approx(100 / 90)


def test_tiny_design_search_through_the_cli(tmp_path, capsys, monkeypatch):
    argv = ["design", "--network", "resnet18", "--board", "ultra96", "--trials-per-task", "2",
            "--candidates", "2", "--out", str(tmp_path), "--json"]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["new_evaluations"] == 3 and result["evaluated"] == 3
    counts = {t.name: t.multiplicity for t in placed("resnet18", stock("ultra96")).tasks}
    stock_cycles = result["stock"]["total_cycles"]
    # designs rank by the deployed network's VTA time with their tuned schedules: every
    # kernel in order, each layer's epilogue; more than the tasks' sum with one epilogue each
    stock_log = tmp_path / result["stock"]["bitstream"] / "resnet18.jsonl"
    assert stock_cycles == network_from_logs("resnet18", [stock_log], stock("ultra96")).vta_cycles
    assert stock_cycles != sum(counts[n] * c for n, c in result["stock"]["tasks"].items())
    assert result["designs"]
    for d in result["designs"]:
        hw = HardwareConfig.from_dict(d["config"])
        assert d["bitstream"] == hw.bitstream and hw.target == "ultra96"
        assert d["total_ms"] == pytest.approx(d["total_cycles"] / 333e3, abs=1e-4)
        assert d["speedup"] == pytest.approx(stock_cycles / d["total_cycles"], abs=1e-4)
        assert d["resources"] == estimate(hw).to_dict()
        assert d["toolchain"] == toolchain(hw)
        check = decoder_check(hw)
        assert d["decoder"]["summary"] == check.summary()
        assert d["decoder"]["stock_decoder"] == check.stock == (d["decoder"]["widened"] == []
                                                                and not check.index_widths)
        where = tmp_path / d["bitstream"]
        assert HardwareConfig.from_json(where / "vta_config.json") == hw
        assert len((where / "resnet18.jsonl").read_text().splitlines()) >= len(counts)
        build = json.loads((where / BUILD_FILE).read_text())
        assert build == json.loads(json.dumps(hardware_build(hw)))
        assert build["chisel"]["CoreParams"]["inpMemDepth"] == hw.inp_depth
        assert build["chisel"]["ShellParams"]["dataBits"] == 128  # ultra96's bus
        assert {c["field"] for c in build["decoder"]["changes"]} == \
            {c.stock.field for c in check.changes}
    # Resumed: nothing is tuned again and the answer is the same.
    assert main([*argv, "--resume"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["new_evaluations"] == 0 and again["designs"] == result["designs"]
    # The table says per design whether the stock decoder reads it.
    assert main([*argv[:-1], "--resume"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[1].split() == ["design", "LUT%", "LUT%hi", "LUTmul", "FF%", "BRAM%", "DSP%",
                                "binds", "VTA", "cycles", "ms", "speedup", "decoder"]
    rows = table[2:2 + len(result["designs"]) + 1]
    stock_name = result["stock"]["bitstream"]
    on_front = stock_name in {d["bitstream"] for d in result["designs"]}
    assert on_front  # at 2 trials a task on ultra96, the stock design is on the front
    rows = rows[:len(result["designs"])]
    # each design once: the stock one marked in its place on the front, not twice
    assert sum(stock_name in line for line in table) == 1
    for d, row in zip(result["designs"], rows, strict=True):
        name = row.removeprefix("stock ").split()[0]
        assert name == d["bitstream"] and row.startswith("stock ") == (name == stock_name)
        assert row.endswith("x  " + d["decoder"]["summary"])
        margin = d["resources"]["lut_margin"]
        assert row.split()[2 + row.startswith("stock ") + (" *" in row):][:3] == [
            f"{margin['lut_percent'][1]:.1f}", str(margin["products_in_luts"]),
            f"{d['resources']['percent']['FF']:.1f}"]
    over = [d["bitstream"] for d in result["designs"] if not d["resources"]["lut_margin"][
        "fits_at_high"]]
    assert (f"over the board at 181 LUTs a product: {', '.join(over)}" if over else
            "every design listed fits at 181 LUTs a product") in table
    # The disk fills up while the second design file is written: none is replaced or added,
    # no temporary file is left, and the error is one line.
    before = {p: p.read_bytes() for p in tmp_path.glob("*/*") if p.is_file()}
    real, calls = os.open, []

    def full_after_one(path, flags, *args, **kwargs):
        name = os.path.basename(path)
        if name.startswith(".") and name.endswith(".tmp"):  # a file written whole, first
            calls.append(os.path.dirname(path))
            if len(calls) > 1:
                raise OSError(errno.ENOSPC, "No space left on device")
        return real(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", full_after_one)
    assert main([*argv, "--resume"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.endswith(": No space left on device\n")
    assert err.startswith(f"vtatune: error: cannot write the Pareto designs to {tmp_path}/")
    assert len(calls) == 2
    assert {p: p.read_bytes() for p in tmp_path.glob("*/*") if p.is_file()} == before
    assert not list(tmp_path.rglob("*.tmp"))


@pytest.mark.parametrize("args, message", [
    (["--network", "resnet19", "--board", "pynq"], "unknown network 'resnet19' (known: "),
    (["--network", "resnet18", "--board", "pynq", "--trials-per-task", "0"],
     "--trials-per-task must be at least 1, got 0"),
    (["--network", "resnet18", "--board", "zcu9"], "argument --board: invalid choice"),
])
def test_bad_input_is_one_line_and_exit_2(args, message, capsys):
    assert main(["design", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vtatune: error: ") and message in err and err.count("\n") == 1


def test_design_on_a_read_only_file_system_is_one_line(tmp_path, capsys, monkeypatch):
    out = tmp_path / "designs"

    def read_only(self, *args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", str(self))

    monkeypatch.setattr(Path, "mkdir", read_only)
    assert main(["design", "--network", "resnet18", "--board", "pynq", "--trials-per-task",
                 "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == f"vtatune: error: cannot create {out}: Read-only file system\n"
    assert not out.exists()


def test_the_candidate_limit_says_what_it_left(tmp_path, monkeypatch):
    """A shape whose first configuration was tuned before the limit was reached (it may be
    the design chosen) is not reported as skipped whole (issue 41 item 10)."""
    _fake_tuning(monkeypatch)
    walk = [hw for hw in maximal_configs("pynq", DEVICES["pynq"], (0, 4, 4))
            if hw != stock("pynq")]
    r = co_design("resnet18", "pynq", trials_per_task=1, candidates=1, out=tmp_path)
    label = shape_label((0, 4, 4))
    limit = [line for line in r.skipped if "candidate limit" in line]
    assert limit[0] == (f"{label}: {len(walk) - 1} of its {len(walk)} configurations not "
                        "tuned: the candidate limit (1) is reached")
    assert limit[1:] and all(
        line.endswith(": not tuned: the candidate limit (1) is reached") for line in limit[1:])
