"""Builds from tuning logs: the AutoTVM habit of ``apply_history_best`` then build.

A :class:`Build` is a lowered program plus the schedule it came from and that schedule's
provenance (a log line, an explicit schedule, or the default fallback). It simulates
(``vtatune.simulate(build)``: the counters and cycles the log recorded), runs functionally
on real tensors (``build.run(data, weight[, bias])``) and exports
(:func:`write_all`: ``program.json``, ``.bin``, ``.c``).

Which record a build uses: the fastest ``ok`` record whose workload shape, hardware config
(every ``vta_config.json`` key, so never a record tuned for another bitstream or board) and
bias flag match the request; ties keep the earliest. ``any_epilogue=True`` then takes the
fastest record of the same operator and shapes whatever its epilogue and bias flag, as TVM's
``apply_history_best`` applies one record per AutoTVM key (a deployed layer's epilogue is
its own; the log was tuned on another). With none, the build falls back to
:func:`search_spaces.default_schedule` and warns once (:class:`FallbackWarning`).

Example:
    >>> import vtatune
    >>> from vtatune.workloads import GemmWorkload
    >>> with vtatune.apply_history_best("logs/gemm.jsonl"):  # doctest: +SKIP
    ...     b = vtatune.build(GemmWorkload(16, 64, 64), hw="pynq")
    >>> b.provenance.describe()  # doctest: +SKIP
    'logs/gemm.jsonl:17'
    >>> vtatune.simulate(b).cycles  # doctest: +SKIP
    5321

The package exposes :func:`build`, :func:`apply_history_best` and :func:`simulate` as
``vtatune.build``, ``vtatune.apply_history_best`` and ``vtatune.simulate``.
"""

from __future__ import annotations

import contextvars
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from simulator.functional import run
from simulator.hardware import HardwareConfig
from simulator.timing import TimingProfile
from vtatune.builds._c_source import write_c
from vtatune.builds._program_files import ExportError, _write, header_path, write_bin, write_json
from vtatune.errors import BuildError, VtatuneError
from vtatune.lowering import Lowered, lower
from vtatune.records import read_records, workload_from
from vtatune.schedule import Schedule
from vtatune.scoring import Simulation, simulate
from vtatune.workloads import Workload, autotvm_key, resolve

__all__ = ["Build", "BuildError", "FallbackWarning", "HistoryBest", "Provenance", "Simulation",
           "apply_history_best", "build", "simulate"]


class FallbackWarning(UserWarning):
    """No tuned record fits the build: the default schedule is used."""


@dataclass(frozen=True)
class Provenance:
    """Where a build's schedule came from.

    ``source``: ``log`` (``log`` and ``line`` name the record), ``schedule`` (given
    explicitly) or ``fallback`` (the default schedule; ``reason`` says why).
    """

    source: str
    log: str | None = None
    line: int | None = None
    reason: str | None = None
    record: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    def describe(self) -> str:
        if self.source == "log":
            return f"{self.log}:{self.line}"
        if self.source == "fallback":
            return f"fallback: default schedule ({self.reason})"
        return "given schedule"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"source": self.source, "log": self.log, "line": self.line,
                             "reason": self.reason}
        if self.record is not None:
            d.update(trial=self.record.get("trial"), study=self.record.get("study"),
                     cycles=self.record.get("cycles"), counters=self.record.get("counters"))
        return d


