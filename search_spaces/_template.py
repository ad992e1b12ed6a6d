"""The template: knobs with fixed, ordered choices; legality; config <-> schedule."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from simulator.hardware import HardwareConfig
from vtatune.errors import IllegalSchedule
from vtatune.lowering import check
from vtatune.schedule import AUTOTVM_GEMM_ORDER, AUTOTVM_OUTER_ORDER, Schedule
from vtatune.workloads import GemmWorkload, Workload

SPACES = ("full", "autotvm")


@dataclass(frozen=True)
class Knob:
    """One tunable knob: a name and its fixed, ordered tuple of choices."""

    name: str
    choices: tuple[Any, ...]


def _divisors(n: int) -> tuple[int, ...]:
    return tuple(d for d in range(1, n + 1) if n % d == 0)


@dataclass(frozen=True)
class Template:
    """The schedule space of one workload on one hardware config."""

    workload: Workload
    hw: HardwareConfig
    bias: bool
    space: str
    knobs: tuple[Knob, ...]
    fixed: tuple[tuple[str, Any], ...]  # knobs of Schedule held constant in this space

    @property
    def name(self) -> str:
        return f"{self.workload.operator}.{self.space}.v1"

    def to_schedule(self, config: dict[str, Any]) -> Schedule:
        return Schedule(**dict(self.fixed), **config)

    def from_schedule(self, schedule: Schedule) -> dict[str, Any] | None:
        config = {k.name: getattr(schedule, k.name) for k in self.knobs}
        if any(config[k.name] not in k.choices for k in self.knobs):
            return None
        return config if self.to_schedule(config) == schedule else None

    def check(self, config: dict[str, Any]) -> None:
        """Raise IllegalSchedule (naming the rule and numbers) if ``config`` cannot run."""
        check(self.workload, self.to_schedule(config), self.hw, self.bias)

    def legal(self, config: dict[str, Any]) -> bool:
        try:
            self.check(config)
        except IllegalSchedule:
            return False
        return True

    def default_config(self) -> dict[str, Any]:
        from vtatune.defaults import default_schedule

        s = default_schedule(self.workload, self.hw, self.bias)
        s = replace(s, **dict(self.fixed))
        return {k.name: getattr(s, k.name) for k in self.knobs}

    def size(self) -> int:
        n = 1
        for k in self.knobs:
            n *= len(k.choices)
        return n


def get_template(workload: Workload, hw: HardwareConfig, bias: bool = False,
                 space: str = "full") -> Template:
    """The template of ``workload`` on ``hw``: ``full`` (vtatune's space) or ``autotvm``."""
    conv = workload.as_conv()
    gemm = isinstance(workload, GemmWorkload)
    tiles = [Knob("tile_b", _divisors(conv.batch // hw.batch))]
    if not gemm:
        tiles += [Knob("tile_h", _divisors(conv.out_height)),
                  Knob("tile_w", _divisors(conv.out_width))]
    tiles += [Knob("tile_ci", _divisors(conv.in_channels // hw.block_in)),
              Knob("tile_co", _divisors(conv.out_channels // hw.block_out)),
              Knob("oc_nthread", (1, 2))]
    if not gemm:
        tiles.append(Knob("h_nthread", (1, 2)))
    if space == "autotvm":
        fixed = (("outer_order", AUTOTVM_OUTER_ORDER), ("gemm_order", AUTOTVM_GEMM_ORDER),
                 ("store", "tile"), ("reuse", False), ("tvm_strict", True))
        return Template(workload, hw, bias, space, tuple(tiles), fixed)
    knobs = [*tiles, Knob("outer_order", ("bhcw", "bchw", "hwbc", "chwb"))]
    fixed = (("store", "tile"), ("reuse", True))
    return Template(workload, hw, bias, space, tuple(knobs), fixed)
