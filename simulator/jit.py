"""numba's ``njit``, imported on first use.

Importing numba costs ~0.2 s, more than the rest of vtatune's start-up. Commands that never
lower or time a program (``--help``, ``best``, ``analyze``, a bad option's error line) should
not pay it. :func:`njit` marks a function; the first call of any marked function of a module
imports numba and replaces every marked function of that module, in definition order, by its
compiled dispatcher, so compiled functions calling each other see dispatchers.

The first run after install compiles the engines (about 10 s for the main command; numba
caches them on disk). Each is compiled once per argument types, not per constant argument
(:func:`_compile_per_type`); helpers only compiled code calls are marked ``inner``.
:func:`on_first_compile` lets a caller say so right before numba compiles (a cache miss), and
only then: a run that compiles nothing (a refusal, a listing, cached engines) says nothing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = [
    "announce_compile", "engines_to_compile", "interpret", "njit", "on_first_compile",
    "skip_blas_probe", "specializations", "uncached",
]

_PENDING: dict[str, list[_Lazy]] = {}  # module name -> its marked functions, in order
_COMPILED: dict[str, Any] = {}  # "module.function" -> its numba dispatcher

_notice: Callable[[], None] | None = None  # said before the process's first compilation
_listening = False  # a listener of numba's compile event is registered


class _Lazy:
    def __init__(self, fn, options: dict[str, Any]) -> None:
        self.py_func, self.options = fn, options
        _PENDING.setdefault(fn.__module__, []).append(self)

    def __call__(self, *args):
        return _compile(self.py_func.__module__)[self.py_func.__name__](*args)


def _compile(module_name: str) -> dict[str, Any]:
    from numba import njit as numba_njit

    _listen()
    _load_lightly()
    namespace = vars(sys.modules[module_name])
    for lazy in _PENDING.pop(module_name, ()):
        dispatcher = numba_njit(**lazy.options)(lazy.py_func)
        _compile_per_type(dispatcher)
        namespace[lazy.py_func.__name__] = dispatcher
        _COMPILED[f"{module_name}.{lazy.py_func.__name__}"] = dispatcher
    return namespace


def _compile_per_type(dispatcher: Any) -> None:
    """Make ``dispatcher`` compile once per argument types where compiled code calls it,
    not once per constant. numba types a constant argument at a compiled call site by its
    value (``Literal[int](0)``, an enum member by its enum) and compiles the callee anew for
    each combination: the executor's ``_append`` ten times, its small helpers four times
    each, about 4.5 s of the main command's 22 s of compiling. Typed by their plain types, the
    constants still fold where it matters: LLVM inlines the callee into its caller."""
    from numba.core import types

    def plain(t: Any) -> Any:
        t = types.unliteral(t)
        return t.dtype if isinstance(t, types.IntEnumMember) else t

    typed = dispatcher.get_call_template

    def get_call_template(args: tuple, kws: dict) -> Any:
        return typed(tuple(plain(a) for a in args), {k: plain(v) for k, v in kws.items()})

    dispatcher.get_call_template = get_call_template


def skip_blas_probe() -> None:
    """Let numba initialise its CPU target without probing for BLAS, for a process whose
    compiled code never calls it (none of the engines does: no ``np.dot``, ``@`` or
    ``np.linalg``). The probe imports ``scipy.linalg`` when SciPy is installed (the ``gp``
    extra installs it): 0.25-0.4 s of a warm command's 1 s. Call it before the first
    engine runs; after it, numba code of this process cannot use BLAS (``np.dot`` fails to
    compile), and SciPy itself imports as usual. The command line calls it."""
    global _blas_probe
    _blas_probe = False


_blas_probe = True  # numba's target initialisation may import scipy.linalg
_target_ready = False  # numba's CPU target is initialised


class _NoScipyLinalg:
    """A meta path finder refusing ``scipy.linalg``: numba's BLAS probe then finds none."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "scipy.linalg" or name.startswith("scipy.linalg."):
            raise ImportError(f"{name}: not imported while numba initialises (skip_blas_probe)")


