"""What building a design takes, written beside its ``vta_config.json``: the flow it covers
(VTA's Chisel RTL), the target clock, the resource estimate with its LUT margin, the
Chisel parameters (core and shell), the instruction and micro-op field layout, whether the
Chisel RTL's stock decoder reads it, and the complete decoder spec that does
(:mod:`simulator.chisel`); and the files of ``design --out``, written whole or not at
all."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from simulator.chisel import FLOW, core_params, decoder_check, rtl_spec
from simulator.hardware import HardwareConfig
from simulator.isa import Opcode, insn_layout, uop_layout
from simulator.resources import estimate
from vtatune.design._inner import DesignError
from vtatune.design._space import toolchain
from vtatune.records import write_whole

#: The file ``design --out`` writes per Pareto design beside ``vta_config.json``.
BUILD_FILE = "hardware_build.json"


def _fields(layout: tuple[tuple[str, int, int], ...]) -> list[dict[str, Any]]:
    return [{"field": name, "offset": off, "width": width} for name, off, width in layout]


def hardware_build(hw: HardwareConfig) -> dict[str, Any]:
    """What building ``hw`` on the Chisel RTL takes, as JSON: the flow it covers, the
    target clock, the resource estimate of its board (with ``lut_margin``: the products
    built in LUTs and the LUT share at both ends of the measured per-product cost), the
    ``CoreParams`` and the shell's parameters (which stock shell, whether one has this bus
    width), every instruction field's offset and width per opcode and the micro-op's,
    whether the stock decoder reads them (and, if not, every field it reads elsewhere, with
    the Chisel source line), the decoder spec that reads them (``rtl_spec``: constants,
    bundle declarations with their spare fields, dispatch patterns) and the TVM toolchain
    change, if any.

    Example:
        >>> from simulator.hardware import DEFAULT
        >>> build = hardware_build(DEFAULT)
        >>> build["decoder"]["summary"], build["chisel"]["CoreParams"]["inpMemDepth"]
        ('stock', 2048)
        >>> build["layout"]["uop"]
        [{'field': 'dst', 'offset': 0, 'width': 11}, {'field': 'src', 'offset': 11, 'width': 11}, \
{'field': 'wgt', 'offset': 22, 'width': 10}]
    """
    layout = {op.name: _fields(insn_layout(hw, op)) for op in Opcode}
    layout["uop"] = _fields(uop_layout(hw))
    return {"bitstream": hw.bitstream, "target_model": hw.target_model, "flow": FLOW,
            "clock_mhz": hw.clock_mhz, "vta_config": hw.to_dict(),
            "resources": estimate(hw).to_dict(), "chisel": core_params(hw),
            "decoder": decoder_check(hw).to_dict(), "rtl_spec": rtl_spec(hw),
            "layout": layout, "tvm_toolchain": toolchain(hw)}


def build_file_text(hw: HardwareConfig) -> str:
    return json.dumps(hardware_build(hw), indent=1) + "\n"


def write_atomically(files: dict[Path, bytes], what: str) -> None:
    """:func:`vtatune.records.write_whole`, its failure as one DesignError line."""
    try:
        write_whole(files)
    except OSError as exc:
        raise DesignError(f"cannot write {what} to {exc.filename}: {exc.strerror or exc}") \
            from None
