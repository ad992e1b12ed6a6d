"""Lowering a schedule to a VTA program, the way TVM's compiler and runtime would.

A schedule becomes a program in four steps, one module each:

- ``_context``: the workload on the hardware as TVM's VTA compute lays it out, and the
  constants every rule reads (:func:`context`);
- ``_rules``: every legality rule, arithmetic only (:func:`rules`, :func:`legality`;
  ``SHAPE_RULES`` are those decided by the tile shape alone), over the DMA patterns of
  ``_dma`` and the DRAM/SRAM layouts of ``_layouts``; the micro-op kernels' loop nest and
  rules in ``_nest``, the ``field_width`` rule in ``_field_width``. A GEMM's rows tile as
  batch blocks or, with ``Schedule.rows="spatial"``, as a 1x1 conv's pixels
  (:func:`rows_context`: the same rules and emitter over the GEMM's DRAM layout);
- ``_plan``: the SRAM allocation per virtual thread and the micro-op kernels (:func:`plan`);
- ``_emit``: the loop tree, TVM's dependency insertion and virtual threads (``_ir``),
  recorded once per loop structure (``_skeleton``), and the instructions as TVM's runtime
  builds them (``_runtime``: :class:`CommandQueue`).

:func:`lower` runs them all; :func:`lower_vadd` lowers the getting-started vector add.

Example:
    >>> from vtatune.workloads import WORKLOADS
    >>> from vtatune.schedule import tutorial_schedule
    >>> from simulator.hardware import DEFAULT
    >>> wl = WORKLOADS["gemm"]["tutorial"]
    >>> lowered = lower(wl, tutorial_schedule(wl), DEFAULT)
    >>> len(lowered.program.instructions)
    142
"""

from vtatune.errors import IllegalSchedule
from vtatune.lowering._alu_only import AluContext, AluFacts
from vtatune.lowering._carry import FRESH, Carry
from vtatune.lowering._context import (
    Context,
    OperatorShape,
    operator_shape,
    rows_context,
    schedule_context,
)
from vtatune.lowering._dma import fold_2d, pattern_2d, split_2d, window
from vtatune.lowering._ir import (
    Dep,
    For,
    Stage,
    Threaded,
    expand_threads,
    insert_deps,
    loop,
)
from vtatune.lowering._layouts import (
    acc_coefficients,
    dilate,
    input_pack,
    output_pack,
    pack_bias,
    pack_conv_data,
    pack_conv_kernel,
    pack_data,
    pack_matrix,
    pack_weight,
    packed_inputs,
    transpose_kernel,
    unpack_conv_output,
    unpack_matrix,
    unpack_output,
)
from vtatune.lowering._lower import (
    Lowered,
    check,
    context,
    legality,
    lower,
    rules,
    shape_rules,
)
from vtatune.lowering._plan import Plan, plan
from vtatune.lowering._rules import SHAPE_FIELDS, SHAPE_RULES, Facts
from vtatune.lowering._runtime import (
    COMPUTE,
    KERNEL_KEYS,
    LOAD,
    STORE,
    CommandQueue,
    Kernel,
    KernelLoop,
)
from vtatune.lowering._vadd import lower_vadd

__all__ = [
    "AluContext", "AluFacts", "COMPUTE", "Carry", "CommandQueue", "Context", "Dep", "FRESH",
    "Facts", "For", "IllegalSchedule", "KERNEL_KEYS", "Kernel", "KernelLoop", "LOAD", "Lowered",
    "OperatorShape", "Plan", "SHAPE_FIELDS", "SHAPE_RULES", "STORE", "Stage", "Threaded",
    "acc_coefficients", "check", "context", "dilate", "expand_threads", "fold_2d", "input_pack",
    "insert_deps", "legality", "loop", "lower", "lower_vadd", "operator_shape", "output_pack",
    "pack_bias", "pack_conv_data", "pack_conv_kernel", "pack_data", "pack_matrix",
    "pack_weight", "packed_inputs",
    "pattern_2d", "plan", "rows_context", "rules", "schedule_context", "shape_rules",
    "split_2d", "transpose_kernel",
    "unpack_conv_output", "unpack_matrix", "unpack_output", "window",
]
