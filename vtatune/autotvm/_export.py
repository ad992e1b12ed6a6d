"""Exporting a log as AutoTVM v0.2 records, the input of TVM's ``apply_history_best``.

An exported record is what TVM's ``autotvm.apply_history_best`` reads: the target string
of the hardware (``ext_dev -device=vta -keys=cpu -model=<target>_<bitstream>``), the task
(``conv2d_packed.vta`` with args ``[data, kernel, strides, padding, dilation, layout,
out_dtype]``, ``dense_packed.vta`` with ``[data, weight, None, out_dtype]``,
``group_conv2d_packed.vta`` with ``[data, kernel, strides, padding, dilation, groups,
out_dtype]`` or ``conv2d_transpose_packed.vta`` with ``[data, kernel, strides, padding,
out_dtype, output_padding]``; tensors in VTA's packed layout; the last two define
conv2d_packed's knobs), the config entity in TVM's knob order (conv2d_packed: tile_b, tile_h,
tile_w, tile_ci, tile_co, oc_nthread, h_nthread; dense_packed: tile_b, tile_ci, tile_co,
oc_nthread) with its index in the template's space (mixed radix, the first knob varying
fastest, as ``ConfigSpace.get`` reads it), and the simulated time in seconds at the board
clock as the cost. For each workload, the fastest record TVM applies as it is (an AutoTVM
point TVM builds: a record tuned in AutoTVM's space) is exported; a log with none (tuned in
vtatune's full space) exports the fastest buildable AutoTVM point nearest its records' tile
and thread choices, re-simulated with TVM's loop orders. Each exported record is compared
with what was tuned (the log's best in any space): TVM running it more than 1% slower is
reported (:class:`ExportWarning`), since tuning in vtatune's richer space can find
schedules TVM's template cannot express (``docs/tvm014.md``).

Import reads whole AutoTVM logs such as TopHub's ``vta_v0.10.log``: records of the tasks in
:data:`TASKS` on a VTA target are simulated; records of other tasks or targets are skipped
with one warning that counts them; a split whose outer x inner is not the axis length is
applied with its inner factor, as TVM's ``split(axis, factor=inner)`` does (one warning).

Example:
    >>> export_autotvm("logs/resnet18.jsonl", "resnet18.autotvm.log")  # doctest: +SKIP
    [ExportedRecord(workload='resnet18.C2', ...), ...]
    >>> [i.score.cycles for i in import_autotvm("tophub_vta.log")]  # doctest: +SKIP
"""


from __future__ import annotations

import json
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from simulator.hardware import HardwareConfig
from simulator.timing import TimingProfile
from vtatune.autotvm._tasks import (
    TVM_VERSION,
    AutotvmError,
    config_entity,
    task_args,
    task_of,
)
from vtatune.errors import IllegalSchedule, VtatuneError
from vtatune.lowering import check
from vtatune.records import hw_from, read_records, schedule_from, workload_from, write_whole
from vtatune.schedule import (
    Schedule,
    to_autotvm,
)
from vtatune.scoring import score
from vtatune.workloads import (
    Workload,
)


def _epoch(timestamp: Any) -> float:
    try:
        return datetime.fromisoformat(str(timestamp)).timestamp()
    except ValueError:
        return 0.0


# --- export ---------------------------------------------------------------------------------
#: An export more than 1% slower than the log's best is reported (``ExportedRecord.slower``):
#: TVM would run a schedule measurably slower than the one tuned.
SLOWDOWN_TOLERANCE = 1.01


class ExportWarning(UserWarning):
    """An exported record is more than 1% slower than the log's best for its workload:
    AutoTVM's template cannot express the tuned schedule (tune in ``space="autotvm"``)."""


class HardwareWarning(UserWarning):
    """Records were exported for hardware TVM v0.14 cannot build: BLOCK_IN != BLOCK_OUT
    (its ``pkg_config.py`` sets both from one ``LOG_BLOCK``)."""


