"""A model's input as a user gives it: one array, a batch (N x the input's shape), the
``--input`` of ``deploy`` and ``run`` (an .npy file of either, or a folder of .npy files, one
input each), checked against what the model takes before anything runs.

A refusal is one :class:`~vtatune.deploy.DeployError` line that ends with what the model
takes: its input's name, dtype and shape (:meth:`ModelInput.describe`). Values are cast to
the model's dtype only within their kind (a float64 array to a float32 model; int32 token
ids to an int64 model, when they fit): an integer array for a float model, a float one for
an integer model, NaN or infinity in a float input, are refused, as onnxruntime refuses
another dtype.

Example:
    >>> import numpy as np
    >>> x = ModelInput("x", (1, 4), np.dtype(np.float32))
    >>> x.describe()
    '[1, 4] float32 (input x)'
    >>> x.batch(np.zeros((3, 1, 4)))[0].shape, x.batch(np.zeros((1, 4)))[1]
    ((3, 1, 4), False)
    >>> x.check(np.arange(4).reshape(1, 4))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    vtatune...DeployError: input of dtype int64: the model takes [1, 4] float32 (input x)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from vtatune.deploy.runtime._errors import DeployError

#: How an .npy file and a zip archive (an .npz) begin.
_NPY_MAGIC, _ZIP_MAGIC = b"\x93NUMPY", b"PK\x03\x04"


@dataclass(frozen=True)
class ModelInput:
    """A model's input: its ``name``, ``shape`` and ``dtype``."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype

    def describe(self) -> str:
        """What the model takes, as refusals end: ``[1, 3, 224, 224] float32 (input x)``."""
        named = f" (input {self.name})" if self.name else ""
        return f"{list(self.shape)} {np.dtype(self.dtype)}{named}"

    def _refuse(self, what: str) -> DeployError:
        return DeployError(f"{what}: the model takes {self.describe()}")

    def check(self, x: Any) -> np.ndarray:
        """``x`` as one input of the model (C-contiguous, the model's dtype); DeployError
        for another shape, another kind of dtype, NaN or infinity in a float input, or
        integers out of the model's integer type."""
        arr = np.asarray(x)
        shape, dtype = tuple(self.shape), np.dtype(self.dtype)
        if arr.shape != shape:
            raise self._refuse(f"input of shape {list(arr.shape)}")
        if arr.dtype != dtype:
            float_model = np.issubdtype(dtype, np.floating)
            kind_ok = np.issubdtype(arr.dtype, np.floating) if float_model else \
                np.issubdtype(arr.dtype, np.integer)
            if not kind_ok:
                raise self._refuse(f"input of dtype {arr.dtype}")
            if not float_model and arr.size:
                info = np.iinfo(dtype)
                low, high = int(arr.min()), int(arr.max())
                if low < info.min or high > info.max:
                    raise self._refuse(f"input of values {low}..{high}, beyond {dtype}")
        if np.issubdtype(arr.dtype, np.floating) and not np.isfinite(arr).all():
            bad = "NaN" if np.isnan(arr).any() else "infinity"
            raise self._refuse(f"input holding {bad}")
        return np.ascontiguousarray(arr, dtype=dtype)

    def batch(self, x: Any) -> tuple[np.ndarray, bool]:
        """``x`` as a batch of inputs (N x the input's shape) and whether it came as one: an
        array of the input's shape is a batch of one (False), N x that shape a batch of N
        (True)."""
        arr = np.asarray(x)
        shape = tuple(self.shape)
        if arr.ndim == len(shape) + 1 and arr.shape[1:] == shape:
            if not len(arr):
                raise self._refuse(f"an empty batch of inputs {list(arr.shape)}")
            return np.stack([self.check(a) for a in arr]), True
        if arr.shape != shape:
            raise self._refuse(f"input of shape {list(arr.shape)}")
        return self.check(arr)[None], False

    def read(self, path: str | Path, flag: str = "--input") -> Inputs:
        """The inputs a command's ``flag`` names: an .npy file of the input's shape (one)
        or of N x it (a batch), or a folder of .npy files, each one input, in the order of
        their names (a batch). DeployError naming the file for anything else (a missing
        file, an .npz, a file not in NumPy's format, an empty folder, one with other
        files)."""
        path = Path(path)
        if not path.is_dir():
            return Inputs(*self.batch(self._npy(path, flag)))
        entries = sorted(p for p in path.iterdir() if not p.name.startswith("."))
        files = [p for p in entries if p.suffix == ".npy" and p.is_file()]
        others = [p.name + ("/" if p.is_dir() else "") for p in entries if p not in files]
        if others:
            raise self._refuse(f"{flag} {path} holds other things than .npy files "
                               f"({', '.join(others[:3])}{', ...' if len(others) > 3 else ''}"
                               "): each .npy file is one input")
        if not files:
            raise self._refuse(f"{flag} {path} is a folder with no .npy file (each one input)")
        xs = []
        for f in files:
            x = self._npy(f, flag)
            if x.shape != tuple(self.shape):
                raise self._refuse(f"{flag} {f}: input of shape {list(x.shape)} (each file is "
                                   "one input)")
            xs.append(self.check(x))
        return Inputs(np.stack(xs), True, tuple(f.name for f in files))

    def _npy(self, path: Path, flag: str) -> np.ndarray:
        """The array in the .npy file ``path``."""
        try:
            with open(path, "rb") as f:
                magic = f.read(len(_NPY_MAGIC))
                f.seek(0)
                if magic == _NPY_MAGIC:
                    return np.load(f, allow_pickle=False)
        except OSError as exc:
            raise self._refuse(f"cannot read {flag} {path} ({exc.strerror or exc})") from None
        except ValueError as exc:  # numpy's: an object array, a damaged header
            raise self._refuse(f"{flag} {path} is no array of numbers in NumPy's .npy format "
                               f"({str(exc).splitlines()[0]})") from None
        if magic.startswith(_ZIP_MAGIC):
            raise self._refuse(f"{flag} {path} is a zip archive (an .npz?), not an .npy file: "
                               "save the input alone with numpy.save")
        raise self._refuse(f"{flag} {path} is not in NumPy's .npy format (numpy.save writes it)")


@dataclass(frozen=True, eq=False)
class Inputs:
    """What ``--input`` gave (:meth:`ModelInput.read`): the ``arrays`` (N x the input's
    shape), whether they came as a batch (``batched``: the output saved is then N x the
    output's shape) and, from a folder, each one's file name."""

    arrays: np.ndarray
    batched: bool
    files: tuple[str, ...] = ()

    def label(self, i: int) -> str:
        """Input ``i`` as reports name it: ``3 (x3.npy)``."""
        return f"{i} ({self.files[i]})" if self.files else str(i)


def check_input(x: Any, shape: tuple[int, ...], dtype: np.dtype, name: str = "") -> np.ndarray:
    """``x`` as the model's input (:meth:`ModelInput.check`)."""
    return ModelInput(name, tuple(shape), np.dtype(dtype)).check(x)


def input_batch(x: Any, shape: tuple[int, ...], dtype: np.dtype,
                name: str = "") -> tuple[np.ndarray, bool]:
    """``x`` as a batch of the model's inputs and whether it came as one
    (:meth:`ModelInput.batch`)."""
    return ModelInput(name, tuple(shape), np.dtype(dtype)).batch(x)