@dataclass(frozen=True)
class Build:
    """A lowered program with its schedule and the schedule's provenance."""

    lowered: Lowered
    provenance: Provenance

    workload = property(lambda self: self.lowered.workload)
    hw = property(lambda self: self.lowered.hw)
    bias = property(lambda self: self.lowered.bias)
    schedule = property(lambda self: self.lowered.schedule)
    program = property(lambda self: self.lowered.program)

    def simulate(self, profile: TimingProfile | None = None) -> Simulation:
        return simulate(self, profile=profile)

    def run(self, data: Any, weight: Any, bias: Any = None, shift: Any = None) -> np.ndarray:
        """Execute the program functionally on unpacked tensors; the unpacked int8 output.

        conv2d: data NCHW, weight OIHW (int8), bias per output channel (int32);
        group_conv2d: weight (O, I / groups, H, W); conv2d_transpose: weight IOHW (ONNX's
        ConvTranspose layout; the build dilates the input and flips the kernel as TVM's
        compute needs); gemm: data (N, I), weight (O, I). Bias is required exactly when the
        build has one; shift (int32 0..31 per output channel; (planes, channels) when the
        epilogue reads several shift planes, ``shift``, ``shift1``...) exactly when the
        workload's epilogue shifts each channel by its own amount (``EpilogueOp("shr",
        tensor="shift")``) or clamps it by its own bounds (``EpilogueOp("min",
        tensor="shift")``: that plane any int32).
        """
        from vtatune.lowering import packed_inputs, unpack_output
        from vtatune.workloads import SHIFTS, Operands, operand_shapes, shift_range_error

        wl, hw = self.workload, self.hw
        shapes = operand_shapes(wl)
        ops = {"data": _operand("data", data, shapes["data"], np.int8),
               "weight": _operand("weight", weight, shapes["weight"], np.int8)}
        if self.bias and bias is None:
            raise BuildError("this build adds a bias: pass bias (one int32 per output channel)")
        if not self.bias and bias is not None:
            raise BuildError("this build has no bias: build with bias=True to add one")
        b = None if bias is None else _operand("bias", bias, shapes["bias"], np.int32)
        shifts = "shift" in wl.epilogue.tensors
        if shifts and shift is None:
            raise BuildError("this build shifts each output channel by its own amount: pass "
                             "shift (one int32 0..31 per output channel)")
        if not shifts and shift is not None:
            raise BuildError("this build has no per-channel shift: its epilogue reads none")
        sh = None if shift is None else _operand("shift", shift, shapes["shift"], np.int32)
        if sh is not None:  # the planes a shr reads: 0..31 (a min's or max's: any int32)
            amounts = [SHIFTS.index(name) for name in wl.epilogue.shift_amounts]
            if bad := shift_range_error(sh.reshape(-1, sh.shape[-1])[amounts]):
                raise BuildError(f"shift: values outside 0..31 ({bad})")
        inputs = packed_inputs(wl, Operands(ops["data"], ops["weight"], b, sh), hw)
        result = run(self.program, hw, inputs)
        return unpack_output(wl, result.machine.read_tensor(self.program, "output"))

    def export(self, directory: str | Path) -> dict[str, Path]:
        """Write ``program.json``, ``program.bin`` and ``program.c`` (:func:`write_all`)."""
        from vtatune.builds._build import write_all

        return write_all(self, directory)

    def describe(self) -> str:
        return (f"{self.workload.describe()} on {self.hw.target_model}"
                f"{' with bias' if self.bias else ''}: {self.schedule.short()} "
                f"[{self.provenance.describe()}]")


def _operand(name: str, value: Any, shape: tuple[int, ...], dtype: type) -> np.ndarray:
    arr = np.asarray(value)
    if arr.shape != shape:
        raise BuildError(f"{name}: expected shape {shape}, got {arr.shape}")
    if arr.dtype != dtype:
        if not np.issubdtype(arr.dtype, np.integer):
            raise BuildError(f"{name}: expected {np.dtype(dtype).name} values, got {arr.dtype}")
        info = np.iinfo(dtype)
        if arr.size and (arr.min() < info.min or arr.max() > info.max):
            raise BuildError(f"{name}: values outside {np.dtype(dtype).name} "
                             f"[{info.min}, {info.max}]")
        arr = arr.astype(dtype)
    return arr


