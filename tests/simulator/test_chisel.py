"""The Chisel RTL's stock decoder as transcribed (simulator.chisel): it reads the stock
configuration's encoding exactly, misreads a configuration with other index widths in the
fields the check lists, and (with the tvm-vta sources at hand) cites its lines truly."""

import os
import random
import re
import subprocess
from pathlib import Path

import pytest

from simulator.chisel import STOCK_DECODER, core_params, decoder_check, stock_index_widths
from simulator.hardware import DEFAULT, HardwareConfig
from simulator.isa import (
    AluInsn,
    AluOp,
    GemmInsn,
    MemId,
    MemInsn,
    Opcode,
    Uop,
    encode_insn,
    encode_uop,
    insn_layout,
    uop_layout,
)

WIDE_OUT = HardwareConfig.from_target_model("ultra96_1x16x32_i8w8a32_15_16_19_17")
SMALL_UOP = HardwareConfig.from_target_model("ultra96_1x16x32_i8w8a32_10_16_18_18")

_OPCODE = {"MemDecode": Opcode.LOAD, "GemmDecode": Opcode.GEMM, "AluDecode": Opcode.ALU}


def _chisel_read(word: int, bundle: str) -> dict[str, int]:
    """What the stock RTL's bundle reads from ``word`` (``asTypeOf``: bit slices)."""
    return {f.field: (word >> f.offset) & ((1 << f.width) - 1)
            for f in STOCK_DECODER[bundle] if f.field is not None}


def _random_insns(hw, rng):
    """One instruction per bundle with every field at a random value that fits ``hw``."""
    def value(op, name):
        width = dict((n, w) for n, _, w in insn_layout(hw, op))[name]
        return rng.randrange(1 << width)

    mem = MemInsn(Opcode.LOAD, MemId.INP, **{n: value(Opcode.LOAD, n) for n in (
        "sram_base", "dram_base", "y_size", "x_size", "x_stride", "y_pad_0", "y_pad_1",
        "x_pad_0", "x_pad_1")}, pop_next=True)
    loop = ("uop_bgn", "uop_end", "iter_out", "iter_in", "dst_factor_out", "dst_factor_in",
            "src_factor_out", "src_factor_in")
    gemm = GemmInsn(reset=rng.random() < 0.5, **{n: value(Opcode.GEMM, n) for n in (
        *loop, "wgt_factor_out", "wgt_factor_in")}, push_prev=True)
    alu = AluInsn(alu_op=AluOp(rng.randrange(4)), use_imm=rng.random() < 0.5,
                  imm=rng.randrange(-(1 << 15), 1 << 15), reset=rng.random() < 0.5,
                  **{n: value(Opcode.ALU, n) for n in loop}, push_next=True)
    return {"MemDecode": mem, "GemmDecode": gemm, "AluDecode": alu}


def _as_fields(insn) -> dict[str, int]:
    out = {"opcode": int(insn.opcode)}
    for name in ("mem", "sram_base", "dram_base", "y_size", "x_size", "x_stride", "y_pad_0",
                 "y_pad_1", "x_pad_0", "x_pad_1", "reset", "uop_bgn", "uop_end", "iter_out",
                 "iter_in", "dst_factor_out", "dst_factor_in", "src_factor_out",
                 "src_factor_in", "wgt_factor_out", "wgt_factor_in", "alu_op", "use_imm",
                 "imm", "pop_prev", "pop_next", "push_prev", "push_next"):
        if hasattr(insn, name):
            out[name] = int(getattr(insn, name))
    if "imm" in out:
        out["imm"] &= 0xFFFF
    return out


def test_bundles_fill_the_words():
    for bundle, fields in STOCK_DECODER.items():
        end = fields[-1].offset + fields[-1].width
        assert end == (32 if bundle == "UopDecode" else 128)
        assert all(a.offset + a.width == b.offset for a, b in zip(fields, fields[1:], strict=False))