def unbuildable_warning(models: Iterable[str]) -> str | None:
    """The one line that says which of ``models`` (TVM target models) TVM v0.14 cannot
    build, or None when it builds them all.

    >>> unbuildable_warning(["ultra96_1x8x64_i8w8a32_10_16_18_18", "pynq_1x16_i8w8a32_15_15_18_17"])
    "TVM v0.14 cannot build ultra96_1x8x64_i8w8a32_10_16_18_18 (BLOCK_IN 8 != BLOCK_OUT 64: \
its pkg_config.py sets both from one LOG_BLOCK): the records for it apply only to a TVM \
whose VTA toolchain takes them apart (docs/codesign.md, 'The design search in detail')"
    """
    hws = [HardwareConfig.from_target_model(m) for m in dict.fromkeys(models)]
    apart = [hw for hw in hws if not hw.tvm_stock_blocks]
    if not apart:
        return None
    what = ", ".join(f"{hw.target_model} (BLOCK_IN {hw.block_in} != BLOCK_OUT {hw.block_out}"
                     for hw in apart)
    return (f"TVM v0.14 cannot build {what}: its pkg_config.py sets both from one LOG_BLOCK)"
            f": the records for {'it' if len(apart) == 1 else 'them'} apply only to a TVM "
            "whose VTA toolchain takes them apart (docs/codesign.md, 'The design search in "
            "detail')")


@dataclass(frozen=True)
class ExportedRecord:
    """One exported record and what was tuned for its workload.

    ``cycles`` / ``seconds``: what TVM will run, the exported AutoTVM point simulated as
    TVM's template lowers it (``tvm_strict``) by the current timing model. ``line`` (of
    ``log``): the record it comes from; ``projected``: no record of the log was an AutoTVM
    point TVM builds, so this is the fastest buildable AutoTVM point nearest the log's tile
    and thread choices, re-simulated with TVM's own loop orders (``line`` is the record
    whose tiles gave it). ``tuned``: the log's best record for the workload in any space,
    at ``tuned_log``:``tuned_line``; ``tuned_cycles`` are its cycles by the current timing
    model (re-simulated when the log was timed by another, ``retimed``)."""

    workload: str
    model: str
    line: int
    cycles: int
    seconds: float
    record: dict[str, Any]
    projected: bool = False
    log: str = ""
    tuned: dict[str, Any] = field(default_factory=dict)
    tuned_cycles: int = 0
    tuned_log: str = ""
    tuned_line: int = 0
    retimed: bool = False

    @property
    def slowdown(self) -> float:
        """Exported cycles over tuned cycles (1.0: TVM runs what was tuned)."""
        return self.cycles / self.tuned_cycles

    @property
    def slower(self) -> bool:
        """Whether TVM will run the workload more than 1% slower than it was tuned."""
        return self.cycles > SLOWDOWN_TOLERANCE * self.tuned_cycles

    @property
    def tuned_space(self) -> str:
        return str(self.tuned.get("space") or "full")

    @property
    def tvm014_builds(self) -> bool:
        """Whether TVM v0.14 builds the record's hardware (BLOCK_IN = BLOCK_OUT)."""
        return HardwareConfig.from_target_model(self.model).tvm_stock_blocks


def _autotvm_record(wl: Workload, hw: HardwareConfig, schedule: Schedule, seconds: float,
                    timestamp: Any) -> dict[str, Any] | None:
    knobs = to_autotvm(schedule, wl, hw)
    if knobs is None:
        return None
    index, entity = config_entity(knobs, wl, hw)
    return {"input": [hw.autotvm_target, task_of(wl).name, task_args(wl, hw), {}],
            "config": {"index": index, "code_hash": None, "entity": entity},
            "result": [[seconds], 0, seconds, _epoch(timestamp)],
            "version": 0.2, "tvm_version": TVM_VERSION}


def to_autotvm_record(record: dict[str, Any]) -> dict[str, Any] | None:
    """The AutoTVM v0.2 record of one ``ok`` vtatune record, or None if AutoTVM's template
    cannot express its schedule or TVM cannot build it (e.g. a dense_packed point with
    tile_co > 1, recorded before vtatune knew TVM rejects it)."""
    wl, hw, schedule = workload_from(record), hw_from(record), schedule_from(record)
    if to_autotvm(schedule, wl, hw) is None:
        return None
    try:
        check(wl, schedule, hw, bool(record.get("bias", False)))
    except IllegalSchedule:
        return None
    return _autotvm_record(wl, hw, schedule, float(record["seconds"]),
                           record.get("timestamp"))