def _init_target() -> None:
    """numba's one-time initialisation of its CPU target (its function registries: about
    0.3 s, which the first compilation pays; loading cached engines does not need it:
    :func:`_load_lightly`), without the BLAS probe if :func:`skip_blas_probe` asked."""
    global _target_ready
    if _target_ready:
        return
    from numba.core.registry import cpu_target

    finder = None if _blas_probe or "scipy.linalg" in sys.modules else _NoScipyLinalg()
    if finder is not None:
        sys.meta_path.insert(0, finder)
    try:
        cpu_target.target_context.refresh()
    finally:
        if finder is not None:
            sys.meta_path.remove(finder)
    _target_ready = True


def _load_lightly() -> None:
    """Let numba load a cached engine without initialising its whole CPU target first.
    numba's cache loader refreshes the target before each load (``Cache.load_overload`` in
    ``numba/core/caching.py``, numba 0.68: every typing and lowering registry, 0.2-0.3 s of
    CPU, a fifth of a warm command), which only compiling needs: loading a compiled engine
    needs numba's runtime (NRT), which it initialises here. A compilation still finds the
    target whole: the compile event initialises it first (:func:`_listen`), and numba's
    compiler refreshes it too (``CompilerBase.__init__``). A numba whose cache loader is
    not this one's has the target initialised as before."""
    global _light_loads
    if _light_loads:
        return
    _light_loads = True
    from numba.core.caching import Cache

    if not all(hasattr(Cache, name) for name in (
            "load_overload", "_load_overload", "_guard_against_spurious_io_errors")):
        _init_target()
        return
    from numba.core.runtime import rtsys

    whole = Cache.load_overload

    def load_overload(self: Any, sig: Any, target_context: Any) -> Any:
        if _target_ready:
            return whole(self, sig, target_context)
        rtsys.initialize(target_context)
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)

    Cache.load_overload = load_overload


_light_loads = False  # numba's cache loader replaced by the light one (_load_lightly)


def _resolve_calls_once() -> None:
    """Have numba resolve a call's types once per function, argument types and compile
    flags, not once per call site. Typing a call to a function numba implements (``+``,
    ``a[i] = x``, ``np.zeros``, ``min``: ``BaseFunction.get_call_type`` in
    ``numba/core/types/functions.py``, numba 0.68) tries the function's templates in turn,
    formats an error message for each that does not match (``a[i] = x`` has dozens) and
    has each overload template hash and compare the compile's flags to look up its cache.
    Of the main command's 8,874 such resolutions, 8,320 repeat an earlier one: about 2.5 s
    of its 16 s of compiling (CPU). A resolution depends only on these (the templates are
    the function's, the flags numba's copy for the compile, never changed while it
    runs), so it is remembered with the implementation numba records for its lowering
    (``_impl_keys``), which a repeat records again. Failures are not remembered: numba
    resolves them as before. A numba without this function keeps its own way."""
    global _calls_resolved_once
    if _calls_resolved_once:
        return
    _calls_resolved_once = True
    from numba.core.targetconfig import ConfigStack
    from numba.core.types.functions import BaseFunction

    resolve = BaseFunction.get_call_type
    resolved: dict[tuple, tuple[Any, Any]] = {}

    def get_call_type(self: Any, context: Any, args: Any, kws: dict) -> Any:
        flags = ConfigStack.top_or_none()
        try:
            key = (self, context, tuple(args), tuple(sorted(kws.items())),
                   None if flags is None else tuple(sorted(flags._values.items())))
            held = resolved.get(key)
        except (TypeError, AttributeError):  # an unhashable type or flag value
            return resolve(self, context, args, kws)
        if held is not None:
            sig, impl = held
            self._impl_keys[sig.args] = impl
            return sig
        sig = resolve(self, context, args, kws)
        if sig is not None:
            resolved[key] = sig, self._impl_keys.get(sig.args)
        return sig

    impl_key = getattr(BaseFunction, "get_impl_key", None)  # where lowering reads them
    if impl_key is not None and "_impl_keys" in impl_key.__code__.co_names:
        BaseFunction.get_call_type = get_call_type


_calls_resolved_once = False  # numba's call resolution remembered (_resolve_calls_once)


def interpret(module_name: str) -> None:
    """Run the marked functions of the imported module ``module_name`` as plain Python in
    this process: never compiled, never loaded from the cache. For a helper process that
    needs what they compute only to reach other engines (to compile those), sooner than
    compiling them would take; their results are Python's, not meant to be kept."""
    namespace = vars(sys.modules[module_name])
    for lazy in _PENDING.pop(module_name, ()):
        namespace[lazy.py_func.__name__] = lazy.py_func


