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
clock as the cost. For each workload, the fastest record that TVM's template can express
and build is exported; a log with none (tuned in vtatune's full space) exports the fastest
buildable AutoTVM point nearest its records' tile and thread choices, re-simulated with
TVM's loop orders.

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
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from simulator.hardware import HardwareConfig
from vtatune.autotvm._tasks import (
    TVM_VERSION,
    AutotvmError,
    config_entity,
    task_args,
    task_of,
)
from vtatune.errors import IllegalSchedule, VtatuneError
from vtatune.lowering import check
from vtatune.records import hw_from, read_records, schedule_from, workload_from
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
@dataclass(frozen=True)
class ExportedRecord:
    """One exported record. ``projected``: no record of the log was an AutoTVM point TVM
    builds, so this is the fastest buildable AutoTVM point nearest the log's tile and
    thread choices, re-simulated with TVM's own loop orders (its cycles are that
    simulation's, not the log's)."""

    workload: str
    model: str
    line: int
    cycles: int
    seconds: float
    record: dict[str, Any]
    projected: bool = False


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
    try:
        check(wl, schedule, hw, bool(record.get("bias", False)))
    except IllegalSchedule:
        return None
    return _autotvm_record(wl, hw, schedule, float(record["seconds"]),
                           record.get("timestamp"))


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


def _projected(group: list[tuple[int, dict[str, Any]]], label: str, key: tuple
               ) -> ExportedRecord | None:
    """The fastest buildable AutoTVM point nearest the tile and thread choices of
    ``group``'s ``ok`` records (in log order), each simulated as TVM's template would lower
    it; the template's default point if none of them runs."""
    from search_spaces import get_template

    best: tuple[int, int, Any, Schedule, dict[str, Any]] | None = None
    seen: set[Schedule] = set()
    templates: dict[tuple, Any] = {}
    fallback: tuple[int, dict[str, Any], Any] | None = None
    for line, r in group:
        try:
            wl, hw, bias = workload_from(r), hw_from(r), bool(r.get("bias", False))
            tk = (wl, hw, bias)
            if tk not in templates:
                templates[tk] = get_template(wl, hw, bias=bias, space="autotvm")
            point = _nearest_buildable(schedule_from(r), templates[tk])
        except (VtatuneError, KeyError, TypeError, ValueError):
            continue
        fallback = fallback or (line, r, templates[tk])
        if point in seen:
            continue
        seen.add(point)
        ev = score(wl, point, hw, bias=bias)
        if ev.status == "ok" and (best is None or ev.cycles < best[0]):
            best = (ev.cycles, line, ev, point, r)
    if best is None and fallback is not None:
        line, r, tpl = fallback
        try:
            point = tpl.to_schedule(tpl.default_config())
        except VtatuneError:
            return None
        ev = score(tpl.workload, point, tpl.hw, bias=tpl.bias)
        if ev.status == "ok":
            best = (ev.cycles, line, ev, point, r)
    if best is None:
        return None
    cycles, line, ev, point, r = best
    rec = _autotvm_record(workload_from(r), hw_from(r), point, ev.seconds, r.get("timestamp"))
    if rec is None:
        return None
    return ExportedRecord(label, key[1], line, cycles, ev.seconds, rec, projected=True)


def export_autotvm(logs: str | Path | Iterable[str | Path], out: str | Path
                   ) -> list[ExportedRecord]:
    """Write, for each workload x hardware (x bias) of ``logs``, the fastest record that is
    an AutoTVM point TVM builds to ``out`` (one v0.2 record a line). A problem with none
    (e.g. tuned in vtatune's full space, whose loop orders and load reuse AutoTVM lacks)
    gets the fastest buildable AutoTVM point nearest its records' tile and thread choices,
    simulated with TVM's loop orders (``projected``). Returns what was written."""
    paths = [logs] if isinstance(logs, str | Path) else list(logs)
    rows = [(n, r) for p in paths for n, r in read_records(p)]
    ok = sorted(((r["cycles"], i, n, r) for i, (n, r) in enumerate(rows)
                 if r.get("status") == "ok" and isinstance(r.get("cycles"), int)),
                key=lambda t: (t[0], t[1]))
    picked: dict[tuple, ExportedRecord] = {}
    groups: dict[tuple, list[tuple[int, dict[str, Any]]]] = {}
    for cycles, _, line, r in ok:
        try:
            key = (r["workload"]["key"], r["hw"]["model"], bool(r.get("bias", False)))
        except (KeyError, TypeError):
            continue
        groups.setdefault(key, []).append((line, r))
        if key in picked:
            continue
        try:
            rec = to_autotvm_record(r)
        except (VtatuneError, KeyError, TypeError, ValueError):
            continue
        if rec is not None:
            picked[key] = ExportedRecord(r["workload"].get("name") or key[0], key[1], line,
                                         cycles, float(r["seconds"]), rec)
    for key, group in groups.items():
        if key not in picked:
            label = group[0][1]["workload"].get("name") or key[0]
            found = _projected(group, label, key)
            if found is not None:
                picked[key] = found
    result = list(picked.values())
    text = "".join(json.dumps(e.record, separators=(", ", ": ")) + "\n" for e in result)
    try:
        Path(out).write_text(text)
    except OSError as exc:
        raise AutotvmError(f"cannot write {out}: {exc.strerror}") from None
    return result
