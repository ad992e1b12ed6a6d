"""A template's knobs as Optuna distributions.

Two encodings (stored with the study, so a resumed study keeps its own):

- ``value``: every knob is a categorical of its real choices, so ``trial.params`` is the
  config itself (what Optuna users expect to see).
- ``index``: ordinal integer knobs (tile sizes) become the index into their sorted
  choices, so CMA-ES can move along them; other knobs stay categorical. A trial's params
  then show ``tile_h: 3`` where the tile is 7 rows: each such knob's value is also a user
  attr, ``knob:tile_h: 7`` (:meth:`Codec.knob_attrs`), which optuna-dashboard and
  ``trials_dataframe()`` show beside the params (and ``config`` holds every knob's value).

Example:
    >>> from types import SimpleNamespace as Knob
    >>> template = Knob(knobs=(Knob(name="tile_h", choices=(1, 2, 7, 14)),
    ...                        Knob(name="store", choices=("tile", "element"))))
    >>> codec = Codec(template, "index")
    >>> codec.to_params({"tile_h": 7, "store": "tile"})
    {'tile_h': 2, 'store': 'tile'}
    >>> codec.knob_attrs({"tile_h": 7, "store": "tile"})
    {'knob:tile_h': 7}
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from optuna.distributions import BaseDistribution, CategoricalDistribution, IntDistribution

ENCODINGS = ("value", "index")

#: The user attr that holds the value of a knob whose param is an index (``knob:tile_h``).
KNOB_ATTR = "knob:"

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

    def knob_attrs(self, config: Config) -> dict[str, Any]:
        """``{"knob:<name>": value}`` for each knob whose param is an index, so a trial shows
        its tile sizes where the params show indices (empty for the ``value`` encoding)."""
        return {KNOB_ATTR + name: config[name] for name, choices in self._indexed
                if choices is not None}

    def key(self, config: Config) -> Key:
        return tuple(config[n] for n in self.names)
