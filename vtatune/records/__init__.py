"""Tuning logs: one JSON object per line, appended as each trial finishes.

A record is complete on its own: the workload's shape, the hardware's ``vta_config.json``
and the full :class:`~vtatune.schedule.Schedule` are in it, so it replays without the
template that produced it (:func:`replay`). The format and its schema are ``_format``'s;
writing, reading and the best record per workload are ``_files``'; pandas analysis lives
in :mod:`vtatune.records.analysis` (not imported here: pandas loads only when asked).

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "demo.jsonl"
    >>> with RecordWriter(path) as log:
    ...     log.write({"schema": 1, "status": "ok", "cycles": 10})
    >>> [r["cycles"] for _, r in read_records(path)]
    [10]
"""

from vtatune.records._files import (
    FSYNC_SECONDS,
    MAX_WARNINGS,
    BestRecord,
    GroupSync,
    RecordWriter,
    append_json_line,
    append_whole,
    best_records,
    check_log_target,
    env_seconds,
    read_records,
    write_whole,
)
from vtatune.records._format import (
    SCHEMA,
    LogError,
    RecordPrefix,
    RecordWarning,
    encode_record,
    hw_fields,
    hw_from,
    now,
    schedule_from,
    target_key,
    workload_fields,
    workload_from,
)
from vtatune.records._replay import Mismatch, ReplayReport, replay

__all__ = [
    "BestRecord", "FSYNC_SECONDS", "GroupSync", "LogError", "MAX_WARNINGS", "Mismatch",
    "RecordPrefix", "RecordWarning", "RecordWriter", "ReplayReport", "SCHEMA",
    "append_json_line", "append_whole",
    "best_records", "check_log_target", "encode_record", "env_seconds", "hw_fields", "hw_from",
    "now", "read_records", "replay", "schedule_from", "target_key", "workload_fields",
    "workload_from", "write_whole",
]
