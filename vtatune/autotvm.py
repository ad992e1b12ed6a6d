"""AutoTVM interop: vtatune logs -> AutoTVM v0.2 records, and AutoTVM VTA records (e.g.
TopHub's) -> vtatune configs that simulate.

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
    >>> [i.evaluation.cycles for i in import_autotvm("tophub_vta.log")]  # doctest: +SKIP
"""

from __future__ import annotations

import json
import re
import warnings
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from simulator.hardware import HardwareConfig

from . import __version__
from .errors import IllegalSchedule, VtatuneError
from .evaluate import Evaluation, evaluate
from .lowering import check
from .records import RecordWarning, hw_from, read_records, schedule_from, workload_from
from .schedule import (
    CONV_AUTOTVM_KNOBS,
    DENSE_AUTOTVM_KNOBS,
    Schedule,
    autotvm_extents,
    from_autotvm,
    to_autotvm,
)
from .workloads import (
    WORKLOADS,
    Conv2dTransposeWorkload,
    Conv2dWorkload,
    GemmWorkload,
    GroupConv2dWorkload,
    Workload,
)

#: TVM version whose VTA templates the lowering reproduces (the fsim reference data's).
TVM_VERSION = "0.14.0"
MAX_WARNINGS = 10  # skipped-line warnings per file before a count
_MODEL = re.compile(r"^([a-z0-9]+)_(\d+)x(\d+)_i(\d+)w(\d+)a(\d+)_(\d+)_(\d+)_(\d+)_(\d+)$")


class AutotvmError(VtatuneError):
    """An AutoTVM file or record that cannot be used."""


def hw_from_model(model: str) -> HardwareConfig:
    """The hardware of a TVM target model such as ``pynq_1x16_i8w8a32_15_15_18_17``."""
    m = _MODEL.match(model)
    if not m:
        raise AutotvmError(f"unknown VTA model {model!r} (want <target>_<B>x<BLOCK>_i8w8a32_"
                           "<uop>_<inp>_<wgt>_<acc>)")
    target, *nums = m.groups()
    batch, block, inp, wgt, acc, uop, ibuf, wbuf, abuf = (int(x) for x in nums)
    for name, v in (("batch", batch), ("block", block), ("inp width", inp),
                    ("wgt width", wgt), ("acc width", acc)):
        if v < 1 or v & (v - 1):
            raise AutotvmError(f"VTA model {model!r}: {name} {v} is not a power of two")
    return HardwareConfig(target=target, log_inp_width=inp.bit_length() - 1,
                          log_wgt_width=wgt.bit_length() - 1,
                          log_acc_width=acc.bit_length() - 1,
                          log_batch=batch.bit_length() - 1, log_block=block.bit_length() - 1,
                          log_uop_buff_size=uop, log_inp_buff_size=ibuf,
                          log_wgt_buff_size=wbuf, log_acc_buff_size=abuf)


