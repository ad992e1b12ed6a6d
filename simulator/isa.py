"""The VTA instruction set: instructions and micro-ops as values, and their binary encoding.

Instructions are frozen dataclasses; the binary form is the 128-bit word of the hardware
(two little-endian 64-bit units, C bit-field packing: a field never straddles a unit) and
the 32-bit micro-op. Field widths follow the hardware configuration.

Example:
    >>> from simulator.hardware import DEFAULT
    >>> insn = MemInsn(Opcode.LOAD, MemId.INP, sram_base=0, dram_base=64, y_size=1, x_size=4,
    ...                x_stride=4, push_next=True)
    >>> decode_insn(encode_insn(insn, DEFAULT), DEFAULT) == insn
    True
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import IntEnum
from functools import cache

from simulator.errors import EncodingError
from simulator.hardware import HardwareConfig

__all__ = [
    "AluInsn", "AluOp", "FinishInsn", "GemmInsn", "Instruction", "MemId", "MemInsn", "Module",
    "Opcode", "UOP_BITS", "Uop", "check_encodable", "decode_insn", "decode_uop", "describe",
    "encode_insn", "encode_uop", "field_widths", "insn_layout", "is_nop", "loop_limit",
    "uop_layout", "uop_widths",
]


class Opcode(IntEnum):
    LOAD = 0
    STORE = 1
    GEMM = 2
    FINISH = 3
    ALU = 4


class MemId(IntEnum):
    UOP = 0
    WGT = 1
    INP = 2
    ACC = 3
    OUT = 4
    ACC_8BIT = 5


class AluOp(IntEnum):
    MIN = 0
    MAX = 1
    ADD = 2
    SHR = 3
    MUL = 4  # functional simulator only


class Module(IntEnum):
    """Pipeline stages, numbered as TVM's runtime numbers them."""

    LOAD = 1
    COMPUTE = 2
    STORE = 3


@dataclass(frozen=True, slots=True)
class MemInsn:
    """LOAD or STORE: a 2D strided DMA (LOAD pads with zeros). ``x_size == 0`` is a NOP."""

    opcode: Opcode
    mem: MemId
    sram_base: int = 0
    dram_base: int = 0
    y_size: int = 0
    x_size: int = 0
    x_stride: int = 0
    y_pad_0: int = 0
    y_pad_1: int = 0
    x_pad_0: int = 0
    x_pad_1: int = 0
    pop_prev: bool = False
    pop_next: bool = False
    push_prev: bool = False
    push_next: bool = False

    @property
    def module(self) -> Module:
        if self.opcode == Opcode.STORE:
            return Module.STORE
        return Module.LOAD if self.mem in (MemId.INP, MemId.WGT) else Module.COMPUTE

    @property
    def is_nop(self) -> bool:
        return self.x_size == 0

    @property
    def kind(self) -> str:
        if self.is_nop:
            return "NOP"
        return f"{self.opcode.name} {self.mem.name}"


@dataclass(frozen=True, slots=True)
class GemmInsn:
    """GEMM over micro-ops ``[uop_bgn, uop_end)`` in a two-level loop; ``reset`` zeroes ACC."""

    reset: bool = False
    uop_bgn: int = 0
    uop_end: int = 0
    iter_out: int = 1
    iter_in: int = 1
    dst_factor_out: int = 0
    dst_factor_in: int = 0
    src_factor_out: int = 0
    src_factor_in: int = 0
    wgt_factor_out: int = 0
    wgt_factor_in: int = 0
    pop_prev: bool = False
    pop_next: bool = False
    push_prev: bool = False
    push_next: bool = False

    opcode = Opcode.GEMM
    module = Module.COMPUTE
    is_nop = False

    @property
    def kind(self) -> str:
        return "GEMM reset" if self.reset else "GEMM"

    @property
    def uop_iterations(self) -> int:
        return self.iter_out * self.iter_in * (self.uop_end - self.uop_bgn)


