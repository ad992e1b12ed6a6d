"""VTA's driver libraries as a process loads them: a board's ``libvta.so``, TVM v0.14's
functional simulator ``libvta_fsim.so``, and its tsim driver ``libvta_tsim.so``, which runs
VTA's RTL verilated into a second library (``libvta_hw.so``).

What a library is, is read from what it registers with TVM's runtime: ``vta.tsim.init``
(tsim), ``vta.simulator.profiler_status`` (fsim), neither (a board's driver). tsim is
started as TVM's ``vta/testing/simulator.py`` (``_load_sw``) starts it: the hardware
library loaded as a TVM module of format ``vta-tsim`` (``TVMModLoadFromFile``), then the
global ``vta.tsim.init`` called with it, which starts the simulation's thread; the driver
then runs programs on it, and ``vta.tsim.profiler_status`` reads the RTL's own cycle
counter.

A library is first tried in a child process (:func:`probe`: this file run as a script,
stdlib only): loaded exactly as :func:`load` loads it, tsim started, a one-instruction
program (FINISH) run, its profiler read. A library that crashes (not VTA's, built against
another runtime, a hardware library that is not one) kills the child, and the caller gets
one line instead of a dead process.

tsim keeps one simulation per process (its ``DPILoader`` is a static of the driver): a
second tsim library in the same process is refused. At exit, the driver's static
``DPILoader`` destructor resumes the simulation's thread after other statics are gone (a
segfault or a hang), so a process that started tsim ends through an exit hook
(``os._exit`` after Python's other exit hooks, with the status :func:`end_process`
recorded), never through C++'s static destructors.
"""

from __future__ import annotations

import atexit
import ctypes
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

RUNTIME = "libtvm_runtime.so"
#: The verilated RTL's library, as tvm-vta's ``hardware/chisel/Makefile`` names it.
HARDWARE = "libvta_hw.so"
TSIM_FORMAT = "vta-tsim"
FSIM, TSIM, DRIVER = "fsim", "tsim", "driver"
#: Each simulator's profiler: the prefix of its ``profiler_status`` / ``profiler_clear``.
PROFILERS = {FSIM: "vta.simulator", TSIM: "vta.tsim"}
#: How long a probe may take (a tsim start resets the RTL; a loaded machine is slow).
PROBE_SECONDS = 120

#: ``vta_phy_addr_t`` is 32 bits unless the library was built with USE_VTA64.
PHY_ADDR = ctypes.c_uint32
#: VTA's C driver API (``vta/include/vta/driver.h``): name -> (restype, argtypes).
DRIVER_API = {
    "VTADeviceAlloc": (ctypes.c_void_p, []),
    "VTADeviceFree": (None, [ctypes.c_void_p]),
    "VTADeviceRun": (ctypes.c_int, [ctypes.c_void_p, PHY_ADDR, ctypes.c_uint32,
                                    ctypes.c_uint32]),
    "VTAMemAlloc": (ctypes.c_void_p, [ctypes.c_size_t, ctypes.c_int]),
    "VTAMemFree": (None, [ctypes.c_void_p]),
    "VTAMemGetPhyAddr": (PHY_ADDR, [ctypes.c_void_p]),
    "VTAMemCopyFromHost": (None, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]),
    "VTAMemCopyToHost": (None, [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]),
    "VTAFlushCache": (None, [ctypes.c_void_p, PHY_ADDR, ctypes.c_int]),
    "VTAInvalidateCache": (None, [ctypes.c_void_p, PHY_ADDR, ctypes.c_int]),
}
#: TVM's VTASynchronize budget (``vta/python/vta/build_module.py``: ``1 << 31``).
WAIT_CYCLES = 1 << 31
CACHED = 1  # VTA_CACHED: TVM's runtime allocates every buffer cached (kAlwaysCache)
_KTVM_MODULE_HANDLE = 9  # TVM's C API type codes (c_runtime_api.h)
_KTVM_STR = 11


class LibraryError(Exception):
    """A library that cannot be used, in one line (the caller raises its own error)."""


# --- loading ---------------------------------------------------------------------------------

_RTLD_NOW = 2
_LM_ID_NEWLM = -1
_RTLD_DI_LMID = 1


