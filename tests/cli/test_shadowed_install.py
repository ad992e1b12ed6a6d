"""``python -m vtatune`` run from the folder that holds the clone (issue 41 item 11)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# What ``pip install -e .`` leaves (setuptools' finder for an editable install, mapping the
# package names to this repository's folders), then ``python -m vtatune --version``.
RUN_AS_EDITABLE = """
import runpy, sys
from setuptools.command.editable_wheel import _finder_template
sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in getattr(f, '__module__', '')]
repo = sys.argv[1]
names = ('vtatune', 'simulator', 'search_spaces')
source = _finder_template('__editable___vtatune_test_finder',
                          {n: repo + '/' + n for n in names}, {})
finder = {}
exec(compile(source, 'finder', 'exec'), finder)
finder['install']()
sys.argv = ['vtatune', '--version']
runpy.run_module('vtatune', run_name='__main__', alter_sys=True)
"""


def test_a_folder_named_vtatune_in_the_working_directory_does_not_shadow_it(tmp_path):
    pytest.importorskip("setuptools.command.editable_wheel")
    (tmp_path / "vtatune" / "vtatune").mkdir(parents=True)  # the clone, seen from outside
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", RUN_AS_EDITABLE, str(REPO)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("vtatune ")
