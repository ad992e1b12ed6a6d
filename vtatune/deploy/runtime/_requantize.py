"""Requantization: how an offloaded layer's int32 accumulators become the int8 tensor the
QDQ model quantizes them to, on VTA where its ALU can and on the CPU where it cannot.

A QDQ layer computes ``q = clip(round(f / out_scale) + zero_point)`` of the float value
``f = acc * acc_scale`` (``acc_scale`` = input scale x weight scale, the int32 bias's own
scale). The requantization multiplier is ``acc_scale / out_scale``:

- **a power of two** ``2^-k`` (k >= 0): VTA's ALU does it, fused into the layer's epilogue
  (:class:`vtatune.workloads.Epilogue`, the one implementation VTA's epilogues have):
  ``add(bias + 2^(k-1))  shr(k)  [add(zero_point)]  clip(low, 127)``, ReLU being the clip's
  low bound ``max(zero_point, -128)``. The rounding is half up where ``R.quantize`` rounds
  half to even, so an exact tie (``acc mod 2^k == 2^(k-1)``) can come out one step higher:
  within one quantization step, rarely (VTA's ALU has no and/or to round ties to even
  within one chain of immediate steps). An ALU-only add has no bias tensor: its rounding
  constant is an immediate. Rounded exactly (``exact``, a GEMM layer, ``1 <= k <= 15``:
  :attr:`Requantization.even_shift`) the tie goes to even as a sum of two floors over a
  copy of the tile: ``add(bias + 2^(k-1)) save shr(k+1) shr(-k-1) add(saved) add(2^k - 1)
  shr(k+1) [add(zero_point)] clip(low, 127)``.
- **anything else, per tensor**: VTA's ALU multiplies by a sum of powers of two close
  enough that every element is within one step of the exact rounding, from shifts and adds
  on the accumulators and a copy of them (:mod:`vtatune.deploy.runtime._fixed_point`:
  the design and its proof), the rounding and the zero point folded into the bias: one
  pass, ``add(bias) save [shr(k) add(saved)]... shr(e) clip(low, 127)``.
- **per channel**, multipliers that are not all powers of two: the same fixed point with
  each channel's digits, its shifts per-channel operands (the ``shift`` input's planes) and
  its rounding and zero point in its own bias: one pass, ``add(bias) save [shr(shift)
  add(saved)]... shr(shift{d-1}) clip(low, 127)``.
- **exactly**, per tensor, with ``exact`` (``True``, or :data:`IN_PASS`: what deploy does
  for a model that normalizes): the exact fixed point, ``clip(round_half_even(x m) + zp)``
  bit for bit in one pass: the biased accumulators clamped by the ``shift`` input's two
  planes, shifted left by guard bits, multiplied by a sum of powers of two of about 24
  significant bits (:mod:`vtatune.deploy.runtime._exact_fixed_point`: the design and its
  check). Where it has no design (per-channel multipliers, a power of two whose ties
  alternate, an ALU-only add), :data:`IN_PASS` rounds as without ``exact`` and ``True``
  as below.
- with ``exact=True`` where VTA cannot round exactly, or when the fixed point cannot bound
  its error (a multiplier near 1, an unknown reduction):
  VTA cannot multiply by it (the HLS and Chisel ALUs have no MUL), and it
  stores int8 only, so it hands the accumulators to the CPU byte by byte: the same program
  runs :attr:`Requantization.planes` times, pass ``j`` storing byte ``j`` of
  ``acc + bias`` (``shr(8j)``, the store keeps the low 8 bits) and the last one the rest,
  saturated (``clip(-128, 127)``), with just enough passes that a saturated top byte means
  a saturated output. The CPU reassembles the accumulators and requantizes them in float32
  as TVM's legalized ``R.quantize`` does (true division, round half to even).

Example:
    >>> r = Requantization(acc_scale=2.0**-12, out_scale=2.0**-5, zero_point=0, relu=True)
    >>> r.shift, r.epilogues(bias=True)[0].describe()
    (7, 'add(bias) shr(7) clip(0,127)')
    >>> import numpy as np
    >>> r.fused_bias(np.array([1, -1], np.int32)).tolist()  # the rounding 2^6 folded in
    [65, 63]
    >>> s = Requantization(acc_scale=4e-4, out_scale=0.03, zero_point=3, relu=False,
    ...                    exact=True)
    >>> s.shift is None, s.planes, [e.describe() for e in s.epilogues(bias=True)]
    (True, 2, ['add(bias)', 'add(bias) shr(8) clip(-128,127)'])
    >>> acc = np.array([-40_000, -300, 0, 299, 301, 40_000], np.int64)
    >>> planes = [e.apply(acc, {"bias": np.int64(0)}) for e in s.epilogues(bias=True)]
    >>> s.finish(planes).tolist()  # round(acc * 4e-4 / 0.03) + 3, saturated
    [-128, -1, 3, 7, 7, 127]
    >>> f = Requantization(acc_scale=4e-4, out_scale=0.03, zero_point=3, relu=False,
    ...                    reduction=576)
    >>> f.planes, f.fixed_point.digits  # x0.01333 ~ 2^-7 + 2^-8 + 2^-10 + 2^-11 + 2^-13
    (1, (7, 8, 10, 11, 13))
    >>> f.epilogues(bias=True)[0].describe()[:48]
    'add(bias) save shr(2) add(saved) shr(1) add(save'
    >>> f.epilogues(bias=True)[0].apply(acc, {"bias": f.fused_bias(np.int64(0))}).tolist()
    [-128, -1, 3, 7, 7, 127]
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from vtatune.deploy.runtime._errors import DeployError
from vtatune.deploy.runtime._exact_fixed_point import ExactFixedPoint, exact_fixed_point
from vtatune.deploy.runtime._fixed_point import (
    MAX_ACCUMULATOR,
    PRODUCT_BOUND,
    TOLERANCE,
    ChannelFixedPoint,
    FixedPoint,
    channel_fixed_point,
    fixed_point,
)
from vtatune.workloads import Epilogue, EpilogueOp

#: The ALU's shift immediates: 0..31.
MAX_SHIFT = 31
#: int8
QMIN, QMAX = -128, 127
#: Passes that cover every int32 accumulator (the top byte then never saturates).
MAX_PLANES = 4
#: The largest shift rounded to even on VTA (its ``2^k - 1`` step an ALU immediate).
MAX_EVEN_SHIFT = 15
#: ``exact``: round exactly where VTA can within its one pass (the exact fixed point), and
#: within a step elsewhere (never the CPU's byte passes): deploy's default for a model that
#: normalizes (LayerNorm, softmax), which amplifies a step.
IN_PASS = "in-pass"


@dataclass(frozen=True)
class Requantization:
    """The requantization of one offloaded layer: accumulators at ``acc_scale`` to int8 at
    ``out_scale`` with ``zero_point``, a ReLU before it when ``relu`` (scales are float32
    values, as the model stores them). ``rounding``: where the fused rounding constant goes,
    ``bias`` (a GEMM layer's bias tensor) or ``imm`` (an ALU-only add: an immediate).
    ``exact``: round exactly: VTA's exact fixed point where it has one, else the CPU (even
    a power-of-two multiplier, rounding ties to even as TVM does, at the price of the
    accumulator's passes), except a shift of 0 (no rounding); :data:`IN_PASS`: the exact
    fixed point where it has one, else as without ``exact``. ``offset``: an integer the
    accumulators take before anything else (an add's zero points, ``-(za + zr)``, as an
    immediate). ``channel_scales``: the accumulator's
    scale per output channel (per-channel weight scales; ``acc_scale`` is the first): VTA
    computes the integer core and the CPU requantizes each channel by its own multiplier.
    ``reduction``: the int8 products each accumulator sums (a conv's input channels per group
    x kernel, a dense's K), which bounds it; 0 when unknown (no fixed point then)."""

    acc_scale: float
    out_scale: float
    zero_point: int
    relu: bool
    rounding: str = "bias"
    exact: bool | str = False
    offset: int = 0
    channel_scales: tuple[float, ...] | None = None
    #: What a bias rescaled to accumulator units lost in the rounding, per channel, in real
    #: units: the CPU adds it back after scaling (a fused requantization cannot).
    channel_residuals: tuple[float, ...] | None = None
    reduction: int = 0
    #: The layer's output is its accumulators as float32 (``acc * acc_scale``), not an int8
    #: tensor: a dynamically quantized model's MatMulInteger / ConvInteger (``_dynamic``).
    float_output: bool = False
    #: The largest ``|acc|`` the layer can reach (from its weights; 0: unknown): how many
    #: accumulator bytes a float output needs.
    acc_bound: int = 0

    @property
    def shift(self) -> int | None:
        """``k`` when the multiplier is ``2^-k`` with ``0 <= k <= 31`` (VTA requantizes;
        with ``exact``, only ``k = 0``), else None (the CPU does)."""
        if self.channel_scales is not None or self.float_output:
            return None  # per channel: channel_shifts; a float output: the CPU's
        if self.even_shift is not None:  # an exact fixed point's multiplier has no shift
            return None
        return self._shift(self.acc_scale)

    @property
    def even_shift(self) -> int | None:
        """``k`` when the multiplier is ``2^-k`` (``1 <= k <= 15``: the step an immediate),
        per tensor, to be rounded exactly (``exact``): VTA rounds ties to even as exact
        arithmetic does, as a sum of two floors (``round_half_even(x / 2^k) = floor((x +
        2^(k-1)) / 2^(k+1)) + floor((x + 3 2^(k-1) - 1) / 2^(k+1))``); else None."""
        if (not self.exact or self.channel_scales is not None or self.float_output
                or self.rounding != "bias"  # an ALU-only add keeps no copy of its tile
                or self.reduction * PRODUCT_BOUND > MAX_ACCUMULATOR // 2):
            return None
        k = self._power(self.acc_scale)
        return k if k is not None and 1 <= k <= MAX_EVEN_SHIFT else None

    def _shift(self, acc_scale: float) -> int | None:
        """``k`` when ``acc_scale / out_scale`` is ``2^-k``, ``0 <= k <= 31`` (not with
        ``exact=True`` unless 0), else None."""
        k = self._power(acc_scale)
        if k is None or (self.exact is True and k):
            return None
        return k

    def _power(self, acc_scale: float) -> int | None:
        """``k`` when ``acc_scale / out_scale`` is ``2^-k``, ``0 <= k <= 31``, else None."""
        m_acc, e_acc = np.frexp(np.float32(acc_scale))
        m_out, e_out = np.frexp(np.float32(self.out_scale))
        k = int(e_out) - int(e_acc)
        return k if m_acc == m_out and 0 <= k <= MAX_SHIFT else None

    @property
    def channel_shifts(self) -> tuple[int, ...] | None:
        """Per-channel scales whose every multiplier is a power of two ``2^-k_c``: the
        ``k_c`` (VTA requantizes, shifting each channel by its own amount: the epilogue's
        ``shr(shift)`` reads them as a per-channel tensor); else None (the CPU does)."""
        if self.channel_scales is None or self.rounding != "bias" or self.float_output:
            return None
        shifts = tuple(self._shift(s) for s in self.channel_scales)
        return None if any(k is None for k in shifts) else shifts  # type: ignore[return-value]

    @property
    def fixed_point(self) -> FixedPoint | None:
        """The fixed-point multiply VTA runs when the multiplier is no power of two (per
        tensor, a GEMM layer's bias to fold the rounding into, not ``exact``, and the
        accumulators bounded: ``reduction``); else None."""
        if (self.exact is True or self.float_output or self.channel_scales is not None
                or self.rounding != "bias" or self.shift is not None or not self.reduction
                or self.reduction * PRODUCT_BOUND > MAX_ACCUMULATOR
                or self.exact_fixed_point is not None or self.even_shift is not None):
            return None
        # a bias rescaled to accumulator units loses up to half a unit, which the fixed
        # point cannot add back: the bound leaves it room
        lost = max((abs(v) for v in self.channel_residuals or ()), default=0.0)
        return _fixed_point(float(self.multipliers[0]), self.zero_point,
                            TOLERANCE - lost / float(np.float32(self.out_scale)))

    @property
    def channel_fixed_point(self) -> ChannelFixedPoint | None:
        """The fixed-point multiply per channel VTA runs when the per-channel multipliers
        are not all powers of two (as :attr:`fixed_point`, each channel's digits); else
        None."""
        if (self.exact is True or self.channel_scales is None or self.rounding != "bias"
                or self.channel_shifts is not None or not self.reduction
                or self.reduction * PRODUCT_BOUND > MAX_ACCUMULATOR):
            return None
        lost = max((abs(v) for v in self.channel_residuals or ()), default=0.0)
        return _channel_fixed_point(tuple(self.multipliers.tolist()), self.zero_point,
                                    TOLERANCE - lost / float(np.float32(self.out_scale)))

    @property
    def exact_fixed_point(self) -> ExactFixedPoint | None:
        """The exact requantization VTA runs in its one pass (with ``exact``, per tensor, a
        GEMM layer's bias to fold the offset into, the accumulators bounded and a design
        found: :func:`~vtatune.deploy.runtime.exact_fixed_point`); else None."""
        if (not self.exact or self.float_output or self.channel_scales is not None
                or self._power(self.acc_scale) is not None
                or self.rounding != "bias" or not self.reduction
                or self.reduction * PRODUCT_BOUND > MAX_ACCUMULATOR
                or self.channel_residuals and any(self.channel_residuals)):
            return None  # a rescaled bias's lost fraction: only the CPU adds it back
        return exact_fixed_point(self.acc_scale, self.out_scale, self.zero_point, self.low)

    def shift_input(self, channels: int) -> np.ndarray | None:
        """The ``shift`` input the pass reads for ``channels`` output channels:
        :attr:`shift_values`, or the exact fixed point's clamp planes (2, channels)."""
        exact = self.exact_fixed_point
        return exact.planes(channels) if exact is not None else self.shift_values

    @property
    def shift_values(self) -> np.ndarray | None:
        """The per-channel ``shift`` input the pass reads: :attr:`channel_shifts` (one per
        channel), the per-channel fixed point's planes ((digits, channels); one plane: one
        per channel), or None."""
        if self.channel_shifts is not None:
            return np.asarray(self.channel_shifts, np.int32)
        fixed = self.channel_fixed_point
        if fixed is None:
            return None
        planes = fixed.shifts()
        return planes[0] if len(planes) == 1 else planes

    @property
    def multiplier(self) -> float:
        """The (smallest, per channel) requantization multiplier."""
        return float(self.multipliers.min())

    @property
    def multipliers(self) -> np.ndarray:
        """The multiplier of each output channel (one value when per tensor)."""
        scales = np.asarray(self.channel_scales if self.channel_scales is not None
                            else [self.acc_scale], np.float32)
        return scales.astype(np.float64) / float(np.float32(self.out_scale))

    @property
    def on_vta(self) -> bool:
        return (self.shift is not None or self.channel_shifts is not None
                or self.fixed_point is not None or self.channel_fixed_point is not None
                or self.exact_fixed_point is not None or self.even_shift is not None)

    @property
    def low(self) -> int:
        """The clip's low bound: a ReLU keeps values at or above the zero point."""
        return max(self.zero_point, QMIN) if self.relu else QMIN

    @property
    def planes(self) -> int:
        """VTA passes: 1 when VTA requantizes; else the accumulator bytes the CPU needs,
        the fewest whose saturated top byte (``|acc| >= 127 * 2^(8(n-1))``) saturates
        the output too (``|acc| * multiplier >= 256``)."""
        if self.on_vta:
            return 1
        if self.float_output:  # every byte of the accumulator: the top one signed, unclipped
            n = 1
            while n < MAX_PLANES and (not self.acc_bound or self.acc_bound >= 1 << 8 * n - 1):
                n += 1
            return n
        n = 1
        while n < MAX_PLANES and (1 << 8 * (n - 1)) * 127 * self.multiplier < 256:
            n += 1
        return n

    def epilogues(self, bias: bool) -> tuple[Epilogue, ...]:
        """The epilogue of each VTA pass (one when VTA requantizes), reading a per-channel
        ``bias`` tensor when the layer has one (with :meth:`fused_bias` when fused). The
        one decision of how a layer requantizes: deploy builds these programs, and
        ``network`` counts them (``len``: the VTA passes)."""
        add_bias = (EpilogueOp("add", tensor="bias"),) if bias else ()
        if self.offset:
            add_bias += (EpilogueOp("add", self.offset),)
        fixed = self.exact_fixed_point or self.fixed_point or self.channel_fixed_point
        if fixed is not None:  # the rounding and the zero point: in the bias
            return (Epilogue((*add_bias, *fixed.ops(), EpilogueOp("clip", self.low, hi=QMAX))),)
        k = self.even_shift
        if k is not None:  # two floors (see even_shift): the first's 2^(k-1) in the bias
            ops = [*add_bias, EpilogueOp("save"), EpilogueOp("shr", k + 1),
                   EpilogueOp("shr", -k - 1),
                    EpilogueOp("add", tensor="saved"), EpilogueOp("add", (1 << k) - 1),
                    EpilogueOp("shr", k + 1)]
            if self.zero_point:
                ops.append(EpilogueOp("add", self.zero_point))
            ops.append(EpilogueOp("clip", self.low, hi=QMAX))
            return (Epilogue(tuple(ops)),)
        if self.channel_shifts is not None:  # the rounding per channel: in the bias
            ops = [*add_bias, EpilogueOp("shr", tensor="shift")]
            if self.zero_point:
                ops.append(EpilogueOp("add", self.zero_point))
            ops.append(EpilogueOp("clip", self.low, hi=QMAX))
            return (Epilogue(tuple(ops)),)
        k = self.shift
        if k is not None:
            ops = list(add_bias)
            if k and self.rounding == "imm":
                ops.append(EpilogueOp("add", 1 << (k - 1)))
            if k:
                ops.append(EpilogueOp("shr", k))
            if self.zero_point:
                ops.append(EpilogueOp("add", self.zero_point))
            ops.append(EpilogueOp("clip", self.low, hi=QMAX))
            return (Epilogue(tuple(ops)),)
        n = self.planes
        out = []
        for j in range(n):
            ops = list(add_bias) + ([EpilogueOp("shr", 8 * j)] if j else [])
            if j == n - 1:
                ops.append(EpilogueOp("clip", QMIN, hi=QMAX))
            out.append(Epilogue(tuple(ops)))
        return tuple(out)

    def fused_bias(self, bias: np.ndarray) -> np.ndarray:
        """The bias tensor a fused pass reads: the layer's bias with the rounding constant
        ``2^(k-1)`` folded in (a GEMM layer's, per channel with :attr:`channel_shifts`; an
        add rounds by an immediate)."""
        bias = np.asarray(bias, np.int64)
        fixed = self.exact_fixed_point or self.fixed_point or self.channel_fixed_point
        if fixed is not None and not fixed.check_bias(bias, self.reduction):
            raise DeployError(
                f"a bias up to {int(np.abs(bias).max(initial=0))} with {self.reduction} "
                "products per accumulator could overflow VTA's fixed-point "
                "requantization: deploy with --exact")
        single = self.exact_fixed_point or self.fixed_point
        if single is not None:
            return (bias + single.offset).astype(np.int32)
        channel = self.channel_fixed_point
        if channel is not None:
            offsets = np.zeros(bias.shape[-1], np.int64)
            offsets[:len(channel.channels)] = channel.offsets  # padded channels: none
            return (bias + offsets).astype(np.int32)
        k = self.even_shift
        if k is not None:
            if int(np.abs(bias).max(initial=0)) + self.reduction * PRODUCT_BOUND + (1 << k) \
                    > MAX_ACCUMULATOR:  # the second floor's sum: twice the accumulator
                raise DeployError(
                    f"a bias up to {int(np.abs(bias).max(initial=0))} with {self.reduction} "
                    "products per accumulator could overflow VTA's rounding to even: deploy "
                    "with --no-exact")
            return (bias + (1 << (k - 1))).astype(np.int32)
        shifts = self.channel_shifts
        if shifts is not None:
            k = np.zeros(bias.shape[-1], np.int64)
            k[:len(shifts)] = shifts  # padded channels: no rounding
            return (bias + np.where(k > 0, 1 << np.maximum(k - 1, 0), 0)).astype(np.int32)
        k = self.shift
        offset = 1 << (k - 1) if k and self.rounding == "bias" else 0
        return (bias + offset).astype(np.int32)

    def needs_bias(self, has_bias: bool) -> bool:
        """Whether a GEMM layer's passes read a bias tensor: its own, or the rounding."""
        shifts = self.channel_shifts or ()
        return has_bias or (self.rounding == "bias" and (
            bool(self.shift) or any(shifts) or self.fixed_point is not None
            or self.channel_fixed_point is not None or self.exact_fixed_point is not None
            or self.even_shift is not None))

    def finish(self, planes: list[np.ndarray], packed_shape: tuple[int, ...] | None = None
               ) -> np.ndarray:
        """The CPU's part when VTA cannot requantize: the passes' int8 outputs (same shape,
        any layout; per channel: the packed output layout ``packed_shape``) reassembled
        into the accumulators, then :meth:`requantize`."""
        acc = planes[-1].astype(np.int64) << 8 * (len(planes) - 1)
        for j, plane in enumerate(planes[:-1]):
            acc += plane.view(np.uint8).astype(np.int64) << 8 * j
        if packed_shape is None:
            return self.requantize(acc)
        return self.requantize(acc, _per_channel(self.channel_scales, packed_shape),
                               _per_channel(self.channel_residuals, packed_shape))

    def requantize(self, acc: np.ndarray, scales: np.ndarray | None = None,
                   residuals: np.ndarray | None = None) -> np.ndarray:
        """int32 accumulators (bias included) -> int8, as TVM's float32 QDQ path computes
        it: ``f = float32(acc) * acc_scale``, ``clip(round_half_even(f / out_scale) + zp)``
        (the ReLU of the float value is the clip's low bound); ``scales``: each element's
        accumulator scale (per channel), else ``acc_scale``; ``residuals``: real values
        added to ``f`` (a rescaled bias's rounding)."""
        f = acc.astype(np.float32) * (np.float32(self.acc_scale) if scales is None
                                      else scales)
        if residuals is not None:
            f = f + residuals
        if self.float_output:
            return f.astype(np.float32)
        q = np.rint(f / np.float32(self.out_scale)) + self.zero_point
        return np.clip(q, self.low, QMAX).astype(np.int8)

    def describe(self) -> str:
        relu = ", ReLU" if self.relu else ""
        zp = f", zero point {self.zero_point}" if self.zero_point else ""
        shifts = self.channel_shifts
        if shifts is not None:
            return (f"on VTA: shift {min(shifts)}..{max(shifts)} per channel (a per-channel "
                    f"operand){zp}{relu}")
        exact = self.exact_fixed_point
        if exact is not None:
            return f"on VTA: x{self.multiplier:.6g} {exact.describe()}{zp}{relu}"
        if self.even_shift is not None:
            return (f"on VTA: shift {self.even_shift}, ties to even as exact arithmetic "
                    f"rounds (two floors){zp}{relu}")
        fixed = self.fixed_point
        if fixed is not None:
            powers = "+".join(f"2^-{e}" for e in fixed.digits)
            return (f"on VTA: x{self.multiplier:.6g} as {powers} (shifts and adds, within "
                    f"{fixed.bound:.2f} of a step){zp}{relu}")
        channel = self.channel_fixed_point
        if channel is not None:
            m = self.multipliers
            return (f"on VTA: x{m.min():.6g}..{m.max():.6g} per channel as {channel.digits} "
                    f"powers of two each (shifts and adds, per-channel shift operands, "
                    f"within {channel.bound:.2f} of a step){zp}{relu}")
        if self.on_vta:
            return f"on VTA: shift {self.shift}{zp}{relu}"
        if self.float_output:
            return (f"on the CPU: the int32 accumulators as float32 x{self.acc_scale:.6g} "
                    f"({self.planes} VTA passes, one per accumulator byte)")
        if self.channel_scales is not None:
            m = self.multipliers
            times = f"x{m.min():.6g}..{m.max():.6g} per channel"
        else:
            times = f"x{self.multiplier:.6g}"
        return (f"on the CPU: {times}{zp}{relu} ({self.planes} VTA passes, "
                f"one per accumulator byte)")


@lru_cache(maxsize=4096)
def _fixed_point(multiplier: float, zero_point: int, tolerance: float) -> FixedPoint | None:
    """:func:`fixed_point`, once per layer's values (every property asks for it)."""
    return fixed_point(multiplier, zero_point, tolerance)


@lru_cache(maxsize=256)
def _channel_fixed_point(multipliers: tuple[float, ...], zero_point: int, tolerance: float
                         ) -> ChannelFixedPoint | None:
    """:func:`channel_fixed_point`, once per layer's values."""
    return channel_fixed_point(multipliers, zero_point, tolerance)


def _per_channel(values: tuple[float, ...] | None, packed_shape: tuple[int, ...]
                 ) -> np.ndarray | None:
    """Per-channel values broadcast over a packed output ((N/B, C/c, ..., c): channel
    ``cb * c + ci``; padded channels take 0: their weights and bias are 0), or None."""
    if values is None:
        return None
    cb, c = packed_shape[1], packed_shape[-1]
    out = np.zeros(cb * c, np.float32)
    out[:len(values)] = np.asarray(values, np.float32)
    shape = [1] * len(packed_shape)
    shape[1], shape[-1] = cb, c
    return out.reshape(shape)