def _dl_error(libc: ctypes.CDLL) -> str:
    err = libc.dlerror()
    return err.decode(errors="replace") if err else "unknown error"


def open_isolated(paths: list[Path]) -> list[ctypes.CDLL]:
    """``paths`` loaded in order into a new linker namespace (glibc's dlmopen). The first
    object of a namespace is that namespace's global scope: the VTA library, loaded after
    TVM's runtime, resolves TVM's symbols there (glibc refuses RTLD_GLOBAL in a namespace
    other than the process's). A library the driver dlopens itself (tsim's hardware) lands
    in the driver's namespace."""
    libc = ctypes.CDLL(None)
    if not hasattr(libc, "dlmopen"):
        raise OSError("dlmopen is not available")
    libc.dlmopen.restype = ctypes.c_void_p
    libc.dlmopen.argtypes = [ctypes.c_long, ctypes.c_char_p, ctypes.c_int]
    libc.dlinfo.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    libc.dlerror.restype = ctypes.c_char_p
    out, lmid = [], ctypes.c_long(_LM_ID_NEWLM)
    for path in paths:
        handle = libc.dlmopen(lmid.value, os.fsencode(path), _RTLD_NOW)
        if not handle:
            raise OSError(_dl_error(libc))
        if lmid.value == _LM_ID_NEWLM and libc.dlinfo(handle, _RTLD_DI_LMID,
                                                       ctypes.byref(lmid)) != 0:
            raise OSError(_dl_error(libc))
        out.append(ctypes.CDLL(str(path), handle=handle))
    return out


class _TVMValue(ctypes.Union):
    _fields_ = [("v_int64", ctypes.c_int64), ("v_float64", ctypes.c_double),
                ("v_handle", ctypes.c_void_p), ("v_str", ctypes.c_char_p)]


class Runtime:
    """TVM's C API in a loaded ``libtvm_runtime.so``: global functions, calls, modules."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self._get = lib.TVMFuncGetGlobal
        self._get.restype = ctypes.c_int
        self._get.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
        self._call = lib.TVMFuncCall
        self._call.restype = ctypes.c_int
        self._call.argtypes = [ctypes.c_void_p, ctypes.POINTER(_TVMValue),
                               ctypes.POINTER(ctypes.c_int), ctypes.c_int,
                               ctypes.POINTER(_TVMValue), ctypes.POINTER(ctypes.c_int)]
        self._error = lib.TVMGetLastError
        self._error.restype = ctypes.c_char_p
        self._load = lib.TVMModLoadFromFile
        self._load.restype = ctypes.c_int
        self._load.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]

    def last_error(self) -> str:
        """TVM's last error, the message without the stack trace TVM puts after it
        (``Stack trace:`` and ``[bt]`` lines)."""
        text = (self._error() or b"").decode(errors="replace").split("Stack trace:")[0]
        lines = [ln.strip() for ln in text.splitlines()
                 if ln.strip() and not ln.strip().startswith("[bt]")]
        return lines[-1] if lines else "unknown error"

    def get(self, name: str) -> ctypes.c_void_p | None:
        out = ctypes.c_void_p()
        if self._get(name.encode(), ctypes.byref(out)) != 0 or not out.value:
            return None
        return out

    def call(self, name: str, *modules: ctypes.c_void_p) -> str | None:
        """Call the global ``name`` with module handles as arguments; its string result,
        else None. LibraryError with TVM's message when it fails."""
        func = self.get(name)
        if func is None:
            raise LibraryError(f"TVM's runtime has no global function {name}")
        n = len(modules)
        args = (_TVMValue * max(n, 1))()
        codes = (ctypes.c_int * max(n, 1))()
        for k, m in enumerate(modules):
            args[k].v_handle, codes[k] = m.value, _KTVM_MODULE_HANDLE
        value, code = _TVMValue(), ctypes.c_int()
        if self._call(func, args, codes, n, ctypes.byref(value), ctypes.byref(code)) != 0:
            raise LibraryError(f"{name}: {self.last_error()}")
        return value.v_str.decode() if code.value == _KTVM_STR and value.v_str else None

    def load_module(self, path: Path, fmt: str) -> ctypes.c_void_p:
        out = ctypes.c_void_p()
        if self._load(os.fsencode(path), fmt.encode(), ctypes.byref(out)) != 0:
            raise LibraryError(self.last_error())
        return out