# --- the AutoTVM tasks ------------------------------------------------------------------
def _conv_tensors(w: Any, hw: HardwareConfig, kernel_in: int) -> list[Any]:
    """The packed data (N/B, C/BI, H, W, B, BI) and kernel (O/BO, kernel_in/BI, K, K, BO,
    BI) args of a convolution task."""
    b, bi, bo = hw.batch, hw.block_in, hw.block_out
    return [["TENSOR", [w.batch // b, w.in_channels // bi, w.height, w.width, b, bi], "int8"],
            ["TENSOR", [w.out_channels // bo, kernel_in // bi, w.kernel, w.kernel, bo, bi],
             "int8"]]


def _conv2d_args(w: Workload, hw: HardwareConfig) -> list[Any]:
    assert isinstance(w, Conv2dWorkload)
    return [*_conv_tensors(w, hw, w.in_channels), [w.stride, w.stride], [w.pad] * 4, [1, 1],
            f"NCHW{hw.batch}n{hw.block_in}c", "int32"]


def _conv2d_workload(args: Any) -> tuple[Workload, tuple[int, int]]:
    (_, d, _), (_, k, _), strides, pads = args[0], args[1], args[2], args[3]
    nb, cib, h, w, b, bi = d
    cob, _, kh, kw, bo, _ = k
    if kh != kw or len(set(pads)) != 1 or strides[0] != strides[1]:
        raise AutotvmError("only square kernels, equal pads and strides are supported")
    if len(args) > 4 and list(args[4]) != [1, 1]:
        raise AutotvmError(f"dilation {args[4]} is not supported")
    return Conv2dWorkload(nb * b, h, w, cib * bi, cob * bo, kh, pads[0], strides[0]), (b, bi)


def _dense_args(w: Workload, hw: HardwareConfig) -> list[Any]:
    b, bi, bo = hw.batch, hw.block_in, hw.block_out
    assert isinstance(w, GemmWorkload)
    return [["TENSOR", [w.batch // b, w.in_channels // bi, b, bi], "int8"],
            ["TENSOR", [w.out_channels // bo, w.in_channels // bi, bo, bi], "int8"], None,
            "int32"]


def _dense_workload(args: Any) -> tuple[Workload, tuple[int, int]]:
    (_, d, _), (_, k, _) = args[0], args[1]
    nb, cib, b, bi = d
    cob, _, bo, _ = k
    return GemmWorkload(nb * b, cib * bi, cob * bo), (b, bi)


def _group_conv2d_args(w: Workload, hw: HardwareConfig) -> list[Any]:
    # group_conv2d_packed(data, kernel, strides, padding, dilation, groups, out_dtype)
    assert isinstance(w, GroupConv2dWorkload)
    return [*_conv_tensors(w, hw, w.group_in_channels), [w.stride, w.stride], [w.pad] * 4,
            [1, 1], w.groups, "int32"]


def _group_conv2d_workload(args: Any) -> tuple[Workload, tuple[int, int]]:
    (_, d, _), (_, k, _), strides, pads, dilation, groups = args[:6]
    nb, cib, h, w, b, bi = d
    cob, _, kh, kw, bo, _ = k
    if kh != kw or len(set(pads)) != 1 or strides[0] != strides[1]:
        raise AutotvmError("only square kernels, equal pads and strides are supported")
    if list(dilation) != [1, 1]:
        raise AutotvmError(f"dilation {dilation} is not supported")
    return GroupConv2dWorkload(nb * b, h, w, cib * bi, cob * bo, kh, pads[0], strides[0],
                               int(groups)), (b, bi)


def _conv2d_transpose_args(w: Workload, hw: HardwareConfig) -> list[Any]:
    # conv2d_transpose_packed(data, kernel, strides, padding, out_dtype, output_padding);
    # the kernel as graph packing leaves it: (CO/BO, CI/BI, K, K, BO, BI)
    assert isinstance(w, Conv2dTransposeWorkload)
    return [*_conv_tensors(w, hw, w.in_channels), [w.stride, w.stride], [w.pad] * 4, "int32",
            [w.output_padding, w.output_padding]]


def _conv2d_transpose_workload(args: Any) -> tuple[Workload, tuple[int, int]]:
    (_, d, _), (_, k, _), strides, pads = args[0], args[1], args[2], args[3]
    opad = list(args[5]) if len(args) > 5 else [0, 0]
    nb, cib, h, w, b, bi = d
    cob, _, kh, kw, bo, _ = k
    if kh != kw or len(set(pads)) != 1 or strides[0] != strides[1] or opad[0] != opad[1]:
        raise AutotvmError("only square kernels, equal pads, strides and output paddings are "
                           "supported")
    return Conv2dTransposeWorkload(nb * b, h, w, cib * bi, cob * bo, kh, pads[0], strides[0],
                                   opad[0]), (b, bi)


@dataclass(frozen=True)
class AutotvmTask:
    """One AutoTVM VTA task vtatune simulates: its name, vtatune's operator, the template's
    knobs in TVM's definition order (the entity's order and the index's radix order), how
    the task's args are written for a workload, and how a workload and its (BATCH,
    BLOCK_IN) packing are read back from them (raising AutotvmError or a TypeError,
    ValueError or IndexError for malformed args)."""

    name: str
    operator: str
    knobs: tuple[str, ...]
    args: Callable[[Workload, HardwareConfig], list[Any]]
    workload: Callable[[Any], tuple[Workload, tuple[int, int]]]


#: The tasks import and export handle, by AutoTVM task name: adding an operator is one entry.
TASKS: dict[str, AutotvmTask] = {t.name: t for t in (
    AutotvmTask("conv2d_packed.vta", "conv2d", CONV_AUTOTVM_KNOBS, _conv2d_args,
                _conv2d_workload),
    AutotvmTask("dense_packed.vta", "gemm", DENSE_AUTOTVM_KNOBS, _dense_args, _dense_workload),
    # Both define the same knobs as conv2d_packed, in the same order.
    AutotvmTask("group_conv2d_packed.vta", "group_conv2d", CONV_AUTOTVM_KNOBS,
                _group_conv2d_args, _group_conv2d_workload),
    AutotvmTask("conv2d_transpose_packed.vta", "conv2d_transpose", CONV_AUTOTVM_KNOBS,
                _conv2d_transpose_args, _conv2d_transpose_workload),
)}


def task_of(workload: Workload) -> AutotvmTask:
    """The AutoTVM task of ``workload``'s operator (AutotvmError if there is none)."""
    for task in TASKS.values():
        if task.operator == workload.operator:
            return task
    raise AutotvmError(f"no AutoTVM task for operator {workload.operator!r}")


def task_args(workload: Workload, hw: HardwareConfig) -> list[Any]:
    """The task's args as AutoTVM serialises them (tensors in VTA's packed layouts)."""
    return task_of(workload).args(workload, hw)


def _factors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def config_entity(knobs: dict[str, Any], workload: Workload, hw: HardwareConfig
                  ) -> tuple[int, list[list[Any]]]:
    """AutoTVM's (index, entity) of a point, knobs in the template's definition order:
    splits are ``sp`` entities over the factors of the axis in ascending order (TVM's
    ``SplitSpace`` enumerates the inner factor), thread counts ``ot`` entities over [1, 2];
    the index is mixed-radix with the first knob varying fastest (``ConfigSpace.get``).

    Example (TopHub's ResNet-18 C8 record has index 575):
        >>> from simulator.hardware import DEFAULT
        >>> c8 = WORKLOADS["conv2d"]["resnet18.C8"]
        >>> config_entity({"tile_b": [1, 1], "tile_h": [1, 14], "tile_w": [1, 14],
        ...                "tile_ci": [16, 1], "tile_co": [4, 4], "oc_nthread": 2,
        ...                "h_nthread": 1}, c8, DEFAULT)[0]
        575
    """
    names = task_of(workload).knobs
    ext = autotvm_extents(workload, hw)
    index, radix, entity = 0, 1, []
    for name in names:
        v = knobs[name]
        if name.startswith("tile_"):
            choices = _factors(ext[name])
            digit = choices.index(v[1])
            entity.append([name, "sp", list(v)])
        else:
            choices = [1, 2]
            digit = choices.index(v)
            entity.append([name, "ot", v])
        index += digit * radix
        radix *= len(choices)
    return index, entity


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
        ev = evaluate(wl, point, hw, bias=bias)
        if ev.status == "ok" and (best is None or ev.cycles < best[0]):
            best = (ev.cycles, line, ev, point, r)
    if best is None and fallback is not None:
        line, r, tpl = fallback
        try:
            point = tpl.to_schedule(tpl.default_config())
        except VtatuneError:
            return None
        ev = evaluate(tpl.workload, point, tpl.hw, bias=tpl.bias)
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
    evaluation: Evaluation

    def config(self) -> dict[str, Any]:
        """The knobs as a vtatune ``autotvm``-space config (inner tile factors)."""
        return {k: getattr(self.schedule, k) for k in self.knobs}


def _named(workload: Workload) -> Workload:
    """The named workload of this shape (e.g. resnet18.C8), if there is one."""
    for table in WORKLOADS.values():
        for w in table.values():
            if w.key() == workload.key() and w.name != "tutorial":
                return w
    return workload


class _Unsupported(AutotvmError):
    """A record of a task, target or hardware vtatune does not simulate: counted, not named
    (a TopHub log holds hundreds: arm_cpu, group_conv2d, conv2d_transpose ...)."""


def workload_from_task(task: str, args: Any, hw: HardwareConfig) -> Workload:
    """The workload of one of :data:`TASKS` (AutotvmError for other tasks or bad args)."""
    spec = TASKS.get(task)
    if spec is None:
        raise _Unsupported(f"task {task}")
    try:
        wl, packing = spec.workload(args)
    except AutotvmError as exc:
        raise AutotvmError(f"{task}: {exc}") from None
    except (TypeError, ValueError, IndexError, VtatuneError) as exc:
        raise AutotvmError(f"{task}: cannot read the task args ({exc})") from None
    if packing != (hw.batch, hw.block_in):
        raise AutotvmError(f"{task}: tensors packed {packing[0]}x{packing[1]}, the hardware "
                           f"is {hw.batch}x{hw.block_in}")
    return _named(wl)


def _target_hw(target: str) -> HardwareConfig:
    """The VTA hardware of a target string (_Unsupported for other targets)."""
    if "-device=vta" not in target:
        device = re.search(r"-device=(\S+)", target)
        raise _Unsupported(f"target {target.split(' ')[0]}"
                           + (f" -device={device.group(1)}" if device else ""))
    model = re.search(r"-model=(\S+)", target)
    if not model:
        raise AutotvmError(f"target {target!r} has no -model")
    try:
        return hw_from_model(model.group(1))
    except AutotvmError:
        raise _Unsupported(f"model {model.group(1)}") from None


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


def tvm_splits(knobs: dict[str, Any], workload: Workload, hw: HardwareConfig
               ) -> tuple[dict[str, Any], list[str]]:
    """``knobs`` with each split as TVM applies it, and a note per split changed. TVM's
    ``SplitEntity.apply`` calls ``split(axis, factor=inner)`` and never reads the outer
    factor, so a split whose outer x inner is not the axis length (TopHub's Yolo-tiny rows
    reuse ResNet configs: tile_h [1, 16] on 208 rows) tiles the axis by its inner factor.

    Example:
        >>> from simulator.hardware import DEFAULT
        >>> yolo = Conv2dWorkload(1, 208, 208, 16, 32, 3, 1, 1)
        >>> tvm_splits({"tile_h": [1, 16], "tile_w": [13, 16]}, yolo, DEFAULT)
        ({'tile_h': [13, 16], 'tile_w': [13, 16]}, ['tile_h [1, 16] on 208'])
    """
    ext = autotvm_extents(workload, hw)
    out, notes = dict(knobs), []
    for name, v in knobs.items():
        if (name in ext and isinstance(v, list) and len(v) == 2
                and all(isinstance(x, int) and not isinstance(x, bool) for x in v)):
            outer, inner = v
            if outer != -1 and inner >= 1 and outer * inner != ext[name] \
                    and ext[name] % inner == 0:
                out[name] = [ext[name] // inner, inner]
                notes.append(f"{name} {v} on {ext[name]}")
    return out, notes


def import_autotvm(path: str | Path, *, best: bool = False) -> list[Imported]:
    """Read AutoTVM v0.2 VTA records (error_no 0) and simulate each config.

    A whole log such as TopHub's is read: records of tasks, targets or hardware vtatune
    does not simulate are skipped with one warning counting them by kind; a split whose
    outer x inner is not the axis length is applied with its inner factor (:func:`tvm_splits`,
    one warning); corrupt lines and unusable records are skipped with a warning naming the
    line (the first ten, then a count). A file without any usable record raises
    AutotvmError. ``best``: keep only the lowest-cost record per task (what AutoTVM's
    apply_history_best would pick).
    """
    try:
        lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        raise AutotvmError(f"cannot read {path}: {exc.strerror}") from None
    parsed = []
    skipped = 0
    unsupported: Counter[str] = Counter()
    first_unsupported = 0
    resplit: list[tuple[int, str]] = []

    def skip(message: str) -> None:
        nonlocal skipped
        skipped += 1
        if skipped <= MAX_WARNINGS:
            warnings.warn(message, RecordWarning, stacklevel=3)

    for n, text in enumerate(lines, 1):
        if not text.strip() or text.lstrip().startswith("#"):
            continue
        try:
            d = json.loads(text)
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
    if skipped > MAX_WARNINGS:
        warnings.warn(f"{path}: {skipped - MAX_WARNINGS} more lines skipped", RecordWarning,
                      stacklevel=2)
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
                           + (f"; {what}" if what else ""))
    if best:
        keep: dict[tuple, tuple] = {}
        for p in parsed:
            k = (p[1], p[2].key(), p[3].target_model)
            if k not in keep or (p[6] or float("inf")) < (keep[k][6] or float("inf")):
                keep[k] = p
        parsed = sorted(keep.values())
    return [Imported(n, task, wl, hw, knobs, index, schedule, cost,
                     evaluate(wl, schedule, hw))
            for n, task, wl, hw, knobs, index, cost, schedule in parsed]


def write_records(imported: list[Imported], path: str | Path, source: str) -> None:
    """Append the imported configs to a vtatune log (``template`` = the AutoTVM task,
    ``space`` = ``autotvm``, ``sampler`` = ``autotvm``, ``study`` = ``autotvm:<file>``), so
    that ``build``, ``analyze``, ``best`` and ``replay`` work on them."""
    from .records import RecordWriter, hw_fields, now, workload_fields

    with RecordWriter(path) as log:
        for trial, imp in enumerate(imported):
            ev = imp.evaluation.as_dict()
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
