"""Reading the docs' markdown tables, for the tests that check what a page quotes."""

from __future__ import annotations

from pathlib import Path


def table_after(page: Path, header: str) -> list[list[str]]:
    """The rows (cells stripped) of the markdown table whose header row starts with
    ``header``, without the header and the alignment row."""
    lines = page.read_text().splitlines()
    (start,) = [i for i, line in enumerate(lines) if line.startswith(header)]
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows
