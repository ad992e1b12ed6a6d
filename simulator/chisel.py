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

Example:
    >>> from simulator.hardware import DEFAULT, HardwareConfig
    >>> decoder_check(DEFAULT).summary()
    'stock'
    >>> hw = HardwareConfig.from_target_model("ultra96_1x16x32_i8w8a32_15_16_19_17")
    >>> decoder_check(hw).summary()
    'needs acc 11->10, inp 11->12 bits'
    >>> core_params(hw)["CoreParams"]["blockOut"], core_params(hw)["ShellParams"]["dataBits"]
    (32, 128)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from simulator.hardware import HardwareConfig
from simulator.isa import Opcode, insn_layout, uop_layout

__all__ = [
    "SOURCE", "STOCK_DECODER", "ChiselField", "DecoderCheck", "FieldChange", "core_params",
    "decoder_check", "stock_index_widths",
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

    def constants(self) -> dict[str, list[int]]:
        """The widths the decoder's width constants (``C_AIDX_BITS``, ...; a literal width by
        its ``Bundle.field``) would need, where they differ from the stock ones. A constant
        needing two widths must be split: ``C_AIDX_BITS`` also sizes AluDecode's src fields,
        which vtatune, like TVM's hw_spec.h, sizes by the INP depth."""
        need: dict[str, set[int]] = {}
        stock: dict[str, int] = {}
        for bundle, fields in STOCK_DECODER.items():
            mine = {name: width for name, _, width in self.layout[bundle]}
            for f in fields:
                if f.field is None or f.width_from == "Bool":
                    continue
                key = f"{bundle}.{f.chisel}" if f.width_from == "literal" else f.width_from
                stock[key] = f.width
                need.setdefault(key, set()).add(mine[f.field])
        return {k: sorted(v) for k, v in need.items() if v != {stock[k]}}

    def padding(self) -> dict[str, dict[str, list[list[int]]]]:
        """Per bundle whose unused bits lie elsewhere than the stock bundle's ``empty_0``:
        the stock and the needed gaps, [offset, width] each (vtatune's layout, like C bit
        fields, starts a field that would straddle bit 64 at bit 64)."""
        out = {}
        for bundle, fields in STOCK_DECODER.items():
            stock = [[f.offset, f.width] for f in fields if f.field is None]
            needed, end = [], 0
            for _, off, width in sorted(self.layout[bundle], key=lambda f: f[1]):
                if off > end:
                    needed.append([end, off - end])
                end = off + width
            if needed != stock:
                out[bundle] = {"stock": stock, "needed": needed}
        return out

    def summary(self) -> str:
        """``stock``, or the index widths the decoder must change (``needs acc 11->10, inp
        11->12 bits``), ``+ padding`` when a bundle's unused bits move too."""
        if self.stock:
            return "stock"
        widths = self.index_widths
        text = "needs " + ", ".join(f"{k} {s}->{n}" for k, (s, n) in widths.items()) + " bits"
        if not widths:
            text = "needs the field layout changed"
        return text + (" + padding" if self.padding() else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "stock_decoder": self.stock, "summary": self.summary(),
            "index_widths": {k: {"stock": s, "needed": n}
                             for k, (s, n) in self.index_widths.items()},
            "widened": list(self.widened),
            "stock_layout_holds_every_value": not self.widened,
            "constants_needed": self.constants(), "padding": self.padding(),
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


def core_params(hw: HardwareConfig) -> dict[str, Any]:
    """The Chisel parameters that build ``hw``: ``CoreParams`` (core/Core.scala:27-43; the
    stock values in core/Configs.scala:32-47) and the shell's memory bus width
    (``ShellParams.memParams.dataBits``, shell/Configs.scala:38 for pynq)."""
    return {
        "CoreParams": {
            "batch": hw.batch, "blockOut": hw.block_out, "blockOutFactor": 1,
            "blockIn": hw.block_in, "inpBits": hw.inp_width, "wgtBits": hw.wgt_width,
            "uopBits": 32, "accBits": hw.acc_width, "outBits": hw.out_width,
            "uopMemDepth": hw.uop_depth, "inpMemDepth": hw.inp_depth,
            "wgtMemDepth": hw.wgt_depth, "accMemDepth": hw.acc_depth,
            "outMemDepth": hw.out_depth, "instQueueEntries": 512,
        },
        "ShellParams": {"dataBits": hw.bus_bits},
        "source": SOURCE,
    }
