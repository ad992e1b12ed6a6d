"""Deploying with the stock default schedules (one batch row a tile, no thread on the rows),
for the tests whose subject is what a stream leaves for the next: a GEMM's own default and
the cost model's pick thread its rows, and their streams then leave no token."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

import search_spaces
from vtatune.errors import IllegalSchedule
from vtatune.lowering import context, rules

_DEFAULT = search_spaces.default_schedule


def stock_default(workload, hw, bias=False):
    """The stock default schedule where it is legal, else the template's default."""
    ctx = context(workload, hw)
    for s in search_spaces.stock_candidates(ctx):
        try:
            rules(ctx, s, bias)
            return s
        except IllegalSchedule:
            continue
    return _DEFAULT(workload, hw, bias)


@contextlib.contextmanager
def stock_schedules() -> Iterator[None]:
    """Inside: a layer with no record takes :func:`stock_default` (the default schedule;
    the cost model's pick, given no warm start, falls back to it)."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr("search_spaces.default_schedule", stock_default)
        m.setattr("vtatune.tuning.cost_model.warm_starts", lambda template: [])
        yield
