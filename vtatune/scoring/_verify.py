"""Bit-exact verification: a lowered program run on the functional model against numpy.

Example:
    >>> from simulator.hardware import DEFAULT
    >>> from vtatune.lowering import lower
    >>> from vtatune.schedule import tutorial_schedule
    >>> from vtatune.workloads import WORKLOADS
    >>> wl = WORKLOADS["gemm"]["tutorial"]
    >>> verify(lower(wl, tutorial_schedule(wl), DEFAULT)).ok
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from simulator.functional import RunResult, run
from vtatune.lowering import packed_inputs, unpack_output
from vtatune.workloads import random_operands, reference_output


@dataclass(frozen=True)
class Verification:
    ok: bool
    mismatches: int
    run: RunResult


def verify(lowered: Any, seed: int = 0) -> Verification:
    """Run ``lowered`` on random data and compare bit-exactly with the numpy reference."""
    wl, hw = lowered.workload, lowered.hw
    ops = random_operands(wl, lowered.bias, seed)
    result = run(lowered.program, hw, packed_inputs(wl, ops, hw))
    got = unpack_output(wl, result.machine.read_tensor(lowered.program, "output"))
    want = reference_output(wl, ops)
    mismatches = int(np.count_nonzero(got != want))
    return Verification(mismatches == 0, mismatches, result)
