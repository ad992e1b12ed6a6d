"""The epilogue of an operator: the elementwise steps VTA's ALU applies to the int32
accumulators of an output tile before the store casts them to int8.

An :class:`Epilogue` is an ordered tuple of :class:`EpilogueOp`, each one ALU instruction
(a ``clip`` is two: ``min`` then ``max``, or the other order when a schedule says
``clip_order="max_min"``), with an immediate or an extra input tensor:

- ``bias``: one int32 per output channel (and batch row), DMA-loaded into the accumulator
  buffer just before the first step that reads it (TVM's ``cache_read`` of the bias);
- ``residual``: int8 shaped like the output, loaded into the accumulators with the DMA's
  sign-extending int8 mode (TVM's ``MEM_ID_ACC_8BIT``);
- ``shift``: one int32 per output channel (and batch row), 0..31, the amount a ``shr``
  shifts that channel right by (a requantization whose per-channel multipliers are powers
  of two), loaded as the bias is, into its own accumulator area. A per-channel fixed-point
  requantization shifts by several: ``shift``, ``shift1``... (:data:`SHIFTS`, read in that
  order), the planes of one ``shift`` input of shape (planes, channels), each loaded into
  its own area. A ``min`` or ``max`` may read a plane too: a per-channel clamp whose bounds
  (any int32) exceed the ALU's 16-bit immediates; only a plane a ``shr`` reads is held to
  0..31 (:meth:`Epilogue.shift_amounts`).

And one that is no input: ``saved``, a copy of the accumulator tile in its own area of the
accumulator buffer (as large as the tile), written by a ``save`` step (three ALU
instructions on the copy's area: ``min 0``, ``max 0``, so it holds 0 whatever it held,
then an ``add`` of the tile) and read by ``add(saved)``: the second operand of a
fixed-point multiply from shifts and adds (VTA's ALU has no multiplier:
``vtatune.deploy.runtime._fixed_point``).

Two families are named:

- :data:`BENCHMARK` / :func:`benchmark`: the epilogue of TVM's VTA benchmarks and of
  ``tune_relay_vta.py``'s tuning template (``right_shift 8``, clip to [0, 127]), with a
  per-channel bias added after the shift under ``--bias``. vtatune's logs and the AutoTVM
  tasks are scored with it.
- :func:`deployed`: what ``relay.quantize`` fuses into every conv of a deployed network
  (``nn.conv2d + add + [nn.relu] + add + right_shift + clip + cast``): the bias first, then
  ReLU, the rounding ``2^(s-1)`` and the shift ``s``, then clip to [-127, 127]. Without a
  ReLU, Relay folds the rounding into the bias (one add).

Example:
    >>> deployed(shift=6, relu=True).describe()
    'add(bias) max(0) add(32) shr(6) clip(-127,127)'
    >>> import numpy as np
    >>> acc = np.array([[-300, 10_000, 40]], np.int32)
    >>> deployed(shift=6, relu=True).apply(acc, {"bias": np.array([[8, 8, 8]], np.int32)})
    array([[  0, 127,   1]], dtype=int8)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from vtatune.errors import WorkloadError

#: The ALU's operations an epilogue step may use (``clip`` is a min and a max). A ``shr``
#: by a negative immediate shifts left by its magnitude: VTA's ALU decodes it so (the
#: functional simulator shifts left by ``-imm``; the RTL, TensorAlu.scala, turns an SHR whose
#: immediate field is negative into its SHL), which is how TVM's VTA compiler lowers a
#: ``shift_left``. Only an immediate: the RTL shifts a register operand right by its low 5
#: bits whatever its sign, so a plane a ``shr`` reads holds 0..31.
OPS = ("add", "max", "min", "shr", "mul", "clip", "save")
#: The immediates a ``shr`` takes: -31..31 (negative: a left shift). The RTL shifts by the
#: low 5 bits of the amount (of its negation, to the left): 32 would shift by 0.
SHR_IMMEDIATES = range(-31, 32)
#: The extra inputs a step may read instead of an immediate, with the ops that may read each.
#: The per-channel shift planes an epilogue may read, in the order it reads them: plane ``j``
#: of the ``shift`` input (a fixed-point multiply's Horner gaps and final shift per channel,
#: or a per-channel clamp's bounds, read by ``min`` and ``max``).
SHIFTS = ("shift", *(f"shift{j}" for j in range(1, 8)))
TENSOR_OPS = {"bias": ("add", "mul"), "residual": ("add", "mul"),
              **{name: ("shr", "min", "max") for name in SHIFTS}, "saved": ("add",)}
#: The copy of the accumulator tile a ``save`` step writes (no input of the operator).
SAVED = "saved"
#: What an ALU instruction of a ``save`` step names as its tensor: it writes the copy's area
#: (an immediate, or the accumulator tile when it has none).
INTO_SAVED = "into_saved"
TENSORS = tuple(t for t in TENSOR_OPS if t != SAVED)
#: The extra inputs that hold one int32 per output channel and batch row (DMA-loaded into
#: the accumulator buffer beside the accumulator tile).
CHANNEL_TENSORS = ("bias", *SHIFTS)


@dataclass(frozen=True)
class EpilogueOp:
    """One step: ``op`` with an immediate ``imm`` (``clip``: ``imm`` is the low bound and
    ``hi`` the high one) or with the extra input ``tensor``; ``save`` takes neither (it
    copies the accumulators into the ``saved`` area)."""

    op: str
    imm: int | None = None
    tensor: str | None = None
    hi: int | None = None

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise WorkloadError(f"unknown epilogue op {self.op!r} (known: {', '.join(OPS)})")
        if self.tensor is not None:
            if self.op not in TENSOR_OPS.get(self.tensor, ()):
                legal = "; ".join(f"{' or '.join(ops)} of {t}" for t, ops in TENSOR_OPS.items())
                raise WorkloadError(f"epilogue op {self.op} cannot read tensor "
                                    f"{self.tensor!r} ({legal})")
            if self.imm is not None:
                raise WorkloadError("an epilogue op reads an immediate or a tensor, not both")
        elif self.op == "save":
            if self.imm is not None:
                raise WorkloadError("save takes no immediate: it copies the accumulators")
        elif not isinstance(self.imm, int) or isinstance(self.imm, bool):
            raise WorkloadError(f"epilogue op {self.op} needs an integer immediate, "
                                f"got {self.imm!r}")
        if self.op == "clip" and (self.hi is None or self.hi < self.imm):
            raise WorkloadError(f"clip needs a low bound <= its high bound, got "
                                f"{self.imm}, {self.hi}")
        if self.op == "shr" and self.imm is not None and self.imm not in SHR_IMMEDIATES:
            raise WorkloadError(f"shr by {self.imm}: a shift is -31..31 (negative: left)")

    def describe(self) -> str:
        if self.op == "clip":
            return f"clip({self.imm},{self.hi})"
        if self.op == "save":
            return "save"
        return f"{self.op}({self.tensor if self.tensor else self.imm})"

    def alu_steps(self, clip_order: str = "min_max") -> tuple[tuple[str, int | None, str | None],
                                                               ...]:
        """The ALU instructions of this step: ``(op, immediate, tensor)`` each."""
        if self.op == "save":  # the copy's area to 0 whatever it held, then + the tile
            return (("min", 0, INTO_SAVED), ("max", 0, INTO_SAVED), ("add", None, INTO_SAVED))
        if self.op != "clip":
            return ((self.op, self.imm, self.tensor),)
        lo, hi = ("max", self.imm, None), ("min", self.hi, None)
        return (hi, lo) if clip_order == "min_max" else (lo, hi)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in (("op", self.op), ("imm", self.imm), ("tensor", self.tensor),
                                  ("hi", self.hi)) if v is not None}


@dataclass(frozen=True)
class Epilogue:
    """The ordered steps applied to a tile's int32 accumulators before the int8 store."""

    ops: tuple[EpilogueOp, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.ops, tuple) or not all(isinstance(o, EpilogueOp)
                                                      for o in self.ops):
            raise WorkloadError("an epilogue is a tuple of EpilogueOp")

    def __hash__(self) -> int:
        # Hashed once: the lowering's caches key on the workload and the rule context, which
        # hold the epilogue, several times per schedule lowered.
        try:
            return self.__dict__["_hash"]
        except KeyError:
            h = self.__dict__["_hash"] = hash(self.ops)
            return h

    def __getstate__(self) -> dict[str, Any]:
        # Not the cached hash: another process hashes strings with another seed.
        return {k: v for k, v in vars(self).items() if k != "_hash"}

    @property
    def tensors(self) -> tuple[str, ...]:
        """The extra inputs it reads, in the order first read (not the ``saved`` copy)."""
        return tuple(dict.fromkeys(o.tensor for o in self.ops if o.tensor
                                   and o.tensor != SAVED))

    @property
    def saves(self) -> bool:
        """It keeps a copy of the accumulator tile (a ``save`` step): the accumulator
        buffer holds a second tile per thread."""
        return any(o.op == "save" for o in self.ops)

    @property
    def shift_planes(self) -> int:
        """How many per-channel shift planes it reads (``shift``, ``shift1``...: the
        ``shift`` input's planes; 0 when none). They are read in order, so the planes it
        reads are the first ones: an epilogue reading ``shift2`` before ``shift1`` is an
        error."""
        read = [t for t in self.tensors if t in SHIFTS]
        if read != list(SHIFTS[:len(read)]):
            raise WorkloadError(f"an epilogue reads the shift planes in order shift, shift1, "
                                f"...: got {', '.join(read)}")
        return len(read)

    @property
    def shift_amounts(self) -> tuple[str, ...]:
        """The shift planes a ``shr`` reads (its per-channel amounts, each 0..31), in the
        order first read; the other planes it reads are ``min``/``max`` bounds (any int32)."""
        return tuple(dict.fromkeys(o.tensor for o in self.ops
                                   if o.op == "shr" and o.tensor in SHIFTS))

    @property
    def bias(self) -> bool:
        """It reads a per-channel bias."""
        return "bias" in self.tensors

    @property
    def channel_tensors(self) -> tuple[str, ...]:
        """The per-channel inputs it reads (:data:`CHANNEL_TENSORS`), in the order first
        read: the order of their areas in the accumulator buffer."""
        return tuple(t for t in self.tensors if t in CHANNEL_TENSORS)

    @property
    def is_benchmark(self) -> bool:
        return self in (BENCHMARK, BENCHMARK_BIAS)

    def with_bias(self, bias: bool) -> Epilogue:
        """This epilogue as a run with the ``bias`` flag (``--bias``, a log record's
        ``bias``) has it: the benchmark epilogue gains its bias; any other epilogue names its
        own tensors and is returned as it is (a flag asking for a bias it lacks is an
        error)."""
        if self.is_benchmark:
            return BENCHMARK_BIAS if bias or self.bias else BENCHMARK
        if bias and not self.bias:
            raise WorkloadError(f"bias asked of an epilogue that reads none: {self.describe()}")
        return self

    def alu_steps(self, clip_order: str = "min_max") -> tuple[tuple[str, int | None,
                                                                    str | None], ...]:
        """Every ALU instruction, in order: ``(op, immediate, tensor)``."""
        return tuple(s for o in self.ops for s in o.alu_steps(clip_order))

    def describe(self) -> str:
        return " ".join(o.describe() for o in self.ops) or "none"

    def key(self) -> str:
        """The epilogue's part of a workload key: ``epi_`` and its steps."""
        return "epi_" + "_".join(
            o.op + (o.tensor or ("" if o.op == "save" else f"{o.imm}" if o.op != "clip"
                                 else f"{o.imm}to{o.hi}"))
            for o in self.ops).replace("-", "m")

    def to_list(self) -> list[dict[str, Any]]:
        return [o.to_dict() for o in self.ops]

    @classmethod
    def from_list(cls, data: Any) -> Epilogue:
        """The inverse of :meth:`to_list` (a log record's ``epilogue``)."""
        if not isinstance(data, list):
            raise WorkloadError(f"an epilogue is a list of steps, got {data!r}")
        try:
            return cls(tuple(EpilogueOp(**d) for d in data))
        except TypeError as exc:
            raise WorkloadError(f"bad epilogue step in {data!r}: {exc}") from None

    def apply(self, acc: np.ndarray, tensors: dict[str, np.ndarray] | None = None,
              clip_order: str = "min_max") -> np.ndarray:
        """The int8 result of the steps on int32 accumulators, as VTA's ALU computes them
        (32-bit wrapping adds and products, arithmetic shifts), then the store's int8
        truncation. ``tensors`` hold the extra inputs broadcastable to ``acc`` (a ``shift``
        plane a ``shr`` reads: 0..31). A ``shr`` by a negative immediate shifts left,
        wrapping."""
        x = acc.astype(np.int64)
        saved = np.zeros_like(x)
        for op, imm, name in self.alu_steps(clip_order):
            if name == INTO_SAVED:  # min 0, max 0: 0 whatever it held; add: the tile
                saved = _wrap32(saved + x) if op == "add" else \
                    (np.minimum if op == "min" else np.maximum)(saved, np.int64(imm))
                continue
            y = saved if name == SAVED else \
                np.asarray((tensors or {})[name], np.int64) if name else np.int64(imm)
            if op == "shr" and name in SHIFTS and (bad := shift_range_error(y)):
                raise WorkloadError(f"a shift is 0..31, got {bad}")
            if op == "add":
                x = _wrap32(x + y)
            elif op == "mul":
                x = _wrap32(x * y)
            elif op == "max":
                x = np.maximum(x, y)
            elif op == "min":
                x = np.minimum(x, y)
            elif name is None and imm < 0:  # shr by a negative immediate: left
                x = _wrap32(x << -imm)
            else:  # shr: arithmetic
                x = x >> y
        return (x & 0xFF).astype(np.uint8).view(np.int8)


