import random

import pytest

from simulator.errors import EncodingError
from simulator.hardware import PRESETS
from simulator.isa import (
    AluInsn,
    AluOp,
    FinishInsn,
    GemmInsn,
    MemId,
    MemInsn,
    Opcode,
    Uop,
    decode_insn,
    decode_uop,
    encode_insn,
    encode_uop,
    field_widths,
)


def _random_insn(rng, hw):
    flags = {f: rng.random() < 0.5 for f in ("pop_prev", "pop_next", "push_prev", "push_next")}
    kind = rng.randrange(4)
    if kind == 0:
        return MemInsn(rng.choice([Opcode.LOAD, Opcode.STORE]), rng.choice(list(MemId)),
                       rng.randrange(1 << 16), rng.randrange(1 << 32), rng.randrange(1 << 16),
                       rng.randrange(1 << 16), rng.randrange(1 << 16), *(rng.randrange(16)
                                                                          for _ in range(4)),
                       **flags)
    w = field_widths(hw, Opcode.GEMM)
    loop = {k: rng.randrange(1 << w[k]) for k in (
        "uop_bgn", "uop_end", "iter_out", "iter_in", "dst_factor_out", "dst_factor_in",
        "src_factor_out", "src_factor_in")}
    if kind == 1:
        return GemmInsn(reset=rng.random() < 0.5, wgt_factor_out=rng.randrange(1 << 10),
                        wgt_factor_in=rng.randrange(1 << 10), **loop, **flags)
    if kind == 2:
        return AluInsn(alu_op=rng.choice(list(AluOp)), use_imm=rng.random() < 0.5,
                       imm=rng.randrange(-(1 << 15), 1 << 15), reset=rng.random() < 0.5,
                       **loop, **flags)
    return FinishInsn(**flags)


@pytest.mark.parametrize("preset", ["pynq", "4x8", "1x32"])
def test_roundtrip(preset):
    hw = PRESETS[preset]
    rng = random.Random(preset)
    for _ in range(500):
        insn = _random_insn(rng, hw)
        data = encode_insn(insn, hw)
        assert len(data) == 16
        assert decode_insn(data, hw) == insn
    for _ in range(200):
        uop = Uop(rng.randrange(hw.acc_depth), rng.randrange(hw.inp_depth),
                  rng.randrange(hw.wgt_depth))
        assert decode_uop(encode_uop(uop, hw), hw) == uop


def test_default_layout_matches_doc():
    hw = PRESETS["pynq"]
    insn = MemInsn(Opcode.LOAD, MemId.WGT, sram_base=1, dram_base=1, y_size=1, x_size=1,
                   x_stride=1, x_pad_1=1)
    word = int.from_bytes(encode_insn(insn, hw), "little")
    assert (word >> 7) & 7 == MemId.WGT
    assert (word >> 10) & 0xFFFF == 1 and (word >> 26) & 0xFFFFFFFF == 1
    assert (word >> 64) & 0xFFFF == 1 and (word >> 124) & 0xF == 1
    g = GemmInsn(uop_end=1, wgt_factor_in=1)
    word = int.from_bytes(encode_insn(g, hw), "little")
    assert (word >> 21) & 0x3FFF == 1 and word >> 118 == 1


@pytest.mark.parametrize("insn, field", [
    (MemInsn(Opcode.LOAD, MemId.INP, y_pad_0=16), "y_pad_0"),
    (MemInsn(Opcode.LOAD, MemId.INP, x_size=1 << 16), "x_size"),
    (GemmInsn(iter_out=1 << 14), "iter_out"),
    (GemmInsn(wgt_factor_in=1 << 10), "wgt_factor_in"),
    (AluInsn(imm=1 << 15), "imm"),
])
def test_overflow_names_field(insn, field):
    with pytest.raises(EncodingError, match=field):
        encode_insn(insn, PRESETS["pynq"])


def test_uop_overflow():
    with pytest.raises(EncodingError, match="wgt"):
        encode_uop(Uop(0, 0, 1024), PRESETS["pynq"])
