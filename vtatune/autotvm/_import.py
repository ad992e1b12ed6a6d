"""Importing AutoTVM logs (TopHub's ``vta_v0.10.log``, a user's tuning log): each record of
a VTA task is simulated as TVM's template lowers it; other tasks and targets are skipped
with one warning that counts them; a split whose outer x inner is not the axis length is
applied with its inner factor, as TVM's ``split(axis, factor=inner)`` does (one warning).

Example:
    >>> [i.score.cycles for i in import_autotvm("tophub_vta.log")]  # doctest: +SKIP
"""


from __future__ import annotations

import json
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulator.hardware import HardwareConfig
from vtatune import __version__
from vtatune.autotvm._tasks import (
    TASKS,
    AutotvmError,
    _target_hw,
    _Unsupported,
    tvm_splits,
    workload_from_task,
)
from vtatune.errors import VtatuneError
from vtatune.records import RecordWarning
from vtatune.schedule import (
    Schedule,
    from_autotvm,
)
from vtatune.scoring import Score, score
from vtatune.workloads import (
    Workload,
)

MAX_WARNINGS = 10  # skipped-line warnings per file before a count


# --- import ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Imported:
    """One AutoTVM record as a vtatune config: its workload, hardware, AutoTVM knobs, the
    schedule TVM's template builds for them, the measured cost and our simulation."""

    line: int
    task: str
    workload: Workload
    hw: HardwareConfig
    knobs: dict[str, Any]
    index: int | None
    schedule: Schedule
    autotvm_seconds: float | None
    score: Score | None  # None: read with simulate=False

    def config(self) -> dict[str, Any]:
        """The knobs as a vtatune ``autotvm``-space config (inner tile factors)."""
        return {k: getattr(self.schedule, k) for k in self.knobs}


def parse_record(d: Any, line: int) -> tuple[str, Workload, HardwareConfig, dict[str, Any],
                                              int | None, float | None, int]:
    """(task, workload, hw, knobs, index, mean cost, error_no) of one AutoTVM record."""
    try:
        target, task, args = d["input"][0], d["input"][1], d["input"][2]
        entity = d["config"]["entity"]
        result = d.get("result") or [[], 0]
    except (KeyError, TypeError, IndexError):
        raise AutotvmError(f"line {line}: not an AutoTVM record") from None
    hw = _target_hw(str(target))
    wl = workload_from_task(str(task), args, hw)
    try:
        knobs = {name: value for name, _, value in entity}
    except (TypeError, ValueError):
        raise AutotvmError(f"line {line}: bad config entity") from None
    costs = [c for c in (result[0] or []) if isinstance(c, int | float)]
    cost = sum(costs) / len(costs) if costs else None
    error_no = result[1] if len(result) > 1 and isinstance(result[1], int) else 0
    return str(task), wl, hw, knobs, d["config"].get("index"), cost, error_no


