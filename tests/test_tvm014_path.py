"""The TVM v0.14 path of docs/tvm014.md ("From the log to a board"), as far as it can be
checked without TVM v0.14: the page shows ``scripts/tvm014/compile_with_log.py`` as it is,
the scripts it names exist and parse, the compile script refuses a missing log in one line
before it needs TVM, and the sections the page and its readers cite exist."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.test_readme import readme_blocks

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "tvm014.md"
COMPILE = "scripts/tvm014/compile_with_log.py"
#: The repository's files the path runs, in its order: build, compile, the fsim references.
PATH_SCRIPTS = ("scripts/tvm014/build_tvm.sh", COMPILE, "scripts/tvm014/deploy.py")


def _headings(page: Path) -> set[str]:
    return {m.group(1) for m in re.finditer(r"^#+ (.+)$", page.read_text(), re.M)}


def _flat(path: Path) -> str:
    """The text with each run of white space one space (a citation may span lines)."""
    return " ".join(path.read_text().split())


def test_the_page_shows_the_compile_script_as_it_is():
    lines = PAGE.read_text().splitlines()
    shown = [code for line, _, code, _ in readme_blocks(PAGE.read_text())
             if lines[line - 2] == f"<!-- tvm014: {COMPILE} -->"]
    assert shown == [(ROOT / COMPILE).read_text()]


def test_the_page_names_each_script_of_the_path_and_each_exists():
    text = PAGE.read_text()
    assert [s for s in PATH_SCRIPTS if f"`{s}" not in text or not (ROOT / s).is_file()] == []


def test_the_scripts_parse():
    compile((ROOT / COMPILE).read_text(), COMPILE, "exec")
    done = subprocess.run(["bash", "-n", str(ROOT / PATH_SCRIPTS[0])], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr


def test_the_compile_script_refuses_a_missing_log_before_it_needs_tvm(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / COMPILE), "--log", "none.log"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "compile_with_log.py: error: none.log: no such file\n"


def test_the_sections_cited_exist():
    """The page's citations of README sections, and the citations of the page's sections
    in the README, the scripts and the references' README."""
    readme = _headings(ROOT / "README.md")
    cited = re.findall(r'"([^"]+)" in the README|README\'s "([^"]+)"', _flat(PAGE))
    assert cited and [a or b for a, b in cited if (a or b) not in readme] == []
    page = _headings(PAGE)
    citing = [ROOT / "README.md", *sorted((ROOT / "scripts" / "tvm014").iterdir()),
              ROOT / "tests" / "networks" / "data" / "README.md"]
    cites = [c for f in citing for c in re.findall(r'docs/tvm014\.md, "([^"]+)"', _flat(f))]
    assert len(cites) >= 3 and [c for c in cites if c not in page] == []


def _without_tvm014() -> dict[str, str]:
    """This environment without TVM v0.14's variables (the test machine has none of it)."""
    drop = {"TVM_HOME", "VTA_HW_PATH", "VTA_HW_PATH_PYNQ", "TVM_LIBRARY_PATH"}
    return {k: v for k, v in os.environ.items() if k not in drop}


def test_the_deploy_script_has_help_without_tvm():
    done = subprocess.run([sys.executable, str(ROOT / "scripts/tvm014/deploy.py"), "--help"],
                          env=_without_tvm014(), capture_output=True, text=True)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith("usage: deploy.py")


def test_the_deploy_script_says_what_to_set_in_one_line(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "scripts/tvm014/deploy.py"),
                           "--out", "x.json"], cwd=tmp_path, env=_without_tvm014(),
                          capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("deploy.py: error: TVM_HOME is not set: ")
    assert done.stderr.count("\n") == 1 and "scripts/tvm014/build_tvm.sh" in done.stderr


def test_the_compile_script_says_what_to_install_without_tvm014(tmp_path):
    """Here `vta` (TVM v0.14's) cannot be imported: one line naming what to build and set."""
    (tmp_path / "r.log").write_text("")
    done = subprocess.run([sys.executable, str(ROOT / COMPILE), "--log", "r.log"],
                          cwd=tmp_path, env=_without_tvm014(), capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("compile_with_log.py: error: No module named ")
    assert done.stderr.count("\n") == 1
    assert "scripts/tvm014/build_tvm.sh" in done.stderr and "PYTHONPATH" in done.stderr


def _exports(text: str) -> set[str]:
    return set(re.findall(r"^export (\w+)=", text, re.M))


def test_the_page_exports_what_the_build_prints_and_the_scripts_read():
    """The page's environment block sets every variable build_tvm.sh prints (TVM_HOME,
    which deploy.py reads, was missing)."""
    printed = _exports((ROOT / PATH_SCRIPTS[0]).read_text())
    assert {"TVM_HOME", "PYTHONPATH", "VTA_HW_PATH"} <= printed
    assert printed - _exports(PAGE.read_text()) == set()


def test_the_fsim_driver_recipe_fetches_its_sources_and_quotes_the_script():
    """docs/deploy.md's recipe: commands that get the sources, no path of this machine, and
    the build's time as the script's header says it."""
    deploy = (ROOT / "docs" / "deploy.md").read_text()
    section = deploy.split("### Building TVM v0.14's fsim driver")[1].split("\n### ")[0]
    block = section.split("```text\n")[1].split("```")[0]
    assert "git clone" in block and "submodule update --init" in block
    assert "/work/" not in block
    script = (ROOT / "scripts/tvm014/build_libvta_fsim.sh").read_text()
    (minutes,) = re.findall(r"About (\d+) minutes", script)
    assert re.findall(r"About (\d+) minutes", section) == [minutes]
    for pinned in re.findall(r"= \S+ ([0-9a-f]{10})", section):
        assert pinned in script
