"""``hardware_build.json``: the Chisel RTL spec of a design is complete (read back, every
instruction of lowered programs decodes to the program's fields with the spec's bundles,
spare fields and dispatch patterns, where the spec as first written did not), and the file
says the clock, the resources with their LUT margin, the shell, and the flow it covers."""

from dataclasses import replace

import pytest

from search_spaces import default_schedule
from simulator.chisel import (
    FLOW,
    STOCK_DECODER,
    decode_with_spec,
    decoder_check,
    rtl_spec,
    spec_mismatches,
    spec_patterns,
)
from simulator.hardware import DEFAULT, HardwareConfig
from simulator.isa import AluInsn, AluOp, encode_insn
from simulator.resources import LUT_PER_PRODUCT_RANGE, estimate
from vtatune.design import hardware_build
from vtatune.lowering import lower
from vtatune.workloads import deployed, get_workload

PICK = HardwareConfig.from_target_model("ultra96_1x8x64_i8w8a32_10_16_18_18")
DESIGNS = {
    "stock": DEFAULT,
    "1x8x64": PICK,
    "1x8x32": HardwareConfig.from_target_model("pynq_1x8x32_i8w8a32_15_15_18_17"),
    "1x32x16-128bit": HardwareConfig.from_target_model("ultra96_1x32x16_i8w8a32_10_17_18_17"),
    "1x16x32-128bit": HardwareConfig.from_target_model("ultra96_1x16x32_i8w8a32_15_16_19_17"),
}


def _programs(hw):
    """Lowered programs whose instructions use every bundle and every ALU op the RTL has:
    ResNet-18's C2 with the benchmark epilogue (shift, clip to [0, 127]: min 127, max 0),
    C5 (stride 2) with the deployed one (bias, ReLU, rounding add, shift, clip +-127), and
    the GEMM tutorial."""
    c2 = get_workload("conv2d", "resnet18.C2")
    c5 = replace(get_workload("conv2d", "resnet18.C5"), epilogue=deployed(8, relu=True))
    gemm = get_workload("gemm", "dense128")
    out = []
    for wl, bias in ((c2, False), (c5, True), (gemm, False)):
        out.append(lower(wl, default_schedule(wl, hw, bias=bias), hw, bias=bias).program)
    return out


def _ops(programs):
    return {(type(i).__name__, getattr(i, "alu_op", None), getattr(i, "imm", None))
            for p in programs for i in p.instructions}


@pytest.mark.parametrize("name", DESIGNS)
def test_every_instruction_decodes_with_the_spec(name):
    hw = DESIGNS[name]
    spec = hardware_build(hw)["rtl_spec"]
    programs = _programs(hw)
    ops = _ops(programs)
    assert {op for kind, op, _ in ops if kind == "AluInsn"} == \
        {AluOp.MIN, AluOp.MAX, AluOp.ADD, AluOp.SHR}
    assert ("AluInsn", AluOp.MIN, 127) in ops  # the clip the stock patterns never dispatch
    for program in programs:
        assert spec_mismatches(spec, hw, program.instructions, program.uops) == []


def _old_spec(hw, *, split_constants=False, move_spares=False, move_alu_patterns=False):
    """The RTL the spec as first written gave: the stock bundles with each width constant
    at the value ``constants_needed`` listed (``C_AIDX_BITS`` [acc, inp]: a constant holds
    one, the first), the spare fields where the stock declares them (``padding: {}``) and the
    stock dispatch patterns. Each flag mends one of the three defects."""
    mine = {name: width for fields in decoder_check(hw).layout.values()
            for name, _, width in fields}
    constants = {}
    for bundle, fields in STOCK_DECODER.items():
        if bundle == "UopDecode":
            continue
        for f in fields:
            if f.field is not None and f.width_from.startswith(("C_", "M_", "OP")):
                constants.setdefault(f.width_from, mine[f.field])
    new = rtl_spec(hw)
    bundles = {}
    for bundle, fields in STOCK_DECODER.items():
        if move_spares or bundle == "UopDecode":
            bundles[bundle] = new["bundles"][bundle]
            continue
        decl = []
        for f in reversed(fields):
            width = f.width if f.field is None or f.width_from in ("Bool", "literal") else \
                (mine[f.field] if split_constants else constants[f.width_from])
            decl.append({"chisel": f.chisel, "field": f.field, "width": width})
        bundles[bundle] = {"declaration": decl}
    dispatch = new["dispatch"] if move_alu_patterns else spec_patterns(DEFAULT)
    return {"bundles": bundles, "dispatch": dispatch}


