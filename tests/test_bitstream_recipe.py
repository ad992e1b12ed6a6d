"""docs/bitstream.md, the recipe from ``hardware_build.json`` to a bitstream, as far as it can
be checked without Vivado or Quartus (issue 41 item 9): the keys it tells to read are the
JSON's, for every board and for a design with a changed decoder; the tvm-vta files and
lines it cites are the ones ``simulator/chisel.py`` recorded from tvm-vta's sources at the
commit the JSON names; its clocks are the JSON's; and its one claim about the stock RTL (only
``uopMemDepth`` differs) holds against tvm-vta's ``CoreConfig`` as recorded here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from simulator.hardware import HardwareConfig
from tests._docs import table_after
from vtatune.design import hardware_build

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "bitstream.md"
RECORDED = (ROOT / "simulator" / "chisel.py").read_text()

#: tvm-vta's stock ``CoreConfig`` (hardware/chisel/src/main/scala/core/Configs.scala:32-47 at
#: d4a15f627d), read through the search tools when the recipe was written.
TVM_VTA_CORE_CONFIG = {
    "batch": 1, "blockOut": 16, "blockOutFactor": 1, "blockIn": 16, "inpBits": 8,
    "wgtBits": 8, "uopBits": 32, "accBits": 32, "outBits": 8, "uopMemDepth": 2048,
    "inpMemDepth": 2048, "wgtMemDepth": 1024, "accMemDepth": 2048, "outMemDepth": 2048,
    "instQueueEntries": 512}

DESIGNS = ["pynq", "ultra96", "de10nano", "ultra96_1x8x64_i8w8a32_10_16_18_18"]


def _hw(name: str) -> HardwareConfig:
    return HardwareConfig.from_target_model(name) if "_" in name else \
        HardwareConfig.resolve(name)


@pytest.mark.parametrize("design", DESIGNS)
def test_each_key_the_recipe_reads_is_in_the_json(design):
    build = hardware_build(_hw(design))
    rows = table_after(PAGE, "| `hardware_build.json` | file of tvm-vta | what to write |")
    assert len(rows) == 6
    for key, *_ in rows:
        node = build
        for part in key.strip("`").split("."):
            node = node[part]
    spec = build["rtl_spec"]
    assert all({"value", "changed", "source"} <= c.keys() for c in spec["constants"].values())
    assert all({"source", "changed", "declaration"} <= b.keys()
               for b in spec["bundles"].values())
    assert all("scala" in d for b in spec["bundles"].values() for d in b["declaration"])
    shell = build["chisel"]["ShellParams"]
    assert {"stock_shell", "stock_shell_source"} <= shell.keys()
    assert shell["memParams"]["dataBits"] == shell["dataBits"]
    assert f"`{shell['stock_shell_source']}`" in PAGE.read_text()


def test_the_files_and_lines_cited_are_the_recorded_ones():
    cited = re.findall(r"`((?:core|shell|vta)/\w+\.scala:\d+(?:-\d+)?)`", PAGE.read_text())
    assert len(cited) >= 7
    assert [c for c in cited if c not in RECORDED] == []


def test_the_commit_is_the_jsons():
    build = hardware_build(_hw("pynq"))
    commit = re.search(r"apache/tvm-vta@([0-9a-f]{40})", build["rtl_spec"]["source"])[1]
    assert f"checkout {commit}" in PAGE.read_text()


def test_the_clocks_are_the_jsons():
    text = " ".join(PAGE.read_text().split())
    said = re.search(r"pynq (\d+), ultra96 (\d+), DE10-Nano (\d+) MHz", text).groups()
    assert [int(mhz) for mhz in said] == [
        hardware_build(_hw(board))["clock_mhz"] for board in ("pynq", "ultra96", "de10nano")]


def test_only_the_uop_depth_of_the_stock_design_differs_from_tvm_vtas():
    core = hardware_build(_hw("pynq"))["chisel"]["CoreParams"]
    assert {k for k in core if core[k] != TVM_VTA_CORE_CONFIG[k]} == {"uopMemDepth"}
    text = " ".join(PAGE.read_text().split())
    assert f"`uopMemDepth = {TVM_VTA_CORE_CONFIG['uopMemDepth']}`" in text
    assert f"gives {core['uopMemDepth']}" in text