def shift_range_error(amounts: np.ndarray) -> str | None:
    """``"lo..hi"`` when per-channel shift amounts (what a ``shr`` reads from a plane)
    leave 0..31, else None."""
    if amounts.size and not (0 <= amounts.min() and amounts.max() < 32):
        return f"{amounts.min()}..{amounts.max()}"
    return None


def _wrap32(x: np.ndarray) -> np.ndarray:
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


#: TVM's benchmark epilogue (``right_shift 8``, clip to [0, 127]); what AutoTVM tunes.
BENCHMARK = Epilogue((EpilogueOp("shr", 8), EpilogueOp("clip", 0, hi=127)))
#: The same with a per-channel bias added after the shift (``--bias``).
BENCHMARK_BIAS = Epilogue((EpilogueOp("shr", 8), EpilogueOp("add", tensor="bias"),
                           EpilogueOp("clip", 0, hi=127)))


def benchmark(bias: bool = False) -> Epilogue:
    """:data:`BENCHMARK` or :data:`BENCHMARK_BIAS`."""
    return BENCHMARK_BIAS if bias else BENCHMARK


def deployed(shift: int, relu: bool, clip: int = 127) -> Epilogue:
    """The epilogue ``relay.quantize`` fuses into a conv of a deployed network: the bias
    (per channel, BN folded), ReLU, round and shift right by ``shift``, clip to
    [-clip, clip]. Without a ReLU the rounding ``2^(shift-1)`` is folded into the bias (one
    add: Relay's SimplifyExpr), so the bias tensor then holds it."""
    ops = [EpilogueOp("add", tensor="bias")]
    if relu:
        ops.append(EpilogueOp("max", 0))
        if shift:
            ops.append(EpilogueOp("add", 1 << (shift - 1)))
    ops += [EpilogueOp("shr", shift), EpilogueOp("clip", -clip, hi=clip)]
    return Epilogue(tuple(ops))


