"""A fixed-point requantization on VTA's ALU: ``round(x * m) + zero_point`` for a multiplier
``m`` that is no power of two, from shifts and adds only (the Chisel and HLS ALUs have MIN,
MAX, ADD and SHR; no multiplier, no negation), in one VTA pass.

The multiplier is approximated by a sum of ``d`` powers of two, ``m' = 2^-e1 + ... +
2^-ed`` (``e1 < ... < ed``: the *digits*), and ``x * m'`` is computed by Horner's rule
from the smallest digit up, right shifts only, on the accumulators ``x`` and a copy of them
(the epilogue's ``save`` and ``add(saved)``)::

    add(bias)  save  [shr(e_{i+1} - e_i)  add(saved)] for i = d-1 .. 1  shr(e1)  clip

The rounding and the zero point cost nothing: an integer ``c`` with ``c * m'`` close to
``zero_point + 1/2`` is folded into the bias (the copy holds it too, so the sum carries
``c * m'``), and the last ``shr`` floors. So ``d`` digits cost ``2d + 2`` ALU instructions
(``save`` is three) beside the bias add and the clip that every requantization has.

**Per channel** (per-channel weight scales: a multiplier ``m_c`` per output channel) the
same program runs with every shift a per-channel operand (:class:`ChannelFixedPoint`): each
channel gets its own design, all with the same digit count ``d`` (the most any channel
needs), the gaps and the last shift read from the planes of the ``shift`` input (``shr(
shift) add(saved) shr(shift1) ... shr(shift{d-1})``) and each channel's ``c`` folded into
its own bias. A channel needing fewer digits splits its smallest one, ``2^-e = 2^-(e+1) +
2^-(e+1)`` (a gap of 0: the Horner step just adds), or takes a closer sum of ``d`` distinct
digits, whichever bound is smaller; the bound below holds digit by digit for each channel.

**The bound.** Let ``x0`` be the accumulator with the layer's bias, ``x = x0 + c`` what the
ALU starts from, ``r_d = x`` and ``r_i = floor(r_{i+1} / 2^(e_{i+1}-e_i)) + x`` (digits
``e1 <= ... <= ed``, only the last two ever equal: a split). Then ``r_i = x * S_i -
delta_i`` with ``S_i = sum_{j>=i} 2^(e_i-e_j) <= 2`` (``< 2`` unless the last two are
equal) and ``delta_i = delta_{i+1} / 2^(e_{i+1}-e_i) + f_i``, ``0 <= f_i < 1`` (``f_i =
0`` for a gap of 0), so ``0 <= delta_1 < D = sum_{i<d} 2^(e1-e_i)`` (``D < 2``: distinct
powers). The output before the clip is ``y = floor(r_1 / 2^e1) =
floor(x0 m + zp + 1/2 + E)`` with::

    E = x0 (m' - m) + (c m' - zp - 1/2 - D / 2^(e1+1)) + (D / 2^(e1+1) - delta_1 / 2^e1)

where ``c`` is chosen to centre the truncation: the second term is at most ``m' / 2`` in
size and the third at most ``D / 2^(e1+1)``. For ``|x0| <= X = ceil((max(127 - zp, 128 +
zp) + 1) / m)``, ``|E| <= B = X |m' - m| + |c m' - zp - 1/2 - D/2^(e1+1)| + D /
2^(e1+1)``, and the digits are the fewest with ``B < 1``. Then ``y`` is within one step of
``round(x0 m) + zp`` whichever way a tie rounds: with ``u = x0 m + zp + 1/2``, ``y =
floor(u + E)`` lies in ``{floor(u) - 1, floor(u), floor(u) + 1}`` and is ``floor(u) - 1``
or ``floor(u)`` when ``u`` is an integer (a tie, rounded to ``u - 1`` or ``u``). The clip
is monotone and 1-Lipschitz, so the int8 outputs are within one step too. Beyond ``X``
both saturate: ``y`` is monotone in ``x0`` (floors and adds of monotone terms), ``y(X) >=
127`` and ``y(-X) <= -128`` by the bound at ``+-X``. Nothing overflows int32 while ``|x| <
2^30`` (``-2|x| - 2 < r_i <= 2|x|``): :meth:`FixedPoint.check_bias` checks it of the
layer's bias with ``reduction`` products of int8 values (``|acc| <= reduction * 2^14``).
A bias rescaled to the accumulator's units (at another scale in the model) is off by up to
half a unit, ``m / 2`` steps more: ``Requantization`` lowers the tolerance by it.

Example:
    >>> f = fixed_point(0.00492607, zero_point=3)
    >>> f.digits, [o.describe() for o in f.ops()], f.offset
    ((8, 10, 15), ['save', 'shr(5)', 'add(saved)', 'shr(2)', 'add(saved)', 'shr(8)'], 713)
    >>> round(f.bound, 3) < 1
    True
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from vtatune.workloads import SHIFTS, EpilogueOp

#: The most digits tried: beyond them the byte passes are cheaper than the ALU work.
MAX_DIGITS = 8
#: The bound every element meets: within one step of the exact rounding (``|E| < 1``).
TOLERANCE = 1.0
#: The largest accumulator (bias and rounding included) the Horner sums cannot overflow.
MAX_ACCUMULATOR = (1 << 30) - 1
#: int8 products: ``|acc| <= reduction * PRODUCT_BOUND``.
PRODUCT_BOUND = 128 * 128


@dataclass(frozen=True)
class FixedPoint:
    """``round(x * multiplier) + zero_point`` as :data:`digits` (``x * sum 2^-e``) and an
    ``offset`` added to the accumulators (the bias's part: rounding and zero point);
    ``bound``: the proven largest ``|E|`` (the module's docstring), below 1."""

    multiplier: float
    zero_point: int
    digits: tuple[int, ...]
    offset: int
    bound: float

    @property
    def approximation(self) -> float:
        """``m'``, the sum of the digits' powers of two."""
        return sum(2.0 ** -e for e in self.digits)

    def ops(self) -> tuple[EpilogueOp, ...]:
        """The epilogue steps after the bias add and before the clip."""
        e = self.digits
        ops: list[EpilogueOp] = [EpilogueOp("save")] if len(e) > 1 else []
        for i in range(len(e) - 1, 0, -1):
            ops += [EpilogueOp("shr", e[i] - e[i - 1]), EpilogueOp("add", tensor="saved")]
        ops.append(EpilogueOp("shr", e[0]))
        return tuple(ops)

    def check_bias(self, bias: np.ndarray, reduction: int) -> bool:
        """Whether no sum overflows: ``reduction * 2^14 + |bias + offset| < 2^30``."""
        worst = int(np.abs(np.asarray(bias, np.int64)).max(initial=0)) + abs(self.offset)
        return reduction * PRODUCT_BOUND + worst <= MAX_ACCUMULATOR


def _range(multiplier: float, zero_point: int) -> int:
    """``X``: the largest ``|x0|`` whose output can be unsaturated."""
    return math.ceil((max(127 - zero_point, 128 + zero_point) + 1) / multiplier)


def power_sums(m: float, d: int) -> list[tuple[int, ...]]:
    """Sums of at most ``d`` powers of two near ``m``: the greedy expansion (each digit the
    largest power not above what is left), stopped after each digit or ended there by the
    power just above what is left (the sum then exceeds ``m``)."""
    out, digits, left = [], [], m
    for _ in range(d):
        if left <= 0:
            break
        e = -math.floor(math.log2(left))
        if len(digits) < d and (not digits or e - 1 > digits[-1]):
            out.append((*digits, e - 1))  # the power just above: the sum passes m
        digits.append(e)
        left = m - sum(2.0 ** -x for x in digits)
        out.append(tuple(digits))
    return [c for c in out if len(c) <= d and all(b > a for a, b in pairwise(c))]


def _design(m: float, zero_point: int, digits: tuple[int, ...]) -> FixedPoint:
    approx = sum(2.0 ** -e for e in digits)
    e1 = digits[0]
    spread = sum(2.0 ** (e1 - e) for e in digits[:-1])  # D
    centre = spread / 2 ** (e1 + 1)
    offset = round((zero_point + 0.5 + centre) / approx)
    bound = (_range(m, zero_point) * abs(approx - m)
             + abs(offset * approx - zero_point - 0.5 - centre) + centre)
    return FixedPoint(m, zero_point, digits, offset, bound)


def fixed_point(multiplier: float, zero_point: int, tolerance: float = TOLERANCE
                ) -> FixedPoint | None:
    """The fixed-point requantization with the fewest digits whose bound is below
    ``tolerance`` (the closest such among them), or None when none of at most
    :data:`MAX_DIGITS` digits, each a right shift of 0..31, meets it (a multiplier of 1 or
    more has no right shift to round with; near 1, the last shift leaves too few guard
    bits)."""
    if not 0 < multiplier < 1:
        return None
    for d in range(1, MAX_DIGITS + 1):
        designs = [_design(multiplier, zero_point, c) for c in power_sums(multiplier, d)
                   if c[0] <= 31 and all(0 < b - a <= 31 for a, b in pairwise(c))]
        fits = [f for f in designs if f.bound < tolerance and len(f.digits) == d]
        if fits:
            return min(fits, key=lambda f: f.bound)
    return None


@dataclass(frozen=True)
class ChannelFixedPoint:
    """A fixed-point requantization per output channel: each channel's :class:`FixedPoint`
    (``channels``), all with the same number of digits, the shifts per-channel operands
    (:meth:`shifts`, the planes of the ``shift`` input) and the offsets in the bias."""

    channels: tuple[FixedPoint, ...]

    @property
    def digits(self) -> int:
        return len(self.channels[0].digits)

    @property
    def bound(self) -> float:
        """The largest channel's bound."""
        return max(f.bound for f in self.channels)

    @property
    def offsets(self) -> np.ndarray:
        return np.array([f.offset for f in self.channels], np.int64)

    def ops(self) -> tuple[EpilogueOp, ...]:
        """The epilogue steps after the bias add and before the clip: the Horner steps of
        :meth:`FixedPoint.ops` with shift plane ``j`` in place of the ``j``-th shift."""
        d = self.digits
        ops: list[EpilogueOp] = [EpilogueOp("save")] if d > 1 else []
        for j in range(d - 1):
            ops += [EpilogueOp("shr", tensor=SHIFTS[j]), EpilogueOp("add", tensor="saved")]
        ops.append(EpilogueOp("shr", tensor=SHIFTS[d - 1]))
        return tuple(ops)

    def shifts(self) -> np.ndarray:
        """(d, channels) int32: plane ``j`` holds each channel's ``j``-th shift (the Horner
        gaps from the smallest digit up, then the largest digit's)."""
        rows = [[e[i] - e[i - 1] for i in range(len(e) - 1, 0, -1)] + [e[0]]
                for e in (f.digits for f in self.channels)]
        return np.array(rows, np.int32).T.copy()

    def check_bias(self, bias: np.ndarray, reduction: int) -> bool:
        """Whether no sum overflows in any channel (:meth:`FixedPoint.check_bias`)."""
        bias = np.asarray(bias, np.int64)
        worst = np.abs(bias[..., :len(self.channels)] + self.offsets).max(initial=0)
        return reduction * PRODUCT_BOUND + int(worst) <= MAX_ACCUMULATOR


def legal_digits(digits: tuple[int, ...]) -> bool:
    """Every shift an ALU immediate's 0..31."""
    return digits[0] <= 31 and all(0 <= b - a <= 31 for a, b in pairwise(digits))


def _with_digits(f: FixedPoint, d: int, tolerance: float) -> FixedPoint | None:
    """``f``'s multiplier with exactly ``d`` digits and a bound below ``tolerance``: the
    best of the sums of ``d`` distinct digits and ``f``'s smallest digit split until it has
    ``d`` (a split keeps ``m'``: only the truncations change)."""
    digits = f.digits
    while len(digits) < d:
        digits = (*digits[:-1], digits[-1] + 1, digits[-1] + 1)
    options = [c for c in power_sums(f.multiplier, d) if len(c) == d] + [digits]
    fits = [g for g in (_design(f.multiplier, f.zero_point, c) for c in options if legal_digits(c))
            if g.bound < tolerance]
    return min(fits, key=lambda g: g.bound) if fits else None


def channel_fixed_point(multipliers: np.ndarray | tuple[float, ...], zero_point: int,
                        tolerance: float = TOLERANCE) -> ChannelFixedPoint | None:
    """The per-channel fixed-point requantization: each channel's :func:`fixed_point` at
    the largest digit count any needs, or None when some channel has none (or cannot have
    that many digits within ``tolerance``)."""
    each = [fixed_point(float(m), zero_point, tolerance) for m in multipliers]
    if not each or any(f is None for f in each):
        return None
    d = max(len(f.digits) for f in each)  # type: ignore[union-attr]
    padded = [_with_digits(f, d, tolerance) for f in each]  # type: ignore[arg-type]
    if any(f is None for f in padded):
        return None
    return ChannelFixedPoint(tuple(padded))  # type: ignore[arg-type]
