"""The CPU's part of a model, built by TVM (``relax.build`` for an LLVM target) and kept in
a cache of built libraries, so a model deployed again (or checked again) loads its CPU
part instead of compiling it.

LLVM's compiling is most of a deploy's time when the CPU keeps much of a model (DenseNet's
concatenations, a transformer's softmax and layer norms: 25 of DenseNet-121's 50 s, half in
``relax.build``, half in the VM's creation, which compiles the module to machine code).
:func:`build_cpu` exports each build (``export_library``: the same machine code, written to
an object and linked) into ``cpu/`` of the deploy cache (:func:`vtatune.deploy.cache_dir`)
under a key naming everything the library depends on: the module (TVM's structural hash,
which covers its constants' values), the target, TVM's version and this file (the build's
recipe). A later build of the same module loads that library (``load_vm``; one that does not
load, damaged, is built again). The files are
written under a temporary name and renamed, so two deploys at once each read a whole
library or build their own; the cache keeps the most recently used libraries up to
:data:`CACHE_BYTES`. A cache that cannot be written (a full disk, a read-only home) is
left alone: the build is used from memory, as it would be without a cache.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vtatune.deploy._cpu_target import CpuTarget
from vtatune.deploy._tuning import cache_dir
from vtatune.deploy._tvm import tvm
from vtatune.deploy.runtime._errors import DeployError
from vtatune.deploy.runtime._tvm import ffi, load_vm, scope_notices_dropped

#: The most the cache of built libraries keeps (the least recently used go first).
CACHE_BYTES = 2 << 30
#: The cache's folder in the deploy cache, and its libraries' suffix.
CACHE_FOLDER, SUFFIX = "cpu", ".so"
#: Where a build is written before its rename; one older than this was left by a process
#: killed halfway (an export takes seconds to a minute).
_BUILDING, STALE_SECONDS = ".build-", 3600


@dataclass(frozen=True)
class CpuBuild:
    """A module built for the CPU: ``executable`` (TVM's relax Executable, None when the
    library came from the cache) and ``library`` (the exported library in the cache, None
    when it could not be written); ``loaded``: its VM, when taking it from the cache loaded
    it already."""

    executable: Any
    library: Path | None
    loaded: Any = field(default=None, repr=False, compare=False)

    def vm(self) -> Any:
        """The relax VM that runs it on this machine's CPU."""
        if self.loaded is not None:
            return self.loaded
        if self.library is not None:
            return load_vm(self.library)
        from tvm import relax

        return relax.VirtualMachine(self.executable, tvm().cpu())

    def export(self, path: Path, fcompile: Any = None) -> None:
        """The library at ``path`` (a bundle's ``cpu.so``): the cached file copied, or the
        executable exported (linked by ``fcompile``, for another CPU)."""
        if self.library is not None:
            path.write_bytes(self.library.read_bytes())
            return
        with scope_notices_dropped():
            self.executable.export_library(str(path), fcompile=fcompile)


def build_cpu(mod: Any, cpu: CpuTarget) -> CpuBuild:
    """``mod`` built for ``cpu``: loaded from the cache when it holds the same build, else
    built (DeployError when TVM cannot) and exported into it."""
    key = hashlib.sha256("\n".join((
        f"{ffi().structural_hash(mod):x}", str(cpu.tvm_target()), tvm().__version__,
        hashlib.sha256(Path(__file__).read_bytes()).hexdigest())).encode()).hexdigest()
    folder = cache_dir() / CACHE_FOLDER
    library = folder / f"{key[:32]}{SUFFIX}"
    if library.is_file():  # whole: written under another name, then renamed
        try:
            loaded = load_vm(library) if cpu.runs_here else None
        except DeployError:  # one this machine cannot load (damaged, say): built again
            with contextlib.suppress(OSError):
                library.unlink()
        else:
            with contextlib.suppress(OSError):
                os.utime(library)  # recently used: pruned last
            return CpuBuild(None, library, loaded)
    executable = _relax_build(mod, cpu)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=folder, prefix=_BUILDING) as tmp:
            written = Path(tmp) / f"lib{SUFFIX}"
            with scope_notices_dropped():
                executable.export_library(str(written), fcompile=cpu.fcompile())
            os.replace(written, library)
        _prune(folder, keep=library)
    except Exception:  # noqa: BLE001 - a full disk, a read-only cache, a failing linker
        return CpuBuild(executable, None)
    return CpuBuild(executable, library)


