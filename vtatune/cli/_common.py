"""What the commands share: the one-line usage error, the argparse subclass that raises it,
the shape flags, and workload/schedule resolution from flags."""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Any

from simulator.hardware import HardwareConfig

from ..errors import VtatuneError
from ..schedule import Schedule, parse_schedule
from ..workloads import Conv2dWorkload, GemmWorkload, Workload, get_workload

CONV_FLAGS = ("batch", "height", "width", "in_channels", "out_channels", "kernel", "pad",
              "stride")
GEMM_FLAGS = ("batch", "in_channels", "out_channels")


class UsageError(VtatuneError):
    """Bad command-line input: reported in one line with exit status 2."""


class Parser(argparse.ArgumentParser):
    """argparse that reports errors in one line with exit status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def add_shape_flags(p: argparse.ArgumentParser) -> None:
    for name in CONV_FLAGS:
        p.add_argument(f"--{name.replace('_', '-')}", type=int, dest=name, metavar="N",
                       help=argparse.SUPPRESS if name != "batch" else "shape flags: --batch "
                       "--height --width --in-channels --out-channels --kernel --pad --stride "
                       "(conv2d); --batch --in-channels --out-channels (gemm)")


def resolve_workload(operator: str, args: argparse.Namespace) -> Workload:
    """A named workload, optionally reshaped by shape flags."""
    base = get_workload(operator, args.workload or "tutorial")
    flags = CONV_FLAGS if operator == "conv2d" else GEMM_FLAGS
    given = {k: getattr(args, k) for k in CONV_FLAGS if getattr(args, k, None) is not None}
    extra = sorted(set(given) - set(flags))
    if extra:
        raise UsageError(f"--{extra[0].replace('_', '-')} does not apply to {operator}")
    if not given:
        return base
    shape = {**base.shape_args(), **given}
    cls = Conv2dWorkload if operator == "conv2d" else GemmWorkload
    return cls(**shape, name="")


def resolve_schedule(spec: str | None, workload: Workload, hw: HardwareConfig,
                     bias: bool) -> Schedule:
    if spec is None:
        spec = "tutorial" if workload.name == "tutorial" else "default"
    parsed = parse_schedule(spec, workload, hw)
    if parsed == "default":
        from ..defaults import default_schedule

        return default_schedule(workload, hw, bias)
    return parsed


def warnings_one_line() -> None:
    """Show Python warnings as ``vtatune: warning: ...`` lines."""

    def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None,
             line: Any = None) -> None:
        print(f"vtatune: warning: {message}", file=sys.stderr)

    warnings.showwarning = show
