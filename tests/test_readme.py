"""Every fenced code block of README.md and of the pages in docs/ runs as written: each in its
own temporary directory
holding a copy of what the blocks read (the shipped ``logs/`` and ``scripts/``), never the
checkout's working files or what a user's run left behind.

How a block runs:

- ```` ```sh ````: ``bash -e -o pipefail``, with the checkout on ``PYTHONPATH`` (vtatune
  imports from it). A leading ``pip install ... &&`` is dropped: the test runs in the
  installed checkout, and pip would need the network.
- ```` ```python ````: ``python`` in a fresh process, the same way.
- ```` ```text ```` (usage synopses, sample output) and any other language: not run.

Marking a block: an HTML comment on the line just above its opening fence (GitHub does not
show it). There are three markers:

- ``<!-- readme-test: slow (why) -->``: too long for the fast suite (a benchmark, the whole
  test suite, many 200-trial studies); it runs only with ``python -m pytest -m slow``.
- ``<!-- readme-test: trials N (why) -->``: runs with every ``--trials <n>`` (and
  ``trials=<n>``) replaced by N, for a tuning example whose full length adds nothing the
  fast suite does not already cover.
- ``<!-- readme-test: clone (why) -->``: runs only in ``test_two_commands_in_a_fresh_clone``
  (the test command: the suite is in the clone, not in a temporary directory).

Anyone adding a README block: make it run as written in a fresh directory in a few seconds,
or mark it slow. ``test_two_commands_in_a_fresh_clone`` (slow) runs the README's two
commands in order in a fresh ``git clone``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("compiled_engines")  # exact CLI output: no first-run notice

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FENCE = re.compile(r"^```(\w*)\s*$")
MARK = re.compile(r"^<!--\s*readme-test:\s*(slow|trials \d+|\w+)")
TRIALS = re.compile(r"(--trials |trials=)\d+")
PIP = re.compile(r"^\s*pip install [^&]*&&\s*")
RUN = {"sh": ["bash", "-e", "-o", "pipefail", "-c"], "python": [sys.executable, "-c"]}


def readme_blocks(text: str) -> list[tuple[int, str, str, str | None]]:
    """``(line of the opening fence, language, code, marker)`` of every fenced block."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, lang = i, m.group(1)
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        mark = MARK.match(lines[start - 1]) if start else None
        blocks.append((start + 1, lang, "\n".join(lines[start + 1:end]) + "\n",
                       mark.group(1) if mark else None))
        i = end + 1
    return blocks


BLOCKS = readme_blocks(README.read_text())
#: The documentation pages: README.md, then docs/*.md in name order.
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
PAGE_BLOCKS = {page: readme_blocks(page.read_text()) for page in PAGES}
RUNNABLE = [pytest.param(code, lang, mark, id=f"{page.relative_to(ROOT)}:{line}-{lang}",
                         marks=[pytest.mark.slow] if mark == "slow" else [])
            for page, blocks in PAGE_BLOCKS.items()
            for line, lang, code, mark in blocks if lang in RUN and mark != "clone"]


def _env(pythonpath: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(pythonpath), "PYTHONUNBUFFERED": "1"}


def test_blocks_are_found_and_marks_known():
    assert len(RUNNABLE) >= 8
    every = [b for blocks in PAGE_BLOCKS.values() for b in blocks]
    assert all(mark is None or mark in ("slow", "clone") or mark.startswith("trials ")
               for _, _, _, mark in every)
    assert {lang for _, lang, _, _ in every} <= {"sh", "python", "text"}


@pytest.mark.parametrize("code, lang, mark", RUNNABLE)
def test_readme_block_runs(code, lang, mark, tmp_path):
    for shipped in ("logs", "scripts"):
        shutil.copytree(ROOT / shipped, tmp_path / shipped,
                        ignore=shutil.ignore_patterns("cache", "local", "__pycache__",
                                                      "*.journal*"))
    if lang == "sh":
        code = "\n".join(PIP.sub("", line) for line in code.splitlines())
    if mark and mark.startswith("trials "):
        code = TRIALS.sub(lambda m: m.group(1) + mark.split()[1], code)
    done = subprocess.run([*RUN[lang], code], cwd=tmp_path, env=_env(ROOT),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{code}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"


@pytest.mark.slow
def test_two_commands_in_a_fresh_clone(tmp_path):
    """The README's two commands, in order, in one fresh clone (committed HEAD): the main
    job's log must not disturb the tests that follow it."""
    clone = tmp_path / "vtatune"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    two = [code for _, lang, code, _ in BLOCKS if lang == "sh"][:2]
    assert "conv2d --trials 200" in two[0] and "pytest" in two[1]
    for code in two:
        code = PIP.sub("", code.strip())
        done = subprocess.run(["bash", "-e", "-c", code], cwd=clone, env=_env(clone),
                              capture_output=True, text=True, timeout=1800)
        assert done.returncode == 0, f"{code}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True,
                            text=True, check=True).stdout
    assert status == "", status  # the run's log and journal are git-ignored
