"""AutoTVM's VTA tasks: each operator's task name and args in TVM's packed layouts, the
config entity in TVM's knob order and its index in the template's space, and the way back
from a task's args to a vtatune workload.

Example:
    >>> from simulator.hardware import DEFAULT
    >>> from vtatune.workloads import WORKLOADS
    >>> wl = WORKLOADS["conv2d"]["resnet18.C8"]
    >>> task_of(wl).name, task_args(wl, DEFAULT)[2:]
    ('conv2d_packed.vta', [[1, 1], [1, 1, 1, 1], [1, 1], 'NCHW1n16c', 'int32'])
"""


from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from simulator.errors import ConfigError
from simulator.hardware import HardwareConfig
from vtatune.errors import VtatuneError
from vtatune.schedule import (
    ALU_AUTOTVM_KNOBS,
    CONV_AUTOTVM_KNOBS,
    DENSE_AUTOTVM_KNOBS,
    autotvm_extents,
)
from vtatune.workloads import (
    WORKLOADS,
    AddWorkload,
    Conv2dTransposeWorkload,
    Conv2dWorkload,
    GemmWorkload,
    GroupConv2dWorkload,
    MultiplyWorkload,
    Workload,
)

#: TVM version whose VTA templates the lowering reproduces (the fsim reference data's).
TVM_VERSION = "0.14.0"


class AutotvmError(VtatuneError):
    """An AutoTVM file or record that cannot be used."""


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


def _alu_args(w: Workload, hw: HardwareConfig) -> list[Any]:
    # add_packed / multiply_packed(lhs, rhs): the add's inputs as the fused function's casts
    # leave them, int32, in the packed layout (N/B, C/BO, H, W, B, BO)
    assert isinstance(w, AddWorkload)
    shape = [w.batch // hw.batch, w.channels // hw.block_out, w.height, w.width, hw.batch,
             hw.block_out]
    return [["TENSOR", shape, "int32"], ["TENSOR", shape, "int32"]]


def _alu_workload(cls: type) -> Callable[[Any], tuple[Workload, tuple[int, int]]]:
    def read(args: Any) -> tuple[Workload, tuple[int, int]]:
        (_, lhs, _), (_, rhs, _) = args[0], args[1]
        if list(lhs) != list(rhs):
            raise AutotvmError(f"{cls.operator} of different shapes {lhs} and {rhs} (a "
                               "broadcast) is not supported")
        nb, cb, h, w, b, bo = lhs
        # the operands' width as the deployed graph has them: an int8 tensor cast to int32
        # (rhs_bits 8) unless told otherwise; the record does not say
        return cls(nb * b, cb * bo, h, w), (b, bo)
    return read


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
    # The ALU-only kernels (vta/python/vta/top/op.py): residual adds and products.
    AutotvmTask("add.vta", "add", ALU_AUTOTVM_KNOBS, _alu_args, _alu_workload(AddWorkload)),
    AutotvmTask("multiply.vta", "multiply", ALU_AUTOTVM_KNOBS, _alu_args,
                _alu_workload(MultiplyWorkload)),
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
        return HardwareConfig.from_target_model(model.group(1))
    except ConfigError:
        raise _Unsupported(f"model {model.group(1)}") from None


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
