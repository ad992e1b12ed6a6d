"""The first run after install, in parallel: a helper process compiles four engines.

numba compiles the engines the first time a command runs them (about 10 s for the main
command, ``conv2d --trials 200``), one after the other, holding the GIL: threads cannot
share the work, a second process can. The tuning commands meet their engines in one order:
at the first trial (the default schedule) the lowering's queue program, then its
executor, fsim's counters and the timing engines; at the second ask the cost model (the
guided sampler's table and warm starts wait for it: ``Search._unguided``); the guided
sampler's (``samplers._parzen``) only after the warm starts. So when numba's cache holds
none of the sampler's engines, :func:`start_sampler_warmup` starts this module as a helper
process that compiles, while the command compiles the queue program and the timing
engines:

- the lowering's executor (``lowering._runtime._execute``, about 1.3 s), by lowering the
  command's first schedule with the queue program run as plain Python
  (:func:`simulator.jit.interpret`: its tables in a fraction of a second instead of 2.5 s of
  compiling), and fsim's counters on that program: ready before the command reaches them;
- the cost model (``cost_model._skeleton``, about 1.1 s) and the guided sampler's engines
  (about 2.4 s), by running the same study (workload, hardware, space, sampler) with a
  stand-in score instead of lowering and simulating: ready before the command's first
  trial ends, and long before its warm starts end.

numba writes them to its on-disk cache and the command loads them from there. All are
compiled for the argument types the command's own code passes (the same code path, the
same schedule), so the command finds them under its own key.

Why this is safe:
- numba writes every cache file (the index, each compiled function) to a temporary name and
  renames it over the final one (``IndexDataCacheFile._open_for_write`` in
  ``numba/core/caching.py``, numba 0.68): a reader sees a whole file or none, and with none
  compiles the function itself (``load`` takes a missing data file for a miss). Two
  processes compiling the same function for the same argument types write the same entry
  (the key: the signature, the CPU, the bytecode; the index holds the source's hash): the
  second rename wins, either is right.
- The helper's outcome is never read: it shares nothing with the command but numba's cache.
  If it fails, is killed or is slow, the command compiles what it needs itself, as it
  would without it: the helper only costs what it would have saved. A command shorter
  than the helper (``--trials 5``) leaves it finishing the cache for a few seconds; it runs
  in its own session, so a Ctrl-C meant for the command does not stop it.
- It starts only from the command line (:mod:`vtatune.cli`), never in library use, and only
  when numba's cache holds none of the sampler's engines (:func:`simulator.jit.uncached`):
  a warm run does not start it.
- It starts only when a core is free for it (:func:`_core_free`: at least one and a half
  of the cores this process may run on idle while it looks): on a busy machine it would
  take the command's own core and make the first run slower, not faster.

The helper is ``python -m vtatune.tuning._warmup``, with the problem pickled on its stdin.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from simulator.hardware import HardwareConfig
from vtatune.scoring import Score
from vtatune.workloads import Workload

#: The module whose compiled engines the helper compiles (the guided sampler's).
SAMPLER_ENGINES = "vtatune.tuning.samplers._parzen"

#: The module the helper runs as plain Python to reach the executor (the queue program).
QUEUE_PROGRAM = "vtatune.lowering._emit"

#: Trials of the helper's study: past the startup draws and the warm starts, so the sampler
#: runs its model (space table, model, draw, log ratio, log pdf).
WARMUP_TRIALS = 40

_started: list[subprocess.Popen[bytes] | None] = []  # the one helper a process may start


def start_sampler_warmup(workload: Workload, hw: HardwareConfig, *, space: str, bias: bool
                         ) -> subprocess.Popen[bytes] | None:
    """Start the helper process compiling the lowering's executor, the cost model and the
    guided sampler's engines into numba's cache, when the cache holds none of the
    sampler's; the process, or None when none was started (warm cache, one started
    already, or it could not start). For the command line only."""
    if _started or not _sampler_cold() or not _core_free():  # cheapest first
        return None
    _started.append(None)
    problem = pickle.dumps((workload, hw, space, bias))
    try:
        helper = subprocess.Popen(
            _helper_command(), stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        assert helper.stdin is not None
        helper.stdin.write(problem)
        helper.stdin.close()
    except OSError:  # no process to start, or it ended at once: the command compiles all
        return None
    _started[0] = helper  # held, so it is not reaped (nor warned about) while it runs
    return helper


#: How long the first run watches the machine before starting the helper (seconds).
IDLE_WINDOW = 0.1


def _core_free() -> bool:
    """Whether a core this process may run on is idle enough for the helper: at least one
    and a half of them idle over :data:`IDLE_WINDOW` while this process waits (one for the
    command, half of one at least for the helper; on one core, never), read from Linux's
    ``/proc/stat``. The last minute's load average, which answered before, remembers the
    commands that just ended (a benchmark's earlier runs, the previous test) and kept the
    helper from starting on an idle machine; it still answers where ``/proc/stat`` cannot
    be read: more than one below the cores. Where neither can be read, no."""
    try:
        cores = os.sched_getaffinity(0)
    except AttributeError:  # no affinity on this platform (macOS)
        cores = set(range(os.cpu_count() or 1))
    idle = _idle_cores(cores, IDLE_WINDOW)
    if idle is not None:
        return idle >= 1.5
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return False
    return len(cores) - load > 1


def _cpu_times() -> dict[int, tuple[int, int]] | None:
    """Per CPU, its idle and total time so far (``/proc/stat``: idle and iowait, of user,
    nice, system, idle, iowait, irq, softirq, steal), or None where it cannot be read."""
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        return None
    times = {}
    for line in lines:
        name, *fields = line.split()
        if name.startswith("cpu") and name[3:].isdigit():
            ticks = [int(f) for f in fields[:8]]
            times[int(name[3:])] = (ticks[3] + ticks[4], sum(ticks))
    return times or None


def _idle_cores(cores: set[int], window: float) -> float | None:
    """How many of ``cores`` were idle over the next ``window`` seconds (a fraction of each,
    summed), or None where the CPUs' times cannot be read."""
    before = _cpu_times()
    time.sleep(window)
    after = _cpu_times()
    if before is None or after is None:
        return None
    idle = 0.0
    for cpu in cores & before.keys() & after.keys():
        total = after[cpu][1] - before[cpu][1]
        idle += (after[cpu][0] - before[cpu][0]) / total if total > 0 else 1.0
    return idle


def _helper_command() -> list[str]:
    return [sys.executable, "-m", __name__]


def _sampler_cold() -> bool:
    import vtatune.tuning.samplers._parzen  # noqa: F401 - its engines are what is looked up
    from simulator.jit import uncached

    return bool(uncached(SAMPLER_ENGINES))


def _stand_in(workload: Workload, schedule: Any, hw: HardwareConfig, bias: bool
              ) -> tuple[Score, float]:
    """A score that needs no engine: cycles from a hash of the schedule, spread enough for
    TPE to split good from bad trials (the values are never used but to compile)."""
    cycles = 1000 + zlib.crc32(repr(schedule).encode()) % 100_000
    return Score("ok", cycles=cycles, seconds=cycles * 1e-8, gops=1.0, utilization=0.5,
                 counters={}, instructions=1, timing="warm-up"), 0.0


@contextlib.contextmanager
def _scoring_stood_in() -> Iterator[None]:
    """The tuner's scoring replaced by :func:`_stand_in` (the study's trials and its final
    table's tutorial comparison), restored after."""
    from vtatune.tuning import _search, _study

    saved = _search.timed_score, _study._tutorial
    _search.timed_score = _stand_in
    _study._tutorial = lambda *_: None
    try:
        yield
    finally:
        _search.timed_score, _study._tutorial = saved


def compile_executor(workload: Workload, hw: HardwareConfig, *, space: str, bias: bool
                     ) -> None:
    """Compile the lowering's executor for the study's first schedule (the template's
    default; none: nothing), the queue program before it run as plain Python, then fsim's
    counters (``simulator.counters._count``) on the program, which the command runs next.
    Only for a helper process: the queue program stays uncompiled in it."""
    from search_spaces import get_template
    from simulator.functional import count
    from simulator.jit import interpret
    from vtatune.errors import VtatuneError
    from vtatune.lowering import lower

    template = get_template(workload, hw, bias=bias, space=space)
    try:
        schedule = template.to_schedule(template.default_config())
    except VtatuneError:  # no default schedule: the command's first trial is the sampler's
        return
    interpret(QUEUE_PROGRAM)
    count(lower(workload, schedule, hw, bias=bias).program, hw)


def compile_sampler(workload: Workload, hw: HardwareConfig, *, space: str, bias: bool) -> None:
    """Compile the cost model and the guided sampler's engines for ``workload`` on ``hw``
    (numba caches them): a study of :data:`WARMUP_TRIALS` stand-in trials in a temporary
    directory."""
    from vtatune.tuning._tune import tune

    with tempfile.TemporaryDirectory() as work, _scoring_stood_in():
        tune(workload, hw, trials=WARMUP_TRIALS, sampler="guided", seed=0, space=space,
             bias=bias, log=f"{work}/warmup.jsonl")


def _main() -> None:
    from simulator.jit import skip_blas_probe

    skip_blas_probe()  # as the command line: numba's target initialised the same way
    workload, hw, space, bias = pickle.loads(sys.stdin.buffer.read())
    compile_executor(workload, hw, space=space, bias=bias)  # in the order the command needs
    compile_sampler(workload, hw, space=space, bias=bias)


if __name__ == "__main__":
    _main()