def _prune(folder: Path, keep: Path) -> None:
    """The least recently used libraries removed until the folder holds at most
    :data:`CACHE_BYTES` (``keep``, just written, stays), and the build folders a killed
    process left (older than :data:`STALE_SECONDS`: another may be writing a young one)."""
    for stale in folder.glob(f"{_BUILDING}*"):
        with contextlib.suppress(OSError):
            if time.time() - stale.stat().st_mtime > STALE_SECONDS:
                shutil.rmtree(stale)
    entries = []
    for path in folder.glob(f"*{SUFFIX}"):
        with contextlib.suppress(OSError):
            stat = path.stat()
            entries.append((stat.st_mtime, stat.st_size, path))
    total = sum(size for _, size, _ in entries)
    for _, size, path in sorted(entries):
        if total <= CACHE_BYTES:
            break
        if path != keep:
            with contextlib.suppress(OSError):
                path.unlink()
                total -= size


#: The widest loop the CPU schedule vectorizes whole (a wider one: in pieces of this).
_VECTOR = 16


def _build_cpu(mod: Any, cpu: CpuTarget) -> Any:
    """``relax.build`` for the CPU ``cpu`` (any LLVM target), with each reduction's innermost
    spatial loop moved inside its reduction loops and vectorized. relax.build leaves the CPU's
    TIR unscheduled (naive loop nests: a convolution's innermost loop is its sum, which LLVM
    cannot vectorize without reordering it); each output's sum still runs in the same order,
    term by term, so the outputs are the unscheduled build's (tests check it), 3-5x sooner
    for ResNet-18's convolutions."""
    t = tvm()
    from tvm import relax
    from tvm.relax.backend import cpu_generic
    from tvm.s_tir import Schedule, ScheduleError
    from tvm.tirx import IterVar, PrimFunc

    target = cpu.tvm_target()
    # FoldConstant left out: it evaluates every call on constants (each weight's
    # dequantize) by building that one function with LLVM, one build each (160 for
    # MobileNet-v2: half its CPU build); the same functions then run at each inference
    # instead, the same code on the same values (tests compare the outputs)
    passes = [p for p in cpu_generic.legalize_passes(target) if p.info.name != "FoldConstant"]
    with target:
        mod = t.transform.Sequential(cpu_generic.library_dispatch_passes(target) + passes)(mod)
    for gv, func in list(mod.functions.items()):
        if not isinstance(func, PrimFunc):
            continue
        sch = Schedule(func)
        changed = False
        for block in sch.get_child_blocks(sch.get_sblock("root")):
            kinds = [int(iv.iter_type) for iv in sch.get(block).iter_vars]
            loops = sch.get_loops(block)
            n = kinds.count(IterVar.DataPar)
            if (len(loops) != len(kinds) or not 0 < n < len(kinds)
                    or kinds != [IterVar.DataPar] * n + [IterVar.CommReduce] * (len(kinds) - n)):
                continue
            *outer, inner = loops[:n]
            try:
                if int(sch.get(inner).extent) > _VECTOR:
                    piece, inner = sch.split(inner, [None, _VECTOR])
                    outer.append(piece)
                sch.reorder(*outer, *loops[n:], inner)
                sch.vectorize(inner)
            except (ScheduleError, TypeError):  # a symbolic extent, an unusual nest
                continue
            changed = True
        if changed:
            mod[gv] = sch.mod["main"]
    return relax.build(mod, target=target)


def _relax_build(mod: Any, cpu: CpuTarget) -> Any:
    """``relax.build`` for the CPU; DeployError when TVM cannot build what its own frontend
    imported (TVM 0.27 leaves an ``R.concat`` of tensors of unknown shape unlegalized, as in
    torchvision's ShuffleNet exported as it is: its CPU-only build fails alike; after
    onnxruntime's ``quant_pre_process``, which infers the shapes, it builds). ``cpu``: the
    CPU it is for."""
    try:
        return _build_cpu(mod, cpu)
    except Exception as exc:  # TVM raises InternalError, TVMError, ...
        text = str(exc).strip().splitlines()
        first = next((line for line in text if "Error" in line), text[0] if text else "")
        offending = next((text[i + 1].strip() for i, line in enumerate(text[:-1])
                          if line.startswith("Offending call")), "")
        raise DeployError(f"TVM cannot build the model for the CPU: {first.strip()}"
                          + (f" ({offending})" if offending else "") + "; shapes TVM could "
                          "not infer are the usual cause: run onnxruntime's quant_pre_process "
                          "on the float model before quantizing it") from None
