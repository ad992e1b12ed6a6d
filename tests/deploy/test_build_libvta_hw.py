"""scripts/tvm014/build_libvta_hw.py without Java or Verilator: the design written as Scala
from a ``hardware_build.json`` (the Chisel Config; the decoder spec written into the
decoder's sources). The sources here are the stock ones' lines the script rewrites
(apache/tvm-vta 36a91576ed, hardware/chisel/src/main/scala/core/ISA.scala and
Decode.scala), cut to them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "tvm014"))

import build_libvta_hw  # noqa: E402

from simulator.hardware import DEFAULT, HardwareConfig  # noqa: E402
from vtatune.design import hardware_build  # noqa: E402

ISA = """trait ISAConstants {
  val C_UOP_BGN_BITS = 13
  val C_UOP_END_BITS = 14
  val C_ITER_BITS = 14
  val C_AIDX_BITS = 11
  val C_IIDX_BITS = 11
  val C_WIDX_BITS = 10
}
object ISA {
  private def alu(id: String): BitPat = {
    // TODO: move alu id next to task id
    val inst = dontCare(17) + aluId(id) + dontCare(105) + taskId("alu")
    instPat(inst)
  }
}
"""

DECODE = """class GemmDecode extends Bundle {
  val wgt_1 = UInt(C_WIDX_BITS.W)
  val op = UInt(OP_BITS.W)
}

class AluDecode extends Bundle {
  val alu_imm = UInt(C_ALU_IMM_BITS.W)
  val op = UInt(OP_BITS.W)
}

class UopDecode extends Bundle {
  val u2 = UInt(10.W)
  val u1 = UInt(11.W)
  val u0 = UInt(11.W)
}
"""

#: ultra96's recommended design (scripts/results/design.md): a decoder of its own.
ULTRA96 = HardwareConfig.from_target_model("ultra96_1x8x64_i8w8a32_10_16_18_18")


def _sources(tmp_path):
    core = tmp_path / "core"
    core.mkdir()
    (core / "ISA.scala").write_text(ISA)
    (core / "Decode.scala").write_text(DECODE)
    return tmp_path


def test_the_stock_design_changes_no_source(tmp_path):
    src = _sources(tmp_path)
    assert build_libvta_hw.apply_decoder(src, hardware_build(DEFAULT)["rtl_spec"]) == []
    assert (src / "core" / "ISA.scala").read_text() == ISA
    assert (src / "core" / "Decode.scala").read_text() == DECODE


def test_a_designs_decoder_is_written_from_its_spec(tmp_path):
    src = _sources(tmp_path)
    spec = json.loads(json.dumps(hardware_build(ULTRA96)["rtl_spec"]))  # as the file has it
    changed = build_libvta_hw.apply_decoder(src, spec)
    assert changed == ["C_UOP_BGN_BITS 13 -> 8", "C_UOP_END_BITS 14 -> 9",
                       "C_AIDX_BITS 11 -> 10", "C_IIDX_BITS 11 -> 13", "C_WIDX_BITS 10 -> 9",
                       "ALU dispatch pattern", "GemmDecode declaration",
                       "AluDecode declaration", "UopDecode declaration"]
    isa = (src / "core" / "ISA.scala").read_text()
    assert "val C_IIDX_BITS = 13\n" in isa and "val C_ITER_BITS = 14\n" in isa
    assert 'val inst = dontCare(25) + aluId(id) + dontCare(97) + taskId("alu")' in isa
    decode = (src / "core" / "Decode.scala").read_text()
    for bundle in ("GemmDecode", "AluDecode", "UopDecode"):
        body = decode.split(f"class {bundle} extends Bundle {{\n")[1].split("\n}")[0]
        assert body.splitlines() == ["  " + f["scala"] for f in
                                     spec["bundles"][bundle]["declaration"]]
    assert "  val u2 = UInt(9.W)\n  val u1 = UInt(13.W)\n  val u0 = UInt(10.W)" in decode


def test_a_source_the_spec_cannot_place_stops_the_build(tmp_path, capsys):
    src = _sources(tmp_path)
    (src / "core" / "ISA.scala").write_text(ISA.replace("val C_AIDX_BITS = 11\n", ""))
    with pytest.raises(SystemExit) as e:
        build_libvta_hw.apply_decoder(src, hardware_build(ULTRA96)["rtl_spec"])
    assert e.value.code == 2
    assert capsys.readouterr().err == ("build_libvta_hw: ISA.scala: no single `val C_AIDX_BITS "
                                       "= N` to set\n")


def test_the_config_is_the_designs_core_and_shell():
    assert build_libvta_hw.config_scala(None) == (
        "class BuildConfig extends Config(new CoreConfig ++ new PynqConfig)\n")
    scala = build_libvta_hw.config_scala(hardware_build(ULTRA96))
    assert ("case CoreKey => CoreParams(batch = 1, blockOut = 64, blockOutFactor = 1, "
            "blockIn = 8, inpBits = 8, wgtBits = 8, uopBits = 32, accBits = 32, outBits = 8, "
            "uopMemDepth = 256, inpMemDepth = 8192, wgtMemDepth = 512, accMemDepth = 1024, "
            "outMemDepth = 1024, instQueueEntries = 512)") in scala
    assert ("memParams = AXIParams(coherent = true, addrBits = 32, dataBits = 128, "
            "lenBits = 8, userBits = 1)") in scala