@dataclass(eq=False)
class Loaded:
    """A loaded VTA library, with TVM's runtime when it needs one, and what it keeps from one
    run to the next: the tokens its FIFOs hold. ``path``: the library; ``kind``:
    :data:`FSIM`, :data:`TSIM` or :data:`DRIVER`; ``hardware``: tsim's hardware library."""

    path: Path
    libs: list[ctypes.CDLL]
    isolated: bool
    kind: str
    runtime: Runtime | None
    hardware: Path | None = None
    tokens: tuple[int, int, int, int] = (0, 0, 0, 0)

    @property
    def driver(self) -> ctypes.CDLL:
        return self.libs[-1]

    def profile(self) -> dict[str, int]:
        """The simulator's profiler counters (fsim: bytes moved and micro-op iterations;
        tsim: the RTL's ``cycle_count``); {} for a board's driver."""
        if self.runtime is None or self.kind not in PROFILERS:
            return {}
        text = self.runtime.call(f"{PROFILERS[self.kind]}.profiler_status")
        if text is None:
            raise LibraryError(f"{self.kind} profiler: status returned no string")
        return {k: int(v) for k, v in json.loads(text).items()}

    def clear_profile(self) -> None:
        if self.runtime is not None and self.kind in PROFILERS:
            self.runtime.call(f"{PROFILERS[self.kind]}.profiler_clear")


def _open(paths: list[Path]) -> tuple[list[ctypes.CDLL], bool]:
    try:
        return open_isolated(paths), True
    except OSError as isolated:
        try:  # no dlmopen (not glibc): the process's namespace
            return [ctypes.CDLL(str(p), mode=ctypes.RTLD_GLOBAL) for p in paths], False
        except OSError as exc:
            raise LibraryError(f"cannot load {paths[-1]}: {exc} ({isolated})") from None


def _kind(runtime: Runtime | None) -> str:
    if runtime is not None and runtime.get("vta.tsim.init") is not None:
        return TSIM
    if runtime is not None and runtime.get(f"{PROFILERS[FSIM]}.profiler_status") is not None:
        return FSIM
    return DRIVER


def load(driver: Path, runtime: Path | None, hardware: Path | None) -> Loaded:
    """The library ``driver`` loaded in this process (after TVM's ``runtime``, when given),
    its driver API typed, and, for tsim, the simulation of ``hardware`` started.
    LibraryError (one line) when it is not usable."""
    libs, isolated = _open([runtime, driver] if runtime is not None else [driver])
    lib = libs[-1]
    for name, (restype, argtypes) in DRIVER_API.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise LibraryError(f"{driver.name} does not export {name} (not a VTA driver "
                               "library)") from None
        fn.restype, fn.argtypes = restype, argtypes
    rt = Runtime(libs[0]) if runtime is not None and hasattr(libs[0], "TVMFuncCall") else None
    loaded = Loaded(driver, libs, isolated, _kind(rt), rt)
    if loaded.kind != TSIM:
        if hardware is not None:
            raise LibraryError(f"{driver.name} is not TVM's tsim driver: a hardware library "
                               f"({hardware.name}) is for tsim only")
        return loaded
    assert rt is not None
    if hardware is None and driver.with_name(HARDWARE).is_file():
        hardware = driver.with_name(HARDWARE)  # where scripts/tvm014/ leave it
    if hardware is None:
        raise LibraryError(f"{driver.name} is TVM's tsim driver: it needs VTA's verilated "
                           f"RTL, and there is no {HARDWARE} next to it (name it: "
                           f"libvta:{driver}:HARDWARE_LIBRARY)")
    try:
        module = rt.load_module(hardware, TSIM_FORMAT)
    except LibraryError as exc:
        raise LibraryError(f"{hardware}: not VTA's verilated RTL (loaded as a {TSIM_FORMAT} "
                           f"module: {exc})") from None
    rt.call("vta.tsim.init", module)
    loaded.hardware = hardware
    return loaded


