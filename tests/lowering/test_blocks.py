"""BLOCK_IN != BLOCK_OUT: the config keys, the output layout the next layer loads, bit-exact
lowering against numpy, the store_layout rule, encodability and the resource rules."""

from __future__ import annotations

import json
import random
from dataclasses import replace

import numpy as np
import pytest

from search_spaces import get_template
from simulator.errors import ConfigError, EncodingError
from simulator.functional import run
from simulator.hardware import DEFAULT, HardwareConfig
from simulator.isa import MemId, check_encodable
from simulator.resources import DEVICES, adder_bits, estimate, memory_banks
from vtatune.errors import IllegalSchedule
from vtatune.lowering import check, context, lower, packed_inputs, shape_rules
from vtatune.schedule import Schedule
from vtatune.scoring import verify
from vtatune.workloads import (
    Conv2dTransposeWorkload,
    Conv2dWorkload,
    GemmWorkload,
    GroupConv2dWorkload,
    random_operands,
    reference_output,
)

# BLOCK_IN = 2 x BLOCK_OUT (the output is stored packed by BLOCK_IN) and the reverse.
IN32 = HardwareConfig(target="ultra96", log_block_in=5, log_block_out=4,
                      log_inp_buff_size=16, log_wgt_buff_size=19)
OUT32 = HardwareConfig(target="ultra96", log_block_in=4, log_block_out=5)
IN16_OUT4 = HardwareConfig(log_block_in=4, log_block_out=2, log_wgt_buff_size=16,
                           log_acc_buff_size=15)
IN4_OUT16 = HardwareConfig(log_block_in=2, log_block_out=4, log_inp_buff_size=13,
                           log_wgt_buff_size=16)


def test_config_keys_round_trip_and_name_the_shape(tmp_path):
    assert IN32.block_in == 32 and IN32.block_out == 16 and not IN32.tvm_stock_blocks
    assert IN32.bitstream == "1x32x16_i8w8a32_15_16_19_17"
    assert OUT32.bitstream == "1x16x32_i8w8a32_15_15_18_17"
    assert (IN32.inp_elem_bytes, IN32.wgt_elem_bytes, IN32.acc_elem_bytes,
            IN32.out_elem_bytes) == (32, 512, 64, 16)
    d = IN32.to_dict()
    assert d["LOG_BLOCK_IN"] == 5 and d["LOG_BLOCK_OUT"] == 4 and "LOG_BLOCK" not in d
    path = tmp_path / "vta_config.json"
    path.write_text(json.dumps(d))
    assert HardwareConfig.from_json(path) == IN32
    # Equal blocks keep TVM's single key, so stock configs and logs read as before.
    assert "LOG_BLOCK" in DEFAULT.to_dict() and "LOG_BLOCK_IN" not in DEFAULT.to_dict()
    assert DEFAULT.tvm_stock_blocks and DEFAULT.bitstream == "1x16_i8w8a32_15_15_18_17"
    both = {**DEFAULT.to_dict(), "LOG_BLOCK_IN": 4, "LOG_BLOCK_OUT": 4}
    assert HardwareConfig.from_dict(both) == DEFAULT
    # log_block= means both, in the constructor and in replace
    assert HardwareConfig(log_block=3).block_in == HardwareConfig(log_block=3).block_out == 8
    assert replace(IN32, log_block=4) == replace(DEFAULT, target="ultra96",
                                                 log_inp_buff_size=16, log_wgt_buff_size=19)


@pytest.mark.parametrize("change, message", [
    ({"LOG_BLOCK_IN": 5}, "LOG_BLOCK_IN: 5 contradicts LOG_BLOCK 4"),
    ({"LOG_BLOCK_OUT": 7}, "LOG_BLOCK_OUT: 7 contradicts LOG_BLOCK 4"),
])
def test_contradicting_block_keys_are_refused(change, message):
    with pytest.raises(ConfigError, match=message):
        HardwareConfig.from_dict({**DEFAULT.to_dict(), **change})


def test_missing_block_key_names_both_ways():
    data = {k: v for k, v in IN32.to_dict().items() if k != "LOG_BLOCK_OUT"}
    with pytest.raises(ConfigError, match=r"LOG_BLOCK_OUT: missing key .*\(or LOG_BLOCK"):
        HardwareConfig.from_dict(data)
    with pytest.raises(ConfigError, match="LOG_BLOCK_OUT: must be an integer in"):
        HardwareConfig.from_dict({**IN32.to_dict(), "LOG_BLOCK_OUT": 9})


