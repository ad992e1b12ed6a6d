"""The timing model: exact costs of hand-built programs, bounds, monotonicity, latency hiding."""

import csv
import json
import random
from dataclasses import replace

import pytest

from simulator.errors import ConfigError, DeadlockError
from simulator.hardware import DEFAULT, PRESETS
from simulator.isa import FinishInsn, GemmInsn, MemId, MemInsn, Opcode, Uop
from simulator.program import Program
from simulator.timing import TimingProfile, time_program
from vtatune.cli import main
from vtatune.lowering import lower
from vtatune.schedule import Schedule, tutorial_schedule
from vtatune.workloads import WORKLOADS, Conv2dWorkload, GemmWorkload

pytestmark = pytest.mark.usefixtures("compiled_engines")  # exact CLI output: no first-run notice

P = TimingProfile.for_hw(DEFAULT)


def _program(insns):
    return Program(tuple(insns), (Uop(0, 0, 0),), (), 1 << 16)


def test_load_gemm_store_cycles_follow_the_profile_formulas():
    """One INP load (256 B = 32 beats), one uop load, one GEMM of 4 uop iterations, one
    4-element store, FINISH; tokens l2g, g2s, s2g chain them."""
    insns = [
        MemInsn(Opcode.LOAD, MemId.INP, 0, 0, 1, 16, 16, push_next=True),
        MemInsn(Opcode.LOAD, MemId.UOP, 0, 0, 1, 1, 1, pop_prev=True),
        GemmInsn(uop_bgn=0, uop_end=1, iter_in=4, push_next=True),
        MemInsn(Opcode.STORE, MemId.OUT, 0, 0, 1, 4, 4, pop_prev=True, push_prev=True),
        FinishInsn(pop_next=True),
    ]
    r = time_program(_program(insns), DEFAULT, P, trace=True)
    bw, lat, req = P.bus_bytes, P.read_latency, P.request_cycles
    # fetch: the whole chunk (5 x 16 B) arrives, then one instruction a cycle is handed over
    chunk_ready = req + lat + 5 * 16 // bw
    dispatch = [chunk_ready + k for k in range(5)]
    # each read waits the bridge's delay (its queue is empty again), then streams its beats
    load_end = dispatch[0] + req + lat + 256 // bw + P.load_done_cycles
    uop_end = load_end + req + lat + 1 + P.wide_load_done_cycles  # 4 B: the wide loader
    gemm_end = uop_end + P.gemm_pipeline + 4
    store_end = gemm_end + P.store_insn_cycles + P.write_handshake + 4 * (
        16 // bw + P.store_read_cycles)
    finish_end = store_end + P.nop_cycles
    assert [(row.start, row.end) for row in r.trace] == [
        (dispatch[0], load_end), (load_end, uop_end), (uop_end, gemm_end),
        (gemm_end, store_end), (store_end, finish_end)]
    assert r.cycles == finish_end == 138  # the pynq constants, as the RTL counts this
    assert r.trace[1].token_wait == load_end - dispatch[1]
    assert r.trace[1].pops == "l2g"


@pytest.mark.parametrize("pad", [1, 6])
def test_padding_hides_behind_the_request_and_alu_costs(pad):
    from simulator.isa import AluInsn, AluOp

    load = MemInsn(Opcode.LOAD, MemId.INP, 0, 0, 2, 4, 8, y_pad_0=pad, x_pad_1=2 * pad,
                   push_next=True)
    alu_imm = AluInsn(AluOp.SHR, use_imm=True, imm=8, uop_bgn=0, uop_end=1, iter_in=10,
                      pop_prev=True)
    alu_reg = AluInsn(AluOp.ADD, uop_bgn=0, uop_end=1, iter_in=10)
    r = time_program(_program([load, alu_imm, alu_reg, FinishInsn()]), DEFAULT, P, trace=True)
    rows = r.trace
    padded = (pad + 2) * (4 + 2 * pad) - 2 * 4
    wait = P.request_cycles + pad + P.read_latency  # the loader steps over y_pad_0 first
    # zero-fill runs while no beat arrives: free while the request waits (pad 1: 10
    # elements), then one cycle an element beyond it (pad 6: 88 elements)
    fill = P.pad_start_cycles + padded
    assert (fill > wait) == (pad == 6)
    assert rows[0].end - rows[0].start == max(wait, fill) + 2 * 4 * 16 // P.bus_bytes + \
        P.load_done_cycles
    assert rows[1].end - rows[1].start == 10 * P.alu_imm_cycles + P.alu_pipeline
    assert rows[2].end - rows[2].start == 10 * P.alu_reg_cycles + P.alu_pipeline


def test_consecutive_loads_each_pay_the_bridge_delay_but_queued_requests_do_not():
    """Back to back in one module, every LOAD finds the bridge idle and waits; a LOAD UOP
    whose request arrives while the INP request still waits is served right after it."""
    inp = MemInsn(Opcode.LOAD, MemId.INP, 0, 0, 1, 1, 1)
    uop = MemInsn(Opcode.LOAD, MemId.UOP, 0, 0, 1, 2, 2)
    one = time_program(_program([inp, FinishInsn()]), DEFAULT, P, trace=True).trace[0]
    two = time_program(_program([inp, inp, FinishInsn()]), DEFAULT, P, trace=True).trace
    load = P.request_cycles + P.read_latency + 2 + P.load_done_cycles
    assert one.end - one.start == load
    assert [(t.start, t.end) for t in two[:2]] == [(two[0].start, two[0].start + load),
                                                   (two[0].start + load, two[0].start + 2 * load)]
    both = time_program(_program([inp, uop, FinishInsn()]), DEFAULT, P, trace=True).trace
    # the UOP request (dispatched one cycle later) queues behind the INP one: no delay of its own
    inp_data = both[0].start + P.request_cycles + P.read_latency
    assert both[1].end == inp_data + 2 + 1 + P.wide_load_done_cycles


def test_deterministic_and_bounded():
    for wl in (WORKLOADS["gemm"]["tutorial"], WORKLOADS["conv2d"]["tutorial"]):
        prog = lower(wl, tutorial_schedule(wl), DEFAULT).program
        a, b = time_program(prog, DEFAULT), time_program(prog, DEFAULT)
        assert a == b
        assert max(a.compute_floor, a.memory_floor) <= a.cycles <= a.serial_cycles


def _random_programs(seed, count):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from test_functional import SMALL, random_legal

    wls = [*SMALL, WORKLOADS["conv2d"]["resnet18.C4"]]
    return random_legal(random.Random(seed), wls, [DEFAULT, PRESETS["4x8"],
                                                   PRESETS["ultra96"]], count, 3000)


@pytest.mark.parametrize("seed", [0, 1])
def test_bounds_and_monotonicity_on_random_schedules(seed):
    for lowered in _random_programs(seed, 12):
        p = TimingProfile.for_hw(lowered.hw)
        base = time_program(lowered.program, lowered.hw, p)
        assert max(base.compute_floor, base.memory_floor) <= base.cycles <= base.serial_cycles
        wide = replace(p, bus_bytes=2 * p.bus_bytes, burst_boundary=2 * p.burst_boundary)
        assert time_program(lowered.program, lowered.hw, wide).cycles <= base.cycles
        slow = replace(p, read_latency=4 * p.read_latency)
        assert time_program(lowered.program, lowered.hw, slow).cycles >= base.cycles


def test_virtual_threads_hide_latency_on_the_conv_tutorial():
    wl = WORKLOADS["conv2d"]["tutorial"]
    two = tutorial_schedule(wl)
    assert two.oc_nthread == 2
    c2 = time_program(lower(wl, two, DEFAULT).program, DEFAULT)
    c1 = time_program(lower(wl, replace(two, oc_nthread=1), DEFAULT).program, DEFAULT)
    assert c2.cycles < c1.cycles
    assert c2.utilization > c1.utilization


def test_memory_bound_gemm_overlaps_load_and_compute_with_threads():
    wl = GemmWorkload(16, 512, 512)
    s = Schedule(tile_b=16, tile_ci=4, tile_co=4, oc_nthread=2)
    r = time_program(lower(wl, s, DEFAULT).program, DEFAULT, trace=True)
    assert r.memory_floor > r.compute_floor  # memory-bound
    loads = [(x.start, x.end) for x in r.trace if x.kind in ("LOAD INP", "LOAD WGT")]
    gemms = [(x.start, x.end) for x in r.trace if x.kind == "GEMM"]
    overlap = sum(max(0, min(e1, e2) - max(s1, s2)) for s1, e1 in loads for s2, e2 in gemms)
    assert overlap > 0
    single = time_program(lower(wl, replace(s, oc_nthread=1), DEFAULT).program, DEFAULT)
    assert r.cycles < single.cycles


def test_ultra96_profile_and_json_overrides(tmp_path):
    p = TimingProfile.for_hw(PRESETS["ultra96"])
    assert (p.bus_bytes, p.burst_boundary, p.fetch_chunk_insns) == (16, 4096, 256)
    de10 = TimingProfile.for_hw(PRESETS["de10nano"])
    assert (de10.max_burst_beats, de10.burst_boundary, de10.fetch_chunk_insns) == (16, 128, 8)
    assert TimingProfile.for_hw(DEFAULT) == TimingProfile()
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"read_latency": 40}))
    assert TimingProfile.from_json(f, p) == replace(p, read_latency=40)
    f.write_text(json.dumps({"read_latncy": 40}))
    with pytest.raises(ConfigError, match="timing profile read_latncy: unknown field"):
        TimingProfile.from_json(f)
    with pytest.raises(ConfigError, match="bus_bytes: must be an integer >= 1"):
        TimingProfile(bus_bytes=0)


