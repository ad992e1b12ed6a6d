"""Whole networks: their layers and where each runs, the tasks to tune, ONNX models, and
tuning a network over one trial budget.

- :func:`load_network` reads a catalogue network (:data:`NETWORKS`) or an ONNX file
  (:func:`read_onnx`) and places each layer on VTA or the CPU with the reason
  (:func:`place`, :class:`Network`, :class:`Task`, :class:`CpuLayer`).
- :func:`tune_network` tunes every task in one storage and one log, a task scheduler
  (:mod:`.schedulers`) picking the task of each next round (:class:`NetworkResult`).
- :func:`draw_network` plots where a tuned network's VTA time goes.

Example:
    >>> net = load_network("resnet18", "pynq")
    >>> [(t.name, t.multiplicity) for t in net.tasks][:3]
    [('resnet18.C2', 4), ('resnet18.C3', 1), ('resnet18.C5', 3)]
"""

from vtatune.networks._catalogue import NETWORKS, load_network, network_names
from vtatune.networks._deployed import (
    Applied,
    DeployedRun,
    KernelRun,
    deployed_run,
    schedules_from_logs,
)
from vtatune.networks._layers import (
    ALU_TARGETS,
    DEPLOYED_SHIFT,
    MAX_GROUP_MERGE,
    PLACEMENTS,
    TASK_KINDS,
    CpuLayer,
    CpuOp,
    Layer,
    Network,
    NetworkError,
    NetworkSpec,
    Step,
    Task,
    group_merge,
    padded,
    place,
    tasks_of,
)
from vtatune.networks._onnx import OnnxModel, layers_from_model, network_name, read_onnx
from vtatune.networks._onnx_graph import OnnxGraph
from vtatune.networks._plot import check_matplotlib, draw_network
from vtatune.networks._tuning import (
    DEFAULT_PATIENCE,
    DEFAULT_ROUND,
    DEFAULT_TRIALS_PER_TASK,
    DEFAULT_WARMUP,
    NetworkResult,
    SharedTrials,
    TaskResult,
    default_network_log,
    network_from_logs,
    share_trials,
    tune_network,
)

__all__ = [
    "ALU_TARGETS", "Applied", "CpuLayer", "CpuOp", "DEFAULT_PATIENCE", "DEFAULT_ROUND",
    "DEFAULT_TRIALS_PER_TASK", "DEFAULT_WARMUP", "DEPLOYED_SHIFT", "MAX_GROUP_MERGE",
    "PLACEMENTS", "DeployedRun",
    "KernelRun", "Layer", "NETWORKS", "Network", "NetworkError", "NetworkResult",
    "NetworkSpec", "OnnxGraph", "OnnxModel", "SharedTrials", "Step", "TASK_KINDS", "Task",
    "TaskResult", "check_matplotlib", "default_network_log", "deployed_run", "draw_network",
    "group_merge", "layers_from_model", "load_network", "network_from_logs", "network_name",
    "network_names", "padded", "place", "read_onnx", "schedules_from_logs", "share_trials",
    "tasks_of", "tune_network",
]
