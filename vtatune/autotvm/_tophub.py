"""TopHub's board-tuned VTA configs: AutoTVM's shipped best points for ResNet-18.

TVM's TopHub log ``vta_v0.10`` for pynq 1x16 holds a ``conv2d_packed.vta`` config per
ResNet-18 conv layer (its ResNet-18 section; the C2, C5 and C8 rows are also in the VTA
notes, section 9), written here as AutoTVM ``[outer, inner]`` splits. A network report
compares a tuned layer with TopHub's config where TopHub has the layer's shape on that
hardware.

Example:
    >>> from simulator.hardware import DEFAULT
    >>> from vtatune.workloads import WORKLOADS
    >>> tophub_config(WORKLOADS["conv2d"]["resnet18.C8"], DEFAULT)["tile_co"]
    [4, 4]
    >>> tophub_config(WORKLOADS["gemm"]["tutorial"], DEFAULT) is None
    True
"""

from __future__ import annotations

from typing import Any

from simulator.hardware import DEFAULT, HardwareConfig
from vtatune.workloads import WORKLOADS, Workload

__all__ = ["TOPHUB", "TOPHUB_HW", "tophub_config"]

#: The hardware TopHub's VTA configs were tuned on.
TOPHUB_HW = DEFAULT

#: ResNet-18 layer label -> AutoTVM conv2d_packed knobs (TopHub, pynq 1x16).
TOPHUB: dict[str, dict[str, Any]] = {
    "C2": {"tile_b": [1, 1], "tile_h": [7, 8], "tile_w": [1, 56], "tile_ci": [4, 1],
           "tile_co": [2, 2], "oc_nthread": 2, "h_nthread": 1},
    "C3": {"tile_b": [1, 1], "tile_h": [4, 7], "tile_w": [1, 28], "tile_ci": [4, 1],
           "tile_co": [2, 4], "oc_nthread": 2, "h_nthread": 1},
    "C4": {"tile_b": [1, 1], "tile_h": [4, 7], "tile_w": [1, 28], "tile_ci": [4, 1],
           "tile_co": [2, 4], "oc_nthread": 1, "h_nthread": 2},
    "C5": {"tile_b": [1, 1], "tile_h": [2, 14], "tile_w": [1, 28], "tile_ci": [8, 1],
           "tile_co": [4, 2], "oc_nthread": 1, "h_nthread": 2},
    "C6": {"tile_b": [1, 1], "tile_h": [1, 14], "tile_w": [1, 14], "tile_ci": [8, 1],
           "tile_co": [4, 4], "oc_nthread": 2, "h_nthread": 1},
    "C7": {"tile_b": [1, 1], "tile_h": [2, 7], "tile_w": [1, 14], "tile_ci": [8, 1],
           "tile_co": [2, 8], "oc_nthread": 2, "h_nthread": 1},
    "C8": {"tile_b": [1, 1], "tile_h": [1, 14], "tile_w": [1, 14], "tile_ci": [16, 1],
           "tile_co": [4, 4], "oc_nthread": 2, "h_nthread": 1},
    "C9": {"tile_b": [1, 1], "tile_h": [1, 7], "tile_w": [1, 7], "tile_ci": [16, 1],
           "tile_co": [2, 16], "oc_nthread": 2, "h_nthread": 1},
    "C10": {"tile_b": [1, 1], "tile_h": [1, 7], "tile_w": [1, 7], "tile_ci": [16, 1],
            "tile_co": [2, 16], "oc_nthread": 2, "h_nthread": 1},
    "C11": {"tile_b": [1, 1], "tile_h": [1, 7], "tile_w": [1, 7], "tile_ci": [32, 1],
            "tile_co": [2, 16], "oc_nthread": 2, "h_nthread": 1},
}

_BY_KEY = {WORKLOADS["conv2d"][f"resnet18.{label}"].key(): knobs
           for label, knobs in TOPHUB.items()}


def tophub_config(workload: Workload, hw: HardwareConfig) -> dict[str, Any] | None:
    """TopHub's AutoTVM knobs for ``workload``'s shape on ``hw``, or None if it has none."""
    if hw != TOPHUB_HW or workload.operator != "conv2d":
        return None
    return _BY_KEY.get(workload.key())
