"""TVM v0.14 interop through AutoTVM logs: vtatune logs exported as AutoTVM v0.2 records
(what ``autotvm.apply_history_best`` reads), AutoTVM VTA logs (TopHub's, a user's) imported
and simulated, and TopHub's shipped ResNet-18 configs.

An exported record is what TVM's ``autotvm.apply_history_best`` reads: the target string
of the hardware (``ext_dev -device=vta -keys=cpu -model=<target>_<bitstream>``), the task
(:data:`TASKS`: ``conv2d_packed.vta``, ``dense_packed.vta``, ``group_conv2d_packed.vta``,
``conv2d_transpose_packed.vta``) with its args in VTA's packed layouts, the config entity
in TVM's knob order with its index in the template's space, and the simulated time in
seconds at the board clock as the cost.

Example:
    >>> from simulator.hardware import DEFAULT
    >>> from vtatune.workloads import WORKLOADS
    >>> wl = WORKLOADS["conv2d"]["resnet18.C8"]
    >>> index, entity = config_entity(tophub_config(wl, DEFAULT), wl, DEFAULT)
    >>> index
    575
"""

from vtatune.autotvm._export import (
    SLOWDOWN_TOLERANCE,
    ExportedRecord,
    ExportWarning,
    HardwareWarning,
    export_autotvm,
    to_autotvm_record,
    unbuildable_warning,
)
from vtatune.autotvm._import import (
    MAX_WARNINGS,
    Imported,
    import_autotvm,
    parse_record,
    write_records,
)
from vtatune.autotvm._tasks import (
    TASKS,
    TVM_VERSION,
    AutotvmError,
    AutotvmTask,
    config_entity,
    task_args,
    task_of,
    tvm_splits,
    workload_from_task,
)
from vtatune.autotvm._tophub import TOPHUB, TOPHUB_HW, tophub_config

__all__ = [
    "MAX_WARNINGS", "SLOWDOWN_TOLERANCE", "TASKS", "TOPHUB", "TOPHUB_HW", "TVM_VERSION",
    "AutotvmError", "AutotvmTask", "ExportWarning", "ExportedRecord", "HardwareWarning",
    "Imported", "config_entity", "export_autotvm", "import_autotvm", "parse_record",
    "task_args", "task_of", "to_autotvm_record", "tophub_config", "tvm_splits",
    "unbuildable_warning", "workload_from_task", "write_records",
]