#: The rounding shift of a deployed network's epilogues: a model's weights decide it (VTA's
#: deploy tutorial quantizes with ``global_scale`` 8.0: 8); counters and cycles do not
#: depend on it.
DEPLOYED_SHIFT = 8


def named_epilogues() -> dict[str, Epilogue]:
    """The epilogues the command line names (``--epilogue``): ``benchmark`` (the workload's
    own default, ``--bias`` adds the bias), ``deployed`` and ``deployed-relu`` (what a conv
    of a deployed network fuses: :func:`deployed` with :data:`DEPLOYED_SHIFT`)."""
    return {"benchmark": BENCHMARK, "deployed": deployed(DEPLOYED_SHIFT, relu=False),
            "deployed-relu": deployed(DEPLOYED_SHIFT, relu=True)}


def epilogue_name(epilogue: Epilogue) -> str | None:
    """The name :func:`named_epilogues` gives ``epilogue`` (the benchmark epilogue with its
    bias: ``benchmark``), or None."""
    if epilogue.is_benchmark:
        return "benchmark"
    return next((n for n, e in named_epilogues().items() if e == epilogue), None)


#: The residual add of a deployed network (``cast + add + nn.relu + clip + cast``): ReLU and
#: clip to [-127, 127] after the add (:class:`~vtatune.workloads.AddWorkload`'s default).
RESIDUAL = Epilogue((EpilogueOp("max", 0), EpilogueOp("clip", -127, hi=127)))