def test_output_is_packed_as_the_next_layer_loads_it():
    """BLOCK_IN = 2 x BLOCK_OUT: the DRAM output is NCHW{BLOCK_IN}c, the next layer's input."""
    wl = Conv2dWorkload(1, 8, 8, 64, 64, 3, 1, 1)
    s = Schedule(tile_h=4, tile_w=8, tile_co=4)
    lowered = lower(wl, s, IN32, bias=True)
    ops = random_operands(wl, bias=True, seed=5)
    out = run(lowered.program, IN32, packed_inputs(wl, ops, IN32)) \
        .machine.read_tensor(lowered.program, "output")
    assert out.shape == (1, 2, 8, 8, 1, 32)
    want = reference_output(wl, ops)  # NCHW
    packed = want.reshape(1, 2, 32, 8, 8).transpose(0, 1, 3, 4, 2)[:, :, :, :, None, :]
    np.testing.assert_array_equal(out, packed)
    # ... by contiguous stores: the ACC tile interleaves the two BLOCK_OUT blocks of a pixel
    # as DRAM does, so each BLOCK_IN block of a tile of 4 full rows is one run of 4 x 8
    # pixels x 2 blocks (rows 128 apart: the next BLOCK_IN block's plane).
    stores = [i for i in lowered.program.instructions
              if getattr(i, "mem", None) == MemId.OUT and not i.is_nop]
    assert [(i.y_size, i.x_size, i.x_stride) for i in stores] == [(2, 64, 128)] * 2
    # The bias add walks (co // 2, pixels) in its two loops and co % 2 in two micro-ops.
    add = lowered.plan.alu_kernels(0)[1]
    assert [(u.dst, u.src) for u in add.uops] == [(0, 128), (1, 129)]
    assert [(lp.extent, lp.dst, lp.src) for lp in add.loops] == [(2, 64, 2), (32, 2, 0)]


def test_store_layout_rule_names_the_numbers():
    wl = Conv2dWorkload(1, 8, 8, 64, 64, 3, 1, 1)
    with pytest.raises(IllegalSchedule) as exc:
        check(wl, Schedule(tile_h=4, tile_w=8, tile_co=1), IN32)
    assert exc.value.rule == "store_layout" and "tile_co a multiple of 2" in str(exc.value)
    batch2 = replace(IN32, log_batch=1, log_inp_buff_size=17)
    with pytest.raises(IllegalSchedule) as exc:
        check(Conv2dWorkload(2, 8, 8, 64, 64, 3, 1, 1), Schedule(tile_co=2), batch2)
    assert exc.value.rule == "store_layout" and "BATCH 2 with BLOCK_IN 32 > BLOCK_OUT 16" \
        in str(exc.value)
    # a group_conv2d tile over several groups (2 output blocks per group here)
    grouped = GroupConv2dWorkload(1, 6, 6, 128, 128, 3, 1, 1, 4)
    with pytest.raises(IllegalSchedule) as exc:
        check(grouped, Schedule(tile_h=6, tile_w=6, tile_co=4), IN32)
    assert exc.value.rule == "store_layout" and "spans 2 groups" in str(exc.value)
    check(grouped, Schedule(tile_h=6, tile_w=6, tile_co=2), IN32)
    # BLOCK_OUT > BLOCK_IN keeps NCHW{BLOCK_OUT}c out (any tile_co) and loads it so in
    check(wl, Schedule(tile_h=4, tile_w=8, tile_co=1, tile_ci=2), OUT32)
    with pytest.raises(IllegalSchedule) as exc:
        check(wl, Schedule(tile_h=4, tile_w=8, tile_co=1, tile_ci=1), OUT32)
    assert exc.value.rule == "load_layout" and "tile_ci a multiple of 2" in str(exc.value)
    with pytest.raises(IllegalSchedule) as exc:
        shape_rules(context(Conv2dWorkload(1, 8, 8, 16, 64, 3, 1, 1), OUT32))
    assert exc.value.rule == "load_layout" and "(got 1 blocks of 16)" in str(exc.value)


def test_input_is_loaded_as_the_previous_layer_stored_it():
    """BLOCK_OUT = 2 x BLOCK_IN: the DRAM input is NCHW{BLOCK_OUT}c (the previous layer's
    output), loaded by contiguous interleaved rows: a padded 3x3 window of 4 + 2 rows x 8 + 2
    columns of one BLOCK_OUT block is rows of 2 x 8 elements with 2 x 1 pad elements a side."""
    wl = Conv2dWorkload(1, 8, 8, 64, 64, 3, 1, 1)
    lowered = lower(wl, Schedule(tile_h=4, tile_w=8, tile_ci=2), OUT32)
    ops = random_operands(wl, bias=False, seed=2)
    data = packed_inputs(wl, ops, OUT32)["data"]
    assert data.shape == (1, 2, 8, 8, 1, 32)  # NCHW32c
    np.testing.assert_array_equal(data[0, 1, 3, 5, 0], ops.data[0, 32:64, 3, 5])
    loads = [i for i in lowered.program.instructions
             if getattr(i, "mem", None) == MemId.INP and not i.is_nop]
    assert {(i.x_size, i.x_stride, i.x_pad_0 + i.x_pad_1) for i in loads} == {(16, 16, 4)}
    assert verify(lowered).ok


