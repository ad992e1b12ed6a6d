import json
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2] / "shared"
REFERENCE = SHARED / "data" / "fsim_reference.jsonl"


@pytest.fixture(scope="session")
def fsim_reference():
    if not REFERENCE.exists():
        pytest.skip(f"{REFERENCE} not found")
    return [json.loads(line) for line in REFERENCE.read_text().splitlines() if line.strip()]
