"""A decoded program kept as bytes: what :func:`simulator.functional.decode` works out for a
program (its execution order, its numpy steps with every index, the micro-op SRAM), saved
once and read back in a fraction of decoding's time.

A deployed model runs the same programs on every inference; decoding them is most of its
first inference (a BERT-small bundle's 46 programs: 0.8 s of CPU to decode, 0.1 s to read
back). A bundle therefore stores each program decoded beside it (``vtatune.deploy``).

The bytes are a zlib-compressed pickle of the steps, read by an unpickler that builds
nothing but numpy arrays, dtypes and ufuncs, slices, the ISA's enums and the functional
simulator's own step functions (:func:`from_bytes` refuses any other name with
:class:`~simulator.errors.ProgramError`). The steps are the simulator's private form: bytes
are read back only by the vtatune that wrote them (a bundle records its version).

Example:
    >>> from simulator.hardware import DEFAULT
    >>> from simulator.functional import decode
    >>> from simulator.isa import FinishInsn, MemId, MemInsn, Opcode
    >>> from simulator.program import Program
    >>> load = MemInsn(Opcode.LOAD, MemId.INP, 0, 0, 1, 16, 16, push_next=True)
    >>> program = Program((load, FinishInsn(pop_prev=True)), (), (), 4096)
    >>> kept = from_bytes(to_bytes(decode(program, DEFAULT)), program, DEFAULT)
    >>> kept.program is program, kept.order, len(kept.steps)
    (True, (0, 1), 1)
"""

from __future__ import annotations

import enum
import inspect
import io
import pickle
import zlib
from typing import Any

import numpy as np

import simulator.functional as functional
import simulator.isa as isa
from simulator.errors import ProgramError
from simulator.functional import DecodedProgram
from simulator.hardware import HardwareConfig
from simulator.program import Program

__all__ = ["from_bytes", "to_bytes"]

#: What numpy pickles an array, a scalar and a dtype as (its private reconstructors).
_NUMPY_BUILDERS = frozenset({"_frombuffer", "_reconstruct", "scalar", "dtype", "ndarray"})


def to_bytes(decoded: DecodedProgram) -> bytes:
    """``decoded``'s order, steps and micro-op SRAM as bytes (its program and hardware are
    the caller's to keep: :func:`from_bytes` takes them back)."""
    data = pickle.dumps((decoded.order, decoded.steps, decoded.uop), protocol=5)
    return zlib.compress(data, 1)


def from_bytes(data: bytes, program: Program, hw: HardwareConfig) -> DecodedProgram:
    """``program`` decoded for ``hw``, read from :func:`to_bytes`'s bytes; ProgramError for
    bytes that are damaged or name anything but the steps' own parts."""
    try:
        order, steps, uop = _Unpickler(io.BytesIO(zlib.decompress(data))).load()
    except ProgramError:
        raise
    except Exception as exc:  # zlib.error, pickle's errors, a wrong shape of tuple
        raise ProgramError(f"a decoded program is damaged ({type(exc).__name__}: {exc})") \
            from None
    uop.flags.writeable = False
    return DecodedProgram(program, hw, order, steps, uop)


class _Unpickler(pickle.Unpickler):
    """Builds numpy values, slices, the ISA's enums and the functional simulator's
    functions; nothing else."""

    def find_class(self, module: str, name: str) -> Any:
        obj = None
        if module == "builtins" and name == "slice":
            obj = slice
        elif module.split(".")[0] == "numpy":
            found = getattr(np, name, None)
            if isinstance(found, np.ufunc):
                obj = found
            elif name in _NUMPY_BUILDERS:
                obj = super().find_class(module, name)
        elif module == functional.__name__:
            found = getattr(functional, name, None)
            if inspect.isfunction(found) and found.__module__ == module:
                obj = found
        elif module == isa.__name__:
            found = getattr(isa, name, None)
            if isinstance(found, type) and issubclass(found, enum.Enum):
                obj = found
        if obj is None:
            raise ProgramError(f"a decoded program names {module}.{name}: not a step's part")
        return obj
