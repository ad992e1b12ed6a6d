"""Random legal configs of a template, for tests that need a spread of schedules."""

from __future__ import annotations

import random
from typing import Any


def random_legal(tpl: Any, rng: random.Random, n: int) -> list[dict[str, Any]]:
    """``n`` legal configs of ``tpl``, each knob drawn uniformly (repeats possible)."""
    out = []
    while len(out) < n:
        c = {k.name: rng.choice(k.choices) for k in tpl.knobs}
        if tpl.legal(c):
            out.append(c)
    return out