def test_the_spec_as_first_written_misreads_the_pick():
    # Ultra96's pick, 1x8x64_i8w8a32_10_16_18_18, built as the first hardware_build.json
    # said: the acc fields land at bits 54-63 behind the stock empty_0, C_AIDX_BITS cannot
    # be both 10 and 13, and a clip with immediate 127 (bits 108-110 of the immediate) is
    # dispatched by no ALU pattern
    hw = PICK
    programs = _programs(hw)
    insns = [i for p in programs for i in p.instructions]
    old = _old_spec(hw)
    bad = spec_mismatches(old, hw, insns)
    assert bad
    assert any("dst_factor_out read" in line for line in bad)
    assert any("dispatched as nothing, not VMIN" in line for line in bad)
    # the spare field alone: widths split right, ALU patterns moved, empty_0 left in place
    only_spares = _old_spec(hw, split_constants=True, move_alu_patterns=True)
    gemm_alu = spec_mismatches(only_spares, hw, insns)
    assert gemm_alu and all("GEMM" in line or "ALU" in line for line in gemm_alu)
    # the ALU patterns alone: a clip's min 127 never dispatches, a shift by 8 runs as a min
    only_patterns = _old_spec(hw, split_constants=True, move_spares=True)
    clip = AluInsn(alu_op=AluOp.MIN, use_imm=True, imm=127, uop_end=1, iter_out=1, iter_in=1)
    word = int.from_bytes(encode_insn(clip, hw), "little")
    assert decode_with_spec(only_patterns, word)[0] == ()
    assert decode_with_spec(rtl_spec(hw), word)[0] == ("VMIN",)
    wrong = spec_mismatches(only_patterns, hw, insns)
    assert wrong and all("(ALU " in m and "dispatched as " in m for m in wrong)
    assert any("(ALU SHR " in m and "dispatched as ['VMIN'], not VSHX" in m for m in wrong)
    # one constant per width: the ALU's src fields take C_IIDX_BITS
    assert spec_mismatches(_old_spec(hw, split_constants=True, move_spares=True,
                                     move_alu_patterns=True), hw, insns) == []
    check = decoder_check(hw)
    assert check.constants()["C_AIDX_BITS"] == 10 and check.constants()["C_IIDX_BITS"] == 13
    assert check.retyped() == {"AluDecode.src_0": "C_IIDX_BITS",
                               "AluDecode.src_1": "C_IIDX_BITS"}
    assert check.padding()["GemmDecode"]["needed"] == [
        {"chisel": "empty_0", "offset": 63, "width": 1, "between": ["acc_0", "acc_1"]}]
    assert check.alu_op_offset == 100
    assert check.summary().endswith(" + padding + ALU patterns")


def test_the_stock_spec_is_the_stock_rtl():
    spec = rtl_spec(DEFAULT)
    assert not any(c["changed"] for c in spec["constants"].values())
    assert not any(b["changed"] for b in spec["bundles"].values())
    assert not any(p["changed"] for p in spec["dispatch"].values())
    for bundle, fields in STOCK_DECODER.items():
        decl = spec["bundles"][bundle]["declaration"]
        assert [(d["chisel"], d["width"]) for d in decl] == \
            [(f.chisel, f.width) for f in reversed(fields)]
    # the stock ALU pattern, as core/ISA.scala:128 writes it
    assert spec["dispatch"]["VADD"]["scala"] == \
        'dontCare(17) + aluId("add") + dontCare(105) + taskId("alu")'
    pick = rtl_spec(PICK)
    assert pick["dispatch"]["VADD"]["scala"] == \
        'dontCare(25) + aluId("add") + dontCare(97) + taskId("alu")'
    assert [d["scala"] for d in pick["bundles"]["GemmDecode"]["declaration"][:4]] == [
        "val empty_1 = UInt(10.W)", "val wgt_1 = UInt(C_WIDX_BITS.W)",
        "val wgt_0 = UInt(C_WIDX_BITS.W)", "val inp_1 = UInt(C_IIDX_BITS.W)"]
    # every constant has one value, and each declared field has its constant's width
    for b in pick["bundles"].values():
        for d in b["declaration"]:
            if d["width_from"] in pick["constants"]:
                assert pick["constants"][d["width_from"]]["value"] == d["width"]


def test_build_file_says_clock_resources_margin_shell_and_flow():
    build = hardware_build(PICK)
    assert build["flow"] == FLOW and "Chisel" in FLOW and "HLS" in FLOW
    assert build["clock_mhz"] == 333.0
    est = estimate(PICK)
    assert build["resources"] == est.to_dict()
    margin = build["resources"]["lut_margin"]
    assert margin["products_in_luts"] == 512 - 360 == 152
    assert margin["lut_per_product"] == list(LUT_PER_PRODUCT_RANGE) == [95.0, 181.0]
    assert margin["lut_percent"] == [93.4, 111.9] and not margin["fits_at_high"]
    assert margin["lut"][1] - margin["lut"][0] == round((181 - 95) * 152)
    shell = build["chisel"]["ShellParams"]
    assert shell["dataBits"] == shell["memParams"]["dataBits"] == 128
    assert shell["stock_shell"] == "PynqConfig" and not shell["stock_shell_has_bus_width"]
    assert shell["note"].startswith("no stock shell config has a 128-bit memory bus")
    assert shell["hostParams"] == {"coherent": False, "addrBits": 16, "dataBits": 32,
                                   "lenBits": 8, "userBits": 1}
    stock_shell = hardware_build(DEFAULT)["chisel"]["ShellParams"]
    assert stock_shell["stock_shell_has_bus_width"] and "note" not in stock_shell
    de10 = hardware_build(HardwareConfig(target="de10nano"))["chisel"]["ShellParams"]
    assert de10["stock_shell"] == "De10Config" and de10["memParams"]["lenBits"] == 4
    # the stock design builds its products in DSPs on ultra96: nothing to spare
    stock = hardware_build(HardwareConfig(target="ultra96"))["resources"]["lut_margin"]
    assert stock["products_in_luts"] == 0 and stock["lut_percent"][0] == \
        stock["lut_percent"][1] and stock["fits_at_high"]
