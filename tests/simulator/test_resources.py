"""The resource model against the Yosys anchor (stock pynq 1x16) and its structural rules."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

import simulator
from simulator.errors import ConfigError, EncodingError
from simulator.hardware import DEFAULT, PRESETS, HardwareConfig
from simulator.isa import check_encodable
from simulator.resources import (
    _MODULE_KEYS,
    DEVICES,
    LUT_PER_PRODUCT,
    MODULES,
    adder_bits,
    bank_blocks,
    coefficients,
    estimate,
    gemm_registers,
    tree_pipe_bits,
)

ANCHOR = json.loads((Path(simulator.__file__).parent / "data" /
                     "vta_resources_yosys.json").read_text())["pynq_1x16"]
# Yosys synthesis of VTA's GEMM datapath per shape and of int8 products in LUTs
# (scripts/synth_multiplier.py).
SYNTH = json.loads((Path(__file__).resolve().parents[2] / "scripts" / "results" /
                    "synth_multiplier.json").read_text())
SYNTH_023 = next(r for r in SYNTH["runs"].values() if r["version"].startswith("Yosys 0.23"))
# Devices with DSPs for every product (Yosys maps every product to a DSP whatever the part)
# and without any.
ALL_DSP = {"xc7": replace(DEVICES["pynq"], dsp=10**6),
           "xcup": replace(DEVICES["ultra96"], dsp=10**6),
           "xc7-nodsp": replace(DEVICES["pynq"], dsp=0)}


def _shape(name):
    b, bi, bo = (int(x) for x in name.split("x"))
    return HardwareConfig(log_batch=b.bit_length() - 1, log_block_in=bi.bit_length() - 1,
                          log_block_out=bo.bit_length() - 1)


def _module(hw, device, name):
    return {m.module: m for m in estimate(hw, device).modules}[name]


def _anchor(family, module):
    return ANCHOR[family]["per_module"][_MODULE_KEYS[module]]


@pytest.mark.parametrize("family, board", [("xc7", "pynq"), ("xcup", "ultra96")])
def test_block_ram_rules_reproduce_the_anchor_exactly(family, board):
    # Block RAM counts come from the mapping rules alone (nothing fitted): equal per module.
    est = estimate(DEFAULT, board)
    for m in est.modules:
        a = _anchor(family, m.module)
        assert (m.ramb36, m.ramb18) == (a["RAMB36"], a["RAMB18"]), m.module
    assert est.ramb36 == ANCHOR[family]["total"]["RAMB36"]


def test_dsp_rule_one_product_per_dsp_and_spill_to_luts():
    # ultra96 has 360 DSPs: all 256 products in DSPs, as Yosys mapped them.
    assert estimate(DEFAULT, "ultra96").dsp == _anchor("xcup", "gemm")["DSP"] == 256
    # pynq has 220: 36 products in LUTs at the measured cost per product, each keeping its
    # 16 operand flip-flops (in a DSP48E1 they sit in the DSP).
    pynq = _module(DEFAULT, "pynq", "gemm")
    assert pynq.dsp == 220
    assert pynq.lut == round(_anchor("xc7", "gemm")["LUT"] + 36 * LUT_PER_PRODUCT)
    assert pynq.ff == _anchor("xc7", "gemm")["FF"] + 36 * 16
    # Without DSPs at all: every product's operand registers, the no-DSP synthesis' FFs.
    assert _module(DEFAULT, ALL_DSP["xc7-nodsp"], "gemm").ff == _anchor("xc7-nodsp", "gemm")["FF"]


def test_lut_per_product_is_the_measured_figure():
    # The constant is the figure scripts/synth_multiplier.py recorded, and that figure is
    # the Booth-recoded marginal cost of a product in VTA's DotProduct(16) (LUTs without
    # DSPs minus with, over 16) of the Yosys run that has the booth pass.
    assert LUT_PER_PRODUCT == SYNTH["model"]["lut_per_product"]
    booth = next(r for r in SYNTH["runs"].values() if r["booth_pass"])
    dot = booth["dot16"]
    assert LUT_PER_PRODUCT == (dot["xc7-nodsp-booth"]["LUT"] - dot["xc7"]["LUT"]) / 16
    assert booth["per_product"]["marginal_booth"] == LUT_PER_PRODUCT
    # Booth recoding is cheaper than the plain array in the same Yosys; Yosys 0.23 (the
    # anchor's) reproduces the anchor's no-DSP cost per product within one LUT.
    assert LUT_PER_PRODUCT < booth["per_product"]["marginal"]
    anchor_cost = (_anchor("xc7-nodsp", "gemm")["LUT"] - _anchor("xc7", "gemm")["LUT"]) / 256
    assert abs(SYNTH_023["per_product"]["marginal"] - anchor_cost) <= 1


@pytest.mark.parametrize("family, board", [("xc7", "pynq"), ("xcup", "ultra96"),
                                           ("xc7-nodsp", None)])
def test_gemm_flip_flops_counted_from_the_chisel_match_the_anchor(family, board):
    # No coefficient: operand, pipeline, bypass and control registers of TensorGemm.scala
    # give the anchor's GEMM FFs exactly on every family (xc7 folds the operand registers
    # into the DSP48E1s, xcup does not).
    assert gemm_registers(DEFAULT) == {"operands": 4096, "tree": 1216, "bypass": 512,
                                       "control": 239}
    assert _module(DEFAULT, ALL_DSP[family], "gemm").ff == _anchor(family, "gemm")["FF"]
    if board:
        assert estimate(DEFAULT, board).ff == ANCHOR[family]["total"]["FF"] + \
            (36 * 16 if board == "pynq" else 0)  # pynq: 36 products in LUTs


@pytest.mark.parametrize("shape", sorted(SYNTH_023["gemm_datapath"]))
def test_gemm_flip_flops_per_shape_against_yosys(shape):
    # Yosys 0.23 (the anchor's) on VTA's GEMM datapath transcribed module for module: the
    # model's GEMM FFs less the control equal the synthesis on every family. The old rule
    # (FFs in proportion to the adder bits) missed 1x8x32 by 36% on xc7 (2,622 - 239 against
    # 5,376): its 32 trees of 8 products pipe their first layer (136 bits each), the stock's
    # 16 trees of 16 their third (76).
    hw = _shape(shape)
    for family, rec in SYNTH_023["gemm_datapath"][shape].items():
        model = _module(hw, ALL_DSP[family], "gemm").ff - gemm_registers(hw)["control"]
        assert model == rec["FF"], (shape, family)
        assert rec["DSP"] == (0 if family == "xc7-nodsp" else hw.macs_per_cycle)


def test_tree_pipeline_registers_follow_the_dot_product_depth():
    assert [tree_pipe_bits(bi) for bi in (8, 16, 32, 64)] == [136, 76, 80, 84]
    one = SYNTH_023["dot16"]
    assert one["xc7"]["FF"] == tree_pipe_bits(16)  # operands in the DSP48E1s
    assert one["xc7-nodsp"]["FF"] == tree_pipe_bits(16) + 16 * 16
    mac = SYNTH_023["mac"]
    assert (mac["xc7"]["FF"], mac["xc7-nodsp"]["FF"]) == (0, 16)


def test_alu_flip_flops_per_lane():
    # Each lane: two registered acc-bit operands, a valid bit and the saved source word.
    u96 = DEVICES["ultra96"]
    stock = _module(DEFAULT, u96, "alu").ff
    assert stock == _anchor("xcup", "alu")["FF"]
    wide = replace(DEFAULT, log_block_in=3, log_block_out=5)
    assert _module(wide, u96, "alu").ff - stock == 16 * (3 * 32 + 1)


def test_tensorload_lut_law_within_its_fit_residual():
    # One law a + b * element bits for the three TensorLoad instances (2 parameters, 3
    # points): the largest relative residual is the stated tolerance, 26 %.
    est = {m.module: m for m in estimate(DEFAULT, "ultra96").modules}
    for m in ("load_inp", "load_wgt", "load_acc"):
        a = _anchor("xcup", m)["LUT"]
        assert abs(est[m].lut - a) / a <= 0.26, m
    assert 0 < coefficients("xcup").load_per_bit < 2  # about one LUT per element bit
    total = ANCHOR["xcup"]["total"]["LUT"]
    assert abs(estimate(DEFAULT, "ultra96").lut - total) / total <= 0.02


def test_logic_scales_with_structure():
    hw8 = replace(DEFAULT, log_block=3, log_wgt_buff_size=16, log_inp_buff_size=14,
                  log_acc_buff_size=16)
    e16 = {m.module: m for m in estimate(DEFAULT, "ultra96").modules}
    e8 = {m.module: m for m in estimate(hw8, "ultra96").modules}
    assert e8["alu"].lut * 2 == pytest.approx(e16["alu"].lut, abs=1)  # half the lanes
    assert e16["alu"].ff - e8["alu"].ff == 8 * (3 * 32 + 1)
    assert e8["gemm"].dsp * 4 == e16["gemm"].dsp
    assert adder_bits(DEFAULT) == 16 * (8 * 17 + 4 * 18 + 2 * 19 + 20 + 32)
    for m in ("load_uop", "fetch", "vme", "other"):
        assert e8[m] == e16[m]  # the fixed shell


def test_aspect_ratios():
    pynq, de10 = DEVICES["pynq"], DEVICES["de10nano"]
    assert bank_blocks(128, 2048, pynq) == (8, 0)  # 2Kx16
    assert bank_blocks(64, 512, pynq) == (1, 0)  # 512x64 SDP
    assert bank_blocks(32, 256, pynq) == (0, 1)  # half empty: one RAMB18 512x32
    assert bank_blocks(128, 2048, de10) == (32, 0)  # M10K 256 Kbit / 8 Kbit
    assert bank_blocks(64, 64, de10) == (2, 0)  # 256x32 x2


def test_stock_on_every_board_and_over_budget_reasons():
    for board in DEVICES:
        assert estimate(DEFAULT, board).fits
    big = estimate(PRESETS["1x32"], "pynq")
    # 804 products in LUTs (238% of the LUTs) and 368 RAMB36 (263%)
    assert not big.fits and big.binding == "BRAM"
    assert big.over_budget[0].startswith("LUT ") and "> 53200 on xc7z020" in big.over_budget[0]
    assert set(estimate(DEFAULT).to_dict()["percent"]) == {"LUT", "FF", "BRAM", "DSP"}
    assert tuple(m.module for m in estimate(DEFAULT).modules) == MODULES
    with pytest.raises(ConfigError, match="unknown board 'zcu9'"):
        estimate(DEFAULT, "zcu9")


def test_encodable_configs():
    check_encodable(DEFAULT)
    check_encodable(PRESETS["4x8"])
    with pytest.raises(EncodingError, match=r"micro-op fields need 33 bits \(acc 12"):
        check_encodable(replace(DEFAULT, log_acc_buff_size=18))
    with pytest.raises(EncodingError, match="instruction layout needs"):
        check_encodable(replace(DEFAULT, log_uop_buff_size=16))
