"""The reference data the tests check against: ``tests/data/`` (its README.md says what
each file is and where it came from), or ``$VTATUNE_SHARED_DATA`` when set. No test skips
for want of it: a checkout without it fails, saying which file is missing."""

from __future__ import annotations

from pathlib import Path

from vtatune.fidelity import data_dir

ROOT = Path(__file__).resolve().parents[1]
DATA = data_dir(ROOT)
#: TVM v0.14's fsim counters on AutoTVM points and tutorial GEMMs, and its rejections.
FSIM_REFERENCE = DATA / "fsim_reference.jsonl"
#: TVM v0.14's deployed ResNet-18, function by function, with its own streams timed.
DEPLOYED = DATA / "tvm014_resnet18_deployed.json"