def smoke_run(loaded: Loaded, insn: bytes) -> dict[str, int]:
    """Run the one instruction ``insn`` (16 bytes: a FINISH) as a program, as the driver
    runs every program; the profiler's counters after it."""
    lib = loaded.driver
    handle = lib.VTADeviceAlloc()
    if not handle:
        raise LibraryError("VTADeviceAlloc failed")
    mem = lib.VTAMemAlloc(len(insn), CACHED)
    if not mem:
        raise LibraryError("VTAMemAlloc failed")
    buf = ctypes.create_string_buffer(insn, len(insn))
    lib.VTAMemCopyFromHost(mem, buf, len(insn))
    phys = lib.VTAMemGetPhyAddr(mem)
    lib.VTAFlushCache(mem, phys, len(insn))
    loaded.clear_profile()
    if lib.VTADeviceRun(handle, phys, 1, WAIT_CYCLES) != 0:
        raise LibraryError(f"VTADeviceRun of one FINISH timed out after {WAIT_CYCLES} cycles")
    counters = loaded.profile()
    lib.VTAMemFree(mem)
    lib.VTADeviceFree(handle)
    return counters


# --- the probe: the same, in a child process --------------------------------------------------

def probe(driver: Path, runtime: Path | None, hardware: Path | None, insn: bytes,
          timeout: float = PROBE_SECONDS) -> dict[str, object]:
    """:func:`load` and :func:`smoke_run` in a child process: ``{"kind": ..., "hardware":
    tsim's hardware library or None, "counters": {...}}``, or LibraryError saying why the
    library is not usable (the child's error, the signal that killed it, its timeout)."""
    args = json.dumps([str(driver), None if runtime is None else str(runtime),
                       None if hardware is None else str(hardware), insn.hex()])
    try:
        done = subprocess.run([sys.executable, "-I", __file__, args], capture_output=True,
                              text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise LibraryError(f"{driver.name}: a test process that loads it and runs one "
                           f"instruction did not finish in {timeout:g} s") from None
    if done.returncode < 0:
        try:
            name = signal.Signals(-done.returncode).name
        except ValueError:
            name = f"signal {-done.returncode}"
        raise LibraryError(f"{driver.name}: loading it and running one instruction killed a "
                           f"test process ({name}); not loaded")
    lines = done.stdout.strip().splitlines()
    try:
        report = json.loads(lines[-1])
    except (IndexError, ValueError):
        err = done.stderr.strip().splitlines()
        raise LibraryError(f"{driver.name}: a test process that loads it exited with status "
                           f"{done.returncode}" + (f": {err[-1]}" if err else "")) from None
    if "error" in report:
        raise LibraryError(report["error"])
    return report


def _probe_main(args: str) -> None:
    driver, runtime, hardware, insn = json.loads(args)
    try:
        loaded = load(Path(driver), runtime and Path(runtime), hardware and Path(hardware))
        report: dict[str, object] = {
            "kind": loaded.kind, "hardware": loaded.hardware and str(loaded.hardware),
            "counters": smoke_run(loaded, bytes.fromhex(insn))}
    except LibraryError as exc:
        report = {"error": str(exc)}
    print(json.dumps(report), flush=True)
    os._exit(0)  # never tsim's static destructors (see the module's doc)


# --- the end of a process that started tsim ---------------------------------------------------

_status: list[int] = []


def end_process(status: int) -> None:
    """Record the status a process that started tsim ends with: the command line calls it
    with its own (Python's exit hooks are not told the status ``sys.exit`` was given)."""
    _status[:] = [status]


def _leave() -> None:
    """The exit hook of a process that started tsim: Python's other exit hooks run as they
    would (this one, registered last, runs first), then the process leaves through
    ``os._exit``, before C++'s static destructors (those of the tsim driver crash or hang).
    Its status: the one recorded by :func:`end_process`, else 1 after an uncaught exception
    (``sys.last_value``), else 0."""
    atexit.unregister(_leave)
    atexit._run_exitfuncs()  # noqa: SLF001 - CPython's own: the hooks registered before ours
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    status = _status[0] if _status else 1 if getattr(sys, "last_value", None) else 0
    os._exit(status)


def guard_exit() -> None:
    """Make this process end without the tsim driver's static destructors."""
    atexit.unregister(_leave)
    atexit.register(_leave)


if __name__ == "__main__":
    _probe_main(sys.argv[1])