# --- choosing a record ----------------------------------------------------------------------
@dataclass(frozen=True)
class HistoryBest:
    """The ``ok`` records of some logs, indexed for builds (AutoTVM's ApplyHistoryBest)."""

    logs: tuple[str, ...]
    # (workload key, hw config items, bias) -> (cycles, log, line, record), the fastest
    best: dict[tuple, tuple[int, str, int, dict[str, Any]]]
    # what else the logs hold per workload key, to explain a fallback
    seen: dict[str, set[str]]
    # (AutoTVM key: operator and shapes, hw config items) -> the fastest, any epilogue
    by_shape: dict[tuple, tuple[int, str, int, dict[str, Any]]] = field(default_factory=dict)
    # (AutoTVM key, hw config items) -> the epilogues its records have, to explain a fallback
    epilogues: dict[tuple, set[str]] = field(default_factory=dict)

    @classmethod
    def load(cls, logs: str | Path | Iterable[str | Path]) -> HistoryBest:
        paths = [logs] if isinstance(logs, str | Path) else list(logs)
        best: dict[tuple, tuple[int, str, int, dict[str, Any]]] = {}
        by_shape: dict[tuple, tuple[int, str, int, dict[str, Any]]] = {}
        seen: dict[str, set[str]] = {}
        epilogues: dict[tuple, set[str]] = {}
        for path in paths:
            for line, r in read_records(path, empty_ok=False):
                try:
                    key = _record_key(r)
                    tuned = workload_from(r)
                    shape_key = (autotvm_key(tuned), key[1])
                except (KeyError, TypeError, ValueError, VtatuneError):
                    continue  # a record of another shape of schema: not usable for builds
                seen.setdefault(key[0], set()).add(
                    r["hw"].get("model", "?") + (" with bias" if key[2] else ""))
                epilogues.setdefault(shape_key, set()).add(
                    _epilogue_flag(tuned) + (" --bias" if key[2] else ""))
                cycles = r.get("cycles")
                if r.get("status") != "ok" or not isinstance(cycles, int):
                    continue
                if key not in best or cycles < best[key][0]:
                    best[key] = (cycles, str(path), line, r)
                if shape_key not in by_shape or cycles < by_shape[shape_key][0]:
                    by_shape[shape_key] = (cycles, str(path), line, r)
        return cls(tuple(str(p) for p in paths), best, seen, by_shape, epilogues)

    def hardware(self) -> tuple[str, ...]:
        """The target models the logs' ``ok`` records were tuned on, sorted."""
        return tuple(sorted({r["hw"].get("model", "?") for _, _, _, r in self.best.values()}))

    def covers(self, hw: HardwareConfig) -> bool:
        """Whether any ``ok`` record was tuned on ``hw``."""
        items = _hw_items(hw.to_dict())
        return any(key[1] == items for key in self.best)

    def lookup(self, workload: Workload, hw: HardwareConfig, bias: bool,
               any_epilogue: bool = False) -> tuple[Provenance, Schedule | None]:
        """The schedule of the fastest record for ``workload`` on ``hw`` with ``bias`` (with
        ``any_epilogue``, else of its operator and shapes: see the module docstring)."""
        key = (workload.key(), _hw_items(hw.to_dict()), bool(bias))
        hit = self.best.get(key)
        if hit is None and any_epilogue:
            hit = self.by_shape.get((autotvm_key(workload), key[1]))
        if hit is None:
            logs = ", ".join(self.logs) or "no log"
            others = sorted(self.seen.get(workload.key(), ()))
            why = (f"no ok record for {workload.name or workload.key()} on {hw.target_model}"
                   f"{' with bias' if bias else ''} in {logs}")
            if others:
                why += f" (it has records for {', '.join(others)})"
            else:  # its shapes tuned with other epilogues: say how to name them
                tuned = self.epilogues.get((autotvm_key(workload), key[1]), set()) \
                    - {_epilogue_flag(workload) + (" --bias" if bias else "")}
                if tuned:
                    why += f" (it has records for its shapes with {' / '.join(sorted(tuned))})"
            return Provenance("fallback", reason=why), None
        _, log, line, record = hit
        return Provenance("log", log, line, record=record), Schedule.from_dict(record["schedule"])


def _epilogue_flag(workload: Workload) -> str:
    """``--epilogue NAME`` naming ``workload``'s epilogue as the commands take it (its steps
    when no name has it)."""
    from vtatune.workloads import epilogue_name

    epilogue = workload.epilogue  # type: ignore[union-attr]
    name = epilogue_name(epilogue)
    return f"--epilogue {name}" if name else f"epilogue {epilogue.describe()}"


