"""Reading a user's JSON file with one-line errors (a config file, a timing profile)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from simulator.errors import ConfigError


def load_json(path: str | Path, what: str) -> Any:
    """The parsed JSON of ``path``; ConfigError naming the file for I/O or syntax errors."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc.msg}: line {exc.lineno} column "
                          f"{exc.colno})") from None
