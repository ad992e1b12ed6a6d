"""Saving a compiled model as a bundle (the format and loading: :mod:`vtatune.deploy.runtime`,
``_bundle``): TVM's exported library of the CPU's part (linked by the cross compiler of
the CPU it is built for, when that is not this machine's), each offloaded layer's programs
(``vtatune.builds``'s ``program.bin`` images, and each decoded for the functional simulator:
:mod:`simulator.decoded`) and packed constants, and the manifest.

The bundle is written whole or not at all: every file goes into a new directory beside the
target (each file itself written whole: :func:`vtatune.records.write_whole`), which is
renamed into place only when all are written; a bundle already there is replaced only then.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import tempfile
from pathlib import Path
from typing import Any

from simulator.decoded import to_bytes
from simulator.functional import DecodedProgram, decode
from simulator.program import Program
from vtatune import __version__
from vtatune.builds import Build, to_bin
from vtatune.deploy._region import BuiltLayer
from vtatune.deploy.runtime import Device, RegionLayer, SimulatedDevice
from vtatune.deploy.runtime._bundle import (
    CPU_LIBRARY,
    FORMAT,
    MANIFEST,
    VERSION,
    decoded_file,
    npy_bytes,
    requantization_to_dict,
    sha256,
    workload_to_dict,
)
from vtatune.deploy.runtime._errors import DeployError
from vtatune.deploy.runtime._tvm import tvm_version
from vtatune.records import write_whole


def _layer(built: BuiltLayer, runtime: RegionLayer, device: Device,
           files: dict[str, bytes]) -> dict[str, Any]:
    """A built layer's manifest entry (``runtime``: the layer as its region runs it); its
    programs and constants go into ``files``."""
    layer, programs = built.layer, built.programs
    names, written = [], {}  # a batch_matmul's heads mostly run the same programs
    for j, lowered in enumerate(programs.passes):
        data = to_bin(Build(lowered, programs.provenance))
        if data not in written:
            written[data] = f"programs/{layer.name}.{j}.bin"
            files[written[data]] = data
            files[decoded_file(written[data])] = to_bytes(_decoded(device, runtime.passes[j]))
        names.append(written[data])
    constants: dict[str, str | None] = {}
    for kind, buffer in (("weight", built.weight), ("bias", built.bias),
                         ("shift", built.shift)):
        constants[kind] = None
        if buffer is not None:
            constants[kind] = f"constants/{layer.name}.{kind}.npy"
            files[constants[kind]] = npy_bytes(device.download(buffer))
    return {
        "name": layer.name, "kind": runtime.kind, "inputs": list(runtime.inputs),
        "output": runtime.output, "out_shape": list(runtime.out_shape),
        "workload": workload_to_dict(built.workload),
        "requantization": requantization_to_dict(built.requant),
        "schedule": programs.passes[0].schedule.to_dict(),
        "schedule_short": runtime.schedule, "source": runtime.source,
        "provenance": runtime.provenance, "programs": names, **constants,
        "runs": workload_to_dict(runtime.runs) if runtime.runs is not None else None,
        "border": runtime.border.to_list() if runtime.border is not None else None,
        "macs": runtime.macs,
        "padded_macs": runtime.padded_macs, "notes": list(runtime.notes),
        "description": runtime.description,
        "operands": [[list(shape), zp] for shape, zp in runtime.operands],
        "cycles": list(runtime.cycles), "default_cycles": runtime.default_cycles,
    }


def _decoded(device: Device, program: Program) -> DecodedProgram:
    """``program`` decoded for the functional simulator: as the device that ran it decoded
    it, or decoded here (another device)."""
    if isinstance(device, SimulatedDevice):
        return device.decoded(program)
    return decode(program, device.hw)


def bundle_files(model: Any) -> dict[str, bytes]:
    """Every file of ``model``'s bundle (a :class:`~vtatune.deploy.CompiledModel`: typed
    loosely, as ``_deploy`` imports this module), by its path in the bundle."""
    files: dict[str, bytes] = {}
    fcompile = model.cpu_target.fcompile()  # another CPU's: its cross compiler links it
    with tempfile.TemporaryDirectory(prefix="vtatune-bundle-") as tmp:
        library = Path(tmp) / CPU_LIBRARY
        try:
            model.cpu_build.export(library, fcompile)
        except Exception as exc:  # TVM raises its own errors (a missing C compiler, ...)
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise DeployError(f"TVM cannot export the CPU's part: {first}") from None
        files[CPU_LIBRARY] = library.read_bytes()
    regions = [{"symbol": symbol, "params": [[v, list(s)] for v, s in region.params],
                "outputs": list(region.outputs),
                "layers": [_layer(b, r, region.device, files)
                           for b, r in zip(region.built, region.layers, strict=True)]}
               for symbol, region in model.regions.items()]
    out_shape, out_dtype = model.output_spec
    manifest = {
        "format": FORMAT, "version": VERSION, "vtatune": __version__, "tvm": tvm_version(),
        "model": {"name": model.name, "sha256": model.model_sha256,
                  "macs": model.model_macs, "float_macs": model.float_macs},
        "hw": {"model": model.hw.target_model, "config": model.hw.to_dict()},
        "cpu": model.cpu_target.as_dict(),
        "input": {"name": model.input_name, "shape": list(model.input_shape),
                  "dtype": str(model.input_dtype)},
        "output": {"shape": list(out_shape), "dtype": str(out_dtype)},
        "main": [{"region": symbol} if op is None else op.as_dict()
                 for symbol, op in model.main_ops],
        "regions": regions,
        "files": {name: sha256(data) for name, data in sorted(files.items())},
    }
    files[MANIFEST] = (json.dumps(manifest, indent=1) + "\n").encode()
    return files


def save(model: Any, path: str | Path) -> Path:
    """``model`` (a :class:`~vtatune.deploy.CompiledModel`) as a bundle in the directory
    ``path`` (made or replaced), whole or not at all; DeployError when ``path`` is
    something else than a bundle or an empty directory, or cannot be written (nothing new
    is then left behind)."""
    path = bundle_target(path)
    files = bundle_files(model)
    new = _beside(path, "new")
    try:
        write_whole({new / name: data for name, data in files.items()})
        if not path.exists():
            os.rename(new, path)
            return path
        old = _beside(path, "old")
        os.rename(path, old)
        try:
            os.rename(new, path)
        except OSError:
            os.rename(old, path)  # the bundle that was there stays
            raise
        shutil.rmtree(old, ignore_errors=True)
    except OSError as exc:
        with contextlib.suppress(OSError):
            shutil.rmtree(new)
        raise DeployError(f"cannot write the bundle {path}: {exc.strerror}") from None
    return path


def bundle_target(path: str | Path) -> Path:
    """``path`` checked as where a bundle can be saved, before any work (``deploy --save``
    is refused before the build, as ``--output`` is): a new name, an empty directory or a
    bundle (replaced), in a place this process can write (a directory made and removed
    beside it says so); DeployError otherwise."""
    path = Path(path)
    try:
        if path.exists() and not (path / MANIFEST).is_file() and (
                not path.is_dir() or any(path.iterdir())):
            raise DeployError(f"{path} exists and is not a bundle: not overwritten (give a new "
                              "directory)")
        path.parent.mkdir(parents=True, exist_ok=True)
        probe = _beside(path, "probe")
        probe.mkdir()
        probe.rmdir()
    except OSError as exc:
        raise DeployError(f"cannot write the bundle {path}: {exc.strerror or exc}") from None
    return path


def _beside(path: Path, what: str) -> Path:
    """A fresh name beside ``path`` (hidden), for a directory on its way in or out."""
    return path.parent / f".{path.name}.{what}.{secrets.token_hex(6)}"
