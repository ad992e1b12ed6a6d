"""The documentation's references lead somewhere (issue 35, item 17): a section it cites by
name is a heading of the page it names, a relative link is a file of the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: "X" cited as a section of the README: README's "X", (README, "X"), "X" in the README
README_SECTION = re.compile(r'README\'s "([^"]+)"|\(README, "([^"]+)"\)|"([^"]+)" in the README')
#: a section of another page: ([page](page.md), "X")
PAGE_SECTION = re.compile(r'\[[^\]]*\]\(([^)#\s]+\.md)\), "([^"]+)"')
LINK = re.compile(r'\]\(([^)#\s]+)(?:#[^)]*)?\)')


def headings(page: Path) -> set[str]:
    """A page's headings, each also as its part before a colon ("Which VTA to build" of
    "Which VTA to build: `design`")."""
    names = {line.lstrip("#").strip() for line in page.read_text().splitlines()
             if line.startswith("#")}
    return names | {n.split(":")[0] for n in names}


def _text(page: Path) -> str:
    return " ".join(page.read_text().split())  # a reference may wrap over lines


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_sections_cited_by_name_exist(page):
    text = _text(page)
    readme = headings(ROOT / "README.md")
    for m in README_SECTION.finditer(text):
        name = next(g for g in m.groups() if g)
        assert name in readme, f"{page.name} cites README section {name!r}"
    for target, name in PAGE_SECTION.findall(text):
        assert name in headings(page.parent / target), f"{page.name} cites {target}: {name!r}"


#: Fenced code blocks and inline code: code, not links (``f(x)["a"](b)`` is a call).
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_lead_to_files(page):
    for target in LINK.findall(CODE.sub("", page.read_text())):
        if "://" in target or target.startswith("mailto:"):
            continue
        assert (page.parent / target).exists(), f"{page.name} links {target}"
