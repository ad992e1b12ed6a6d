"""An exact fixed-point requantization on VTA's ALU: ``clip(round_half_even(x * m) + zp)``
bit for bit for every int32 accumulator ``x``, in one VTA pass, from the ALU's MIN, MAX, ADD
and SHR alone.

Why: :mod:`._fixed_point` rounds within one step of the exact result (about 7 % of the
elements one step off), which LayerNorm and softmax amplify: a transformer's output ends
up 3-14 steps from onnxruntime's where TVM's CPU build is 0-9 (``docs/deploy.md``). Exact
rounding needs the multiplier to about 24 significant bits and guard bits below the
accumulator's, which the fixed point's right shifts alone do not keep.

The program (``x`` the accumulator with the layer's bias, ``c0`` folded into the bias, ``f``
an odd factor of set bits ``b_j``)::

    add(bias + c0)  min(shift) max(shift1)  [save [shr(b_{j-1} - b_j) add(saved)]...]
    shr(-L)  add(c1)  save  [shr(e_{i+1} - e_i)  add(saved)] for i = d-1 .. 1
    shr(e1 + L)  clip(low, 127)

1. **clamp** ``x + c0`` to ``[lo, hi]``: beyond them the output saturates anyway, and the
   clamped value leaves room for the guard bits. The bounds (up to ~2^20) do not fit the
   ALU's 16-bit immediates: they are the two planes of the layer's ``shift`` input, the
   same for every channel;
2. **times the factor** ``f`` (1, or two or three set bits), exactly: left shifts and adds
   of a copy, from the top bit down. A product of two short multiplies reaches the 24
   bits with fewer digits than one long one (on ViT-small's, ConvNeXt-tiny's and
   ResNet-18's layers 40.2 ALU cycles an output vector on average against 45.5);
3. **shift left** by ``L`` guard bits (an SHR by ``-L``: VTA's ALU shifts left) and add
   ``c1`` (``0 <= c1 < f 2^L``, an immediate): the offset ``C = c0 f 2^L + c1`` carries the
   zero point and the rounding at the guard bits' resolution;
4. **multiply** by ``m' = sum 2^-e_i`` (``f m' ~ m``) with :mod:`._fixed_point`'s Horner
   steps (right shifts and adds of a second copy), then shift right by ``e1 + L``.

**Exact, checked rather than bounded.** Every step is monotone in ``x`` (min, max, add, an
arithmetic shift), so the output ``y(x)`` is. The exact result ``g(x)`` is a monotone step
function: it reaches level ``v`` at its breakpoint ``t_v``, the least ``x`` with
``round_half_even(x m) + zp >= v`` (``low < v <= 127``). So ``y == g`` for every ``x`` if and
only if ``y(t_v) >= v`` and ``y(t_v - 1) <= v - 1`` at each of the (at most 255)
breakpoints: :func:`exact_fixed_point` searches factors, digits, ``L`` and ``C`` and keeps
the design that passes with the fewest ALU cycles, computing those points in int64, the
ALU's 32-bit arithmetic being exact there (no intermediate reaches 2^31: checked). A tie
(``x m`` exactly half-way) is where ``t_v`` moves by one with the parity of ``v - zp``:
the check holds there too, or no design is found (a power-of-two multiplier, whose ties
alternate, has none: the caller rounds elsewhere).

Example:
    >>> f = exact_fixed_point(np.float32(4e-4), np.float32(0.03), zero_point=3, low=-128)
    >>> len(f.digits) > 3, f.guard_bits > 0
    (True, True)
    >>> x = np.arange(-40_000, 40_001)
    >>> from fractions import Fraction
    >>> m = Fraction(float(np.float32(4e-4))) / Fraction(float(np.float32(0.03)))
    >>> exact = np.clip([round(int(v) * m) + 3 for v in x], -128, 127)
    >>> bool((f.apply(x) == exact).all())
    True
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np

from vtatune.deploy.runtime._fixed_point import PRODUCT_BOUND, legal_digits, power_sums
from vtatune.workloads import SHIFTS, EpilogueOp

#: The most digits tried (each costs two ALU instructions; beyond them a layer takes the
#: caller's other rounding).
MAX_EXACT_DIGITS = 24
#: The most guard bits: ``c1 < 2^L`` stays within the ALU's 16-bit immediates.
MAX_GUARD_BITS = 15
#: The factors tried before the digits: 1, then every odd number below 2^11 of two or
#: three set bits (a design takes the one whose steps cost least).
FACTORS = (1, *(f for f in range(3, 1 << 11, 2) if bin(f).count("1") <= 3))
#: The largest immediate ``step``.
MAX_STEP = (1 << 15) - 1
#: No intermediate value may reach it (the ALU's int32).
LIMIT = 1 << 31
QMAX = 127


@dataclass(frozen=True)
class ExactFixedPoint:
    """``clip(round_half_even(x * multiplier) + zero_point, low, 127)`` exactly: ``digits``
    (``m' = sum 2^-e``), ``guard_bits`` ``L``, the offset ``C = offset * factor * 2^L +
    step`` (``offset`` into the bias, ``step`` an immediate), the clamp ``bounds`` of the
    biased accumulator ``x + offset`` (``lo``, ``hi``: the ``shift`` input's two planes)
    and ``factor``, an odd integer the clamped value is first multiplied by, exactly (left
    shifts and adds: a second, short multiply that makes the first one's digits fewer)."""

    multiplier: Fraction
    zero_point: int
    low: int
    digits: tuple[int, ...]
    guard_bits: int
    offset: int
    step: int
    bounds: tuple[int, int]
    factor: int = 1

    def ops(self) -> tuple[EpilogueOp, ...]:
        """The epilogue steps after the bias add and before the clip."""
        e, g = self.digits, self.guard_bits
        ops = [EpilogueOp("min", tensor=SHIFTS[0]), EpilogueOp("max", tensor=SHIFTS[1])]
        bits = _bits(self.factor)
        if len(bits) > 1:  # x * factor from the top bit down: shift left, add the copy
            ops.append(EpilogueOp("save"))
            for i in range(len(bits) - 1, 0, -1):
                ops += [EpilogueOp("shr", bits[i - 1] - bits[i]),
                        EpilogueOp("add", tensor="saved")]
        if g:
            ops.append(EpilogueOp("shr", -g))
        if self.step:
            ops.append(EpilogueOp("add", self.step))
        if len(e) > 1:
            ops.append(EpilogueOp("save"))
        for i in range(len(e) - 1, 0, -1):
            ops += [EpilogueOp("shr", e[i] - e[i - 1]), EpilogueOp("add", tensor="saved")]
        ops.append(EpilogueOp("shr", e[0] + g))
        return tuple(ops)

    def planes(self, channels: int) -> np.ndarray:
        """The ``shift`` input: (2, channels) int32, the clamp's ``hi`` then ``lo``."""
        lo, hi = self.bounds
        return np.array([[hi] * channels, [lo] * channels], np.int32)

    def apply(self, x: np.ndarray) -> np.ndarray:
        """The int8 outputs of accumulators ``x`` (bias included, not ``offset``), as the
        ALU computes them (the clip included)."""
        lo, hi = self.bounds
        u = np.clip(np.asarray(x, np.int64) + self.offset, lo, hi) * self.factor
        y = _horner((u << self.guard_bits) + self.step, self.digits, self.guard_bits)
        return np.clip(y, self.low, QMAX).astype(np.int8)

    def check_bias(self, bias: np.ndarray, reduction: int) -> bool:
        """Whether the bias add cannot overflow: ``reduction`` int8 products plus the
        largest ``|bias + offset|`` below 2^31."""
        worst = int(np.abs(np.asarray(bias, np.int64) + self.offset).max(initial=0))
        return reduction * PRODUCT_BOUND + worst < LIMIT

    def describe(self) -> str:
        times = f"x{self.factor} and " if self.factor > 1 else ""
        return (f"exactly ({times}{len(self.digits)} powers of two by shifts and adds, "
                f"{self.guard_bits} guard bits, clamped to [{self.bounds[0]}, "
                f"{self.bounds[1]}])")

    @property
    def alu_cycles(self) -> int:
        """What its steps cost an output vector (the timing model's 1 cycle an immediate
        step, 2 a tensor operand's), the bias add and the clip included."""
        return _cycles(self.factor, len(self.digits), bool(self.guard_bits), bool(self.step))


def _cycles(factor: int, digits: int, shifted: bool = True, stepped: bool = True) -> int:
    """bias 2 + clamp 4 + [copy 4 + 3 a further bit of the factor] + shift 1 + step 1 +
    [copy 4 + 3 a further digit] + shift 1 + clip 2."""
    bits = len(_bits(factor))
    return (2 + 4 + (4 + 3 * (bits - 1) if bits > 1 else 0) + shifted + stepped
            + (4 + 3 * (digits - 1) if digits > 1 else 0) + 1 + 2)


def _bits(n: int) -> tuple[int, ...]:
    """The positions of ``n``'s set bits, lowest first."""
    return tuple(i for i in range(n.bit_length()) if n >> i & 1)


def _horner(x: np.ndarray, digits: tuple[int, ...], guard_bits: int) -> np.ndarray:
    """``x * sum 2^-e`` by right shifts and adds from the smallest digit up, then the last
    shift by ``e1 + L`` (int64: the caller keeps every value within int32)."""
    r = x
    for i in range(len(digits) - 1, 0, -1):
        r = (r >> (digits[i] - digits[i - 1])) + x
    return r >> (digits[0] + guard_bits)


def rounding_breakpoints(multiplier: Fraction, zero_point: int, low: int) -> np.ndarray:
    """``t_v`` for ``v = low + 1 .. 127``: the least ``x`` whose exact result is ``>= v``
    (``round_half_even(x m) >= v - zp``: above ``(v - zp - 1/2) / m``, or at it when a
    tie rounds up, ``v - zp`` even)."""
    out = []
    for v in range(low + 1, QMAX + 1):
        w = v - zero_point
        q = (Fraction(w) - Fraction(1, 2)) / multiplier
        if q.denominator == 1:
            out.append(int(q) + (w % 2))  # a tie: rounded up (to w) only when w is even
        else:
            out.append(math.ceil(q))
    return np.array(out, np.int64)


@lru_cache(maxsize=4096)  # once per layer's values: every Requantization property asks
def exact_fixed_point(acc_scale: float, out_scale: float, zero_point: int, low: int
                      ) -> ExactFixedPoint | None:
    """The exact requantization of accumulators at ``acc_scale`` to int8 at ``out_scale``
    (float32 values: the multiplier is their exact quotient) whose steps cost the fewest
    ALU cycles, or None when no factor with at most :data:`MAX_EXACT_DIGITS` digits passes
    the check (a multiplier of 1 or more; one whose ties alternate, a power of two; one
    below about 2^-16, whose unsaturated accumulators span more than 2^24 and leave too few
    guard bits)."""
    m = Fraction(float(np.float32(acc_scale))) / Fraction(float(np.float32(out_scale)))
    zero_point, low = int(zero_point), int(low)
    if not 0 < m < 1:
        return None
    if low >= QMAX:  # a ReLU at the zero point 127: the output is 127 whatever x is
        return ExactFixedPoint(m, zero_point, low, (1,), 0, 0, 0, (0, 0))
    t = rounding_breakpoints(m, zero_point, low)
    levels = np.arange(low + 1, QMAX + 1, dtype=np.int64)
    lo_x, hi_x = int(t[0]) - 1, int(t[-1])  # beyond: saturated either way
    mf = float(m)
    # the exact result's margins at the breakpoints, in steps: a design's error there must
    # stay within [-above, below) (float64: a filter only, the integer check decides)
    above = t * mf + zero_point + 0.5 - levels
    below = levels - ((t - 1) * mf + zero_point + 0.5)
    best: ExactFixedPoint | None = None
    for factor in FACTORS:
        for d in range(1, MAX_EXACT_DIGITS + 1):
            if best is not None and _cycles(factor, d) >= best.alu_cycles:
                break
            design = _with_digits(m, zero_point, low, factor, d, t, levels, lo_x, hi_x,
                                  above, below)
            if design is not None:
                if best is None or design.alu_cycles < best.alu_cycles:
                    best = design
                break
    return best


def _with_digits(m: Fraction, zero_point: int, low: int, factor: int, d: int,
                 t: np.ndarray, levels: np.ndarray, lo_x: int, hi_x: int,
                 above: np.ndarray, below: np.ndarray) -> ExactFixedPoint | None:
    """The first design of ``factor`` and ``d`` digits (the most guard bits) that passes."""
    mf = float(m / factor)
    for digits in power_sums(mf, d):
        if len(digits) != d or not legal_digits(digits):
            continue
        slope = (sum(2.0 ** -e for e in digits) - mf) * factor
        if (above + t * slope).min() + (below - (t - 1) * slope).min() <= 0:
            continue  # no offset fits even without the truncations
        for g in range(min(MAX_GUARD_BITS, 31 - digits[0]), -1, -1):
            design = _fit(m, zero_point, low, digits, g, t, levels, lo_x, hi_x, factor)
            if design is not None:
                return design
    return None


def _fit(m: Fraction, zero_point: int, low: int, digits: tuple[int, ...], g: int,
         t: np.ndarray, levels: np.ndarray, lo_x: int, hi_x: int, factor: int = 1
         ) -> ExactFixedPoint | None:
    """The design of ``factor``, ``digits`` and ``g`` guard bits with an offset ``C`` that
    passes the breakpoint check (``y(t_v) >= v``, ``y(t_v - 1) <= v - 1``), None if no
    ``C`` does, none splits into a bias offset and an immediate step, or a value could
    overflow."""
    unit = factor << g  # what one unit of the bias is worth after the factor and shift
    at, before = t * unit, (t - 1) * unit
    span = factor << (digits[0] + g + 10)  # |C| <= unit (|zp| + 1) / m
    # the least C lifting every breakpoint to its level, the greatest keeping each one
    # below: each point's own binary search, all at once (y is monotone in C)
    c_min = _least(lambda c: _horner(at + c, digits, g) >= levels, len(t), -span, span)
    c_max = _least(lambda c: _horner(before + c, digits, g) > levels - 1, len(t),
                   -span, span) - 1
    lo_c, hi_c = int(c_min.max()), int(c_max.min())
    if lo_c > hi_c:
        return None
    c = (lo_c + hi_c) // 2
    if c % unit > MAX_STEP:  # the step must be an immediate: the interval's best such C
        c = lo_c if lo_c % unit <= MAX_STEP else lo_c + unit - lo_c % unit
        if c > hi_c:
            return None
    offset, step = divmod(c, unit)[0], c % unit
    bounds = (lo_x + offset, hi_x + offset)
    biggest = max(abs(bounds[0]), abs(bounds[1])) * unit + step
    if 2 * biggest + 2 >= LIMIT:  # Horner's sums stay below 2 |x| (distinct digits)
        return None
    return ExactFixedPoint(m, zero_point, low, digits, g, offset, step, bounds, factor)


def _least(holds, n: int, lo: int, hi: int) -> np.ndarray:
    """Per point, the least ``c`` in ``[lo, hi]`` where the monotone ``holds(c)`` is true
    (``hi + 1`` if none): a vectorized binary search."""
    a = np.full(n, lo, np.int64)
    b = np.full(n, hi + 1, np.int64)
    while (a < b).any():
        mid = (a + b) >> 1
        ok = holds(mid)
        b = np.where(ok & (a < b), mid, b)
        a = np.where(~ok & (a < b), mid + 1, a)
    return a
