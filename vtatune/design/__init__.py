"""Hardware and schedule co-design: which VTA configuration to build for a network on a board.

An outer search over VTA configurations (BATCH, BLOCK_IN, BLOCK_OUT, the four buffer
sizes; the board's clock) wraps the inner schedule search of every task of the network on
each candidate. The result is the Pareto front of network latency against resource use (the
binding resource's percent of the board), each design compared with the board's stock 1x16
configuration tuned the same way (same trials per task, same seed). Area is the mean share
of the board's LUT, block RAM and DSP; the design's binding resource is the one closest to
its budget. A design with BLOCK_IN != BLOCK_OUT says it needs a toolchain change
(``Design.toolchain``).

Outer search: with ``objective="latency"`` an exhaustive walk over the maximal feasible
buffer sizes of every (BATCH, BLOCK_IN, BLOCK_OUT), biggest tensor core first, skipping a
shape whose compute floor (one GEMM micro-op per cycle) is already slower than the best
design found; with ``objective="latency-area"`` Optuna's NSGA-II over all the knobs for
``candidates`` candidates, each proposal evaluated as the feasible configuration nearest it
(``nearest_feasible``). A candidate is a configuration besides the stock one whose tasks are
tuned; one refused before tuning (``infeasibility``: encoding, layout, resources, placement,
a task failing the lowering's shape rules) costs no trial and is no candidate. Every
evaluated design is a trial of one Optuna study (``storage``, default a journal file in
``out``); ``resume`` continues it without
re-evaluating a configuration, and each (task, hardware) keeps its own tuning log and study
under ``out/tuning``, so nothing is tuned twice.

Example:
    >>> r = co_design("resnet18", "ultra96", trials_per_task=20)  # doctest: +SKIP
    >>> r.best.hw.bitstream, round(r.best.speedup, 2)  # doctest: +SKIP
    ('1x16_i8w8a32_15_16_18_16', 1.0)
"""

from vtatune.design._designs import Design, DesignResult, pareto_front
from vtatune.design._hardware import BUILD_FILE, hardware_build
from vtatune.design._inner import (
    DesignError,
    InnerResult,
    network_log,
    placed,
    placement_difference,
    tune_tasks,
    vta_layers,
)
from vtatune.design._plot import label_positions, plot_front
from vtatune.design._search import OBJECTIVES, co_design
from vtatune.design._space import (
    BUFFERS,
    KNOB_RANGES,
    MIN_DEPTH,
    SHAPE_KNOBS,
    TVM_STOCK,
    compute_floor,
    infeasibility,
    layout_reason,
    maximal_configs,
    nearest_feasible,
    runnable_shapes,
    shape_label,
    shapes,
    smallest,
    stock,
    task_reason,
    toolchain,
    with_shape,
)

__all__ = [
    "BUFFERS", "BUILD_FILE", "KNOB_RANGES", "MIN_DEPTH", "OBJECTIVES", "SHAPE_KNOBS",
    "TVM_STOCK", "Design", "DesignError", "DesignResult", "InnerResult", "co_design",
    "compute_floor", "hardware_build",
    "infeasibility", "label_positions", "layout_reason", "maximal_configs", "nearest_feasible",
    "network_log",
    "pareto_front", "placed", "placement_difference", "plot_front", "runnable_shapes",
    "shape_label", "shapes", "smallest", "stock", "task_reason", "toolchain", "tune_tasks",
    "vta_layers", "with_shape",
]
