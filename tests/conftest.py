import json

import pytest

from tests._data import FSIM_REFERENCE


@pytest.fixture(scope="session")
def fsim_reference():
    return [json.loads(line) for line in FSIM_REFERENCE.read_text().splitlines()
            if line.strip()]


@pytest.fixture(scope="session", autouse=True)
def compiled_engines(tmp_path_factory):
    """Every compiled engine (the simulator's, the lowering's, the guided sampler's) is
    built before the first test, as after a user's first run: a test of the command line
    sees no first-run notice, whichever tests ran before it. Past the guided sampler's
    startup draws, so its TPE step runs too."""
    from vtatune.tuning import tune

    tune("gemm", trials=14, seed=0, log=tmp_path_factory.mktemp("engines") / "warm.jsonl")


@pytest.fixture(autouse=True)
def deploy_cache(tmp_path_factory, monkeypatch):
    """Each test's ``deploy`` tunes into a cache log of its own (``$VTATUNE_CACHE_DIR``:
    subprocesses inherit it), never the user's ``~/.cache/vtatune``, and no test sees the
    records another one tuned."""
    monkeypatch.setenv("VTATUNE_CACHE_DIR", str(tmp_path_factory.mktemp("vtatune-cache")))
