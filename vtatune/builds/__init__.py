"""Builds: a workload lowered with the best schedule a tuning log holds (the AutoTVM habit of
``apply_history_best`` then build), and its program written as files a VTA runtime can
load: ``program.json`` (readable), ``program.bin`` (binary image, checksummed) and
``program.c`` (the same stream as calls to VTA's runtime C API).

Example:
    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", FallbackWarning)
    ...     b = build("gemm:dense128", hw="pynq")  # no log applied: the default schedule
    >>> b.provenance.source
    'fallback'
"""

from vtatune.builds._build import (
    Build,
    FallbackWarning,
    HistoryBest,
    Provenance,
    apply_history_best,
    build,
    write_all,
)
from vtatune.builds._c_source import (
    Call,
    RuntimeCalls,
    c_source,
    replay_calls,
    runtime_calls,
    write_c,
)
from vtatune.builds._program_files import (
    ExportError,
    LoadedProgram,
    from_bin,
    header_path,
    load_bin,
    load_json,
    to_bin,
    to_json_dict,
    write_bin,
    write_json,
)

__all__ = [
    "Build", "Call", "ExportError", "FallbackWarning", "HistoryBest", "LoadedProgram",
    "Provenance", "RuntimeCalls", "apply_history_best", "build", "c_source", "from_bin",
    "header_path", "load_bin", "load_json", "replay_calls", "runtime_calls", "to_bin",
    "to_json_dict", "write_all", "write_bin", "write_c", "write_json",
]