def _stale(record: dict[str, Any]) -> bool:
    """Whether another timing model than the current one timed ``record``."""
    return record.get("timing") != TimingProfile.for_hw(hw_from(record)).fingerprint()


def _timed_now(record: dict[str, Any]) -> tuple[int, float, bool] | None:
    """The record's (cycles, seconds) by the current timing model, and whether they were
    re-simulated: its own when that model timed it, else its schedule re-simulated (None if
    it no longer runs)."""
    if not _stale(record):
        return record["cycles"], float(record["seconds"]), False
    ev = score(workload_from(record), schedule_from(record), hw_from(record),
               bias=bool(record.get("bias", False)))
    return (ev.cycles, ev.seconds, True) if ev.status == "ok" else None


_Row = tuple[str, int, dict[str, Any]]  # (log, line, record)


def _tuned(group: list[_Row]) -> tuple[int, _Row, bool] | None:
    """The log's best record (any space) by its logged cycles, with its cycles by the
    current timing model and whether they were re-simulated; a record that no longer
    runs is passed over for the next."""
    for row in group:  # fastest first
        try:
            now = _timed_now(row[2])
        except (VtatuneError, KeyError, TypeError, ValueError):
            continue
        if now is not None:
            return now[0], row, now[2]
    return None


def _fastest_applicable(group: list[_Row]) -> tuple[int, float, _Row, dict[str, Any]] | None:
    """The fastest record of ``group`` that is an AutoTVM point TVM builds (the log's
    AutoTVM-space records), by the current timing model: (cycles, seconds, row, AutoTVM
    record). Ties keep the earliest in ``group``'s order."""
    best: tuple[int, float, _Row, dict[str, Any]] | None = None
    seen: set[Schedule] = set()
    for row in group:
        r = row[2]
        try:
            schedule = schedule_from(r)
            if schedule in seen or to_autotvm_record(r) is None:
                continue
            seen.add(schedule)
            now = _timed_now(r)
        except (VtatuneError, KeyError, TypeError, ValueError):
            continue
        if now is not None and (best is None or now[0] < best[0]):
            rec = _autotvm_record(workload_from(r), hw_from(r), schedule, now[1],
                                  r.get("timestamp"))
            if rec is not None:
                best = (now[0], now[1], row, rec)
    return best


def _nearest_buildable(schedule: Schedule, tpl: Any) -> Schedule:
    """The AutoTVM point nearest ``schedule``: per knob, the largest choice of the pruned
    autotvm template not above the schedule's value (else its smallest). The pruned
    choices are those some buildable point uses (dense_packed: tile_co 1, oc_nthread 1;
    tile_b below the runtime's kernel-key limit), so a dense128 tile of 128 rows x 4
    channel blocks becomes 64 rows x 1 block."""
    config = {}
    for k in tpl.knobs:
        v = getattr(schedule, k.name)
        below = [c for c in k.choices if c <= v]
        config[k.name] = max(below) if below else k.choices[0]
    return tpl.to_schedule(config)


def _projected(group: list[_Row]) -> tuple[int, float, _Row, dict[str, Any]] | None:
    """The fastest buildable AutoTVM point nearest the tile and thread choices of
    ``group``'s ``ok`` records (in log order), each simulated as TVM's template would lower
    it; the template's default point if none of them runs."""
    from search_spaces import get_template

    best: tuple[int, Any, Schedule, _Row] | None = None
    seen: set[Schedule] = set()
    templates: dict[tuple, Any] = {}
    fallback: tuple[_Row, Any] | None = None
    for row in group:
        r = row[2]
        try:
            wl, hw, bias = workload_from(r), hw_from(r), bool(r.get("bias", False))
            tk = (wl, hw, bias)
            if tk not in templates:
                templates[tk] = get_template(wl, hw, bias=bias, space="autotvm")
            point = _nearest_buildable(schedule_from(r), templates[tk])
        except (VtatuneError, KeyError, TypeError, ValueError):
            continue
        fallback = fallback or (row, templates[tk])
        if point in seen:
            continue
        seen.add(point)
        ev = score(wl, point, hw, bias=bias)
        if ev.status == "ok" and (best is None or ev.cycles < best[0]):
            best = (ev.cycles, ev, point, row)
    if best is None and fallback is not None:
        row, tpl = fallback
        try:
            point = tpl.to_schedule(tpl.default_config())
        except VtatuneError:
            return None
        ev = score(tpl.workload, point, tpl.hw, bias=tpl.bias)
        if ev.status == "ok":
            best = (ev.cycles, ev, point, row)
    if best is None:
        return None
    cycles, ev, point, row = best
    r = row[2]
    rec = _autotvm_record(workload_from(r), hw_from(r), point, ev.seconds, r.get("timestamp"))
    return None if rec is None else (cycles, ev.seconds, row, rec)