@dataclass(frozen=True, slots=True)
class AluInsn:
    """Vector ALU over ACC: ``acc[dst] = op(acc[dst], imm or acc[src])`` lane-wise."""

    alu_op: AluOp = AluOp.ADD
    use_imm: bool = False
    imm: int = 0
    reset: bool = False
    uop_bgn: int = 0
    uop_end: int = 0
    iter_out: int = 1
    iter_in: int = 1
    dst_factor_out: int = 0
    dst_factor_in: int = 0
    src_factor_out: int = 0
    src_factor_in: int = 0
    pop_prev: bool = False
    pop_next: bool = False
    push_prev: bool = False
    push_next: bool = False

    opcode = Opcode.ALU
    module = Module.COMPUTE
    is_nop = False

    @property
    def kind(self) -> str:
        return f"ALU {self.alu_op.name}"

    @property
    def uop_iterations(self) -> int:
        return self.iter_out * self.iter_in * (self.uop_end - self.uop_bgn)


@dataclass(frozen=True, slots=True)
class FinishInsn:
    """Ends the run (executed by the compute module)."""

    pop_prev: bool = False
    pop_next: bool = False
    push_prev: bool = False
    push_next: bool = False

    opcode = Opcode.FINISH
    module = Module.COMPUTE
    is_nop = False
    kind = "FINISH"


Instruction = MemInsn | GemmInsn | AluInsn | FinishInsn


@dataclass(frozen=True, slots=True)
class Uop:
    """A micro-op: indices into ACC (dst), INP or ACC (src) and WGT (wgt)."""

    dst: int
    src: int = 0
    wgt: int = 0


UOP_BITS = 32

# --- binary layouts ----------------------------------------------------------------------
_FLAGS = (("pop_prev", 1), ("pop_next", 1), ("push_prev", 1), ("push_next", 1))


@cache
def _layouts(hw: HardwareConfig) -> dict[Opcode, tuple[tuple[str, int, int], ...]]:
    """Per opcode: (field, bit offset, width), laid out with C bit-field rules."""
    widths = tuple((depth - 1).bit_length()
                   for depth in (hw.uop_depth, hw.acc_depth, hw.inp_depth, hw.wgt_depth))
    layouts, bits = _layouts_of(*widths)
    if layouts is None:
        raise EncodingError(f"instruction layout needs {bits} bits for {hw.bitstream}")
    return layouts


