"""Bundles run as a user runs them: in a new Python process running this tree's vtatune."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def fresh(*argv: str, **kw: Any) -> subprocess.CompletedProcess:
    """A new Python process running this tree's vtatune (``argv`` after the interpreter)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=300, **kw)


def bundle_round_trip(model: Any, x: np.ndarray, tmp_path: Path,
                      **options: Any) -> tuple[Any, dict[str, Any]]:
    """``model`` built (``compile_model(model, **options)``), run, saved, and run by
    `vtatune run` in a fresh process, which must write the built run's output exactly:
    the built run and the fresh process's ``--json`` object."""
    from vtatune.deploy import compile_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = compile_model(model, **options)
        want = compiled.run(x)
    compiled.save(tmp_path / "bundle")
    np.save(tmp_path / "x.npy", x)
    proc = fresh("-m", "vtatune", "run", str(tmp_path / "bundle"), "--input",
                 str(tmp_path / "x.npy"), "--output", str(tmp_path / "y.npy"), "--json")
    assert proc.returncode == 0, proc.stderr
    got = np.load(tmp_path / "y.npy")
    assert got.dtype == want.output.dtype
    np.testing.assert_array_equal(got, want.output)
    return want, json.loads(proc.stdout)
