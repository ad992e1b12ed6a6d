"""Benchmark the first hour's commands end to end: the first run after install (numba
compiling the engines) and a warm run (the engines loaded from numba's cache).

    python scripts/bench_first_run.py [--repeat 3] [--tree DIR ...] [--no-bytecode]
                                      [-- COMMAND ...]

Each round runs, per tree, ``python -m vtatune COMMAND`` twice in a fresh process: first
with an empty numba cache (``NUMBA_CACHE_DIR`` set to a new temporary directory, as right
after install), then again with the cache that run left (warm). Every run gets a fresh
temporary directory as its working directory, so a study starts from an empty journal and
log. The default command is the main one, ``conv2d --trials 200 --seed 1 --quiet``. It
prints each run's wall time (until the command exits) and CPU time (user + system of the
command and of every process it started, e.g. the first run's helper that compiles the
guided sampler, waited for before the next run: on Linux this script adopts them as a
subreaper), and the range over the rounds.

Each command runs as on a user's Python, which writes the bytecode of the modules it
imports: the first run with none of the tree's (removed before it, as right after ``pip
install -e``), the warm run with what the first wrote. ``PYTHONDONTWRITEBYTECODE``, which
this machine's environment sets, is not passed on: with it every run compiled vtatune's
hundred-odd modules from source (0.15-0.2 s of CPU; ``--no-bytecode`` measures that).

``--tree`` names the source trees to compare (default: this one), e.g. a checkout of an
earlier commit (``git archive <commit> | tar -x -C DIR``): the command runs with that tree
first on ``PYTHONPATH`` and that tree as the code numba compiles. Rounds alternate the
trees, cold and warm, so a shared machine's drift falls on all of them alike.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAIN_COMMAND = ("conv2d", "--trials", "200", "--seed", "1", "--quiet")


def adopt_orphans() -> None:
    """Become the parent of the processes our children leave running (Linux's child
    subreaper), so their CPU time is waited for and counted."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass  # elsewhere: the command's own CPU time only


def wait_for_orphans() -> None:
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def remove_bytecode(tree: Path) -> None:
    """Remove the bytecode of the tree's packages (``__pycache__/*.pyc``; numba's cache
    files beside them stay)."""
    for package in (p for p in tree.iterdir() if (p / "__init__.py").is_file()):
        for pyc in package.rglob("__pycache__/*.pyc"):
            pyc.unlink(missing_ok=True)


def run(tree: Path, command: list[str], cache: Path, *, bytecode: bool
        ) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of ``python -m vtatune command`` from ``tree``."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache),
           "PYTHONPATH": os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")])}
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    with tempfile.TemporaryDirectory() as work:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "vtatune", *command], cwd=work, env=env,
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        wait_for_orphans()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="rounds (default: 3)")
    ap.add_argument("--tree", type=Path, action="append",
                    help="a source tree to time (repeatable; default: this one)")
    ap.add_argument("--no-bytecode", dest="bytecode", action="store_false",
                    help="run with PYTHONDONTWRITEBYTECODE: every run compiles the tree's "
                         "modules from source")
    ap.add_argument("command", nargs="*", help="the vtatune command (default: the main one)")
    args = ap.parse_args()
    adopt_orphans()
    trees = [t.resolve() for t in args.tree or [ROOT]]
    command = args.command or list(MAIN_COMMAND)
    print(f"python -m vtatune {' '.join(command)}; "
          f"{'bytecode written' if args.bytecode else 'no bytecode'}; load average "
          f"{os.getloadavg()[0]:.1f} at the start")
    results: dict[tuple[Path, str], list[tuple[float, float]]] = {}
    for r in range(args.repeat):
        for tree in trees:
            remove_bytecode(tree)
            with tempfile.TemporaryDirectory() as cache:
                for kind in ("first run", "warm"):
                    wall, cpu = run(tree, command, Path(cache), bytecode=args.bytecode)
                    results.setdefault((tree, kind), []).append((wall, cpu))
                    print(f"  round {r + 1}  {tree}  {kind:9}  {wall:6.2f} s wall  "
                          f"{cpu:6.2f} s CPU", flush=True)
    print(f"ranges over {args.repeat} rounds (load average {os.getloadavg()[0]:.1f} at "
          "the end):")
    for (tree, kind), runs in results.items():
        walls, cpus = [w for w, _ in runs], [c for _, c in runs]
        print(f"  {tree}  {kind:9}  {min(walls):.2f}-{max(walls):.2f} s wall  "
              f"{min(cpus):.2f}-{max(cpus):.2f} s CPU")


if __name__ == "__main__":
    main()
