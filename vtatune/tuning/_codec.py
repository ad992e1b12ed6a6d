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

    @functools.cached_property
    def names(self) -> tuple[str, ...]:
        return tuple(k.name for k in self.template.knobs)

    @functools.cached_property
    def _indexed(self) -> tuple[tuple[str, tuple[Any, ...] | None], ...]:
        """(knob, its choices when the param is an index into them, else None): a config is
        converted once per ask and per sampler candidate, so decide each knob once."""
        return tuple((k.name, k.choices if self.encoding == "index" and _ordinal(k.choices)
                      else None) for k in self.template.knobs)

    @functools.cached_property
    def _position(self) -> dict[str, dict[Any, int]]:
        return {name: {c: i for i, c in enumerate(choices)}
                for name, choices in self._indexed if choices is not None}

    def distributions(self) -> dict[str, BaseDistribution]:
        out: dict[str, BaseDistribution] = {}
        for name, choices in self._indexed:
            if choices is not None:
                out[name] = IntDistribution(0, len(choices) - 1)
            else:
                out[name] = CategoricalDistribution(self.template.knob(name).choices)
        return out

    def to_params(self, config: Config) -> dict[str, Any]:
        if self.encoding == "value":
            return dict(config)
        position = self._position
        return {name: (config[name] if choices is None else position[name][config[name]])
                for name, choices in self._indexed}

    def from_params(self, params: dict[str, Any]) -> Config:
        if self.encoding == "value":
            return {n: params[n] for n in self.names}
        return {name: (params[name] if choices is None else choices[params[name]])
                for name, choices in self._indexed}

    def key(self, config: Config) -> Key:
        return tuple(config[n] for n in self.names)
