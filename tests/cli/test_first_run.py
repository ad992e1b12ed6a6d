"""The main command's first run after install and its warm start (issue 41 item 14): what
numba compiles, and what a command imports."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def test_each_command_module_lists_the_commands_it_registers():
    """The parser of one command registers only the module listing it (``COMMANDS``): a
    list that missed a command would leave that command unparsable."""
    import argparse
    import importlib

    from vtatune.cli import MODULES, build_parser

    def names(parser: argparse.ArgumentParser) -> list[str]:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        return list(sub.choices)

    everything = names(build_parser())
    listed = [c for m in MODULES for c in importlib.import_module(f"vtatune.cli.{m}").COMMANDS]
    assert sorted(listed) == sorted(everything)
    for command in everything:
        assert command in names(build_parser(command))
    assert names(build_parser("conv2d")) == list(importlib.import_module(
        "vtatune.cli.tune").COMMANDS)
    assert names(build_parser("no-such-command")) == everything


def test_numba_resolves_a_calls_types_once_not_at_every_call_site(tmp_path):
    """numba typed every call site anew (trying the function's templates, formatting the
    failures' messages): 8,320 of the main command's 8,874 resolutions repeated an earlier
    one, about 2.5 s of its first run (issue 41 item 14). A fresh engine of 40 alike
    statements (a setitem, a getitem and an add each) resolves each call once, and
    computes what Python does."""
    body = "".join(f"    a[{i % 3}] = a[{(i + 1) % 3}] + x\n" for i in range(40))
    source = f"def fill(a, x):\n{body}    return a\n"
    (tmp_path / "repeated_engine.py").write_text(
        "from simulator.jit import njit\n\n\n@njit(cache=False)\n" + source)
    code = ("import numpy as np\n"
            "from numba.core.types.functions import BaseFunction\n"
            "numbas = BaseFunction.get_call_type\n"
            "resolved = []\n"
            "def counted(self, context, args, kws):\n"
            "    resolved.append(self)\n"
            "    return numbas(self, context, args, kws)\n"
            "BaseFunction.get_call_type = counted\n"
            "from repeated_engine import fill\n"
            "print(fill(np.ones(3, np.int64), 2).tolist(), len(resolved))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, env=env, check=True)
    plain: dict = {}
    exec(source, plain)  # noqa: S102 - the same function as plain Python
    result, resolutions = out.stdout.split("]")
    assert result + "]" == str(plain["fill"](np.ones(3, np.int64), 2).tolist())
    assert int(resolutions) < 20  # 120 call sites
