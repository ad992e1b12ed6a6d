"""A template's knobs as Optuna distributions.

Two encodings (stored with the study, so a resumed study keeps its own):

- ``value``: every knob is a categorical of its real choices, so ``trial.params`` is the
  config itself (what Optuna users expect to see).
- ``index``: ordinal integer knobs (tile sizes) become the index into their sorted
  choices, so CMA-ES can move along them; other knobs stay categorical.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution

ENCODINGS = ("value", "index")

Config = dict[str, Any]
Key = tuple[Any, ...]


@functools.lru_cache(maxsize=256)
def _ordinal(choices: tuple[Any, ...]) -> bool:
    return (len(choices) > 1 and all(type(c) is int for c in choices)
            and list(choices) == sorted(choices))


@dataclass(frozen=True)
class Codec:
    """Maps a template's configs to and from one Optuna encoding."""

    template: Any
    encoding: str = "value"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(k.name for k in self.template.knobs)

    def distributions(self) -> dict[str, BaseDistribution]:
        out: dict[str, BaseDistribution] = {}
        for k in self.template.knobs:
            if self.encoding == "index" and _ordinal(k.choices):
                out[k.name] = IntDistribution(0, len(k.choices) - 1)
            else:
                out[k.name] = CategoricalDistribution(k.choices)
        return out

    def to_params(self, config: Config) -> dict[str, Any]:
        if self.encoding == "value":
            return dict(config)
        return {k.name: (k.choices.index(config[k.name]) if _ordinal(k.choices)
                         else config[k.name]) for k in self.template.knobs}

    def from_params(self, params: dict[str, Any]) -> Config:
        if self.encoding == "value":
            return {n: params[n] for n in self.names}
        return {k.name: (k.choices[params[k.name]] if _ordinal(k.choices)
                         else params[k.name]) for k in self.template.knobs}

    def key(self, config: Config) -> Key:
        return tuple(config[n] for n in self.names)
