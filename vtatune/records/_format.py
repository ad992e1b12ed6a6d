"""Tuning logs: one JSON object per line, appended as each trial finishes.

A record is complete on its own: the workload's shape, the hardware's ``vta_config.json``
and the full :class:`~vtatune.schedule.Schedule` are in it, so it replays without the
template that produced it (``python -m vtatune replay LOG``).

Example:
    >>> from vtatune.workloads import WORKLOADS
    >>> workload_fields(WORKLOADS["gemm"]["dense128"])["key"]
    'gemm.batch128.in_channels128.out_channels128'

Schema (``schema`` = 1): ``schema``, ``workload`` {operator, name, key, shape},
``hw`` {target, bitstream, model, config}, ``bias``, ``template``, ``space``, ``config``
(the knobs), ``schedule`` (every Schedule field), ``status`` (``ok`` / ``illegal`` /
``error``), ``rule``, ``error``, ``cycles``, ``seconds``, ``gops``, ``utilization``,
``counters`` (fsim's seven), ``instructions``, ``trial``, ``timestamp`` (ISO 8601, UTC),
``study``, ``study_id`` (unique per study; absent in logs of older versions), ``sampler``,
``seed``, ``version`` (of vtatune), ``timing`` (the fingerprint of the timing profile that
scored it, :meth:`simulator.timing.TimingProfile.fingerprint`; absent in logs made before the
model was calibrated against the RTL).
"""


from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from simulator.hardware import HardwareConfig
from vtatune.errors import VtatuneError
from vtatune.schedule import Schedule
from vtatune.workloads import BENCHMARK, WORKLOAD_CLASSES, Epilogue, Workload

SCHEMA = 1


class RecordWarning(UserWarning):
    """A log line that is not a complete record (skipped)."""


class LogError(VtatuneError):
    """A log that cannot be read or does not fit the request."""


def workload_fields(workload: Workload) -> dict[str, Any]:
    """A record's ``workload``: operator, name, key, shape, and the epilogue's steps when it
    is not a benchmark one (older records have none: theirs is the benchmark's)."""
    out = {"operator": workload.operator, "name": workload.name, "key": workload.key(),
           "shape": workload.shape_args()}
    if not workload.epilogue.is_benchmark:
        out["epilogue"] = workload.epilogue.to_list()
    return out


def hw_fields(hw: HardwareConfig) -> dict[str, Any]:
    return {"target": hw.target, "bitstream": hw.bitstream, "model": hw.target_model,
            "config": hw.to_dict()}


def workload_from(record: dict[str, Any]) -> Workload:
    """The workload a record was tuned for."""
    w = record["workload"]
    epilogue = Epilogue.from_list(w["epilogue"]) if "epilogue" in w else BENCHMARK
    return WORKLOAD_CLASSES[w["operator"]](**w["shape"], name=w.get("name", ""),
                                           epilogue=epilogue)


def hw_from(record: dict[str, Any]) -> HardwareConfig:
    return HardwareConfig.from_dict(record["hw"]["config"])


def schedule_from(record: dict[str, Any]) -> Schedule:
    return Schedule.from_dict(record["schedule"])


def target_key(record: dict[str, Any]) -> tuple[str, str, bool]:
    """What "the same tuning problem" means: workload shape x hardware model x bias."""
    return record["workload"]["key"], record["hw"]["model"], bool(record.get("bias", False))


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def encode_record(record: dict[str, Any]) -> bytes:
    """One log line: compact JSON (no NaN) and a newline."""
    return (json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n").encode()


class RecordPrefix:
    """The leading fields every record of a study shares (workload, hardware, study ...),
    encoded once: :meth:`line` gives what :func:`encode_record` gives for the prefix's
    fields followed by ``rest``'s."""

    def __init__(self, fields: dict[str, Any]) -> None:
        self._head = encode_record(fields)[:-2]  # without "}\n"

    def line(self, rest: dict[str, Any]) -> bytes:
        tail = encode_record(rest)
        if self._head == b"{":
            return tail
        return self._head + (b"," + tail[1:] if tail != b"{}\n" else b"}\n")
