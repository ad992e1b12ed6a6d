"""Which schedule each offloaded layer runs: a tuned log's, as builds take one
(:func:`vtatune.builds.build` under :func:`vtatune.builds.apply_history_best`, a record of
the layer's operator and shapes whatever epilogue it was tuned with, as TVM's
``apply_history_best`` applies one record per AutoTVM key), else the default schedule with
one :class:`vtatune.builds.FallbackWarning` per workload (operator, shapes, epilogues, bias:
the layers sharing one are built once), as AutoTVM's fallback warns; or, when asked, tuned on
the spot (:func:`vtatune.tuning.tune`, appended to the log). A layer is known by its workload
alone, never by its name: every model has a ``conv2d_1``, so a study or a warning named after
layers would mix the models that share a log.
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

from simulator.hardware import HardwareConfig
from vtatune.builds import (
    Build,
    FallbackWarning,
    HistoryBest,
    Provenance,
    apply_history_best,
    build,
)
from vtatune.deploy.runtime._errors import DeployError
from vtatune.errors import VtatuneError
from vtatune.lowering import Lowered, lower
from vtatune.schedule import Schedule
from vtatune.workloads import Epilogue, Workload


@dataclass(frozen=True)
class LayerPrograms:
    """The programs of one offloaded layer (one per VTA pass) and where their schedule
    came from (``tuned``: tuned on the spot by this deploy)."""

    passes: tuple[Lowered, ...]
    provenance: Provenance
    tuned: bool = False

    @property
    def source(self) -> str:
        return "tuned" if self.tuned else self.provenance.source

    def describe(self) -> str:
        what = self.provenance.describe()
        return f"tuned on the spot, {what}" if self.tuned else what


def check_log(log: str | Path, hw: HardwareConfig, tuning: bool = False) -> HistoryBest | None:
    """The log's records, indexed; DeployError when the file is missing or holds records
    of other hardware only. ``tuning``: the log is where tuning appends, so a file not
    there yet or still empty is a new log (None: no records yet)."""
    path = Path(log)
    if tuning and (not path.exists() or path.is_file() and path.stat().st_size == 0):
        return None
    if not path.is_file():
        raise DeployError(f"log {log} not found (tune with `python -m vtatune network MODEL.onnx"
                          f" --log {log}`, or deploy without --log: default schedules)")
    history = HistoryBest.load(path)
    if history.best and not history.covers(hw):
        raise DeployError(f"log {log} holds records of {', '.join(history.hardware())}, none of "
                          f"{hw.target_model}: give --hw for the hardware it was tuned on")
    return history


#: The warning of a deploy without a log (the layers take the default schedules).
NO_LOG = ("no log given: every offloaded layer takes the default schedule (give a tuned log: "
          "--log, log=...)")


class LayerBuilder:
    """Builds offloaded layers' programs on ``hw`` with the schedules of ``log`` (None: the
    default schedules, one warning in all); ``tune_trials`` > 0 tunes a workload the log
    lacks for that many trials first, appending to ``tune_log`` (default: the log, else
    ``runs/deploy-<hw model>.jsonl``). A context manager: inside it, the log is applied as
    :func:`vtatune.builds.apply_history_best` applies one (loaded once)."""

    def __init__(self, hw: HardwareConfig, log: str | Path | None = None,
                 tune_trials: int = 0, tune_log: str | Path | None = None) -> None:
        if not isinstance(tune_trials, int) or isinstance(tune_trials, bool) or tune_trials < 0:
            raise DeployError(f"tune trials must be a non-negative integer, got {tune_trials!r}")
        self.hw = hw
        self.log = None if log is None else str(log)
        self.tune_trials = tune_trials
        self.history = None if log is None else \
            check_log(log, hw, tuning=bool(tune_trials) and tune_log is None)
        self.tune_log = str(tune_log or log or f"runs/deploy-{hw.target_model}.jsonl")
        self._stack = contextlib.ExitStack()
        self._built: dict[tuple[Workload, tuple[Epilogue, ...], bool], LayerPrograms] = {}

    def __enter__(self) -> LayerBuilder:
        if self.history is not None:  # a new log (tuning appends to it) has no records yet
            self._stack.enter_context(apply_history_best(self.log))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def programs(self, workload: Workload, epilogues: tuple[Epilogue, ...],
                 bias: bool, runs_as: Workload | None = None) -> LayerPrograms:
        """One program per epilogue (VTA pass), all with the schedule chosen for
        ``workload`` (the first pass's). Built, tuned and warned about once per workload:
        its layer's name is left out. ``runs_as``: the workload VTA runs instead, with that
        schedule (a conv with a zero-point border runs unpadded on the bordered input: the
        same output tiles, so the layer's tuned schedule serves it; the default schedule
        where it does not lower)."""
        workload = replace(workload, name="")
        if runs_as is not None:
            runs_as = replace(runs_as, name="")
        key = (workload, epilogues, bias, runs_as)
        if key not in self._built:
            self._built[key] = self._programs(workload, epilogues, bias, runs_as)
        return self._built[key]

    def _programs(self, workload: Workload, epilogues: tuple[Epilogue, ...],
                  bias: bool, runs_as: Workload | None) -> LayerPrograms:
        tuned = False
        known = self.history is not None and _lowers(
            workload, self.history.lookup(workload, self.hw, bias, any_epilogue=True)[1],
            self.hw, bias)
        if self.tune_trials and not known:
            self._tune(workload, bias)
            tuned = True
        first = self._first(workload, bias)
        if runs_as is not None and runs_as != workload:
            wl = replace(runs_as, epilogue=workload.epilogue)
            try:
                first = replace(first, lowered=lower(wl, first.schedule, self.hw, bias=bias))
            except VtatuneError as exc:
                first = _default(wl, self.hw, bias, f"{first.provenance.describe()} does not "
                                 f"lower unpadded on the zero-point border: {exc}")
            workload = wl
        passes = [first.lowered]
        for epilogue in epilogues[1:]:
            wl = replace(workload, epilogue=epilogue)
            try:
                passes.append(lower(wl, first.schedule, self.hw, bias=bias))
            except VtatuneError:  # an epilogue's immediates the schedule's kernels cannot take
                passes.append(_default(wl, self.hw, bias).lowered)
        return LayerPrograms(tuple(passes), first.provenance, tuned)

    @property
    def without_log(self) -> bool:
        """Every layer takes the default schedule: no log, no tuning (the caller warns once:
        :data:`NO_LOG`)."""
        return self.log is None and not self.tune_trials

    def _first(self, workload: Workload, bias: bool) -> Build:
        if self.without_log:
            return _default(workload, self.hw, bias, "no log given")
        try:
            return build(workload, self.hw, bias=bias, any_epilogue=True)
        except VtatuneError as exc:  # the record's schedule does not lower with this epilogue
            warnings.warn(f"vtatune.build: {exc}; using the default schedule", FallbackWarning,
                          stacklevel=5)
            return _default(workload, self.hw, bias, str(exc))

    def _tune(self, workload: Workload, bias: bool) -> None:
        from vtatune.tuning import tune

        Path(self.tune_log).parent.mkdir(parents=True, exist_ok=True)
        tune(workload, self.hw, trials=self.tune_trials, seed=0, log=self.tune_log, bias=bias)
        # the new records are applied as an inner apply_history_best block is
        self._stack.enter_context(apply_history_best(self.tune_log))


def _lowers(workload: Workload, schedule: Schedule | None, hw: HardwareConfig,
            bias: bool) -> bool:
    """Whether a log's ``schedule`` for the workload's shapes lowers with its epilogue (one
    tuned with a shorter epilogue may not: a fixed-point requantization's copy of the tile
    takes room in the accumulator buffer)."""
    if schedule is None:
        return False
    try:
        lower(workload, schedule, hw, bias=bias)
    except VtatuneError:
        return False
    return True


def _default(workload: Workload, hw: HardwareConfig, bias: bool, reason: str = "") -> Build:
    """``workload`` built with the default schedule, a fallback for ``reason``."""
    from search_spaces import default_schedule

    b = build(workload, hw, bias=bias, schedule=default_schedule(workload, hw, bias))
    return replace(b, provenance=Provenance("fallback", reason=reason or "default schedule"))