FAST = [
    (Conv2dWorkload(1, 14, 14, 64, 64, 3, 1, 1), IN32),
    (Conv2dWorkload(1, 14, 14, 64, 128, 1, 0, 2), IN32),
    (Conv2dWorkload(2, 7, 7, 64, 64, 3, 1, 1), IN32),     # two batch blocks of BATCH 1
    (Conv2dWorkload(1, 14, 14, 64, 64, 3, 1, 1), OUT32),
    (GemmWorkload(1, 256, 128), IN32),
    (GemmWorkload(4, 128, 256), OUT32),
    (GroupConv2dWorkload(1, 6, 6, 64, 128, 3, 1, 1, 2), IN32),
    (Conv2dWorkload(1, 6, 6, 32, 32, 3, 1, 1), IN16_OUT4),  # k = 4 blocks per BLOCK_IN
    (Conv2dWorkload(1, 6, 6, 64, 32, 3, 1, 1), IN4_OUT16),  # k = 4 blocks per BLOCK_OUT
    (GroupConv2dWorkload(1, 6, 6, 128, 128, 3, 1, 1, 2), OUT32),
    (Conv2dTransposeWorkload(1, 4, 4, 64, 32, 4, 1, 2, 0), OUT32),
]


@pytest.mark.parametrize("wl,hw", FAST, ids=lambda x: getattr(x, "describe", lambda: "")()[:40]
                         or x.bitstream)
def test_random_legal_schedules_are_bit_exact(wl, hw):
    rng = random.Random(wl.describe() + hw.bitstream)
    for bias in (False, True):
        tpl = get_template(wl, hw, bias=bias, tune_store=True)
        legal = list(tpl.legal_configs())
        assert legal
        for config in rng.sample(legal, min(3, len(legal))):
            s = tpl.to_schedule(config)
            v = verify(lower(wl, s, hw, bias=bias, verify_encoding=True),
                       seed=rng.randrange(1 << 16))
            assert v.ok, (wl.describe(), hw.bitstream, s.short(), v.mismatches)


def test_threads_and_element_stores_are_bit_exact():
    wl = Conv2dWorkload(2, 8, 8, 64, 128, 3, 1, 1)
    for s in (Schedule(tile_h=4, tile_w=8, tile_co=2, oc_nthread=2, h_nthread=2),
              Schedule(tile_b=2, tile_h=2, tile_w=4, tile_co=4, tile_ci=2, store="element",
                       reuse=True, outer_order="cwhb")):
        assert verify(lower(wl, s, IN32, bias=True)).ok, s.short()


def test_encodability_follows_both_blocks():
    check_encodable(IN32)
    check_encodable(OUT32)
    # 1x32x16 with the stock buffers: INP 1024 and WGT 512 deep leave room for ACC 2^12.
    check_encodable(replace(IN32, log_inp_buff_size=15, log_wgt_buff_size=18,
                            log_acc_buff_size=18))
    # The micro-op's index widths follow each buffer's element: acc BLOCK_OUT x 4 bytes,
    # inp BLOCK_IN bytes, wgt BLOCK_IN x BLOCK_OUT bytes.
    with pytest.raises(EncodingError, match=r"micro-op fields need 33 bits \(acc 10 \+ inp 14 "
                                            r"\+ wgt 9\)"):
        check_encodable(replace(OUT32, log_inp_buff_size=18))


def test_resource_rules_follow_each_block():
    """wgt: BLOCK_OUT banks of BLOCK_IN bytes; inp BATCH x BLOCK_IN; acc/out BATCH x
    BLOCK_OUT; BATCH x BLOCK_OUT adder trees over BLOCK_IN products; B*BI*BO products."""
    banks = memory_banks(IN32)
    assert banks["load_wgt"] == (16, 32 * 8, IN32.wgt_depth)
    assert banks["load_inp"] == (1, 32 * 8, IN32.inp_depth)
    assert banks["load_acc"] == (1, 16 * 32, IN32.acc_depth)
    assert banks["store"] == (1, 16 * 8, IN32.out_depth)
    # trees of 32 products: 16+17+...+20 bit levels, into 32-bit accumulators
    tree32 = 16 * 17 + 8 * 18 + 4 * 19 + 2 * 20 + 1 * 21
    tree16 = 8 * 17 + 4 * 18 + 2 * 19 + 1 * 20
    assert adder_bits(IN32) == 16 * (tree32 + 32)
    assert adder_bits(OUT32) == 32 * (tree16 + 32)
    u96 = DEVICES["ultra96"]
    for hw in (IN32, OUT32):
        est = estimate(hw, u96)
        assert est.dsp == u96.dsp == 360  # 512 products: 152 spill to LUTs
        alu = next(m for m in est.modules if m.module == "alu")
        assert alu.lut == round(estimate(DEFAULT, u96).modules[MODULE_ALU].lut
                                * hw.block_out / 16)


MODULE_ALU = 1  # simulator.resources.MODULES order: gemm, alu, ...
