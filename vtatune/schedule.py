"""Schedules: the knobs that decide how a VTA operator is tiled, ordered and threaded.

One :class:`Schedule` describes GEMM and conv2d alike (a GEMM is a 1×1 conv on a 1×1
image). Knobs, all plain values so that ``search_spaces`` can enumerate them:

========== ===================================================================================
tile_b      batch blocks per tile
tile_h      output rows per tile (per thread)
tile_w      output columns per tile
tile_co     output-channel blocks per tile (per thread)
tile_ci     input-channel blocks per load step (the reduction is split into load steps)
oc_nthread  virtual threads on the output-channel tiles (1 or 2)
h_nthread   virtual threads on the row tiles (1 or 2)
outer_order order of the outer tile loops, a permutation of ``b h c w`` (``c`` = channels)
gemm_order  order of the loops inside a load step, a permutation of
            ``ci co h w kh kw``; the two outermost fold into the GEMM instruction's loops,
            the rest unroll into micro-ops
store       ``tile`` (the largest legal 2D DMA per store) or ``element`` (one per element)
reuse       skip a LOAD whose tile is already resident in its SRAM slot (e.g. weights kept
            across spatial tiles when ``c`` is outside ``h``/``w`` and one load step covers
            all input channels)
clip_order  ``min_max`` (TVM's topi epilogue) or ``max_min`` (the tutorials)
tvm_strict  reproduce TVM's own lowering limits (AutoTVM template points): no split DMA,
            one store per batch row that must fold to 2D, TVM's accumulator footprint
rows        a GEMM's rows (batch blocks): ``batch`` (each row of a tile its own input load
            and reset and GEMM kernels, as TVM's dense_packed lowers them) or ``spatial``
            (the rows are a 1x1 conv's pixels: ``tile_h`` rows per tile and thread in one
            input load and the GEMM instruction's loops, ``h_nthread`` threads on them;
            ``tile_b`` 1)
========== ===================================================================================

AutoTVM's ``conv2d_packed`` point is ``outer_order="bhcw"``, ``gemm_order="ci,w,kw,kh,co,h"``,
``store="tile"``, ``tvm_strict=True`` with the inner split factors as tiles
(:func:`from_autotvm`); ``dense_packed`` is the same with h = w = 1.

Example:
    >>> from vtatune.workloads import WORKLOADS
    >>> s = from_autotvm({"tile_b": [-1, 1], "tile_h": [-1, 7], "tile_w": [-1, 14],
    ...                   "tile_ci": [-1, 1], "tile_co": [-1, 8], "oc_nthread": 2,
    ...                   "h_nthread": 1}, WORKLOADS["conv2d"]["resnet18.C8"])
    >>> s.tile_h, s.tile_co, s.oc_nthread
    (7, 8, 2)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from vtatune.errors import ScheduleError
from vtatune.workloads import AddWorkload, GemmWorkload, GroupConv2dWorkload, Workload

__all__ = [
    "ALU_AUTOTVM_KNOBS", "AUTOTVM_GEMM_ORDER", "AUTOTVM_OUTER_ORDER", "CLIP_ORDERS",
    "CONV_AUTOTVM_KNOBS", "DENSE_AUTOTVM_KNOBS", "GEMM_AXES", "OUTER_AXES", "ROW_MODES",
    "STORE_MODES",
    "Schedule", "autotvm_extents", "autotvm_knob_names", "from_autotvm", "from_autotvm_defaults",
    "gemm_tutorial_schedule", "parse_schedule", "schedule_from_knobs", "to_autotvm",
    "tutorial_schedule", "tvm_fallback",
]


GEMM_AXES = ("ci", "co", "h", "w", "kh", "kw")
OUTER_AXES = ("b", "h", "c", "w")
AUTOTVM_GEMM_ORDER = "ci,w,kw,kh,co,h"
AUTOTVM_OUTER_ORDER = "bhcw"
STORE_MODES = ("tile", "element")
ROW_MODES = ("batch", "spatial")
CLIP_ORDERS = ("min_max", "max_min")
_TILE_KNOBS = ("tile_b", "tile_h", "tile_w", "tile_co", "tile_ci")
#: The AutoTVM templates' knobs in TVM's definition order (``cfg.define_split`` /
#: ``define_knob`` in vta_conv2d.py / vta_dense.py): the order of a record's entity and of
#: the mixed-radix config index.
CONV_AUTOTVM_KNOBS = ("tile_b", "tile_h", "tile_w", "tile_ci", "tile_co", "oc_nthread",
                      "h_nthread")
DENSE_AUTOTVM_KNOBS = ("tile_b", "tile_ci", "tile_co", "oc_nthread")
#: add.vta / multiply.vta's knobs (``vta/python/vta/top/op.py``), in definition order.
ALU_AUTOTVM_KNOBS = ("tile_co", "tile_h", "tile_w")


def autotvm_knob_names(workload: Workload) -> tuple[str, ...]:
    """The knobs of the AutoTVM template that schedules ``workload``, in definition order."""
    if isinstance(workload, GemmWorkload):
        return DENSE_AUTOTVM_KNOBS
    if isinstance(workload, AddWorkload):
        return ALU_AUTOTVM_KNOBS
    return CONV_AUTOTVM_KNOBS


@dataclass(frozen=True)
class Schedule:
    """A point of vtatune's schedule space (see the module docstring for each knob)."""

    tile_b: int = 1
    tile_h: int = 1
    tile_w: int = 1
    tile_co: int = 1
    tile_ci: int = 1
    oc_nthread: int = 1
    h_nthread: int = 1
    outer_order: str = AUTOTVM_OUTER_ORDER
    gemm_order: str = AUTOTVM_GEMM_ORDER
    store: str = "tile"
    reuse: bool = False
    clip_order: str = "min_max"
    tvm_strict: bool = False
    rows: str = "batch"

    def __post_init__(self) -> None:
        for key in _TILE_KNOBS:
            v = getattr(self, key)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ScheduleError(f"{key} must be a positive integer, got {v!r}")
        for key in ("oc_nthread", "h_nthread"):
            if getattr(self, key) not in (1, 2):
                raise ScheduleError(f"{key} must be 1 or 2 (VTA supports 2 virtual threads "
                                    f"per axis), got {getattr(self, key)!r}")
        if sorted(self.outer_order) != sorted(OUTER_AXES) or len(self.outer_order) != 4:
            raise ScheduleError(f"outer_order must be a permutation of 'bhcw', got "
                                f"{self.outer_order!r}")
        order = self.gemm_order.split(",")
        if sorted(order) != sorted(GEMM_AXES):
            raise ScheduleError(f"gemm_order must be a permutation of {','.join(GEMM_AXES)}, "
                                f"got {self.gemm_order!r}")
        if self.store not in STORE_MODES:
            raise ScheduleError(f"store must be one of {', '.join(STORE_MODES)}, "
                                f"got {self.store!r}")
        if self.clip_order not in CLIP_ORDERS:
            raise ScheduleError(f"clip_order must be one of {', '.join(CLIP_ORDERS)}, "
                                f"got {self.clip_order!r}")
        for key in ("reuse", "tvm_strict"):
            if not isinstance(getattr(self, key), bool):
                raise ScheduleError(f"{key} must be true or false")
        if self.rows not in ROW_MODES:
            raise ScheduleError(f"rows must be one of {', '.join(ROW_MODES)}, "
                                f"got {self.rows!r}")

    @property
    def nthreads(self) -> int:
        return self.oc_nthread * self.h_nthread

    def to_dict(self) -> dict[str, Any]:
        # every field is a plain value: a shallow copy is the dict (asdict deep-copies each);
        # ``rows`` only when not its default, so a schedule of before it writes as it did
        out = dict(vars(self))
        if out["rows"] == "batch":
            del out["rows"]
        return out

    @classmethod
    def from_dict(cls, data: Any) -> Schedule:
        if not isinstance(data, dict):
            raise ScheduleError("a schedule must be a JSON object of knobs")
        known = {f.name for f in fields(cls)}
        for key in data:
            if key not in known:
                raise ScheduleError(f"unknown schedule knob {key!r} (knobs: "
                                    f"{', '.join(sorted(known))})")
        return cls(**data)

    def short(self) -> str:
        """A compact one-line rendering."""
        s = (f"b{self.tile_b} h{self.tile_h} w{self.tile_w} co{self.tile_co} ci{self.tile_ci} "
             f"vt{self.oc_nthread}x{self.h_nthread} {self.outer_order} [{self.gemm_order}] "
             f"store={self.store}")
        if self.reuse:
            s += " reuse"
        if self.tvm_strict:
            s += " tvm"
        if self.rows != "batch":
            s += f" rows={self.rows}"
        return s