def _hw_items(config: dict[str, Any]) -> tuple:
    # HW_VER does not change what runs; everything else (bitstream, board) does.
    return tuple(sorted((k, v) for k, v in HardwareConfig.from_dict(config).to_dict().items()
                        if k != "HW_VER"))


def _record_key(r: dict[str, Any]) -> tuple[str, tuple, bool]:
    return r["workload"]["key"], _hw_items(r["hw"]["config"]), bool(r.get("bias", False))


_CONTEXT: contextvars.ContextVar[tuple[HistoryBest, ...]] = contextvars.ContextVar(
    "vtatune_history_best", default=())


@contextmanager
def apply_history_best(logs: str | Path | Iterable[str | Path]) -> Iterator[HistoryBest]:
    """Builds inside the ``with`` block use the best records of ``logs`` (one path or
    several). Nested blocks: the innermost one that has a record wins.

    Example:
        >>> with apply_history_best("logs/resnet18.jsonl") as history:  # doctest: +SKIP
        ...     builds = [build(layer) for layer in resnet18_layers()]
    """
    history = HistoryBest.load(logs)
    token = _CONTEXT.set((*_CONTEXT.get(), history))
    try:
        yield history
    finally:
        _CONTEXT.reset(token)


def build(workload: Workload | str, hw: HardwareConfig | str | None = None, *,
          log: str | Path | Iterable[str | Path] | None = None, bias: bool = False,
          schedule: Schedule | dict[str, Any] | str | None = None,
          any_epilogue: bool = False) -> Build:
    """Lower ``workload`` on ``hw`` with the best tuned schedule.

    ``workload``: a Workload or ``"conv2d:resnet18.C8"`` / ``"gemm"``. ``hw``: a
    HardwareConfig, a preset name or a ``vta_config.json`` path (default pynq). ``log``: the
    log(s) to take the schedule from; without it, the enclosing :func:`apply_history_best`
    blocks. ``schedule``: skip the logs and use this one (a Schedule, a dict of knobs such
    as ``{"tile_h": 14}`` or a string as ``--schedule`` takes it; ScheduleError if bad).
    ``any_epilogue``: a record of the operator and shapes serves whatever its epilogue
    (:meth:`HistoryBest.lookup`).
    """
    wl, hw = resolve(workload, hw)
    if schedule is not None:
        from search_spaces import resolve_schedule

        prov: Provenance = Provenance("schedule")
        chosen: Schedule | None = resolve_schedule(schedule, wl, hw, bias)
    else:
        histories = (HistoryBest.load(log),) if log is not None else _CONTEXT.get()
        prov, chosen = Provenance("fallback", reason="no log given (use log=... or "
                                                     "apply_history_best)"), None
        for history in reversed(histories):
            prov, chosen = history.lookup(wl, hw, bias, any_epilogue)
            if chosen is not None:
                break
        if chosen is None and len(histories) > 1:
            prov = Provenance("fallback", reason=f"no ok record for "
                              f"{wl.name or wl.key()} on {hw.target_model} in any applied log")
    if chosen is None:
        from search_spaces import default_schedule

        warnings.warn(f"vtatune.build: {prov.reason}; using the default schedule",
                      FallbackWarning, stacklevel=2)
        chosen = default_schedule(wl, hw, bias)
    try:
        lowered = lower(wl, chosen, hw, bias=bias)
    except VtatuneError as exc:
        where = prov.describe()
        raise BuildError(f"{where}: the schedule does not lower: {exc}") from None
    return Build(lowered, prov)


def write_all(source: Any, directory: str | Path) -> dict[str, Path]:
    """``program.json``, ``program.bin``, ``program.c`` and a copy of ``vta_runtime.h``."""
    d = Path(directory)
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ExportError(f"cannot create {d}: {exc.strerror}") from None
    return {
        "json": write_json(source, d / "program.json"),
        "bin": write_bin(source, d / "program.bin"),
        "c": write_c(source, d / "program.c"),
        "header": _write(d / "vta_runtime.h", header_path().read_bytes()),
    }
