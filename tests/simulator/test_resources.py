"""The resource model against the Yosys anchor (stock pynq 1x16) and its structural rules."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

import simulator
from simulator.errors import ConfigError, EncodingError
from simulator.hardware import DEFAULT, PRESETS
from simulator.isa import check_encodable
from simulator.resources import (
    _MODULE_KEYS,
    DEVICES,
    MODULES,
    adder_bits,
    bank_blocks,
    coefficients,
    estimate,
)

ANCHOR = json.loads((Path(simulator.__file__).parent / "data" /
                     "vta_resources_yosys.json").read_text())["pynq_1x16"]


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
    # pynq has 220: 36 products in LUTs at the xc7-nodsp cost per product.
    pynq = {m.module: m for m in estimate(DEFAULT, "pynq").modules}
    per_product = (_anchor("xc7-nodsp", "gemm")["LUT"] - _anchor("xc7", "gemm")["LUT"]) / 256
    assert pynq["gemm"].dsp == 220
    assert pynq["gemm"].lut == round(_anchor("xc7", "gemm")["LUT"] + 36 * per_product)
    # Without DSPs at all the rule gives the nodsp synthesis' gemm LUTs.
    nodsp = replace(DEVICES["pynq"], dsp=0)
    assert {m.module: m for m in estimate(DEFAULT, nodsp).modules}["gemm"].lut == \
        _anchor("xc7-nodsp", "gemm")["LUT"]


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
    assert not big.fits and big.binding == "LUT"
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
