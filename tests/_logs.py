"""Test logs written through vtatune.records, the way the tuner writes them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simulator.hardware import HardwareConfig
from vtatune import __version__
from vtatune.records import RecordWriter, hw_fields, now, workload_fields
from vtatune.schedule import Schedule
from vtatune.scoring import score
from vtatune.workloads import Workload

KNOBS = ("tile_b", "tile_h", "tile_w", "tile_ci", "tile_co", "oc_nthread", "h_nthread")


def record(wl: Workload, schedule: Schedule, hw: HardwareConfig, trial: int, *,
           bias: bool = False, study: str = "s", space: str = "full") -> dict[str, Any]:
    ev = score(wl, schedule, hw, bias=bias).as_dict()
    return {"schema": 1, "workload": workload_fields(wl), "hw": hw_fields(hw), "bias": bias,
            "template": f"{wl.operator}.{space}.v1", "space": space, "study": study,
            "sampler": "random", "seed": 7, "version": __version__,
            "config": {k: getattr(schedule, k) for k in KNOBS},
            "schedule": schedule.to_dict(),
            **ev,
            "trial": trial, "timestamp": now()}


def write_log(path: Path, records: list[dict[str, Any]]) -> Path:
    with RecordWriter(path) as log:
        for r in records:
            log.write(r)
    return path