def _store_cycles(hw, store, profile=None):
    """The cycles of one STORE on ``hw``, alone in its program."""
    r = time_program(_program([store, FinishInsn()]), hw, profile, trace=True)
    return r.trace[0].end - r.trace[0].start


@pytest.mark.parametrize("hw, wide", [
    (PRESETS["ultra96"], True),  # 1x16 = 16 B on a 128-bit bus: one beat
    (DEFAULT, False),  # 1x16 on a 64-bit bus: two beats
    (replace(PRESETS["ultra96"], log_block_out=3), True),  # 1x8: two elements a beat
    (replace(PRESETS["ultra96"], log_batch=1, log_block_out=3), True),  # 2x8 = 16 B
    (PRESETS["4x8"], False),  # 4x8 = 32 B on 64 bits
    (replace(PRESETS["ultra96"], log_block_out=5), False),  # 1x32 = 32 B on 128 bits
])
def test_a_store_of_one_beat_elements_writes_a_beat_per_cycle(hw, wide):
    """The RTL's store unit: the wide one where BATCH x BLOCK_OUT bytes fit in a beat
    (TensorStore.scala), a beat per cycle and a read per burst; else the narrow one, per
    element each BATCH row's beats and an SRAM read."""
    p = TimingProfile.for_hw(hw)
    assert p.wide_store(hw) is wide
    x, y, stride = 5, 3, 9
    cycles = _store_cycles(hw, MemInsn(Opcode.STORE, MemId.OUT, 0, 0, y, x, stride))
    if wide:
        per_row = -(-x * hw.out_elem_bytes // p.bus_bytes)
        assert cycles == p.store_insn_cycles + y * (
            p.write_handshake + p.store_read_cycles + per_row)
    else:
        assert cycles == p.store_insn_cycles + y * p.write_handshake + x * y * (
            p.store_elem_cycles(hw))


def test_the_wide_store_counts_bus_words_and_bursts():
    """Rows start mid-word (1x8 on 128 bits: two elements a beat): a row's beats run from
    its first bus word to its last (the first and last pulses masked, GenVMECmdWide); a row
    crossing a 4 KB boundary is two bursts."""
    hw = replace(PRESETS["ultra96"], log_block_out=3)
    p = TimingProfile.for_hw(hw)
    fixed = p.store_insn_cycles
    burst = p.write_handshake + p.store_read_cycles
    # 3 elements from element 1: bytes 8..32, words 0 and 1.
    assert _store_cycles(hw, MemInsn(Opcode.STORE, MemId.OUT, 0, 1, 1, 3, 3)) == (
        fixed + burst + 2)
    # 2 rows of 3, 5 elements apart from element 1: words 0-1, then bytes 48..72, words 3-4.
    assert _store_cycles(hw, MemInsn(Opcode.STORE, MemId.OUT, 0, 1, 2, 3, 5)) == (
        fixed + 2 * burst + 4)
    # 5 elements from byte 4064: 2 words before the 4 KB boundary, 1 after it.
    start = (4096 - 32) // 8
    assert _store_cycles(hw, MemInsn(Opcode.STORE, MemId.OUT, 0, start, 1, 5, 5)) == (
        fixed + 2 * burst + 3)
    # The per-element rate the tuner's prior uses: half a beat.
    assert p.store_elem_cycles(hw) == 0.5


def test_deadlock_is_an_error_naming_the_instruction():
    insns = [MemInsn(Opcode.LOAD, MemId.INP, 0, 0, 1, 1, 1, pop_next=True), FinishInsn()]
    with pytest.raises(DeadlockError, match=r"instruction #0 \(LOAD INP, load module\) waits "
                                            r"on FIFO g2l"):
        time_program(_program(insns), DEFAULT)


def test_full_queue_stalls_fetch_and_a_blocked_head_deadlocks():
    # 3 stores wait on a compute push that sits behind them; with a 2-deep queue fetch
    # cannot reach it.
    store = MemInsn(Opcode.STORE, MemId.OUT, 0, 0, 1, 1, 1, pop_prev=True)
    insns = [store, store, store,
             GemmInsn(reset=True, uop_bgn=0, uop_end=1, push_next=True),
             GemmInsn(reset=True, uop_bgn=0, uop_end=1, push_next=True),
             GemmInsn(reset=True, uop_bgn=0, uop_end=1, push_next=True), FinishInsn()]
    ok = time_program(_program(insns), DEFAULT, P)
    assert ok.cycles > 0
    with pytest.raises(DeadlockError, match=r"fetch cannot hand instruction #2 \(STORE OUT\) "
                                            r"to the full store queue: its head, #0 \(STORE "
                                            r"OUT\), waits on FIFO g2s"):
        time_program(_program(insns), DEFAULT, replace(P, queue_depth=2))


def test_cli_json_trace_and_timeline(tmp_path, capsys):
    trace, png = tmp_path / "t.csv", tmp_path / "t.png"
    code = main(["simulate", "conv2d", "--json", "--trace", str(trace), "--timeline", str(png)])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert set(report) >= {"cycles", "seconds", "gops", "utilization", "modules", "bounds"}
    assert report["seconds"] == report["cycles"] / 100e6
    assert report["bounds"]["compute_floor"] == report["counters"]["gemm_counter"]
    assert set(report["modules"]) == {"load", "compute", "store"}
    rows = list(csv.DictReader(trace.open()))
    assert len(rows) == report["instructions"]["total"]
    assert max(int(r["end"]) for r in rows) == report["cycles"]
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_cli_bad_profile_is_one_line(tmp_path, capsys):
    f = tmp_path / "p.json"
    f.write_text("{")
    assert main(["simulate", "gemm", "--profile", str(f)]) == 2
    err = capsys.readouterr().err
    assert "not valid JSON" in err and len(err.strip().splitlines()) == 1


def test_ultra96_is_faster_than_pynq_in_seconds():
    wl = Conv2dWorkload(1, 14, 14, 256, 256, 3, 1, 1)
    s = tutorial_schedule(wl)
    pynq = time_program(lower(wl, s, DEFAULT).program, DEFAULT)
    u96 = time_program(lower(wl, s, PRESETS["ultra96"]).program, PRESETS["ultra96"])
    assert u96.cycles <= pynq.cycles
    assert u96.seconds(PRESETS["ultra96"]) < pynq.seconds(DEFAULT)
