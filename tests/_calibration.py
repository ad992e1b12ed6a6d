"""Calibration data for the tests that quantize a model with onnxruntime's quantize_static."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np


class CalibrationReader:
    """onnxruntime's calibration data reader over ``samples`` of the input ``name``."""

    def __init__(self, name: str, samples: Iterable[np.ndarray]) -> None:
        self.items = iter([{name: s} for s in samples])

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self.items, None)


def seeded_reader(name: str, shape: Sequence[int], n: int = 4) -> CalibrationReader:
    """``n`` standard normal float32 samples of ``shape``, drawn in turn from
    ``numpy.random.default_rng(0)``."""
    rng = np.random.default_rng(0)
    return CalibrationReader(name, [rng.standard_normal(shape).astype(np.float32)
                                    for _ in range(n)])
