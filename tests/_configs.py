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


def verified_random_schedules(wl: Any, hw: Any, n: int = 3) -> tuple[list[Any], int]:
    """``n`` random legal schedules of ``wl``'s template (``tune_store``) on ``hw``, each
    lowered with its encoding checked and verified bit for bit against numpy (a seed a
    schedule, drawn from one rng seeded by the workload and hardware): the lowered programs
    and the last seed."""
    from search_spaces import get_template
    from vtatune.lowering import lower
    from vtatune.scoring import verify

    rng = random.Random(wl.key() + hw.bitstream)
    tpl = get_template(wl, hw, tune_store=True)
    lowered, seed = [], 0
    for config in random_legal(tpl, rng, n):
        s = tpl.to_schedule(config)
        low = lower(wl, s, hw, verify_encoding=True)
        seed = rng.randrange(1 << 16)
        v = verify(low, seed=seed)
        assert v.ok, (wl.describe(), hw.bitstream, s.short(), v.mismatches)
        lowered.append(low)
    return lowered, seed