@cache
def _layouts_of(uop_bits: int, acc_bits: int, inp_bits: int, wgt_bits: int
                ) -> tuple[dict[Opcode, tuple[tuple[str, int, int], ...]] | None, int]:
    """:func:`_layouts` of the index widths, the only part of the hardware they read (a
    design search checks a hundred thousand configurations of a few widths); None and the
    bits needed when an instruction does not fit."""
    head = (("opcode", 3), *_FLAGS)
    mem = (
        *head,
        ("mem", 3),
        ("sram_base", 16),
        ("dram_base", 32),
        ("y_size", 16),
        ("x_size", 16),
        ("x_stride", 16),
        ("y_pad_0", 4),
        ("y_pad_1", 4),
        ("x_pad_0", 4),
        ("x_pad_1", 4),
    )
    loop = (
        ("reset", 1),
        ("uop_bgn", uop_bits),
        ("uop_end", uop_bits + 1),
        ("iter_out", 14),
        ("iter_in", 14),
        ("dst_factor_out", acc_bits),
        ("dst_factor_in", acc_bits),
        ("src_factor_out", inp_bits),
        ("src_factor_in", inp_bits),
    )
    gemm = (*head, *loop, ("wgt_factor_out", wgt_bits), ("wgt_factor_in", wgt_bits))
    alu = (*head, *loop, ("alu_op", 3), ("use_imm", 1), ("imm", 16))

    def place(spec: tuple[tuple[str, int], ...]) -> tuple[tuple[tuple[str, int, int], ...], int]:
        out, pos = [], 0
        for name, width in spec:
            if pos // 64 != (pos + width - 1) // 64:
                pos = (pos // 64 + 1) * 64
            out.append((name, pos, width))
            pos += width
        return tuple(out), pos

    placed = {Opcode.LOAD: place(mem), Opcode.STORE: place(mem), Opcode.GEMM: place(gemm),
              Opcode.ALU: place(alu), Opcode.FINISH: place(gemm)}
    # the first that does not fit, in the order the opcodes were laid out before
    for _, bits in placed.values():
        if bits > 128:
            return None, bits
    return {op: fields for op, (fields, _) in placed.items()}, 128


def check_encodable(hw: HardwareConfig) -> None:
    """Raise EncodingError, with the bits, when ``hw``'s instructions or micro-ops cannot be
    encoded: an instruction is 128 bits (two 64-bit words no field straddles) and a micro-op
    32 bits (ACC, INP and WGT index fields, each log2 of its buffer's depth).

    >>> from simulator.hardware import DEFAULT
    >>> from dataclasses import replace
    >>> check_encodable(replace(DEFAULT, log_inp_buff_size=16))
    Traceback (most recent call last):
    ...
    simulator.errors.EncodingError: micro-op fields need 33 bits (acc 11 + inp 12 + wgt 10), \
a micro-op has 32
    """
    dst, src, wgt = uop_widths(hw)
    if dst + src + wgt > UOP_BITS:
        raise EncodingError(f"micro-op fields need {dst + src + wgt} bits (acc {dst} + inp "
                            f"{src} + wgt {wgt}), a micro-op has {UOP_BITS}")
    _layouts(hw)


def loop_limit() -> int:
    """Largest loop extent an instruction can encode (14-bit field)."""
    return (1 << 14) - 1


def insn_layout(hw: HardwareConfig, opcode: Opcode) -> tuple[tuple[str, int, int], ...]:
    """Every field of an instruction of ``opcode`` on ``hw``: (name, bit offset, width),
    least significant first (``opcode`` at bit 0; FINISH uses the GEMM layout). Raises
    EncodingError when the fields do not fit 128 bits.

    >>> from simulator.hardware import DEFAULT
    >>> [f for f in insn_layout(DEFAULT, Opcode.GEMM) if f[0].startswith("dst")]
    [('dst_factor_out', 64, 11), ('dst_factor_in', 75, 11)]
    """
    return _layouts(hw)[opcode]


def uop_layout(hw: HardwareConfig) -> tuple[tuple[str, int, int], ...]:
    """The micro-op's fields: (name, bit offset, width), least significant first.

    >>> from simulator.hardware import DEFAULT
    >>> uop_layout(DEFAULT)
    (('dst', 0, 11), ('src', 11, 11), ('wgt', 22, 10))
    """
    dst, src, wgt = uop_widths(hw)
    return (("dst", 0, dst), ("src", dst, src), ("wgt", dst + src, wgt))


def field_widths(hw: HardwareConfig, opcode: Opcode) -> dict[str, int]:
    """Bit width of every field of an instruction of ``opcode`` on ``hw``."""
    return {name: width for name, _, width in _layouts(hw)[opcode]}


def encode_insn(insn: Instruction, hw: HardwareConfig) -> bytes:
    """The 16-byte encoding of ``insn``; a value that does not fit raises EncodingError."""
    word = 0
    for name, pos, width in _layouts(hw)[insn.opcode]:
        value = int(getattr(insn, name, 0)) if name != "opcode" else int(insn.opcode)
        if name == "imm":
            if not -(1 << 15) <= value < (1 << 15):
                raise EncodingError(f"{insn.kind}: imm {value} does not fit 16 signed bits")
            value &= 0xFFFF
        elif not 0 <= value < (1 << width):
            raise EncodingError(
                f"{insn.kind}: field {name}={value} does not fit {width} bits "
                f"(max {(1 << width) - 1})"
            )
        word |= value << pos
    return word.to_bytes(16, "little")


def decode_insn(data: bytes, hw: HardwareConfig) -> Instruction:
    """Inverse of :func:`encode_insn`."""
    if len(data) != 16:
        raise EncodingError(f"an instruction is 16 bytes, got {len(data)}")
    word = int.from_bytes(data, "little")
    try:
        opcode = Opcode(word & 0x7)
    except ValueError:
        raise EncodingError(f"unknown opcode {word & 0x7}") from None
    values = {
        name: (word >> pos) & ((1 << width) - 1) for name, pos, width in _layouts(hw)[opcode]
    }
    flags = {name: bool(values[name]) for name, _ in _FLAGS}
    if opcode in (Opcode.LOAD, Opcode.STORE):
        try:
            mem = MemId(values["mem"])
        except ValueError:
            raise EncodingError(f"unknown memory type {values['mem']}") from None
        rest = {
            f.name: values[f.name]
            for f in fields(MemInsn)
            if f.name not in ("opcode", "mem") and f.name not in flags
        }
        return MemInsn(opcode, mem, **rest, **flags)
    if opcode == Opcode.FINISH:
        return FinishInsn(**flags)
    loop = {
        name: values[name]
        for name in (
            "uop_bgn", "uop_end", "iter_out", "iter_in", "dst_factor_out", "dst_factor_in",
            "src_factor_out", "src_factor_in",
        )
    }
    if opcode == Opcode.GEMM:
        return GemmInsn(
            reset=bool(values["reset"]),
            wgt_factor_out=values["wgt_factor_out"],
            wgt_factor_in=values["wgt_factor_in"],
            **loop,
            **flags,
        )
    imm = values["imm"] - (1 << 16) if values["imm"] & 0x8000 else values["imm"]
    try:
        alu_op = AluOp(values["alu_op"])
    except ValueError:
        raise EncodingError(f"unknown ALU opcode {values['alu_op']}") from None
    return AluInsn(
        alu_op=alu_op,
        use_imm=bool(values["use_imm"]),
        imm=imm,
        reset=bool(values["reset"]),
        **loop,
        **flags,
    )


def uop_widths(hw: HardwareConfig) -> tuple[int, int, int]:
    return (
        (hw.acc_depth - 1).bit_length(),
        (hw.inp_depth - 1).bit_length(),
        (hw.wgt_depth - 1).bit_length(),
    )


def encode_uop(uop: Uop, hw: HardwareConfig) -> int:
    """The 32-bit word of a micro-op (dst | src | wgt from bit 0 up)."""
    dst_w, src_w, wgt_w = uop_widths(hw)
    for name, value, width in (("dst", uop.dst, dst_w), ("src", uop.src, src_w),
                               ("wgt", uop.wgt, wgt_w)):
        if not 0 <= value < (1 << width):
            raise EncodingError(f"micro-op field {name}={value} does not fit {width} bits")
    return uop.dst | (uop.src << dst_w) | (uop.wgt << (dst_w + src_w))


def decode_uop(word: int, hw: HardwareConfig) -> Uop:
    dst_w, src_w, wgt_w = uop_widths(hw)
    return Uop(
        word & ((1 << dst_w) - 1),
        (word >> dst_w) & ((1 << src_w) - 1),
        (word >> (dst_w + src_w)) & ((1 << wgt_w) - 1),
    )


def is_nop(insn: Instruction) -> bool:
    return insn.is_nop


def describe(insn: Instruction) -> str:
    """A one-line human-readable rendering of an instruction."""
    flags = "".join(
        c for c, on in (("<", insn.pop_prev), (">", insn.pop_next),
                        ("^", insn.push_prev), ("v", insn.push_next)) if on
    )
    if isinstance(insn, MemInsn):
        if insn.is_nop:
            body = f"NOP({insn.module.name.lower()})"
        else:
            body = (
                f"{insn.opcode.name} {insn.mem.name} sram={insn.sram_base} dram={insn.dram_base} "
                f"y={insn.y_size} x={insn.x_size} stride={insn.x_stride} "
                f"pad=({insn.y_pad_0},{insn.y_pad_1},{insn.x_pad_0},{insn.x_pad_1})"
            )
    elif isinstance(insn, (GemmInsn, AluInsn)):
        body = (
            f"{insn.kind} uop[{insn.uop_bgn}:{insn.uop_end}] loops={insn.iter_out}x{insn.iter_in}"
        )
        if isinstance(insn, AluInsn) and insn.use_imm:
            body += f" imm={insn.imm}"
    else:
        body = "FINISH"
    return f"{body} [{flags}]" if flags else body