def _read_logs(logs: str | Path | Iterable[str | Path]) -> list[list[_Row]]:
    """The ``ok`` records of ``logs`` per workload x hardware x bias (in order of first
    appearance), each group fastest first by the logged cycles (ties in log order)."""
    paths = [logs] if isinstance(logs, str | Path) else list(logs)
    groups: dict[tuple, list[_Row]] = {}
    for path in paths:
        for line, r in read_records(path):
            if r.get("status") != "ok" or not isinstance(r.get("cycles"), int):
                continue
            try:
                key = (r["workload"]["key"], r["hw"]["model"], bool(r.get("bias", False)))
            except (KeyError, TypeError):
                continue
            groups.setdefault(key, []).append((str(path), line, r))
    return [sorted(g, key=lambda row: row[2]["cycles"]) for g in groups.values()]


def export_autotvm(logs: str | Path | Iterable[str | Path], out: str | Path
                   ) -> list[ExportedRecord]:
    """Write to ``out`` (one v0.2 record a line), for each workload x hardware (x bias) of
    ``logs``, the fastest record TVM applies as it is: the fastest of the logs' records that
    are AutoTVM points TVM builds (tuned with ``space="autotvm"``). A workload with none
    (tuned in vtatune's full space only, whose loop orders and load reuse AutoTVM lacks)
    gets the fastest buildable AutoTVM point nearest its records' tile and thread choices,
    simulated with TVM's loop orders (``projected``). Cycles are the current timing
    model's (a record timed by another is re-simulated). Each returned record also says
    what was tuned (the log's best in any space); one more than 1% slower than that
    (``slower``) is reported with an :class:`ExportWarning`; records for hardware TVM v0.14
    cannot build (BLOCK_IN != BLOCK_OUT) with one :class:`HardwareWarning`. Returns what was
    written."""
    picked: list[ExportedRecord] = []
    for group in _read_logs(logs):
        tuned = _tuned(group)
        chosen = _fastest_applicable(group)
        projected = chosen is None
        if projected:
            chosen = _projected(group)
        if tuned is None or chosen is None:
            continue
        cycles, seconds, (log, line, r), rec = chosen
        if not projected and cycles < tuned[0]:
            # a log re-timed by the current model: the exported record is itself one of the
            # log's, now faster than the one that was best by the logged cycles
            tuned = (cycles, (log, line, r), _stale(r))
        tuned_cycles, (tuned_log, tuned_line, tuned_record), retimed = tuned
        picked.append(ExportedRecord(
            r["workload"].get("name") or r["workload"]["key"], r["hw"]["model"], line,
            cycles, seconds, rec, projected, log, tuned_record, tuned_cycles, tuned_log,
            tuned_line, retimed))
    if picked:  # nothing to export leaves no file behind (an empty log would apply nothing)
        text = "".join(json.dumps(e.record, separators=(", ", ": ")) + "\n" for e in picked)
        try:  # whole or not at all: a full disk never leaves half a log for TVM to read
            write_whole({Path(out): text.encode()}, make_dirs=False)
        except OSError as exc:
            raise AutotvmError(f"cannot write {out}: {exc.strerror or exc}") from None
    unbuildable = unbuildable_warning(e.model for e in picked)
    if unbuildable:
        warnings.warn(HardwareWarning(unbuildable), stacklevel=2)
    for e in picked:
        if e.slower:
            warnings.warn(ExportWarning(
                f"{e.workload} on {e.model}: tuned at {e.tuned_cycles:,} cycles, exported at "
                f"{e.cycles:,} ({e.slowdown:.3g}x): AutoTVM's template cannot express "
                "the tuned schedule; tune it in AutoTVM's space (space='autotvm') to export "
                "what you tune"), stacklevel=2)
    return picked
