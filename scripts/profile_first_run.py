"""Where a command's first run after install compiles: each engine numba compiles in the
command's process, with its CPU time (numba's ``numba:compile`` events).

    python scripts/profile_first_run.py [--helper] [--tree DIR] [-- COMMAND ...]

Runs ``python -m vtatune COMMAND`` (default: the main one, ``conv2d --trials 200 --seed 1
--quiet``) in a fresh process with an empty numba cache (``NUMBA_CACHE_DIR`` a new
temporary directory) and a fresh working directory, and prints, per compiled function in
the order the command met them: when its compiling started (wall and CPU seconds since
the process started), its own CPU time (what numba compiled for it inside, e.g. a helper
or numpy's ``np.zeros``, subtracted) and that inclusive, how many times it was compiled,
then the totals and the process's CPU time. ``--helper`` starts the first run's helper
process (``vtatune.tuning._warmup``) whatever the machine's load (it starts only with a
core free) and waits for it; ``--helper-only`` profiles the helper itself on the main
command's problem instead. ``--tree`` runs another source tree (``git archive <commit> |
tar -x -C DIR``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAIN_COMMAND = ("conv2d", "--trials", "200", "--seed", "1", "--quiet")

# Run in the profiled process: a listener of numba's compile events, then the command.
_PROFILED = '''
import atexit, os, sys, time
T0, C0 = time.perf_counter(), time.process_time()
from numba.core import event
stack, rows = [], {}
class Listener(event.Listener):
    def on_start(self, ev):
        d = ev.data["dispatcher"]
        name = f"{d.py_func.__module__}.{d.py_func.__name__}"
        rows.setdefault(name, [time.perf_counter() - T0, time.process_time() - C0, 0.0, 0.0, 0])
        stack.append((name, time.process_time(), [0.0]))
    def on_end(self, ev):
        name, c, inner = stack.pop()
        spent = time.process_time() - c
        row = rows[name]
        row[2] += spent - inner[0]
        row[3] += spent
        row[4] += 1
        if stack:
            stack[-1][2][0] += spent
event.register("numba:compile", Listener())
def report():
    print(f"{'wall':>7} {'CPU':>6}  {'own':>5} {'incl.':>5}  n  compiled", file=sys.stderr)
    for name, (wall, cpu, own, incl, n) in sorted(rows.items(), key=lambda r: r[1][0]):
        print(f"{wall:6.2f}s {cpu:5.2f}s  {own:5.2f} {incl:5.2f}  {n}  {name}", file=sys.stderr)
    print(f"compiling: {sum(r[2] for r in rows.values()):.2f} s of CPU; the process: "
          f"{time.process_time() - C0:.2f} s of CPU, {time.perf_counter() - T0:.2f} s wall",
          file=sys.stderr)
atexit.register(report)
mode, argv = sys.argv[1], sys.argv[2:]
if mode == "helper-only":
    import io, pickle
    from simulator.hardware import DEFAULT
    from vtatune.tuning import _warmup
    from vtatune.workloads import resolve
    sys.stdin = io.TextIOWrapper(io.BytesIO(pickle.dumps((resolve("conv2d")[0], DEFAULT,
                                                           "full", False))))
    _warmup._main()
else:
    from vtatune.tuning import _warmup
    if mode == "helper":
        _warmup._core_free = lambda: True
    from vtatune.cli import main
    status = main(argv)
    for helper in _warmup._started:
        if helper is not None:
            helper.wait()
'''


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    which = ap.add_mutually_exclusive_group()
    which.add_argument("--helper", action="store_true",
                       help="start the first run's helper process whatever the load")
    which.add_argument("--helper-only", action="store_true",
                       help="profile the helper process on the main command's problem")
    ap.add_argument("--tree", type=Path, default=ROOT, help="the source tree to run")
    ap.add_argument("command", nargs="*", help="the vtatune command (default: the main one)")
    args = ap.parse_args()
    mode = "helper-only" if args.helper_only else "helper" if args.helper else "alone"
    tree = args.tree.resolve()
    print(f"{tree}: python -m vtatune {' '.join(args.command or MAIN_COMMAND)} ({mode}); "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as work:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache,
               "PYTHONPATH": os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")])}
        subprocess.run([sys.executable, "-c", _PROFILED, mode,
                        *(args.command or MAIN_COMMAND)], cwd=work, env=env, check=True,
                       stdout=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