def autotvm_extents(workload: Workload, hw=None) -> dict[str, int]:
    """The extent of each axis AutoTVM's template splits (``cfg.define_split``): batch and
    channel blocks, output rows and columns; ``tile_ci`` splits one group's input blocks
    (group_conv2d's reduction axis)."""
    from simulator.hardware import DEFAULT

    hw = hw or DEFAULT
    if isinstance(workload, AddWorkload):  # and MultiplyWorkload
        return {"tile_co": workload.channels // hw.block_out, "tile_h": workload.height,
                "tile_w": workload.width}
    wl = workload.as_conv() if isinstance(workload, GemmWorkload) else workload
    ci = wl.group_in_channels if isinstance(wl, GroupConv2dWorkload) else wl.in_channels
    return {"tile_b": wl.batch // hw.batch, "tile_h": wl.out_height, "tile_w": wl.out_width,
            "tile_ci": ci // hw.block_in, "tile_co": wl.out_channels // hw.block_out}


def _split_inner(name: str, value: Any, extent: int) -> int:
    """AutoTVM's [outer, inner] split (-1 = the rest) -> the inner factor."""
    if (not isinstance(value, list) or len(value) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)):
        raise ScheduleError(f"autotvm knob {name} must be a split [outer, inner], got {value!r}")
    outer, inner = value
    if inner == -1 and outer > 0 and extent % outer == 0:
        inner = extent // outer
    if inner < 1 or extent % inner:
        raise ScheduleError(f"autotvm knob {name}={value}: inner factor must divide {extent}")
    if outer not in (-1, extent // inner):
        raise ScheduleError(f"autotvm knob {name}={value}: outer x inner must equal {extent}")
    return inner


def from_autotvm(knobs: Any, workload: Workload, hw=None) -> Schedule:
    """The schedule TVM's ``conv2d_packed`` / ``dense_packed`` template builds for a point
    (``group_conv2d_packed`` and ``conv2d_transpose_packed`` define the same knobs)."""
    from simulator.hardware import DEFAULT

    hw = hw or DEFAULT
    if not isinstance(knobs, dict):
        raise ScheduleError("an autotvm point must be an object of knobs")
    allowed = autotvm_knob_names(workload)
    for key in knobs:
        if key not in allowed:
            raise ScheduleError(f"unknown autotvm knob {key!r} for {workload.operator} "
                                f"(knobs: {', '.join(allowed)})")
    extents = autotvm_extents(workload, hw)
    tiles = {}
    for key in _TILE_KNOBS:
        if key in knobs:
            tiles[key] = _split_inner(key, knobs[key], extents[key])
        elif key not in allowed:  # an axis the template does not split (gemm's h, w)
            tiles[key] = 1
        else:
            raise ScheduleError(f"autotvm point lacks knob {key}")
    threads = {}
    for key in ("oc_nthread", "h_nthread"):
        v = knobs.get(key, 1)
        if key not in knobs and key in allowed:
            raise ScheduleError(f"autotvm point lacks knob {key}")
        threads[key] = v
    return Schedule(**tiles, **threads, outer_order=AUTOTVM_OUTER_ORDER,
                    gemm_order=AUTOTVM_GEMM_ORDER, store="tile", reuse=False,
                    clip_order="min_max", tvm_strict=True)


def to_autotvm(schedule: Schedule, workload: Workload, hw=None) -> dict[str, Any] | None:
    """The AutoTVM point expressing ``schedule``, or None if the template cannot."""
    base = from_autotvm_defaults(schedule)
    if base != schedule:
        return None
    extents = autotvm_extents(workload, hw)
    names = autotvm_knob_names(workload)
    if any(getattr(schedule, k) != 1 for k in (*_TILE_KNOBS, "oc_nthread", "h_nthread")
           if k not in names):
        return None  # an axis the template does not split or thread
    out: dict[str, Any] = {}
    for key in names:
        if key.startswith("tile_"):
            inner = getattr(schedule, key)
            out[key] = [extents[key] // inner, inner]
        else:
            out[key] = getattr(schedule, key)
    return out


def from_autotvm_defaults(schedule: Schedule) -> Schedule:
    """``schedule`` with every non-tile knob set as AutoTVM's template fixes it."""
    return replace(schedule, outer_order=AUTOTVM_OUTER_ORDER, gemm_order=AUTOTVM_GEMM_ORDER,
                   store="tile", reuse=False, clip_order="min_max", tvm_strict=True,
                   rows="batch")


def tutorial_schedule(workload: Workload, hw=None) -> Schedule:
    """The seed tutorials' schedules (TVM's matrix_multiply_opt and convolution_opt).
    Raises ScheduleError where the tutorial's schedule cannot exist: the GEMM one when
    BLOCK_IN != BLOCK_OUT, any operator but conv2d and gemm."""
    from simulator.hardware import DEFAULT

    hw = hw or DEFAULT
    if isinstance(workload, GemmWorkload):
        if hw.block_in != hw.block_out:
            # A channel block of the DRAM tensors is max(BLOCK_IN, BLOCK_OUT) channels, so
            # one of the tutorial's two channel loops splits in two (c // k, c % k): three
            # channel loops, of which the GEMM instruction folds two and the innermost,
            # unrolled, accumulates consecutive micro-ops into one ACC row.
            packed, k = (("input", hw.block_out // hw.block_in) if hw.block_out > hw.block_in
                         else ("output", hw.block_in // hw.block_out))
            raise ScheduleError(
                f"the GEMM tutorial's schedule (matrix_multiply_opt: output-channel blocks "
                f"outside input-channel blocks, both in the GEMM instruction's two loops) "
                f"cannot exist on BLOCK_IN {hw.block_in} != BLOCK_OUT {hw.block_out}: the "
                f"{packed} channels are packed by {k} blocks, a third channel loop that "
                "unrolls innermost and makes consecutive micro-ops write one ACC row (rule "
                "dst_dependency); use --schedule default or tune")
        return gemm_tutorial_schedule(256, 256, hw)
    if workload.operator != "conv2d":
        raise ScheduleError(f"the seed tutorials schedule conv2d and gemm only, not "
                            f"{workload.operator}: use default or a JSON schedule")
    # convolution_opt: 128 output channels x 7 rows x 14 cols per tile, 16 input channels
    # per load step (at least one channel block of the input as it lies in DRAM: BLOCK_OUT
    # channels when BLOCK_OUT > BLOCK_IN, rule load_layout), 2 virtual threads on oc, stores
    # per output element. 128 channels are whole BLOCK_IN blocks (rule store_layout).
    return Schedule(tile_b=1, tile_h=7, tile_w=14, tile_co=128 // hw.block_out,
                    tile_ci=max(16, hw.block_in, hw.block_out) // hw.block_in,
                    oc_nthread=2, h_nthread=1, outer_order="bchw",
                    gemm_order="co,h,ci,kh,kw,w", store="element", clip_order="max_min")


def gemm_tutorial_schedule(tile_in_channels: int, tile_out_channels: int, hw=None) -> Schedule:
    """matrix_multiply_opt with the given channel tiles (ic_out outermost, per-element store)."""
    from simulator.hardware import DEFAULT

    hw = hw or DEFAULT
    if tile_in_channels % hw.block_in or tile_out_channels % hw.block_out:
        raise ScheduleError(f"tutorial GEMM tiles must be multiples of the block "
                            f"({hw.block_in}), got {tile_in_channels}/{tile_out_channels}")
    return Schedule(tile_b=1, tile_co=tile_out_channels // hw.block_out,
                    tile_ci=tile_in_channels // hw.block_in, outer_order="bchw",
                    gemm_order="co,h,w,ci,kh,kw", store="element", clip_order="max_min")


def parse_schedule(spec: str | None, workload: Workload, hw=None) -> Schedule | str:
    """``tutorial``, ``default`` (returned as the string, resolved by the lowering),
    a JSON object of knobs, ``{"autotvm": {...}}``, or ``@file`` holding such JSON."""
    if spec is None or spec == "default":
        return "default"
    if spec == "tutorial":
        return tutorial_schedule(workload, hw)
    text = spec
    if spec.startswith("@"):
        try:
            text = Path(spec[1:]).read_text()
        except OSError as exc:
            raise ScheduleError(f"cannot read schedule file {spec[1:]}: {exc.strerror}") from None
    elif not spec.lstrip().startswith("{"):
        raise ScheduleError(f"unknown schedule {spec!r}: give tutorial, default, a JSON object "
                            "of knobs or @file")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ScheduleError(f"schedule is not valid JSON ({exc.msg}: column {exc.colno})") from None
    return schedule_from_knobs(data, workload, hw)


def schedule_from_knobs(data: Any, workload: Workload, hw=None) -> Schedule:
    """A dict of knobs (the others at their defaults) or ``{"autotvm": {...}}``."""
    if isinstance(data, dict) and "autotvm" in data:
        if len(data) != 1:
            raise ScheduleError("an autotvm schedule is {\"autotvm\": {knobs}} alone")
        return from_autotvm(data["autotvm"], workload, hw)
    return Schedule.from_dict(data)


def tvm_fallback(workload: Workload, hw=None) -> Schedule:
    """The schedule TVM v0.14 runs for a task its AutoTVM log lacks: the fallback config,
    entity 0 of the template's space (every split's inner factor 1, one thread), as
    ``FallbackContext`` gives it."""
    return from_autotvm({k: [-1, 1] if k.startswith("tile_") else 1
                         for k in autotvm_knob_names(workload)}, workload, hw)