def import_autotvm(path: str | Path, *, best: bool = False,
                   simulate: bool = True) -> list[Imported]:
    """Read AutoTVM v0.2 VTA records (error_no 0) and simulate each config.

    A whole log such as TopHub's is read: records of tasks, targets or hardware vtatune
    does not simulate are skipped with one warning counting them by kind; a split whose
    outer x inner is not the axis length is applied with its inner factor (:func:`tvm_splits`,
    one warning); corrupt lines and unusable records are skipped with a warning naming the
    line (the first ten, then a count). A file without any usable record raises
    AutotvmError, in one line (the lines it skipped are counted there, not warned about).
    ``best``: keep only the lowest-cost record per task (what AutoTVM's apply_history_best
    would pick). ``simulate=False``: read the configs only (``score`` None).
    """
    try:
        lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        raise AutotvmError(f"cannot read {path}: {exc.strerror}") from None
    parsed = []
    skipped: list[str] = []  # warned about only when some record is usable
    records = 0  # lines that are AutoTVM records, usable or not
    unsupported: Counter[str] = Counter()
    first_unsupported = 0
    resplit: list[tuple[int, str]] = []
    skip = skipped.append

    for n, text in enumerate(lines, 1):
        if not text.strip() or text.lstrip().startswith("#"):
            continue
        try:
            d = json.loads(text)
            records += isinstance(d, dict) and "input" in d and "config" in d
            task, wl, hw, knobs, index, cost, error_no = parse_record(d, n)
            if error_no != 0:
                continue  # a failed measurement: AutoTVM ignores it too
            knobs, notes = tvm_splits(knobs, wl, hw)
            schedule = from_autotvm(knobs, wl, hw)
        except json.JSONDecodeError as exc:
            skip(f"{path}:{n}: skipped a corrupt or truncated line ({exc.msg})")
            continue
        except _Unsupported as exc:
            unsupported[str(exc)] += 1
            first_unsupported = first_unsupported or n
            continue
        except VtatuneError as exc:
            skip(f"{path}:{n}: skipped: {str(exc).removeprefix(f'line {n}: ')}")
            continue
        resplit += [(n, note) for note in notes]
        parsed.append((n, task, wl, hw, knobs, index, cost, schedule))
    if not records:
        lines_ = "it holds no record" if not skipped else "its only line is not a record" \
            if len(skipped) == 1 else f"none of its {len(skipped)} lines is a record"
        raise AutotvmError(f"{path} is not an AutoTVM log ({lines_})")
    if parsed:
        for message in skipped[:MAX_WARNINGS]:
            warnings.warn(message, RecordWarning, stacklevel=2)
        if len(skipped) > MAX_WARNINGS:
            warnings.warn(f"{path}: {len(skipped) - MAX_WARNINGS} more lines skipped",
                          RecordWarning, stacklevel=2)
    what = ""
    if unsupported:
        total = sum(unsupported.values())
        what = (f"skipped {total} record{'s' * (total != 1)} vtatune cannot simulate (first "
                f"at line {first_unsupported}): "
                + ", ".join(f"{c} {k}" for k, c in sorted(unsupported.items(),
                                                          key=lambda kc: (-kc[1], kc[0]))))
        if parsed:  # else the error below says it
            warnings.warn(f"{path}: {what}", RecordWarning, stacklevel=2)
    if resplit and parsed:
        warnings.warn(f"{path}: {len(resplit)} split{'s' * (len(resplit) != 1)} with outer x "
                      f"inner not the axis length (first at line {resplit[0][0]}: "
                      f"{resplit[0][1]}) applied with the inner factor, as TVM's "
                      "split(factor=inner) does", RecordWarning, stacklevel=2)
    if not parsed:
        raise AutotvmError(f"{path}: no usable AutoTVM VTA record (one of "
                           f"{', '.join(TASKS)} on a VTA target, with error_no 0)"
                           + (f"; {what}" if what else "")
                           + (f"; {len(skipped)} line{'s' * (len(skipped) != 1)} skipped "
                              f"(first: {skipped[0].removeprefix(f'{path}:')})"
                              if skipped else ""))
    if best:
        keep: dict[tuple, tuple] = {}
        for p in parsed:
            k = (p[1], p[2].key(), p[3].target_model)
            if k not in keep or (p[6] or float("inf")) < (keep[k][6] or float("inf")):
                keep[k] = p
        parsed = sorted(keep.values())
    return [Imported(n, task, wl, hw, knobs, index, schedule, cost,
                     score(wl, schedule, hw) if simulate else None)
            for n, task, wl, hw, knobs, index, cost, schedule in parsed]


def write_records(imported: list[Imported], path: str | Path, source: str) -> None:
    """Append the imported configs to a vtatune log (``template`` = the AutoTVM task,
    ``space`` = ``autotvm``, ``sampler`` = ``autotvm``, ``study`` = ``autotvm:<file>``), so
    that ``build``, ``analyze``, ``best`` and ``replay`` work on them."""
    from vtatune.records import RecordWriter, hw_fields, now, workload_fields

    with RecordWriter(path) as log:
        for trial, imp in enumerate(imported):
            ev = imp.score.as_dict()
            log.write({
                "schema": 1, "workload": workload_fields(imp.workload),
                "hw": hw_fields(imp.hw), "bias": False, "template": imp.task,
                "space": "autotvm", "study": f"autotvm:{Path(source).name}",
                "sampler": "autotvm", "seed": None, "version": __version__,
                "config": imp.config(), "schedule": imp.schedule.to_dict(),
                **ev,
                "trial": trial, "timestamp": now(),
                "autotvm": {"line": imp.line, "index": imp.index, "knobs": imp.knobs,
                            "seconds": imp.autotvm_seconds},
            })