def njit(*, inner: bool = False, **options: Any):
    """``numba.njit(**options)``, deferred until a marked function is first called.

    ``inner=True`` marks a helper that only compiled code calls: compiled without the
    wrappers through which Python and C would call it, and not cached on its own (its
    callers' cached code holds it): about a tenth less compiling on the first run."""
    if inner:
        options = {**options, "no_cpython_wrapper": True, "no_cfunc_wrapper": True}
    def mark(fn):
        return _Lazy(fn, options)
    return mark


def on_first_compile(callback: Callable[[], None] | None) -> None:
    """Call ``callback`` once, right before numba first compiles a function in this process:
    a cache miss, not the load of a cached engine (numba's ``numba:compile`` event). None
    forgets it. The command line says "compiling the engines" with it."""
    global _notice
    _notice = callback
    if callback is not None and "numba" in sys.modules:
        _listen()


def announce_compile(prefixes: tuple[str, ...]) -> None:
    """Give the :func:`on_first_compile` notice now if a marked function of the imported
    modules named ``prefix...`` is not in numba's cache: for work that other processes
    (``--jobs`` workers) are about to compile, which this one would not see."""
    global _notice
    if _notice is not None and any(name.startswith(prefixes) for name in engines_to_compile()):
        callback, _notice = _notice, None
        callback()


def _listen() -> None:
    global _listening
    if _listening:
        return
    from numba.core import event

    class _FirstCompile(event.Listener):
        def on_start(self, _: Any) -> None:
            global _notice
            _init_target()  # compiling needs the whole target (without the BLAS probe)
            _resolve_calls_once()
            callback, _notice = _notice, None
            if callback is not None:
                callback()

        def on_end(self, _: Any) -> None:
            pass

    event.register("numba:compile", _FirstCompile())
    _listening = True


def specializations() -> dict[str, int]:
    """Per marked function this process has run (``module.function``): how many argument
    type combinations numba compiled or loaded it for. Each is a compilation on the first
    run after install, so a command that passes other array flags or layouts than the
    tuner pays one more."""
    return {name: len(dispatcher.signatures) for name, dispatcher in _COMPILED.items()}


def engines_to_compile() -> list[str]:
    """The marked, not yet compiled functions of the imported modules that numba's on-disk
    cache does not hold (``__pycache__/<file>.<function>-<line>.py<version>.nbi``): the
    first run after install compiles them (about 10 s), if it calls them. Cheap: looks
    for files only. Empty when ``NUMBA_CACHE_DIR`` moves the cache elsewhere (not
    guessed)."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return []
    tag = f"py{sys.version_info.major}{sys.version_info.minor}.nbi"
    missing = []
    for module_name, lazies in _PENDING.items():
        source = Path(sys.modules[module_name].__file__ or "")
        for lazy in lazies:
            if not lazy.options.get("cache") or lazy.options.get("inline") == "always":
                continue  # not cached, or compiled only into its callers
            code = lazy.py_func.__code__
            index = (source.parent / "__pycache__" /
                     f"{source.stem}.{lazy.py_func.__qualname__}-{code.co_firstlineno}.{tag}")
            if not index.exists():
                missing.append(f"{module_name}.{lazy.py_func.__name__}")
    return missing


def uncached(module_name: str) -> list[str]:
    """The marked functions of the imported module ``module_name`` that this process has not
    compiled yet and numba's on-disk cache holds no fresh entry for, looked up where numba
    itself looks (its own cache locator: ``NUMBA_CACHE_DIR``, the source's ``__pycache__``
    or the user-wide cache) and read as numba reads it (an index written by another numba
    version or for an edited source holds nothing). Cheap: reads one small index per
    function (imports numba). A function whose cache cannot be read counts as held: callers
    start extra work only on a certain miss."""
    from numba.core.caching import FunctionCache

    missing = []
    for lazy in _PENDING.get(module_name, ()):
        if not lazy.options.get("cache") or lazy.options.get("inline") == "always":
            continue  # not cached, or compiled only into its callers
        try:
            # numba's private index reader: the one place that knows its format
            held = bool(FunctionCache(lazy.py_func)._cache_file._load_index())
        except Exception:  # noqa: BLE001 - unreadable, no locator, another layout: unknown
            held = True
        if not held:
            missing.append(f"{module_name}.{lazy.py_func.__name__}")
    return missing