def test_stock_decoder_reads_the_stock_encoding():
    # the transcribed bundles place every field where vtatune's encoder puts it for the
    # stock configuration: encode, read back with the RTL's bit slices
    rng = random.Random(3)
    for _ in range(20):
        for bundle, insn in _random_insns(DEFAULT, rng).items():
            word = int.from_bytes(encode_insn(insn, DEFAULT), "little")
            assert _chisel_read(word, bundle) == _as_fields(insn)
    uop = Uop(dst=2047, src=1234, wgt=1023)
    got = _chisel_read(encode_uop(uop, DEFAULT), "UopDecode")
    assert got == {"dst": 2047, "src": 1234, "wgt": 1023}
    check = decoder_check(DEFAULT)
    assert check.stock and check.summary() == "stock" and not check.changes
    assert check.constants() == {} and check.padding() == {}


@pytest.mark.parametrize("hw", [WIDE_OUT, SMALL_UOP], ids=lambda hw: hw.bitstream)
def test_stock_decoder_misreads_exactly_the_fields_listed(hw):
    check = decoder_check(hw)
    listed = {(c.stock.bundle, c.stock.field) for c in check.changes}
    misread = set()
    rng = random.Random(5)
    for _ in range(50):
        for bundle, insn in _random_insns(hw, rng).items():
            word = int.from_bytes(encode_insn(insn, hw), "little")
            want = _as_fields(insn)
            misread |= {(bundle, k) for k, v in _chisel_read(word, bundle).items()
                        if v != want[k]}
        uop = {name: rng.randrange(1 << w) for name, _, w in uop_layout(hw)}
        got = _chisel_read(encode_uop(Uop(**uop), hw), "UopDecode")
        misread |= {("UopDecode", k) for k, v in got.items() if v != uop[k]}
    assert misread == listed
    assert not check.stock


def test_index_widths_follow_the_buffer_depths():
    # 1x16x32_..._15_16_19_17: ACC 2^17 B of 32 x 4 B = 1024 rows (10 bits), INP 2^16 B of
    # 16 B = 4096 (12 bits): the micro-op's 11/11/10 become 10/12/10
    check = decoder_check(WIDE_OUT)
    acc = (WIDE_OUT.acc_depth - 1).bit_length()
    inp = (WIDE_OUT.inp_depth - 1).bit_length()
    assert (acc, inp) == (10, 12)
    assert check.index_widths == {"acc": (11, acc), "inp": (11, inp)}
    assert check.widened == ("inp",)
    assert check.summary() == "needs acc 11->10, inp 11->12 bits"
    # C_AIDX_BITS sizes both the ACC factors and, in the stock RTL, AluDecode's src
    # factors, which the encoding sizes by INP: each constant keeps one value, and the src
    # fields are declared with C_IIDX_BITS
    assert check.constants() == {"C_AIDX_BITS": acc, "C_IIDX_BITS": inp,
                                 "UopDecode.u0": acc, "UopDecode.u1": inp}
    assert check.retyped() == {"AluDecode.src_0": "C_IIDX_BITS",
                               "AluDecode.src_1": "C_IIDX_BITS"}
    # 256 micro-ops (8 bits): the GEMM head is 3 + 4 + 1 + 8 + 9 + 14 + 14 = 53 bits, an
    # 11-bit ACC factor ends at bit 64, so the stock bundle's 1-bit spare field is gone
    # (the spare bits are now above the last field), and alu_op moves from bit 108
    small = decoder_check(SMALL_UOP)
    assert small.index_widths["uop"] == (13, 8)
    assert small.padding()["GemmDecode"] == {
        "stock": [{"chisel": "empty_0", "offset": 63, "width": 1,
                   "between": ["lp_1", "acc_0"]}], "needed": []}
    assert small.alu_op_offset == 53 + 2 * 11 + 2 * 12 == 99
    assert small.summary() == \
        "needs uop 13->8, inp 11->12, wgt 10->9 bits + padding + ALU patterns"
    assert stock_index_widths() == {"uop": 13, "acc": 11, "inp": 11, "wgt": 10}


