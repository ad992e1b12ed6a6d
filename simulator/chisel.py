"""What building a configuration on VTA's Chisel RTL takes: its core and shell parameters,
and whether the RTL's stock instruction decoder reads the instructions vtatune encodes for it.

VTA's Chisel design (``apache/tvm-vta``, ``hardware/chisel``) takes the tensor shapes and the
scratchpad depths as parameters (``CoreParams``, ``core/Core.scala:27-43``; the memory bus
width is the shell's ``memParams.dataBits``, ``shell/Configs.scala:38``), and its datapath
elaborates unchanged with BLOCK_IN != BLOCK_OUT. Its decoder does not follow them: the
instruction bundles (``core/Decode.scala``) take their field widths from fixed constants
(``core/ISA.scala:31-51``) and the micro-op bundle has literal widths 11/11/10 (acc/inp/wgt
index, ``Decode.scala:117-121``): the field layout of the stock 1x16_i8w8a32_15_15_18_17
(a 2048-deep INP and ACC, a 1024-deep WGT, 8192 micro-ops). vtatune's encoder, like TVM's
``hw_spec.h``, derives each index field's width from its buffer's depth
(:func:`simulator.isa.insn_layout`, :func:`simulator.isa.uop_layout`), so a configuration with
other depths moves fields that the stock decoder reads at fixed bits.

:data:`STOCK_DECODER` transcribes the bundles (file:line of every field and width, at
:data:`SOURCE`), least significant field first (a Chisel ``Bundle`` lists its fields most
significant first; ``asTypeOf`` packs them with no gaps, so each ``empty_0`` is explicit
padding). :func:`decoder_check` compares a configuration's layout with it, field by field.

:func:`rtl_spec` is what the decoder needs to read a configuration's programs, derived from
the same field table the encoder uses: every width constant with one value each, every
bundle's declaration with its spare fields where ``asTypeOf`` needs them, and the dispatch
patterns (the ALU ones test ``alu_op``'s bits, wherever the layout puts them).
:func:`spec_mismatches` checks a spec by reading a program's instructions and micro-ops
with it as the RTL would; :func:`shell_params` names the stock shell a build starts from.

Example:
    >>> from simulator.hardware import DEFAULT, HardwareConfig
    >>> decoder_check(DEFAULT).summary()
    'stock'
    >>> hw = HardwareConfig.from_target_model("ultra96_1x16x32_i8w8a32_15_16_19_17")
    >>> decoder_check(hw).summary()
    'needs acc 11->10, inp 11->12 bits'
    >>> core_params(hw)["CoreParams"]["blockOut"], core_params(hw)["ShellParams"]["dataBits"]
    (32, 128)
    >>> pick = HardwareConfig.from_target_model("ultra96_1x8x64_i8w8a32_10_16_18_18")
    >>> rtl_spec(pick)["dispatch"]["VMIN"]["scala"]
    'dontCare(25) + aluId("minpool") + dontCare(97) + taskId("alu")'
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from simulator.hardware import DEFAULT, HardwareConfig
from simulator.isa import (
    AluOp,
    Instruction,
    MemId,
    Opcode,
    Uop,
    describe,
    encode_insn,
    encode_uop,
    insn_layout,
    uop_layout,
)

__all__ = [
    "FLOW", "RTL_INSTRUCTIONS", "SOURCE", "STOCK_DECODER", "ChiselField", "DecoderCheck",
    "FieldChange", "SpecField", "core_params", "decode_with_spec", "decoder_check", "rtl_spec",
    "shell_params", "spec_bundles", "spec_constants", "spec_mismatches", "spec_patterns",
    "stock_index_widths",
]

#: The Chisel sources transcribed here: repository, commit and directory.
SOURCE = ("apache/tvm-vta@d4a15f627d5cc9762a82270d1be60a136e6af9c2 "
          "hardware/chisel/src/main/scala")

#: ``ISAConstants`` (core/ISA.scala): the width constants of the decoder's fields.
_CONSTANTS: dict[str, tuple[int, str]] = {
    "OP_BITS": (3, "core/ISA.scala:33"),
    "M_ID_BITS": (3, "core/ISA.scala:36"),
    "M_SRAM_OFFSET_BITS": (16, "core/ISA.scala:37"),
    "M_DRAM_OFFSET_BITS": (32, "core/ISA.scala:38"),
    "M_SIZE_BITS": (16, "core/ISA.scala:39"),
    "M_STRIDE_BITS": (16, "core/ISA.scala:40"),
    "M_PAD_BITS": (4, "core/ISA.scala:41"),
    "C_UOP_BGN_BITS": (13, "core/ISA.scala:43"),
    "C_UOP_END_BITS": (14, "core/ISA.scala:44"),
    "C_ITER_BITS": (14, "core/ISA.scala:45"),
    "C_AIDX_BITS": (11, "core/ISA.scala:46"),
    "C_IIDX_BITS": (11, "core/ISA.scala:47"),
    "C_WIDX_BITS": (10, "core/ISA.scala:48"),
    "C_ALU_OP_BITS": (3, "core/ISA.scala:50"),
    "C_ALU_IMM_BITS": (16, "core/ISA.scala:51"),
}

_DEPS = ("pop_prev", "pop_next", "push_prev", "push_next")

# Bundles as (Chisel field, vtatune field or None for padding, width: a constant's name, or
# an int for a literal width or a Bool, Decode.scala line of the declaration), least
# significant first.
_MEM = (
    ("op", "opcode", "OP_BITS", 54),
    *((d, d, 1, line) for d, line in zip(_DEPS, (53, 52, 51, 50), strict=True)),
    ("id", "mem", "M_ID_BITS", 49),
    ("sram_offset", "sram_base", "M_SRAM_OFFSET_BITS", 48),
    ("dram_offset", "dram_base", "M_DRAM_OFFSET_BITS", 47),
    ("empty_0", None, 6, 46),
    ("ysize", "y_size", "M_SIZE_BITS", 45),
    ("xsize", "x_size", "M_SIZE_BITS", 44),
    ("xstride", "x_stride", "M_STRIDE_BITS", 43),
    ("ypad_0", "y_pad_0", "M_PAD_BITS", 42),
    ("ypad_1", "y_pad_1", "M_PAD_BITS", 41),
    ("xpad_0", "x_pad_0", "M_PAD_BITS", 40),
    ("xpad_1", "x_pad_1", "M_PAD_BITS", 39),
)


def _loop(first_line: int) -> tuple[tuple[str, str | None, Any, int], ...]:
    """The head GemmDecode and AluDecode share (op .. empty_0), declared from
    ``first_line`` (op) upwards in the file, i.e. downwards in significance."""
    ln = first_line
    return (
        ("op", "opcode", "OP_BITS", ln),
        *((d, d, 1, ln - 1 - i) for i, d in enumerate(_DEPS)),
        ("reset", "reset", 1, ln - 5),
        ("uop_begin", "uop_bgn", "C_UOP_BGN_BITS", ln - 6),
        ("uop_end", "uop_end", "C_UOP_END_BITS", ln - 7),
        ("lp_0", "iter_out", "C_ITER_BITS", ln - 8),
        ("lp_1", "iter_in", "C_ITER_BITS", ln - 9),
        ("empty_0", None, 1, ln - 10),
    )


_GEMM = (
    *_loop(79),
    ("acc_0", "dst_factor_out", "C_AIDX_BITS", 68),
    ("acc_1", "dst_factor_in", "C_AIDX_BITS", 67),
    ("inp_0", "src_factor_out", "C_IIDX_BITS", 66),
    ("inp_1", "src_factor_in", "C_IIDX_BITS", 65),
    ("wgt_0", "wgt_factor_out", "C_WIDX_BITS", 64),
    ("wgt_1", "wgt_factor_in", "C_WIDX_BITS", 63),
)
_ALU = (
    *_loop(110),
    ("dst_0", "dst_factor_out", "C_AIDX_BITS", 99),
    ("dst_1", "dst_factor_in", "C_AIDX_BITS", 98),
    ("src_0", "src_factor_out", "C_AIDX_BITS", 97),
    ("src_1", "src_factor_in", "C_AIDX_BITS", 96),
    # its position is also fixed by the VMIN..VSHX decode patterns (core/ISA.scala:126-130:
    # 105 bits below it, 17 above)
    ("alu_op", "alu_op", "C_ALU_OP_BITS", 95),
    ("alu_use_imm", "use_imm", 1, 94),
    ("alu_imm", "imm", "C_ALU_IMM_BITS", 93),
)
_UOP = (("u0", "dst", 11, 120), ("u1", "src", 11, 119), ("u2", "wgt", 10, 118))

#: The decoder's bundles and the vtatune layout each decodes: (Chisel class, the opcodes of
#: :mod:`simulator.isa` it reads, Decode.scala lines, fields).
_BUNDLES = (
    ("MemDecode", (Opcode.LOAD, Opcode.STORE), "core/Decode.scala:38-55", _MEM),
    ("GemmDecode", (Opcode.GEMM,), "core/Decode.scala:62-80", _GEMM),
    ("AluDecode", (Opcode.ALU,), "core/Decode.scala:92-111", _ALU),
    ("UopDecode", (), "core/Decode.scala:117-121", _UOP),
)


@dataclass(frozen=True)
class ChiselField:
    """One field of a decoder bundle, as the stock RTL places it."""

    bundle: str  # MemDecode, GemmDecode, AluDecode or UopDecode
    chisel: str  # the bundle's field name
    field: str | None  # vtatune's (simulator.isa) name; None for padding
    offset: int  # least significant bit
    width: int
    width_from: str  # the constant that sets the width ("literal" / "Bool" otherwise)
    source: str  # file:line of the declaration (and of the width constant)


def _stock_decoder() -> dict[str, tuple[ChiselField, ...]]:
    out = {}
    for bundle, _, _, spec in _BUNDLES:
        fields, pos = [], 0
        for chisel, name, width, line in spec:
            src = f"core/Decode.scala:{line}"
            if isinstance(width, str):
                value, where = _CONSTANTS[width]
                src, how = f"{src}; {width} {where}", width
            else:
                value, how = width, "Bool" if width == 1 else "literal"
            fields.append(ChiselField(bundle, chisel, name, pos, value, how, src))
            pos += value
        out[bundle] = tuple(fields)
    return out


#: The stock decoder's field layout per bundle (least significant first).
STOCK_DECODER: dict[str, tuple[ChiselField, ...]] = _stock_decoder()


def stock_index_widths() -> dict[str, int]:
    """The index widths the stock decoder hard-codes: micro-op buffer (uop_begin), ACC,
    INP and WGT (the micro-op's u0, u1, u2).

    >>> stock_index_widths()
    {'uop': 13, 'acc': 11, 'inp': 11, 'wgt': 10}
    """
    uop = {f.chisel: f.width for f in STOCK_DECODER["UopDecode"]}
    return {"uop": _CONSTANTS["C_UOP_BGN_BITS"][0], "acc": uop["u0"], "inp": uop["u1"],
            "wgt": uop["u2"]}


def _index_widths(hw: HardwareConfig) -> dict[str, int]:
    """The same widths in vtatune's layout of ``hw``."""
    gemm = {name: width for name, _, width in insn_layout(hw, Opcode.GEMM)}
    uop = {name: width for name, _, width in uop_layout(hw)}
    return {"uop": gemm["uop_bgn"], "acc": uop["dst"], "inp": uop["src"], "wgt": uop["wgt"]}


@dataclass(frozen=True)
class FieldChange:
    """A field the stock decoder reads elsewhere, or with another width, than ``hw``'s
    encoding puts it."""

    stock: ChiselField
    offset: int  # in the configuration's layout
    width: int

    def to_dict(self) -> dict[str, Any]:
        return {"bundle": self.stock.bundle, "chisel": self.stock.chisel,
                "field": self.stock.field, "stock": [self.stock.offset, self.stock.width],
                "needed": [self.offset, self.width], "width_from": self.stock.width_from,
                "source": self.stock.source}


@dataclass(frozen=True)
class DecoderCheck:
    """Whether the stock Chisel decoder reads ``hw``'s instructions and micro-ops."""

    hw: HardwareConfig
    layout: dict[str, tuple[tuple[str, int, int], ...]]  # vtatune's, per bundle
    changes: tuple[FieldChange, ...]

    @property
    def stock(self) -> bool:
        return not self.changes

    @property
    def index_widths(self) -> dict[str, tuple[int, int]]:
        """The index widths that differ: name -> (stock, needed)."""
        stock, mine = stock_index_widths(), _index_widths(self.hw)
        return {k: (stock[k], mine[k]) for k in stock if stock[k] != mine[k]}

    @property
    def widened(self) -> tuple[str, ...]:
        """Index widths wider than the stock decoder's: no stock-layout encoding of the
        programs can hold them, the decoder must change."""
        return tuple(k for k, (s, n) in self.index_widths.items() if n > s)

    def constants(self) -> dict[str, int]:
        """The width constants (``C_AIDX_BITS``, ...; a literal width by its
        ``Bundle.field``) whose value ``hw`` needs differ from the stock one: one value
        each (:func:`spec_constants`; ``AluDecode``'s src fields, sized like the INP index,
        are declared with ``C_IIDX_BITS`` where it differs from ``C_AIDX_BITS``:
        :meth:`retyped`)."""
        out = {k: v for k, v in spec_constants(self.hw).items() if v != _CONSTANTS[k][0]}
        stock = {f.chisel: f.width for f in STOCK_DECODER["UopDecode"]}
        for f in self.bundles()["UopDecode"]:
            if f.field is not None and f.width != stock[f.chisel]:
                out[f"UopDecode.{f.chisel}"] = f.width
        return out

    def bundles(self) -> dict[str, tuple[SpecField, ...]]:
        return spec_bundles(self.hw)

    def retyped(self) -> dict[str, str]:
        """Fields declared with another width constant than the stock RTL's:
        ``Bundle.field`` -> constant."""
        out = {}
        for bundle, fields in self.bundles().items():
            stock = {f.chisel: f.width_from for f in STOCK_DECODER[bundle]}
            out |= {f"{bundle}.{f.chisel}": f.width_from for f in fields
                    if f.field is not None and f.width_from != stock[f.chisel]}
        return out

    def padding(self) -> dict[str, dict[str, list[dict[str, Any]]]]:
        """Per bundle whose spare bits inside the word (``empty_N``) must be declared
        elsewhere than the stock bundle's, or be added or removed: the stock and the needed
        spare fields, each with its bits and the two fields it lies ``between`` (the one
        below it, the one above). ``asTypeOf`` packs a declaration with no gaps, so a spare
        field left in its stock place shifts every field above it. Spare bits above the last
        field are not listed: a shorter bundle reads the word's low bits all the same (the
        spec declares them, :func:`spec_bundles`)."""
        def spares(fields: tuple[Any, ...]) -> list[dict[str, Any]]:
            return [{"chisel": f.chisel, "offset": f.offset, "width": f.width,
                     "between": [fields[i - 1].chisel, fields[i + 1].chisel]}
                    for i, f in enumerate(fields) if f.field is None and i + 1 < len(fields)]

        out = {}
        for bundle, fields in self.bundles().items():
            stock, needed = spares(STOCK_DECODER[bundle]), spares(fields)
            if [(s["between"], s["width"]) for s in stock] != \
                    [(n["between"], n["width"]) for n in needed]:
                out[bundle] = {"stock": stock, "needed": needed}
        return out

    @property
    def alu_op_offset(self) -> int:
        """Where ``hw``'s layout puts ``alu_op``, the bits the ALU dispatch patterns test
        (the stock patterns test 108-110)."""
        return {name: off for name, off, _ in self.layout["AluDecode"]}["alu_op"]

    def summary(self) -> str:
        """``stock``, or the index widths the decoder must change (``needs acc 11->10, inp
        11->12 bits``), ``+ padding`` when a bundle's spare field must move, ``+ ALU
        patterns`` when the ALU dispatch patterns must test other bits."""
        if self.stock:
            return "stock"
        widths = self.index_widths
        text = "needs " + ", ".join(f"{k} {s}->{n}" for k, (s, n) in widths.items()) + " bits"
        if not widths:
            text = "needs the field layout changed"
        stock_alu = next(f for f in STOCK_DECODER["AluDecode"] if f.chisel == "alu_op").offset
        return (text + (" + padding" if self.padding() else "")
                + (" + ALU patterns" if self.alu_op_offset != stock_alu else ""))

    def to_dict(self) -> dict[str, Any]:
        return {
            "stock_decoder": self.stock, "summary": self.summary(),
            "index_widths": {k: {"stock": s, "needed": n}
                             for k, (s, n) in self.index_widths.items()},
            "widened": list(self.widened),
            "stock_layout_holds_every_value": not self.widened,
            "constants_needed": self.constants(), "fields_retyped": self.retyped(),
            "padding": self.padding(), "alu_op_offset": self.alu_op_offset,
            "changes": [c.to_dict() for c in self.changes],
            "source": SOURCE,
        }


def decoder_check(hw: HardwareConfig) -> DecoderCheck:
    """Compare ``hw``'s instruction and micro-op layout with the stock decoder's, field by
    field (offset and width). Raises EncodingError when ``hw``'s instructions do not fit."""
    layout: dict[str, tuple[tuple[str, int, int], ...]] = {}
    changes = []
    for bundle, opcodes, _, _ in _BUNDLES:
        fields = insn_layout(hw, opcodes[0]) if opcodes else uop_layout(hw)
        layout[bundle] = fields
        mine = {name: (off, width) for name, off, width in fields}
        for f in STOCK_DECODER[bundle]:
            if f.field is not None and mine[f.field] != (f.offset, f.width):
                changes.append(FieldChange(f, *mine[f.field]))
    return DecoderCheck(hw, layout, tuple(changes))


# --- the complete decoder spec of a configuration ------------------------------------------
#: ``ISA`` (core/ISA.scala:88-103): the task, memory and ALU ids the dispatch patterns test.
_TASK_ID = {"load": 0, "store": 1, "gemm": 2, "finish": 3, "alu": 4}
_MEM_ID = {"uop": 0, "wgt": 1, "inp": 2, "acc": 3, "out": 4}
_ALU_ID = {"minpool": 0, "maxpool": 1, "add": 2, "shift": 3}

#: The instruction patterns of ``ISA`` (core/ISA.scala:138-148) that dispatch an instruction
#: (``FetchDecode``'s ListLookup, Decode.scala:135-151; ``ComputeDecode``'s ``io.inst ===``
#: tests, Decode.scala:201-209): name -> (task, the
#: memory or ALU id it also tests, the bundle that then reads it, vtatune's opcode and id).
_PATTERNS: dict[str, tuple[str, str | None, str, Opcode, int | None]] = {
    "LUOP": ("load", "uop", "MemDecode", Opcode.LOAD, MemId.UOP),
    "LWGT": ("load", "wgt", "MemDecode", Opcode.LOAD, MemId.WGT),
    "LINP": ("load", "inp", "MemDecode", Opcode.LOAD, MemId.INP),
    "LACC": ("load", "acc", "MemDecode", Opcode.LOAD, MemId.ACC),
    "SOUT": ("store", None, "MemDecode", Opcode.STORE, None),
    "GEMM": ("gemm", None, "GemmDecode", Opcode.GEMM, None),
    "FNSH": ("finish", None, "GemmDecode", Opcode.FINISH, None),
    "VMIN": ("alu", "minpool", "AluDecode", Opcode.ALU, AluOp.MIN),
    "VMAX": ("alu", "maxpool", "AluDecode", Opcode.ALU, AluOp.MAX),
    "VADD": ("alu", "add", "AluDecode", Opcode.ALU, AluOp.ADD),
    "VSHX": ("alu", "shift", "AluDecode", Opcode.ALU, AluOp.SHR),
}
#: What the RTL's fetch stage dispatches, as (opcode, memory or ALU op; None: any): anything
#: else stops the simulation (FetchVME64.scala: "Unknown instruction type"), e.g. a LOAD of
#: ACC_8BIT (TVM's ALU-only kernels on fsim) or an ALU MUL (fsim only).
RTL_INSTRUCTIONS: frozenset[tuple[Opcode, int | None]] = frozenset(
    (op, sub) for _, _, _, op, sub in _PATTERNS.values())
_INSN_BITS = 128

#: What ``hardware_build.json``'s spec covers.
FLOW = ("VTA's Chisel RTL (apache/tvm-vta hardware/chisel: CoreParams, the shell's "
        "ShellParams, the decoder's ISAConstants, bundles and dispatch patterns). Not the HLS "
        "design (hardware/xilinx): it is sized by hw_spec.h from vta_config.json through "
        "TVM's pkg_config.py, which sets BLOCK_IN and BLOCK_OUT from one LOG_BLOCK")


@dataclass(frozen=True)
class SpecField:
    """One field of a decoder bundle as a configuration needs it declared."""

    chisel: str  # the bundle's field name (``empty_N``: spare bits)
    field: str | None  # vtatune's name; None for spare bits
    offset: int  # least significant bit, where ``asTypeOf`` puts it: the widths below it
    width: int
    width_from: str  # an ISAConstants name, "Bool", or "literal"

    @property
    def scala(self) -> str:
        """The declaration, as Decode.scala writes it."""
        if self.width_from == "Bool":
            return f"val {self.chisel} = Bool()"
        width = self.width if self.width_from == "literal" else self.width_from
        return f"val {self.chisel} = UInt({width}.W)"

    def to_dict(self) -> dict[str, Any]:
        return {"chisel": self.chisel, "field": self.field, "offset": self.offset,
                "width": self.width, "width_from": self.width_from, "scala": self.scala}


def _layout_of(hw: HardwareConfig, bundle: str) -> tuple[tuple[str, int, int], ...]:
    opcodes = next(ops for name, ops, _, _ in _BUNDLES if name == bundle)
    return insn_layout(hw, opcodes[0]) if opcodes else uop_layout(hw)


def spec_constants(hw: HardwareConfig) -> dict[str, int]:
    """Every width constant of ``ISAConstants`` the bundles use, with the value ``hw``'s
    layout needs: the width of the first field declared with it (MemDecode, GemmDecode,
    AluDecode in turn), so ``C_AIDX_BITS`` is the ACC index's and ``C_IIDX_BITS`` the INP
    index's; a field whose stock constant then has another width is declared with the
    constant of its own width (:func:`spec_bundles`)."""
    values: dict[str, int] = {}
    for bundle, fields in STOCK_DECODER.items():
        mine = {name: width for name, _, width in _layout_of(hw, bundle)}
        for f in fields:
            if f.field is not None and f.width_from in _CONSTANTS:
                values.setdefault(f.width_from, mine[f.field])
    return values


def _width_from(stock: ChiselField, width: int, constants: dict[str, int],
                owner: dict[str, str]) -> str:
    if stock.width_from in ("Bool", "literal"):
        return stock.width_from
    if constants[stock.width_from] == width:
        return stock.width_from
    # e.g. AluDecode's src fields: the stock declares them with C_AIDX_BITS, the encoding
    # (like hw_spec.h) sizes them as GemmDecode's inp fields, C_IIDX_BITS
    mine = owner[stock.field or ""]
    if constants[mine] != width:  # pragma: no cover - no layout of simulator.isa does this
        raise ValueError(f"no ISAConstants width holds {stock.bundle}.{stock.chisel}")
    return mine


def spec_bundles(hw: HardwareConfig) -> dict[str, tuple[SpecField, ...]]:
    """Every decoder bundle as ``hw`` needs it declared, least significant first: the
    fields of vtatune's layout (:func:`simulator.isa.insn_layout`, the table the encoder
    uses) with the stock Chisel names, and every gap a spare field (``empty_0``, ...) in its
    place, up to the word's top, so ``asTypeOf``, which packs the fields with no gaps,
    reads each field where the encoder wrote it. The stock configuration gives the stock
    bundles (:data:`STOCK_DECODER`)."""
    constants = spec_constants(hw)
    owner: dict[str, str] = {}
    for fields in STOCK_DECODER.values():
        for f in fields:
            if f.field is not None and f.width_from in _CONSTANTS:
                owner.setdefault(f.field, f.width_from)
    out: dict[str, tuple[SpecField, ...]] = {}
    for bundle, stock_fields in STOCK_DECODER.items():
        stock = {f.field: f for f in stock_fields if f.field is not None}
        top = 32 if bundle == "UopDecode" else _INSN_BITS
        fields: list[SpecField] = []
        end = 0
        for name, off, width in (*sorted(_layout_of(hw, bundle), key=lambda f: f[1]),
                                 (None, top, 0)):
            if off > end:  # a gap: spare bits, named as the stock bundles name theirs
                spares = sum(f.field is None for f in fields)
                fields.append(SpecField(f"empty_{spares}", None, end, off - end,
                                        "Bool" if off - end == 1 else "literal"))
            if name is not None:
                f = stock[name]
                fields.append(SpecField(f.chisel, name, off, width,
                                        _width_from(f, width, constants, owner)))
                end = off + width
        out[bundle] = tuple(fields)
    return out


def _bitpat(tests: list[tuple[int, int, int]]) -> str:
    """A Chisel ``BitPat`` string (most significant bit first) testing each (offset,
    width, value); every other bit a don't-care."""
    bits = ["?"] * _INSN_BITS
    for off, width, value in tests:
        for i in range(width):
            bits[_INSN_BITS - 1 - off - i] = str((value >> i) & 1)
    return "b" + "".join(bits)


def spec_patterns(hw: HardwareConfig) -> dict[str, dict[str, Any]]:
    """The dispatch patterns ``hw`` needs (``ISA``, core/ISA.scala:108-148): the task id at
    bit 0, a load's memory id where MemDecode's ``id`` lies, an ALU instruction's op where
    ``hw``'s layout puts ``alu_op`` (the stock ``alu(id)`` tests bits 108-110: ``dontCare(17)
    + aluId(id) + dontCare(105) + taskId("alu")``)."""
    mem = {name: off for name, off, _ in insn_layout(hw, Opcode.LOAD)}["mem"]
    alu = {name: off for name, off, _ in insn_layout(hw, Opcode.ALU)}["alu_op"]
    op_bits = _CONSTANTS["OP_BITS"][0]
    out = {}
    for name, (task, sub, bundle, _, _) in _PATTERNS.items():
        tests = [(0, op_bits, _TASK_ID[task])]
        scala = None
        if task == "load":
            tests.append((mem, 3, _MEM_ID[sub or ""]))
        elif task == "alu":
            tests.append((alu, 3, _ALU_ID[sub or ""]))
            scala = (f"dontCare({_INSN_BITS - alu - 3}) + aluId(\"{sub}\") + "
                     f"dontCare({alu - op_bits}) + taskId(\"alu\")")
        out[name] = {"bitpat": _bitpat(tests), "bundle": bundle,
                     "tests": [list(t) for t in tests], **({"scala": scala} if scala else {})}
    return out


#: The stock shells (shell/Configs.scala) whose parameters besides the memory bus width a
#: build takes: per board family, (config class, its lines, the top-level config and
#: shell, hostParams, memParams).
_SHELLS: dict[str, tuple[str, str, str, dict[str, Any], dict[str, Any]]] = {
    "xilinx": ("PynqConfig", "shell/Configs.scala:28-44",
               "DefaultPynqConfig (vta/Configs.scala:34) with XilinxShell",
               {"coherent": False, "addrBits": 16, "dataBits": 32, "lenBits": 8,
                "userBits": 1},
               {"coherent": True, "addrBits": 32, "dataBits": 64, "lenBits": 8,
                "userBits": 1}),
    "intel": ("De10Config", "shell/Configs.scala:66-80",
              "DefaultDe10Config (vta/Configs.scala:36) with IntelShell",
              {"addrBits": 16, "dataBits": 32, "idBits": 13, "lenBits": 4},
              {"addrBits": 32, "dataBits": 64, "userBits": 5, "lenBits": 4,
               "coherent": True}),
}


def shell_params(hw: HardwareConfig) -> dict[str, Any]:
    """The shell ``hw`` is built with: the stock shell config of its board family (Intel:
    De10Config; every other target: PynqConfig, the Xilinx one) with ``memParams.dataBits``
    set to ``hw``'s bus width, and whether a stock config has that width (every stock
    shell's memory bus is 64 bits; F1Config's too)."""
    family = "intel" if hw.target == "de10nano" else "xilinx"
    name, lines, top, host, mem = _SHELLS[family]
    stock_bits = mem["dataBits"]
    out: dict[str, Any] = {
        "dataBits": hw.bus_bits, "stock_shell": name, "stock_shell_source": lines,
        "top": top, "hostParams": dict(host), "memParams": {**mem, "dataBits": hw.bus_bits},
        "vcrParams": "VCRParams()", "vmeParams": "VMEParams()",
        "stock_shell_has_bus_width": hw.bus_bits == stock_bits,
    }
    if hw.bus_bits != stock_bits:
        out["note"] = (f"no stock shell config has a {hw.bus_bits}-bit memory bus (each has "
                       f"{stock_bits}): {name} with memParams.dataBits = {hw.bus_bits}, the "
                       "other parameters as listed")
    return out


def core_params(hw: HardwareConfig) -> dict[str, Any]:
    """The Chisel parameters that build ``hw``: ``CoreParams`` (core/Core.scala:27-43; the
    stock values in core/Configs.scala:32-47) and the shell's (:func:`shell_params`)."""
    return {
        "CoreParams": {
            "batch": hw.batch, "blockOut": hw.block_out, "blockOutFactor": 1,
            "blockIn": hw.block_in, "inpBits": hw.inp_width, "wgtBits": hw.wgt_width,
            "uopBits": 32, "accBits": hw.acc_width, "outBits": hw.out_width,
            "uopMemDepth": hw.uop_depth, "inpMemDepth": hw.inp_depth,
            "wgtMemDepth": hw.wgt_depth, "accMemDepth": hw.acc_depth,
            "outMemDepth": hw.out_depth, "instQueueEntries": 512,
        },
        "ShellParams": shell_params(hw),
        "source": SOURCE,
    }


def rtl_spec(hw: HardwareConfig) -> dict[str, Any]:
    """Everything the Chisel RTL's decoder needs to read ``hw``'s programs, derived from
    the field table the encoder uses: every ``ISAConstants`` width (stock and needed), each
    bundle's declaration in Decode.scala's order (most significant first, spare fields in
    place) and the dispatch patterns, each marked ``changed`` where it differs from the
    stock RTL. :func:`decode_with_spec` reads instructions with it, as the RTL would."""
    constants = spec_constants(hw)
    bundles = spec_bundles(hw)
    stock_bundles = spec_bundles(DEFAULT)  # the stock decoder's configuration
    patterns, stock_patterns = spec_patterns(hw), spec_patterns(DEFAULT)
    return {
        "flow": FLOW, "source": SOURCE,
        "constants": {k: {"value": v, "stock": _CONSTANTS[k][0], "changed": v != _CONSTANTS[k][0],
                          "source": _CONSTANTS[k][1]}
                      for k, v in constants.items()},
        "bundles": {
            b: {"source": next(src for name, _, src, _ in _BUNDLES if name == b),
                "changed": fields != stock_bundles[b],
                "declaration": [f.to_dict() for f in reversed(fields)]}
            for b, fields in bundles.items()},
        "dispatch": {name: {**p, "changed": p["bitpat"] != stock_patterns[name]["bitpat"]}
                     for name, p in patterns.items()},
    }


# --- reading a program with a spec, as the RTL would ---------------------------------------
def _matches(bitpat: str, word: int) -> bool:
    bits = bitpat[1:]
    return all(c == "?" or int(c) == (word >> (len(bits) - 1 - i)) & 1
               for i, c in enumerate(bits))


def _unpack(declaration: list[dict[str, Any]], word: int) -> dict[str, int]:
    """``asTypeOf``: the last declared field at bit 0, each one above the widths below it
    (the spec's offsets are not read: the widths and the order alone place the fields)."""
    out, pos = {}, 0
    for f in reversed(declaration):
        if f["field"] is not None:
            out[f["field"]] = (word >> pos) & ((1 << f["width"]) - 1)
        pos += f["width"]
    return out


def decode_with_spec(spec: dict[str, Any], word: int) -> tuple[tuple[str, ...], dict[str, int]]:
    """How an RTL built to ``spec`` (:func:`rtl_spec`, or its JSON) reads the 128-bit
    instruction ``word``: the dispatch patterns it matches (one, for an instruction the RTL
    runs; none: never dispatched) and the fields of the bundle the first one names."""
    names = tuple(n for n, p in spec["dispatch"].items() if _matches(p["bitpat"], word))
    if not names:
        return (), {}
    bundle = spec["dispatch"][names[0]]["bundle"]
    return names, _unpack(spec["bundles"][bundle]["declaration"], word)


def _expected(insn: Instruction) -> tuple[str | None, dict[str, int]]:
    """The pattern that must dispatch ``insn`` and the fields its bundle must read."""
    sub = getattr(insn, "mem", None) if insn.opcode == Opcode.LOAD else \
        getattr(insn, "alu_op", None) if insn.opcode == Opcode.ALU else None
    name = next((n for n, (_, _, _, op, i) in _PATTERNS.items()
                 if op == insn.opcode and i == sub), None)
    fields = {"opcode": int(insn.opcode)}
    bundle = _PATTERNS[name][2] if name else "GemmDecode"
    for f in STOCK_DECODER[bundle]:
        if f.field is not None and f.field != "opcode":
            fields[f.field] = int(getattr(insn, f.field, 0))
    if "imm" in fields:
        fields["imm"] &= 0xFFFF
    return name, fields


def spec_mismatches(spec: dict[str, Any], hw: HardwareConfig,
                    instructions: Iterable[Instruction], uops: Iterable[Uop] = ()
                    ) -> list[str]:
    """Encode every instruction and micro-op with vtatune's encoder for ``hw``, read each
    back with ``spec`` as the RTL would (:func:`decode_with_spec`; micro-ops with the
    ``UopDecode`` declaration) and say, one line each, where the RTL would not get the
    program's fields: an instruction dispatched by no pattern (or by the wrong one, or by
    several), a field read with another value. Empty: the spec reads the program."""
    out = []
    for i, insn in enumerate(instructions):
        word = int.from_bytes(encode_insn(insn, hw), "little")
        want_name, want = _expected(insn)
        names, got = decode_with_spec(spec, word)
        where = f"instruction {i} ({describe(insn)})"
        if names != ((want_name,) if want_name else ()):
            out.append(f"{where}: dispatched as {list(names) or 'nothing'}, "
                       f"not {want_name or 'nothing (no RTL pattern)'}")
            continue
        bad = {k: (got.get(k), v) for k, v in want.items() if got.get(k) != v}
        if bad:
            out.append(f"{where}: " + ", ".join(f"{k} read {g}, written {v}"
                                               for k, (g, v) in bad.items()))
    declaration = spec["bundles"]["UopDecode"]["declaration"]
    for i, uop in enumerate(uops):
        got = _unpack(declaration, encode_uop(uop, hw))
        want = {"dst": uop.dst, "src": uop.src, "wgt": uop.wgt}
        if got != want:
            out.append(f"micro-op {i}: read {got}, written {want}")
    return out
