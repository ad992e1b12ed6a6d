"""Which schedule each offloaded layer runs: a tuned log's, as builds take one (a record of the
layer's operator and shapes whatever epilogue it was tuned with, as TVM's
``apply_history_best`` applies one record per AutoTVM key); else, when tuning is on (the
``deploy`` command's default), the record tuning wrote for it into the hardware's cache log
(:mod:`vtatune.deploy._tuning`) before the build; else the cost model's best legal schedule
(:func:`vtatune.tuning.cost_model.warm_starts`, the first that lowers with the layer's
epilogues), with one :class:`vtatune.builds.FallbackWarning` per workload (operator, shapes,
epilogues, bias: the layers sharing one are built once), as AutoTVM's fallback warns. A
given log wins over the cache log. A layer is known by its workload alone, never by its
name: every model has a ``conv2d_1``, so a study or a warning named after layers would mix
the models that share a log. Each layer's programs also carry the cycles the default
schedule (``search_spaces.default_schedule``, what tuning starts from) would take, for the
report.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from simulator.hardware import HardwareConfig
from simulator.timing import time_program
from vtatune.builds import (
    Build,
    FallbackWarning,
    HistoryBest,
    Provenance,
    build,
)
from vtatune.deploy.runtime._errors import DeployError
from vtatune.errors import VtatuneError
from vtatune.lowering import Lowered, lower
from vtatune.networks import DEFAULT_PATIENCE
from vtatune.schedule import Schedule
from vtatune.scoring import score
from vtatune.workloads import Epilogue, Workload

if TYPE_CHECKING:
    from vtatune.deploy._tuning import Tuning


@dataclass(frozen=True)
class LayerPrograms:
    """The programs of one offloaded layer (one per VTA pass), where their schedule came
    from (``tuned``: tuned by this deploy), and the cycles of the same passes with the
    default schedule (``default_cycles``: each timed from an idle VTA; 0 when it does not
    lower)."""

    passes: tuple[Lowered, ...]
    provenance: Provenance
    tuned: bool = False
    default_cycles: int = 0

    @property
    def source(self) -> str:
        return "tuned" if self.tuned else self.provenance.source

    def describe(self) -> str:
        p = self.provenance
        what = f"fallback: {PICK} ({p.reason})" if p.source == "fallback" else p.describe()
        return f"tuned by this deploy, {what}" if self.tuned else what


#: What a layer with no record takes (its provenance says so).
PICK = "the cost model's pick"


def check_log(log: str | Path, hw: HardwareConfig, tuning: bool = False) -> HistoryBest | None:
    """The log's records, indexed; DeployError when the file is missing or holds records
    of other hardware only. ``tuning``: the log is where tuning appends, so a file not
    there yet or still empty is a new log (None: no records yet)."""
    path = Path(log)
    if tuning and (not path.exists() or path.is_file() and path.stat().st_size == 0):
        return None
    if not path.is_file():
        raise DeployError(f"log {log} not found (tune with `python -m vtatune network MODEL.onnx"
                          f" --log {log}`, or deploy without --log)")
    history = HistoryBest.load(path)
    if history.best and not history.covers(hw):
        raise DeployError(f"log {log} holds records of {', '.join(history.hardware())}, none of "
                          f"{hw.target_model}: give --hw for the hardware it was tuned on")
    return history


#: The warning of a deploy with no log and no tuning (the layers take the cost model's pick).
NO_LOG = (f"no log given and no tuning: every offloaded layer takes {PICK} (give a tuned log, "
          "--log, log=..., or tune: --tune N, tune_trials=N)")


class LayerBuilder:
    """Builds offloaded layers' programs on ``hw`` with the schedules of ``log`` (None: no
    log) and, with ``tune_trials`` > 0, of ``tune_log`` (default: the hardware's cache log,
    :func:`vtatune.deploy.cache_log`), where :meth:`tune` first tunes the workloads no log
    holds, ``tune_trials`` a workload on average, shared by the network command's task
    scheduler (``seed``: the studies' and the scheduler's; ``progress``: a bar on stderr;
    ``patience``: as :func:`vtatune.deploy.tune_workloads`'s).
    A context manager: inside it, the logs are loaded once, as
    :func:`vtatune.builds.apply_history_best` loads them (``log``'s records win)."""

    def __init__(self, hw: HardwareConfig, log: str | Path | None = None,
                 tune_trials: int = 0, tune_log: str | Path | None = None, *,
                 seed: int = 0, progress: bool = False,
                 patience: int | None = DEFAULT_PATIENCE) -> None:
        from vtatune.deploy._tuning import cache_log

        if not isinstance(tune_trials, int) or isinstance(tune_trials, bool) or tune_trials < 0:
            raise DeployError(f"tune trials must be a non-negative integer, got {tune_trials!r}")
        self.hw = hw
        self.log = None if log is None else str(log)
        self.tune_trials = tune_trials
        self.seed, self.progress, self.patience = seed, progress, patience
        self.tune_log = str(tune_log) if tune_log is not None else \
            str(cache_log(hw)) if tune_trials else None
        self.history = None if log is None else \
            check_log(log, hw, tuning=bool(tune_trials) and self.tune_log == self.log)
        self.tuning: Tuning | None = None
        self._tuned: set[tuple[Workload, bool]] = set()
        self._histories: list[HistoryBest] = []
        self._built: dict[tuple[Workload, tuple[Epilogue, ...], bool, Workload | None],
                          LayerPrograms] = {}

    def __enter__(self) -> LayerBuilder:
        # a log tuning has not written to yet holds no records; the given log's last: it wins
        logs = ([self.tune_log] if self.tune_log not in (None, self.log) else []) + \
            ([self.log] if self.log is not None else [])
        self._histories = [HistoryBest.load(log) for log in logs
                           if Path(log).is_file() and Path(log).stat().st_size]
        return self

    def __exit__(self, *exc: object) -> None:
        self._histories = []

    def known(self, workload: Workload, bias: bool) -> bool:
        """Whether a log applied (``log``, else the tuning log) holds a record for
        ``workload`` (its operator and shapes, any epilogue) on this hardware whose schedule
        lowers with ``workload``'s own epilogue (see :func:`_lowering_error`)."""
        return self._lookup(replace(workload, name=""), bias)[1] is not None

    def tune(self, problems: list[tuple[Workload, bool, int]]) -> Tuning | None:
        """Tune each ``(workload, bias, weight)`` no log holds into the tuning log (the
        budget: ``tune_trials`` a workload); None when tuning is off."""
        from vtatune.deploy._tuning import tune_workloads

        if not self.tune_trials:
            return None
        with self:  # the logs as they are before tuning
            new: dict[tuple[Workload, bool], int] = {}
            for workload, bias, weight in problems:
                key = (replace(workload, name=""), bias)
                if not self.known(*key):
                    new[key] = new.get(key, 0) + weight
        self.tuning = tune_workloads([(w, b, n) for (w, b), n in new.items()], self.hw,
                                     trials=self.tune_trials, log=self.tune_log,
                                     seed=self.seed, progress=self.progress,
                                     patience=self.patience,
                                     known=len({(replace(w, name=""), b)
                                                for w, b, _ in problems}) - len(new))
        self._tuned = set(new)
        return self.tuning

    def programs(self, workload: Workload, epilogues: tuple[Epilogue, ...],
                 bias: bool, runs_as: Workload | None = None) -> LayerPrograms:
        """One program per epilogue (VTA pass), all with the schedule chosen for
        ``workload`` (the first pass's). Built and warned about once per workload:
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
        first = self._first(workload, bias)
        # tuned here, and a record found (a workload no schedule can run falls back)
        tuned = (workload, bias) in self._tuned and first.provenance.source == "log"
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
        return LayerPrograms(tuple(passes), first.provenance, tuned,
                             _default_cycles(passes, self.hw, bias))

    @property
    def without_log(self) -> bool:
        """No log and no tuning: every layer takes the cost model's pick (the caller warns
        once: :data:`NO_LOG`)."""
        return self.log is None and not self.tune_trials

    def _lookup(self, workload: Workload, bias: bool) -> tuple[Provenance, Schedule | None]:
        """The record the applied logs have for ``workload`` (``log``'s first), or why none."""
        if not self._histories:
            return Provenance("fallback", reason="no log given"), None
        missing = []
        for history in reversed(self._histories):
            prov, chosen = history.lookup(workload, self.hw, bias, any_epilogue=True)
            error = _lowering_error(workload, chosen, self.hw, bias)
            if chosen is not None and error is None:
                return prov, chosen
            # a record tuned with a shorter epilogue may not lower with this one: the next
            # log's (the tuning log's, where deploy tuned it again) serves
            missing.append(prov if chosen is None else Provenance(
                "fallback", reason=f"{prov.describe()}: {error}"))
        if len(missing) == 1:
            return missing[0], None
        return Provenance("fallback", reason=f"no ok record for {workload.key()} on "
                          f"{self.hw.target_model} in any applied log"), None

    def _first(self, workload: Workload, bias: bool) -> Build:
        prov, chosen = self._lookup(workload, bias)
        if chosen is None:
            if not self.without_log:
                warnings.warn(f"vtatune.build: {prov.reason}; using {PICK}", FallbackWarning,
                              stacklevel=5)
            return cost_model_pick(workload, self.hw, bias, prov.reason or "")
        try:
            return replace(build(workload, self.hw, bias=bias, schedule=chosen), provenance=prov)
        except VtatuneError as exc:  # the record's schedule does not lower with this epilogue
            warnings.warn(f"vtatune.build: {prov.describe()}: {exc}; using {PICK}",
                          FallbackWarning, stacklevel=5)
            return cost_model_pick(workload, self.hw, bias, str(exc))


def cost_model_pick(workload: Workload, hw: HardwareConfig, bias: bool,
                    reason: str = "") -> Build:
    """``workload`` built with the cost model's best legal schedule (its best estimate
    among the warm starts the guided sampler starts from, the first that lowers), else
    the default schedule: a fallback for ``reason``."""
    from search_spaces import get_template
    from vtatune.tuning.cost_model import warm_starts

    template = get_template(workload, hw, bias=bias)
    try:
        starts = warm_starts(template)
    except (KeyError, AttributeError, VtatuneError):  # a template the model cannot read
        starts = []
    for config in starts:
        try:
            b = build(workload, hw, bias=bias, schedule=template.to_schedule(config))
        except VtatuneError:
            continue
        return replace(b, provenance=Provenance("fallback", reason=reason or "no record"))
    return _default(workload, hw, bias, reason)


def _default_cycles(passes: list[Lowered], hw: HardwareConfig, bias: bool) -> int:
    """The cycles of ``passes``' workloads with the default schedule, each timed from an
    idle VTA (0 when one does not lower)."""
    from search_spaces import default_schedule

    total = 0
    for p in passes:
        try:
            schedule = default_schedule(p.workload, hw, bias)
        except VtatuneError:
            return 0
        program = p.program if schedule == p.schedule else None
        if program is None:
            ev = score(p.workload, schedule, hw, bias=bias)
            if ev.status != "ok":
                return 0
            total += ev.cycles
        else:
            total += time_program(program, hw).cycles
    return total


def _lowering_error(workload: Workload, schedule: Schedule | None, hw: HardwareConfig,
                    bias: bool) -> str | None:
    """Why a log's ``schedule`` for the workload's shapes does not lower with its epilogue
    (one tuned with a shorter epilogue may not: a fixed-point requantization's copy of the
    tile takes room in the accumulator buffer), or None when it does."""
    if schedule is None:
        return "no record"
    try:
        lower(workload, schedule, hw, bias=bias)
    except VtatuneError as exc:
        return str(exc)
    return None


def _default(workload: Workload, hw: HardwareConfig, bias: bool, reason: str = "") -> Build:
    """``workload`` built with the default schedule, a fallback for ``reason``."""
    from search_spaces import default_schedule

    b = build(workload, hw, bias=bias, schedule=default_schedule(workload, hw, bias))
    return replace(b, provenance=Provenance("fallback", reason=reason or "default schedule"))