def test_core_params_are_the_configuration():
    for hw in (DEFAULT, WIDE_OUT, HardwareConfig.preset("ultra96")):
        p = core_params(hw)
        core = p["CoreParams"]
        assert (core["batch"], core["blockIn"], core["blockOut"]) == \
            (hw.batch, hw.block_in, hw.block_out)
        assert [core[f"{b}MemDepth"] for b in ("uop", "inp", "wgt", "acc", "out")] == \
            [hw.uop_depth, hw.inp_depth, hw.wgt_depth, hw.acc_depth, hw.acc_depth]
        assert p["ShellParams"]["dataBits"] == hw.bus_bits
    assert core_params(DEFAULT)["ShellParams"]["dataBits"] == 64
    assert core_params(WIDE_OUT)["ShellParams"]["dataBits"] == 128


def _tvm_vta_file(path: str) -> str | None:
    """A file of the tvm-vta sources: a checkout or a git directory in $VTATUNE_TVM_VTA
    (default: the mirror of this machine, if present)."""
    root = Path(os.environ.get("VTATUNE_TVM_VTA", "/work/.mirror/apache+tvm-vta/repo"))
    full = f"hardware/chisel/src/main/scala/{path}"
    if (root / full).is_file():
        return (root / full).read_text()
    if (root / "HEAD").is_file():
        commit = "d4a15f627d5cc9762a82270d1be60a136e6af9c2"
        done = subprocess.run(["git", "--git-dir", str(root), "show", f"{commit}:{full}"],
                              capture_output=True, text=True, check=False)
        return done.stdout if done.returncode == 0 else None
    return None


def test_citations_name_the_lines_declared():
    sources = {p: _tvm_vta_file(p) for p in ("core/Decode.scala", "core/ISA.scala")}
    if None in sources.values():
        pytest.skip("the tvm-vta sources are not at hand (set VTATUNE_TVM_VTA)")
    lines = {p: text.splitlines() for p, text in sources.items()}
    for fields in STOCK_DECODER.values():
        for f in fields:
            for ref in f.source.split("; "):
                words = ref.split()
                path, line = words[-1].rsplit(":", 1)
                text = lines[path][int(line) - 1]
                if path.endswith("Decode.scala"):
                    width = f.width_from if f.width_from not in ("Bool", "literal") else \
                        ("Bool()" if f.width_from == "Bool" else f"{f.width}.W")
                    assert re.search(rf"val {f.chisel} = .*{re.escape(width)}", text), ref
                else:
                    assert re.search(rf"val {words[0]} = {f.width}\b", text), ref


def test_shell_and_pattern_citations_name_the_lines():
    from simulator.chisel import _SHELLS, shell_params

    sources = {p: _tvm_vta_file(p) for p in ("shell/Configs.scala", "vta/Configs.scala",
                                             "core/ISA.scala")}
    if None in sources.values():
        pytest.skip("the tvm-vta sources are not at hand (set VTATUNE_TVM_VTA)")
    lines = {p: text.splitlines() for p, text in sources.items()}
    for name, where, top, host, mem in _SHELLS.values():
        first, last = (int(n) for n in where.rsplit(":", 1)[1].split("-"))
        body = "\n".join(lines["shell/Configs.scala"][first - 1:last])
        assert body.startswith(f"class {name} extends Config")
        host_src, mem_src = body.split("memParams")
        for params, src in ((host, host_src), (mem, mem_src)):
            for key, value in params.items():
                assert re.search(rf"{key} = {str(value).lower()}\b", src), (name, key)
        config, line = re.match(r"(\w+) \(vta/Configs.scala:(\d+)\)", top).groups()
        assert lines["vta/Configs.scala"][int(line) - 1].startswith(
            f"class {config} extends Config(new CoreConfig ++ new {name})")
    assert "dontCare(17) + aluId(id) + dontCare(105)" in lines["core/ISA.scala"][127]
    assert shell_params(DEFAULT)["memParams"]["dataBits"] == 64
