"""TVM's runtime without TVM's compiler: the relax VM of an exported library, through
``tvm_ffi`` and ``libtvm_runtime.so`` (what a board installs), never the ``tvm`` Python
package (``import tvm`` loads the whole compiler, Relax and its frontends: ~800 modules).

The runtime library is ``$TVM_LIBRARY_PATH/libtvm_runtime.so`` when that variable is set
(as TVM's own ``libinfo`` looks), else the one in the installed ``apache-tvm`` wheel.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.metadata
import importlib.util
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from vtatune.deploy.runtime._errors import DeployError

#: relax.VirtualMachine's constants: a CPU device (DLPack's kDLCPU), the pooled allocator.
_CPU, _POOLED = 1, 2
#: TVM's buffers are 64-byte aligned; its compiled code may assume it of its inputs.
_ALIGN = 64

_LOADED: list[ctypes.CDLL] = []
#: What TVM 0.27 prints on stderr that says nothing to a user: its relax executable, for
#: each constant it saves or loads (a leftover debug line, "Warning: Scope Loaded:" with
#: nothing after it); tvm_ffi, for each exported library loaded after another (each
#: registers its embedded module under one system-library name; the VM of each reads its
#: own module, never that name).
_SCOPE_NOTICE = re.compile(r"executable\.cc:\d+: Warning: Scope (Saving|Loaded):\s*$"
                           r"|Warning:SystemLib symbol __tvm_ffi__library_bin get overriden")
#: The region symbols registered in this process (TVM's registry is global to it).
_REGISTERED: set[str] = set()


def tvm_version() -> str:
    """The installed apache-tvm release, read from its metadata (no import), or ``none``."""
    try:
        return importlib.metadata.version("apache-tvm")
    except importlib.metadata.PackageNotFoundError:
        return "none"


def _runtime_library() -> Path:
    if os.environ.get("TVM_LIBRARY_PATH"):
        return Path(os.environ["TVM_LIBRARY_PATH"]) / "libtvm_runtime.so"
    spec = importlib.util.find_spec("tvm")
    if spec is None or not spec.submodule_search_locations:
        raise DeployError("running a bundle needs TVM's runtime (libtvm_runtime.so): "
                          "pip install apache-tvm, or set TVM_LIBRARY_PATH")
    return Path(next(iter(spec.submodule_search_locations))) / "lib" / "libtvm_runtime.so"


def ffi() -> ModuleType:
    """``tvm_ffi`` with TVM's runtime library loaded (once per process): the relax VM and
    its builtins registered, as ``import tvm`` would register them."""
    try:
        tvm_ffi = _import_tvm_ffi()
    except ImportError:
        raise DeployError("running a bundle needs TVM's runtime: pip install apache-tvm") \
            from None
    if not _LOADED:
        path = _runtime_library()
        try:
            _LOADED.append(ctypes.CDLL(str(path), ctypes.RTLD_GLOBAL))
        except OSError as exc:
            raise DeployError(f"cannot load TVM's runtime {path}: {exc}") from None
    return tvm_ffi


def _import_tvm_ffi() -> ModuleType:
    """``tvm_ffi``, imported without ml_dtypes when nothing imported either yet: tvm_ffi
    imports it, if installed, only to map its dtypes (bfloat16, float8, int4, ...), which no
    bundle passes (its tensors are int8, uint8, int32, int64, float32), and it is half of a
    bundle's start (0.55 s of CPU of about 1.1 s, importing its C extension). ml_dtypes
    stays importable afterwards."""
    if "tvm_ffi" in sys.modules or "ml_dtypes" in sys.modules:
        import tvm_ffi

        return tvm_ffi
    sys.modules["ml_dtypes"] = None  # type: ignore[assignment]  # its import: ImportError
    try:
        import tvm_ffi
    finally:
        if sys.modules.get("ml_dtypes", 0) is None:
            del sys.modules["ml_dtypes"]
    return tvm_ffi


@contextlib.contextmanager
def scope_notices_dropped() -> Iterator[None]:
    """Meanwhile, TVM's stderr (the C++ runtime writes to file descriptor 2) without the
    relax executable's scope notices; anything else it writes is passed on."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            lines = caught.read().decode(errors="replace").splitlines(keepends=True)
            kept = "".join(line for line in lines if not _SCOPE_NOTICE.search(line))
            if kept:
                sys.stderr.write(kept)


def load_vm(library: Path) -> Any:
    """The relax VM of an exported library (``Executable.export_library``), on the CPU."""
    tvm_ffi = ffi()
    try:
        with scope_notices_dropped():
            vm = tvm_ffi.load_module(str(library))["vm_load_executable"]()
    except Exception as exc:  # tvm_ffi raises its own errors for a bad library
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DeployError(f"cannot load {library}: {first}") from None
    vm["vm_initialization"](_CPU, 0, _POOLED)
    return vm


def registered(symbol: str) -> bool:
    """Whether a region of this process (built or loaded here) holds ``symbol``."""
    return symbol in _REGISTERED


def register(symbol: str, function: Any) -> None:
    """``function`` as the global function ``symbol`` (what ``R.call_dps_packed`` calls);
    DeployError when a region of this process holds it already (the model's VM would call
    the newer one)."""
    if symbol in _REGISTERED:
        raise DeployError(f"the region {symbol} is registered in this process already")
    ffi().register_global_func(symbol, function, override=True)
    _REGISTERED.add(symbol)


def run_main(vm: Any, x: np.ndarray) -> np.ndarray:
    """The VM's ``main`` on ``x`` (its first output when it returns a tuple), as numpy. The
    input is copied into 64-byte aligned memory, as TVM allocates its tensors."""
    tvm_ffi = ffi()
    raw = np.empty(x.nbytes + _ALIGN, np.uint8)
    start = -raw.ctypes.data % _ALIGN
    aligned = raw[start:start + x.nbytes].view(x.dtype).reshape(x.shape)
    aligned[...] = x
    out = vm["main"](tvm_ffi.from_dlpack(aligned))
    if not isinstance(out, tvm_ffi.Tensor):
        out = out[0]
    return np.from_dlpack(out).copy()
