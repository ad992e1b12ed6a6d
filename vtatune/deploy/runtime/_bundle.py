"""A deployed model kept: the bundle directory :meth:`vtatune.deploy.CompiledModel.save`
writes, loaded here into a :class:`~vtatune.deploy.runtime.DeployedModel` with no ONNX
file, no log and no code generation.

A bundle holds:

- ``manifest.json``: the format, the vtatune and TVM versions that wrote it, the model's
  name and SHA-256, the hardware config, the CPU the CPU part is compiled for (its name,
  TVM target, LLVM triple and architecture), the input's and output's shapes and dtypes, the
  ops of ``main`` in order, each offloaded region (its symbol, parameters, outputs, layers:
  workload, requantization, schedule and where it came from, its programs and constants),
  and the SHA-256 of every other file;
- ``cpu.so``: TVM's exported library of the CPU's part (the relax VM's executable);
- ``programs/<layer>.<pass>.bin``: each VTA pass's program (:mod:`simulator.image`), as
  the chain lowered it (the tokens it starts from included: ``vtatune.deploy._chain``);
  a program a layer runs more than once (a batch_matmul's heads) is one file;
- ``programs/<layer>.<pass>.decoded``: each program decoded for the functional simulator
  (:mod:`simulator.decoded`), once, when the bundle is saved: on the simulated device a
  loaded bundle's first inference reads it instead of decoding (a bundle without them,
  as vtatune wrote them before, decodes on its first inference). Its unpickler builds
  only the steps' own parts, and a bundle is code anyway: its ``cpu.so`` runs when it
  loads;
- ``constants/<layer>.weight.npy``, ``.bias.npy``: weights and biases packed as the device
  holds them.

Loading checks, before anything runs, that the bundle is whole (every checksum), that this
vtatune and TVM wrote it, that this machine's CPU runs its CPU part (a bundle built for a
board's CPU runs on the board), that the device is the bundle's hardware, and that no region of
this process holds its regions' symbols (TVM's function registry is one per process: a
model built or loaded here would lose them); it then uploads the
constants, registers each region's function with TVM under its symbol (what the CPU part's
``R.call_dps_packed`` calls) and only then creates the VM. A refusal is one
:class:`~vtatune.deploy.DeployError` line.
"""

from __future__ import annotations

import hashlib
import io
import json
import platform
import time
from dataclasses import fields
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from simulator.errors import VTAError
from simulator.hardware import HardwareConfig
from simulator.image import ImageError, decode
from simulator.isa import Instruction
from simulator.program import Program
from vtatune import __version__
from vtatune.deploy.runtime._device import Device, SimulatedDevice
from vtatune.deploy.runtime._errors import DeployError
from vtatune.deploy.runtime._inputs import ModelInput
from vtatune.deploy.runtime._model import DeployedModel
from vtatune.deploy.runtime._region import (
    Border,
    CpuOp,
    RegionLayer,
    RegionRunner,
    Trace,
    packed_function,
)
from vtatune.deploy.runtime._requantize import Requantization
from vtatune.deploy.runtime._select import device_from_spec
from vtatune.deploy.runtime._tvm import load_vm, register, registered, tvm_version
from vtatune.workloads import WORKLOAD_CLASSES, Epilogue, Workload

#: The manifest's name in a bundle, its format and version.
MANIFEST = "manifest.json"
FORMAT = "vtatune.bundle"
#: 3: a requantization's ``exact`` may be ``IN_PASS``, and ``True`` means VTA's exact rounding
#: in one pass where it has one (a bundle of 2 saved the CPU's byte passes for it).
VERSION = 3
#: TVM's exported library of the CPU's part.
CPU_LIBRARY = "cpu.so"


#: Other names of an architecture (``platform.machine()``'s, a triple's first part).
_ARCH_NAMES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}


def machine_arch(name: str) -> str:
    """An architecture's one name: ``x86_64``, ``aarch64``, ``arm`` (any 32-bit ARM:
    ``armv7l``, ``armv7a``, ``thumbv7``, ...), or the name as it is."""
    name = name.lower()
    if name.startswith(("arm", "thumb")) and name not in _ARCH_NAMES:
        return "arm"
    return _ARCH_NAMES.get(name, name)


def triple_arch(triple: str) -> str:
    """The architecture of an LLVM target triple (``armv7l-linux-gnueabihf``: ``arm``)."""
    return machine_arch(triple.split("-", 1)[0])


def host_arch() -> str:
    """This machine's architecture (:func:`machine_arch` of ``platform.machine()``)."""
    return machine_arch(platform.machine())


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def workload_to_dict(wl: Workload) -> dict[str, Any]:
    """A workload as JSON: its operator, name, shape and epilogue."""
    return {"operator": wl.operator, "name": wl.name, "shape": wl.shape_args(),
            "epilogue": wl.epilogue.to_list()}


