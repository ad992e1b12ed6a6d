"""Scoring: a schedule lowered and simulated, a program simulated, a run verified.

- :func:`score` is what the tuner, ``replay`` and the network and design searches call for
  each schedule: lower it, count fsim's counters, time it; it never raises for a schedule
  that cannot run (``status`` says ``illegal`` with the rule, or ``error``).
- :func:`simulate` gives the same numbers for a program already built (a Build, a lowered
  schedule, an exported ``program.bin``).
- :func:`verify` runs a lowered program on the functional model with random operands and
  compares it bit for bit with the numpy reference.
- :func:`timing_report`, :func:`write_trace_csv` and :func:`draw_timeline` report one timed
  run (``simulate --json``, ``--trace``, ``--timeline``).

Example:
    >>> from simulator.hardware import DEFAULT
    >>> from vtatune.lowering import lower
    >>> from vtatune.schedule import tutorial_schedule
    >>> from vtatune.workloads import WORKLOADS
    >>> wl = WORKLOADS["conv2d"]["resnet18.C8"]
    >>> s = score(wl, tutorial_schedule(wl), DEFAULT)
    >>> s.cycles == simulate(lower(wl, tutorial_schedule(wl), DEFAULT)).cycles
    True
"""

from vtatune.scoring._score import ENGINE_MODULES, Score, announce_worker_compile, score
from vtatune.scoring._simulate import Simulation, simulate
from vtatune.scoring._timeline import draw_timeline, timing_report, write_trace_csv
from vtatune.scoring._verify import Verification, verify

__all__ = ["ENGINE_MODULES", "Score", "Simulation", "Verification", "announce_worker_compile",
           "draw_timeline", "score", "simulate", "timing_report", "verify", "write_trace_csv"]
