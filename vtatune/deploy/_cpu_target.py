"""What TVM compiles a model's CPU part for (:class:`CpuTarget`): this machine, a board's
CPU by the board's name, or any LLVM target TVM takes; and the C++ toolchain that links it
(``export_library``'s ``fcompile``) when it is not this machine's CPU.

The boards are the Zynq and Cyclone V boards VTA runs on: Pynq-Z1/Z2 (Zynq-7020) and
DE10-Nano (Cyclone V SoC) have a dual Cortex-A9 with NEON running 32-bit ARM Linux with
hard float (``armv7l``, Debian's ``armhf``); Ultra96 (Zynq UltraScale+ ZU3EG) a Cortex-A53
running 64-bit Linux (``aarch64``). TVM v0.14's VTA targets the same triples
(``vta.Environment.target_host``).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from typing import Any

from vtatune.deploy._tvm import tvm
from vtatune.deploy.runtime._bundle import host_arch, triple_arch
from vtatune.deploy.runtime._errors import DeployError

#: This machine's CPU: TVM's ``llvm`` target with nothing more (LLVM's host triple and CPU).
HOST = "host"
#: The boards' CPUs as TVM 0.27's LLVM targets (its JSON form: TVM 0.27 no longer parses
#: "llvm -mtriple=..." strings; :func:`resolve_cpu_target` still takes them).
BOARDS: dict[str, dict[str, Any]] = {
    "pynq": {"kind": "llvm", "mtriple": "armv7l-linux-gnueabihf", "mcpu": "cortex-a9",
             "mattr": ["+neon"], "mfloat-abi": "hard"},
    "de10nano": {"kind": "llvm", "mtriple": "armv7l-linux-gnueabihf", "mcpu": "cortex-a9",
                 "mattr": ["+neon"], "mfloat-abi": "hard"},
    "ultra96": {"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mcpu": "cortex-a53"},
}
#: The cross compiler (g++, which links TVM's objects into the shared library) for a CPU
#: architecture, and the Debian/Ubuntu package that installs it.
CROSS_COMPILERS: dict[str, tuple[str, str]] = {
    "arm": ("arm-linux-gnueabihf-g++", "g++-arm-linux-gnueabihf"),
    "aarch64": ("aarch64-linux-gnu-g++", "g++-aarch64-linux-gnu"),
    "x86_64": ("x86_64-linux-gnu-g++", "g++-x86-64-linux-gnu"),
}
_CHOICES = f"{HOST}, {', '.join(BOARDS)}, or a TVM llvm target"


@dataclass(frozen=True)
class CpuTarget:
    """A CPU part's target: ``name`` (``host``, a board, or ``custom``), ``target`` (TVM's
    target: ``"llvm"`` or its JSON config), ``triple`` (LLVM's target triple) and ``arch``
    (the triple's architecture: ``x86_64``, ``aarch64``, ``arm``, ...)."""

    name: str
    target: str | dict[str, Any]
    triple: str
    arch: str

    @property
    def runs_here(self) -> bool:
        """Whether this machine's CPU runs what is built for this target."""
        return self.arch == host_arch()

    @property
    def cross_compiler(self) -> tuple[str, str] | None:
        """The cross compiler and its package, None when this machine's compiler links it."""
        return None if self.runs_here else CROSS_COMPILERS[self.arch]

    def describe(self) -> str:
        return f"{self.name} ({self.triple})"

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "target": self.target, "triple": self.triple,
                "arch": self.arch}

    def tvm_target(self) -> Any:
        return tvm().target.Target(self.target)

    def fcompile(self) -> Any:
        """``export_library``'s ``fcompile``: None (TVM's default, this machine's compiler)
        or the cross compiler, DeployError in one line naming its package when it is not
        installed."""
        if self.cross_compiler is None:
            return None
        compiler, package = self.cross_compiler
        if shutil.which(compiler) is None:
            raise DeployError(f"the CPU part for {self.describe()} is linked by {compiler}, "
                              f"which is not installed: apt-get install {package}")
        tvm()
        from tvm.support import cc

        return cc.cross_compiler(compiler)


def _config(spec: str) -> str | dict[str, Any]:
    """A target given as JSON (TVM 0.27's form), as "llvm -key=value ..." (TVM's former
    form: ``mattr`` and ``keys`` comma-separated lists), or as a kind alone."""
    if spec.startswith("{"):
        try:
            config = json.loads(spec)
        except json.JSONDecodeError as exc:
            raise DeployError(f"--cpu-target {spec}: not JSON ({exc})") from None
        if not isinstance(config, dict):
            raise DeployError(f"--cpu-target {spec}: a JSON object is a target, not this")
        return config
    kind, *options = spec.split()
    if not options:
        return kind
    config: dict[str, Any] = {"kind": kind}
    for option in options:
        key, eq, value = option.lstrip("-").partition("=")
        if not option.startswith("-") or not eq:
            raise DeployError(f"--cpu-target {spec}: {option!r} is not -key=value")
        config[key] = value.split(",") if key in ("mattr", "keys", "libs") else value
    return config


def resolve_cpu_target(spec: str | None = None) -> CpuTarget:
    """The CPU target ``spec`` names: None or ``host`` (this machine), a board (``pynq``,
    ``de10nano``, ``ultra96``: :data:`BOARDS`), or a TVM ``llvm`` target (JSON, or
    "llvm -mtriple=... -mcpu=..."); DeployError in one line for anything else, or for an
    architecture no cross compiler is known for (:data:`CROSS_COMPILERS`)."""
    spec = (spec or HOST).strip()
    if spec in BOARDS:
        name, config = spec, BOARDS[spec]
    elif spec == HOST:
        name, config = HOST, "llvm"
    elif spec.startswith(("{", "llvm")):
        name, config = "custom", _config(spec)
    else:
        raise DeployError(f"unknown --cpu-target {spec!r}: {_CHOICES} (e.g. "
                          f"'{json.dumps(BOARDS['ultra96'])}')")
    try:
        target = tvm().target.Target(config)
    except Exception as exc:  # TVM raises ValueError, TVMError, ...
        text = str(exc).strip().splitlines()
        raise DeployError(f"--cpu-target {spec}: {text[0] if text else type(exc).__name__}") \
            from None
    if target.kind.name != "llvm":
        raise DeployError(f"--cpu-target {spec}: a {target.kind.name} target; the CPU part is "
                          "compiled by LLVM (an llvm target)")
    triple = str(target.attrs.get("mtriple") or _system_triple())
    arch = triple_arch(triple)
    if arch != host_arch() and arch not in CROSS_COMPILERS:
        raise DeployError(f"--cpu-target {spec}: no cross compiler is known for {arch} "
                          f"({', '.join(CROSS_COMPILERS)})")
    return CpuTarget(name, config, triple, arch)


def _system_triple() -> str:
    """LLVM's triple for this machine (a target with no ``mtriple`` is for it)."""
    return str(tvm().get_global_func("target.llvm_get_system_triple")())