def workload_from_dict(d: dict[str, Any]) -> Workload:
    return WORKLOAD_CLASSES[d["operator"]](**d["shape"], name=d["name"],
                                           epilogue=Epilogue.from_list(d["epilogue"]))


def requantization_to_dict(r: Requantization) -> dict[str, Any]:
    """A requantization as JSON: each of its fields (an array as a list)."""
    return {f.name: np.asarray(v).tolist() if isinstance(v, np.ndarray) else v
            for f in fields(r) for v in (getattr(r, f.name),)}


def requantization_from_dict(d: dict[str, Any]) -> Requantization:
    # per-channel values are tuples (the dataclass is hashed): JSON gives lists
    return Requantization(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})


def npy_bytes(array: np.ndarray) -> bytes:
    out = io.BytesIO()
    np.save(out, array, allow_pickle=False)
    return out.getvalue()


def _refuse(path: Path, what: str) -> DeployError:
    return DeployError(f"bundle {path}: {what}")


def read_manifest(path: str | Path) -> dict[str, Any]:
    """The manifest of the bundle ``path``, its format and versions checked."""
    path = Path(path)
    if not (path / MANIFEST).is_file():
        what = "not found" if not path.exists() else f"no {MANIFEST} (not a vtatune bundle)"
        raise _refuse(path, what)
    try:
        manifest = json.loads((path / MANIFEST).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _refuse(path, f"{MANIFEST} is damaged ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise _refuse(path, f"{MANIFEST} is not a vtatune bundle's manifest")
    if manifest.get("version") != VERSION:
        raise _refuse(path, f"format version {manifest.get('version')}, this vtatune reads "
                            f"{VERSION}")
    wrote = (manifest.get("vtatune"), manifest.get("tvm"))
    here = (__version__, tvm_version())
    if wrote != here:
        raise _refuse(path, f"saved by vtatune {wrote[0]} with TVM {wrote[1]}, this is vtatune "
                            f"{here[0]} with TVM {here[1]}: save it again with these")
    return manifest


def input_of(path: str | Path, manifest: dict[str, Any]) -> ModelInput:
    """What the bundle at ``path`` takes, from its ``manifest``."""
    try:
        inp = manifest["input"]
        return ModelInput(inp["name"], tuple(int(n) for n in inp["shape"]),
                          np.dtype(inp["dtype"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise _refuse(Path(path), f"{MANIFEST} is damaged ({type(exc).__name__}: {exc})") \
            from None


def _files(path: Path, manifest: dict[str, Any]) -> dict[str, bytes]:
    """Every file the manifest lists, each checked against its SHA-256."""
    out = {}
    for name, digest in manifest["files"].items():
        try:
            data = (path / name).read_bytes()
        except OSError as exc:
            raise _refuse(path, f"cannot read {name} ({exc.strerror})") from None
        if sha256(data) != digest:
            raise _refuse(path, f"{name} is damaged (its SHA-256 is not the manifest's): save "
                                "the bundle again")
        out[name] = data
    return out


def _array(path: Path, files: dict[str, bytes], name: str | None) -> np.ndarray | None:
    if name is None:
        return None
    if name not in files:
        raise _refuse(path, f"{name} is not among the manifest's files")
    return np.load(io.BytesIO(files[name]), allow_pickle=False)


def _layer(path: Path, files: dict[str, bytes], d: dict[str, Any], device: Device,
           memo: dict[bytes, Instruction]) -> RegionLayer:
    passes, programs = [], {}  # a program the layer runs more than once is one file
    for name in d["programs"]:
        if name not in files:
            raise _refuse(path, f"{name} is not among the manifest's files")
        if name not in programs:
            try:
                image = decode(files[name], name, memo)
            except ImageError as exc:
                raise _refuse(path, str(exc)) from None
            if image.hw != device.hw:
                raise _refuse(path, f"{name} is a program of {image.hw.target_model}")
            programs[name] = image.program
            kept = decoded_file(name)
            if isinstance(device, SimulatedDevice) and kept in files:
                device.decoded_by(image.program, partial(_read_decoded, path, kept,
                                                         files[kept], image.program, device.hw))
        passes.append(programs[name])
    weight, bias, shift = (_array(path, files, d.get(k)) for k in ("weight", "bias", "shift"))
    return RegionLayer(
        d["name"], d["kind"], tuple(d["inputs"]), int(d["output"]), tuple(d["out_shape"]),
        workload_from_dict(d["workload"]), requantization_from_dict(d["requantization"]),
        tuple(passes), d["schedule_short"], d["source"], d["provenance"],
        None if weight is None else device.upload(weight),
        None if bias is None else device.upload(bias),
        workload_from_dict(d["runs"]) if d.get("runs") else None,
        Border(*d["border"]) if d["border"] is not None else None,
        int(d["macs"]), int(d["padded_macs"]), tuple(d["notes"]), d["description"],
        tuple((tuple(shape), int(zp)) for shape, zp in d["operands"]),
        tuple(int(c) for c in d["cycles"]),
        None if shift is None else device.upload(shift), int(d.get("default_cycles", 0)))


def decoded_file(program_file: str) -> str:
    """The file that keeps a program file's program decoded for the functional simulator
    (:mod:`simulator.decoded`): ``programs/<layer>.<pass>.decoded``."""
    return program_file.removesuffix(".bin") + ".decoded"


def _read_decoded(path: Path, name: str, data: bytes, program: Program,
                  hw: HardwareConfig) -> Any:
    from simulator.decoded import from_bytes

    try:
        return from_bytes(data, program, hw)
    except VTAError as exc:
        raise _refuse(path, f"{name}: {exc}") from None


def _main_op(d: dict[str, Any]) -> tuple[str, CpuOp | None]:
    if "region" in d:
        return d["region"], None
    return "", CpuOp(**d)


def load(path: str | Path, device: Device | str | None = None,
         hw: HardwareConfig | str | None = None) -> DeployedModel:
    """The bundle at ``path``, ready to run on ``device`` (a :class:`Device` of the bundle's
    hardware, or a spec for :func:`device_from_spec`: ``sim`` (default: a
    :class:`SimulatedDevice` that reads each program kept decoded and runs it untimed, the
    cycles being the bundle's record of the timing model's), ``libvta:PATH``).
    ``hw``: the hardware the caller means to run on (a preset, a file or a config): a
    bundle of other hardware is refused. DeployError in one line for a bundle that is
    damaged, of another vtatune or TVM, or of other hardware."""
    t0 = time.perf_counter()
    path = Path(path)
    manifest = read_manifest(path)
    try:
        cpu = manifest["cpu"]
        if cpu["arch"] != host_arch():
            raise _refuse(path, f"its CPU part is compiled for {cpu['name']} ({cpu['triple']}), "
                                f"this machine is {host_arch()}: run it there, or save it "
                                "again with --cpu-target host")
        bundle_hw = HardwareConfig.from_dict(manifest["hw"]["config"])
        if hw is not None:
            want = hw if isinstance(hw, HardwareConfig) else HardwareConfig.resolve(hw)
            if want != bundle_hw:
                raise _refuse(path, f"built for {bundle_hw.target_model}, not for "
                                    f"{want.target_model}")
        if device in (None, "sim"):  # the bundle records each pass's cycles: no timing
            device = SimulatedDevice(bundle_hw, timed=False)
        elif isinstance(device, str):
            device = device_from_spec(device, bundle_hw)
        elif device.hw != bundle_hw:
            raise _refuse(path, f"built for {bundle_hw.target_model}, the device is "
                                f"{device.hw.target_model}")
        files = _files(path, manifest)
        if CPU_LIBRARY not in files:
            raise _refuse(path, f"{CPU_LIBRARY} is not among the manifest's files")
        taken = [r["symbol"] for r in manifest["regions"] if registered(r["symbol"])]
        if taken:
            raise _refuse(path, f"its regions ({', '.join(taken)}) are registered in this "
                                "process already (the model was built or loaded here): load "
                                "it in another process")
        trace = Trace()
        memo: dict[bytes, Instruction] = {}  # the programs' instructions, decoded once each
        for region in manifest["regions"]:
            layers = tuple(_layer(path, files, d, device, memo) for d in region["layers"])
            runner = RegionRunner(region["symbol"],
                                  tuple((int(v), tuple(s)) for v, s in region["params"]),
                                  layers, tuple(region["outputs"]), device, trace)
            register(region["symbol"], packed_function(runner))
        vm = load_vm(path / CPU_LIBRARY)
        inp = input_of(path, manifest)
        main_ops = [_main_op(d) for d in manifest["main"]]
        name = manifest["model"]["name"]
        macs = int(manifest["model"]["macs"])
        floats = int(manifest["model"].get("float_macs", 0))  # bundles before it: 0
    except (KeyError, TypeError, ValueError) as exc:
        raise _refuse(path, f"{MANIFEST} is damaged ({type(exc).__name__}: {exc})") from None
    except VTAError as exc:
        if isinstance(exc, DeployError):
            raise
        raise _refuse(path, str(exc)) from None
    return DeployedModel(name, bundle_hw, device, (inp.name, inp.shape, inp.dtype), vm, trace,
                         main_ops, {"load": time.perf_counter() - t0}, macs, floats)
