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


@pytest.fixture(scope="session", autouse=True)
def compiled_engines(tmp_path_factory):
    """Every compiled engine (the simulator's, the lowering's, the guided sampler's) is
    built before the first test, as after a user's first run: a test of the command line
    sees no first-run notice, whichever tests ran before it. Past the guided sampler's
    startup draws, so its TPE step runs too."""
    from vtatune.tuning import tune

    tune("gemm", trials=14, seed=0, log=tmp_path_factory.mktemp("engines") / "warm.jsonl")
