"""What a pattern match is: the layer it stands for (:class:`LayerSpec`, plain numpy and
numbers), read from the match's annotated expressions, and whether VTA runs it
(:func:`refusals`: every reason it does not).

The check functions of the pattern table (``_patterns``) and the code generator
(``_codegen``) read matches through this one module, so what was accepted is what is built.

Annotations a pattern gives (``_patterns``): ``x_q`` / ``x_scale`` / ``x_zp`` (the 8-bit
input of a conv or dense, or of a ReLU; a batch_matmul's first operand), ``w_*`` (the 8-bit
weight constant per tensor or per channel; a batch_matmul's second operand), ``b_*`` (the
quantized bias constant) or ``b_f`` (a float32 one), ``a_*`` and ``r_*`` (an add's two
8-bit inputs), ``core`` (the conv, matmul or add call), ``w_perm`` (a Gemm's
``permute_dims`` of its weight), ``relu``, ``out_scale`` / ``out_zp`` and ``root`` (the
final ``quantize``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from simulator.hardware import HardwareConfig
from vtatune.deploy.runtime import Border
from vtatune.deploy.runtime._requantize import Requantization
from vtatune.errors import VtatuneError
from vtatune.networks import Layer, place
from vtatune.workloads import (
    Conv2dTransposeWorkload,
    Conv2dWorkload,
    Workload,
    transpose_kernel,
)

#: The layer kinds a pattern matches, by the Relax op at its core.
ANCHORS = {"relax.nn.conv2d": "conv2d", "relax.nn.conv2d_transpose": "conv2d_transpose",
           "relax.matmul": "dense"}
KINDS = ("conv2d", "conv2d_transpose", "dense", "batch_matmul", "add", "relu")


class Unsupported(Exception):  # noqa: N818  (a verdict, not an error: the layer stays on the CPU)
    """The match is not a layer VTA runs; ``str()`` says why."""


@dataclass(frozen=True)
class QParams:
    """A per-tensor quantization: float32 scale and integer zero point."""

    scale: float
    zero_point: int

    def describe(self) -> str:
        return f"scale {self.scale:.6g}" + (f" zp {self.zero_point}" if self.zero_point else "")


@dataclass(frozen=True, eq=False)
class LayerSpec:
    """One matched layer in plain values.

    ``inputs``: the int8 activations' shapes and quantizations (one for a conv, dense or
    ReLU; two for an add). ``weight``: int8 in vtatune's operand layout
    (:func:`vtatune.workloads.operand_shapes`: OIHW, grouped (O, I/g, K, K), transposed
    IOHW, dense (O, I)). ``bias``: int32 per output channel, in the accumulator's scale.
    ``padding`` is (top, left, bottom, right) as Relax and ONNX have it.

    uint8 tensors (``QuantType.QUInt8``) are read as the int8 tensors ``u - 128`` with
    their zero points ``- 128`` (the same real values, exactly); the region converts at its
    boundary (:func:`to_int8`, :func:`from_int8`).
    """

    kind: str
    inputs: tuple[tuple[tuple[int, ...], QParams], ...]
    out_shape: tuple[int, ...]
    out: QParams
    relu: bool = False
    weight: np.ndarray | None = None
    weight_q: QParams | None = None
    bias: np.ndarray | None = None
    #: Per-output-channel weight scales (``per_channel=True``), else None (``weight_q``'s).
    weight_scales: tuple[float, ...] | None = None
    #: The largest rounding, in accumulator units, of a bias rescaled to the accumulator's
    #: scale (a bias quantized at another scale: shared between layers, say); 0 when exact.
    bias_rounding: float = 0.0
    #: What that rounding lost per channel, in real units (None when exact).
    bias_residuals: tuple[float, ...] | None = None
    #: The output is the accumulators as float32, no int8 tensor (an accumulator pattern:
    #: a dynamically quantized model's integer GEMM, ``_dynamic``).
    float_output: bool = False
    strides: tuple[int, int] = (1, 1)
    padding: tuple[int, int, int, int] = (0, 0, 0, 0)
    dilation: tuple[int, int] = (1, 1)
    groups: int = 1
    output_padding: tuple[int, int] = (0, 0)

    @property
    def x(self) -> QParams:
        return self.inputs[0][1]

    @property
    def channels(self) -> int:
        """Output channels (a dense's last axis, a conv's second)."""
        return int(_channels(self.kind, self.out_shape) or 0)

    def layer(self, name: str = "") -> Layer:
        """The layer as ``network`` reads one from a model: what :func:`place` decides on."""
        shape = self.inputs[0][0]
        if self.kind == "dense":
            rows = int(np.prod(shape[:-1]))  # [..., S, K]: the leading axes fold into rows
            return Layer(name, "dense", rows, shape[-1], self.out_shape[-1],
                         quantized=True, relu=self.relu)
        if self.kind == "batch_matmul":  # [..., M, K] x [..., K, N]: a GEMM per head
            return Layer(name, "batch_matmul", shape[-2], shape[-1], self.out_shape[-1],
                         heads=int(np.prod(shape[:-2])), quantized=True)
        if self.kind == "add":
            n, c, h, w = shape
            return Layer(name, "add", n, c, c, h, w, quantized=True, relu=self.relu)
        n, c, h, w = shape
        kernel = self.weight.shape[2:] if self.weight is not None else (1, 1)
        return Layer(name, self.kind, n, c, self.out_shape[1], h, w,
                     (int(kernel[0]), int(kernel[1])), self.padding, self.strides,
                     self.dilation, self.groups, self.output_padding, quantized=True,
                     relu=self.relu)

    @property
    def has_bias(self) -> bool:
        """Whether VTA adds a bias to the accumulators: the model's, an input zero point's
        correction, or (a batch_matmul) its operands' zero points' corrections."""
        if self.kind == "batch_matmul":
            return bool(self.x.zero_point or self.weight_q.zero_point)
        return self.accumulator_bias() is not None

    def acc_scales(self) -> np.ndarray:
        """The accumulator's float32 scale per output channel: input scale x weight scale
        (the scale TVM's float32 QDQ graph gives each channel's products)."""
        w = np.asarray(self.weight_scales if self.weight_scales is not None
                       else [self.weight_q.scale] * self.channels, np.float32)
        return (np.float32(self.x.scale) * w).astype(np.float32)

    def requantization(self, exact: bool = False) -> Requantization:
        """How the layer's accumulators become its int8 output (see ``_requantize``;
        ``exact``: on the CPU wherever VTA's rounding could differ from TVM's)."""
        if self.kind == "add":
            (_, a), (_, r) = self.inputs
            return Requantization(self.x.scale, self.out.scale, self.out.zero_point,
                                  self.relu, rounding="imm", exact=exact,
                                  offset=-(a.zero_point + r.zero_point))
        scales = self.acc_scales()
        channel = tuple(float(v) for v in scales) if self.weight_scales is not None else None
        bound = 0
        if self.float_output and self.weight is not None:  # |x| <= 128 for every int8
            axes = tuple(range(1, self.weight.ndim))
            bound = 128 * int(np.abs(self.weight.astype(np.int64)).sum(axes).max(initial=0))
        return Requantization(float(scales[0]), self.out.scale, self.out.zero_point,
                              self.relu, exact=exact, channel_scales=channel,
                              channel_residuals=self.bias_residuals,
                              reduction=self.reduction, float_output=self.float_output,
                              acc_bound=bound)

    @property
    def reduction(self) -> int:
        """The int8 products an accumulator sums: a dense's or batch_matmul's K, a conv's
        input channels per group x kernel (a transposed conv's: at most its input channels
        x kernel)."""
        if self.kind in ("dense", "batch_matmul"):
            return int(self.inputs[0][0][-1])
        shape = self.weight.shape  # OIHW; a transposed conv's IOHW
        taps = int(np.prod(shape[2:]))
        return taps * int(shape[0] if self.kind == "conv2d_transpose" else shape[1])

    def border(self) -> Border | None:
        """How the input is laid out when its zero point must fill what VTA's DMA pads with
        0 (:class:`~vtatune.deploy.runtime.Border`): a padded conv's padding; a transposed
        conv's dilation and its ``k - 1 - pad`` (``+ output_padding`` after) padding. None
        when the input has no zero point, or nothing is padded."""
        zx = self.x.zero_point
        if not zx:
            return None
        if self.kind == "conv2d" and any(self.padding):
            return Border(self.padding[0], self.padding[0], zx)
        if self.kind == "conv2d_transpose":
            k, pad, op = self.weight.shape[2], self.padding[0], self.output_padding[0]
            return Border(k - 1 - pad, k - 1 - pad + op, zx, self.strides[0])
        return None

    def run_workload(self, workload: Workload) -> Workload:
        """The workload VTA runs for ``workload`` (this layer's, from :func:`workload_of`):
        itself, or with a :meth:`border`, a conv unpadded (stride 1 for a transposed conv,
        its kernel flipped) on the input so laid out: the same output, every tap a real or
        zero-point pixel."""
        b = self.border()
        if b is None:
            return workload
        if isinstance(workload, Conv2dTransposeWorkload):
            h, w = ((n - 1) * b.stride + 1 + b.before + b.after
                    for n in (workload.height, workload.width))
            return Conv2dWorkload(workload.batch, h, w, workload.in_channels,
                                  workload.out_channels, workload.kernel, 0, 1, workload.name,
                                  workload.epilogue)
        return replace(workload, height=workload.height + b.before + b.after,
                       width=workload.width + b.before + b.after, pad=0)

    def run_weight(self, runs: Workload) -> np.ndarray:
        """The weight in ``runs``'s operand layout: a transposed conv's kernel as the conv
        it runs as correlates it (OIHW, flipped) when it runs as one; a grouped conv's
        groups merged as ``runs`` merges them (:func:`~vtatune.networks.group_merge`)."""
        if self.kind == "conv2d_transpose" and isinstance(runs, Conv2dWorkload):
            return transpose_kernel(self.weight)
        if self.kind == "conv2d" and self.groups > 1:
            return block_diagonal(self.weight, self.groups, self.merged_groups(runs))
        return self.weight

    def merged_groups(self, runs: Workload) -> int:
        """How many of the model's groups ``runs`` merges into one (1: none; a conv that is
        not grouped: 1)."""
        if self.kind != "conv2d" or self.groups == 1:
            return 1
        return runs.in_channels // getattr(runs, "groups", 1) // int(self.weight.shape[1])

    def accumulator_bias(self) -> np.ndarray | None:
        """The int32 VTA adds to its accumulators: the model's bias, and ``-zx * sum(w)``
        per output channel when the input has a zero point (exact: a padded conv reads its
        padding as the zero point, :meth:`border`)."""
        zx = self.x.zero_point
        if self.kind not in ("conv2d", "conv2d_transpose", "dense") or (
                self.bias is None and not zx):
            return self.bias
        bias = np.zeros(self.channels, np.int64) if self.bias is None \
            else self.bias.astype(np.int64)
        if zx:  # sum(w) over all but the output channels (a transposed conv's are IOHW)
            axes = (0, 2, 3) if self.kind == "conv2d_transpose" else tuple(
                range(1, self.weight.ndim))
            bias -= zx * self.weight.astype(np.int64).sum(axes)
        if np.abs(bias).max(initial=0) >= 1 << 31:
            raise Unsupported("the bias with the input zero point's correction overflows int32")
        return bias.astype(np.int32)

    def with_relu(self, relu_spec: LayerSpec) -> LayerSpec:
        """This layer with the ReLU that follows it fused (the ReLU keeps the quantization,
        so it is the requantization's low bound)."""
        return replace(self, relu=True, out_shape=relu_spec.out_shape)

    def describe(self) -> str:
        return self.layer().describe()


def block_diagonal(weight: np.ndarray, groups: int, k: int) -> np.ndarray:
    """A grouped conv's weight (O, I/g, K, K) with each ``k`` neighbouring groups merged
    into one of ``k x I/g`` input channels: output channel ``o`` of group ``j`` keeps its
    weights at slot ``j % k`` of its merged group's inputs, zeros at the others (a last
    merged group short of ``k`` groups: its missing inputs padded with zeros as well). The
    same products, exactly, each accumulator summing ``k - 1`` zero products more."""
    if k == 1:
        return weight
    out, per = weight.shape[:2]
    slot = (np.arange(out) // (out // groups)) % k
    merged = np.zeros((out, k, per, *weight.shape[2:]), weight.dtype)
    merged[np.arange(out), slot] = weight
    return merged.reshape(out, k * per, *weight.shape[2:])


# --- reading a match --------------------------------------------------------------------------
def _np(expr: Any) -> np.ndarray:
    return expr.value.numpy()


def _dtype(expr: Any) -> str:
    return str(expr.ty.dtype)


def _shape(expr: Any) -> tuple[int, ...]:
    shape = getattr(getattr(expr, "ty", None), "shape", None)
    try:
        return tuple(int(s) for s in shape)
    except (TypeError, ValueError):  # no static shape (a symbolic or unknown one)
        raise Unsupported(f"a tensor of no static shape ({shape}): VTA's programs are "
                          "built for fixed shapes") from None


_WHAT = {"x": "input", "w": "weight", "a": "input", "r": "input", "out": "output", "b": "bias",
         "root": "output", "x_q": "input", "a_q": "an input", "r_q": "an input",
         "w_q": "weight"}


def _offset(ann: dict[str, Any], key: str) -> int:
    """What reads a tensor as int8: 0 for int8, -128 for uint8 (``u - 128``, the zero point
    moved alike: the same real values); Unsupported for any other type."""
    dtype = _dtype(ann[key])
    if dtype == "int8":
        return 0
    if dtype == "uint8":
        return -128
    raise Unsupported(f"the {_WHAT[key]} is {dtype}: VTA computes 8-bit integers "
                      "(QuantType.QInt8 or QUInt8)")


def _scales(ann: dict[str, Any], prefix: str) -> tuple[np.ndarray, np.ndarray]:
    """A quantization's float32 scales and integer zero points, one or one per channel."""
    scale = _np(ann[f"{prefix}_scale"]).astype(np.float32).reshape(-1)
    zp = _np(ann[f"{prefix}_zp"]).astype(np.int64).reshape(-1)
    return scale, zp


def _qparams(ann: dict[str, Any], prefix: str, offset: int = 0) -> QParams:
    """A per-tensor quantization (an activation's), its zero point read as int8's."""
    scale, zp = _scales(ann, prefix)
    if scale.size != 1 or zp.size != 1:
        raise Unsupported(f"per-channel {_WHAT[prefix]} scales ({scale.size}): VTA's "
                          "activations are quantized per tensor")
    return QParams(float(scale[0]), int(zp[0]) + offset)


def _weight_qparams(ann: dict[str, Any], channels: int, offset: int
                    ) -> tuple[QParams, tuple[float, ...] | None]:
    """The weight's quantization: per tensor, or per output channel (``per_channel=True``:
    the scales, when they differ); its zero point read as int8's, one for all channels
    or the first that differs (nonzero ones are refused)."""
    scale, zp = _scales(ann, "w")
    zp = zp + offset
    if scale.size not in (1, channels) or zp.size not in (1, channels):
        raise Unsupported(f"weight scales of {scale.size} values for {channels} output "
                          "channels")
    nonzero = zp[zp != 0]
    q = QParams(float(scale[0]), int(nonzero[0]) if nonzero.size else 0)
    per_channel = scale.size > 1 and bool((scale != scale[0]).any())
    return q, tuple(float(v) for v in scale) if per_channel else None


#: A bias in the accumulator's scale: the int32 values, the largest rounding (accumulator
#: units), and what the rounding lost per channel in real units (None: exact).
_Bias = tuple[np.ndarray, float, tuple[float, ...] | None]


def _to_units(real: np.ndarray, acc_scales: np.ndarray) -> _Bias:
    """Real bias values in accumulator units, rounded to the nearest."""
    units = real.astype(np.float64) / acc_scales.astype(np.float64)
    values = np.rint(units).astype(np.int64)
    lost = (units - values) * acc_scales.astype(np.float64)
    residuals = tuple(float(v) for v in lost) if lost.any() else None
    return _int32_bias(values), float(np.abs(units - values).max(initial=0.0)), residuals


def _bias(ann: dict[str, Any], acc_scales: np.ndarray) -> _Bias:
    """The bias in the accumulator's scale (:data:`_Bias`). A bias quantized at the
    accumulator's scale (input scale x weight scale, zero point 0) is taken as it is; any
    other (a bias shared between layers and quantized once, at the first one's scale; a
    zero point; a float32 bias the quantizer left) is rescaled: its real value (``(b - zp)
    * scale`` in float32, as TVM dequantizes it) to the nearest accumulator unit, exact
    where it is representable there (a zero bias always is)."""
    channels = acc_scales.size
    if "b_f" in ann:  # left in float by the quantizer: its real values
        real = _np(ann["b_f"]).reshape(-1)
        if real.dtype.kind != "f" or real.size not in (1, channels):
            raise Unsupported(f"a bias of {real.size} {real.dtype} values for {channels} "
                              "channels")
        return _to_units(np.broadcast_to(real.astype(np.float32), (channels,)), acc_scales)
    b = _np(ann["b_q"]).reshape(-1)
    if b.dtype.kind not in "iu":
        raise Unsupported(f"the bias is {b.dtype}, not an integer tensor")
    if b.size != channels:
        raise Unsupported(f"a bias of {b.size} values for {channels} channels")
    scale, zp = _scales(ann, "b")
    if scale.size not in (1, channels) or zp.size not in (1, channels):
        raise Unsupported(f"bias scales of {scale.size} values for {channels} channels")
    if not zp.any() and np.array_equal(np.broadcast_to(scale, acc_scales.shape), acc_scales):
        return _int32_bias(b.astype(np.int64)), 0.0, None
    real = ((b.astype(np.int64) - zp).astype(np.float32) * scale).astype(np.float32)
    return _to_units(real, acc_scales)


def _int32_bias(values: np.ndarray) -> np.ndarray:
    if np.abs(values).max(initial=0) >= 1 << 31:
        raise Unsupported("the bias in the accumulator's scale overflows int32")
    return values.astype(np.int32)


def _pair(values: Any) -> tuple[int, int]:
    v = [int(x) for x in values]
    return (v[0], v[1]) if len(v) == 2 else (v[0], v[0])


def spec_of(kind: str, ann: dict[str, Any]) -> LayerSpec:
    """The layer a match of ``kind`` annotates (Relax expressions by annotation name);
    Unsupported when it is not an 8-bit layer of that kind with per-tensor activations."""
    float_output = "out_scale" not in ann  # an accumulator pattern: no quantize after it
    out = QParams(1.0, 0) if float_output else _qparams(ann, "out", _offset(ann, "root"))
    out_shape = _shape(ann["root"])
    relu = "relu" in ann
    if kind == "relu":
        x = _qparams(ann, "x", _offset(ann, "x_q"))
        return LayerSpec("relu", ((_shape(ann["x_q"]), x),), out_shape, out, relu=True)
    if kind == "add":
        a = (_shape(ann["a_q"]), _qparams(ann, "a", _offset(ann, "a_q")))
        r = (_shape(ann["r_q"]), _qparams(ann, "r", _offset(ann, "r_q")))
        if a[0] != r[0] or a[0] != out_shape:
            raise Unsupported(f"broadcasting add {list(a[0])} + {list(r[0])}")
        if len(out_shape) != 4:
            raise Unsupported(f"add of {len(out_shape)}-D tensors (VTA adds NCHW tensors)")
        return LayerSpec("add", (a, r), out_shape, out, relu=relu)
    if kind == "batch_matmul":
        return _batch_matmul(ann, out_shape, out)
    x = _qparams(ann, "x", _offset(ann, "x_q"))
    x_shape = _shape(ann["x_q"])
    w_offset = _offset(ann, "w_q")
    w = _np(ann["w_q"])
    if w_offset:
        w = (w.astype(np.int16) + w_offset).astype(np.int8)
    if len(out_shape) < 2:
        raise Unsupported(f"an output of {len(out_shape)} dimension(s)")
    channels = _channels(kind, out_shape)
    wq, w_scales = _weight_qparams(ann, channels, w_offset)
    common: dict[str, Any] = dict(inputs=((x_shape, x),), out_shape=out_shape, out=out,
                                  relu=relu, weight_q=wq, weight_scales=w_scales,
                                  float_output=float_output)
    if "b_q" in ann or "b_f" in ann:
        probe = LayerSpec(kind, ((x_shape, x),), out_shape, out, weight_q=wq,
                          weight_scales=w_scales)
        common["bias"], common["bias_rounding"], common["bias_residuals"] = _bias(
            ann, probe.acc_scales())
    if kind == "dense" and len(x_shape) > 2 and w.ndim == 2:
        return _dense_rows(ann, w, x_shape, common)
    if kind == "dense":
        if len(x_shape) != 2 or w.ndim != 2:
            raise Unsupported(f"matmul of {len(x_shape)}-D by {w.ndim}-D tensors (VTA's dense "
                              "is 2-D)")
        if "w_perm" in ann:
            axes = ann["w_perm"].attrs.axes
            if axes is not None and [int(a) for a in axes] != [1, 0]:
                raise Unsupported("a weight permutation other than a transpose")
            weight = w  # Gemm transB: (O, I) already
        else:
            weight = w.T  # MatMul: (I, O)
        if weight.shape != (out_shape[1], x_shape[1]):
            raise Unsupported(f"weight {list(w.shape)} does not match {list(x_shape)} -> "
                              f"{list(out_shape)}")
        return LayerSpec("dense", weight=np.ascontiguousarray(weight), **common)
    attrs = ann["core"].attrs
    for name, want in (("data_layout", "NCHW"), ("out_layout", "NCHW"),
                       ("kernel_layout", "IOHW" if kind == "conv2d_transpose" else "OIHW")):
        if str(getattr(attrs, name)) != want:
            raise Unsupported(f"{name} {getattr(attrs, name)} (VTA's layers take {want})")
    pad = [int(p) for p in attrs.padding]
    padding = (pad[0], pad[1], pad[0], pad[1]) if len(pad) == 2 else tuple(pad)
    extra: dict[str, Any] = {}
    if kind == "conv2d_transpose":
        extra["output_padding"] = _pair(attrs.output_padding)
    return LayerSpec(kind, weight=w, strides=_pair(attrs.strides), padding=padding,
                     dilation=_pair(attrs.dilation), groups=int(attrs.groups), **extra,
                     **common)


def _channels(kind: str, out_shape: tuple[int, ...]) -> int | None:
    """The output channels a bias adds to: the last axis of a dense (its rows may be
    [..., S] activations), the second of a conv."""
    if len(out_shape) < 2:
        return None
    return out_shape[-1] if kind in ("dense", "batch_matmul") else out_shape[1]


def _dense_rows(ann: dict[str, Any], w: np.ndarray, x_shape: tuple[int, ...],
                common: dict[str, Any]) -> LayerSpec:
    """A MatMul of [..., S, K] activations by a [K, N] weight: a dense layer of
    prod(...) * S rows (the leading axes folded into rows, as ``network`` reads it); the
    spec keeps the model's shapes (the region folds and unfolds them)."""
    if "w_perm" in ann:
        raise Unsupported(f"matmul of {len(x_shape)}-D activations by a permuted weight")
    out_shape = common["out_shape"]
    if w.shape[0] != x_shape[-1] or out_shape != (*x_shape[:-1], w.shape[1]):
        raise Unsupported(f"weight {list(w.shape)} does not match {list(x_shape)} -> "
                          f"{list(out_shape)}")
    return LayerSpec("dense", weight=np.ascontiguousarray(w.T), **common)


def _batch_matmul(ann: dict[str, Any], out_shape: tuple[int, ...], out: QParams) -> LayerSpec:
    """A MatMul of two int8 activations [..., M, K] x [..., K, N] (attention's Q.K^T, P.V):
    one GEMM per leading index, the second operand its weight, packed at run time. Zero
    points stay exact without padding: their corrections are a bias computed with the
    packing (``_region``)."""
    if type(ann["w_q"]).__name__ == "Constant":  # relax.Constant
        raise Unsupported("a matmul by a constant that no dense pattern took")
    xs, ws = _shape(ann["x_q"]), _shape(ann["w_q"])
    if len(xs) < 3 or len(xs) != len(ws) or xs[:-2] != ws[:-2]:
        raise Unsupported(f"matmul of {list(xs)} by {list(ws)} (VTA multiplies matrices of "
                          "equal leading axes, one GEMM each)")
    if xs[-1] != ws[-2] or out_shape != (*xs[:-1], ws[-1]):
        raise Unsupported(f"matmul of {list(xs)} by {list(ws)} -> {list(out_shape)}")
    x = _qparams(ann, "x", _offset(ann, "x_q"))
    w = _qparams(ann, "w", _offset(ann, "w_q"))
    return LayerSpec("batch_matmul", ((xs, x), (ws, w)), out_shape, out, weight_q=w)


# --- deciding --------------------------------------------------------------------------------
def refusals(spec: LayerSpec, hw: HardwareConfig) -> list[str]:
    """Every reason VTA does not run ``spec`` on ``hw`` (``network``'s placement among
    them: the same layer is offloaded by both or by neither, for the same reason); empty
    when it runs."""
    if spec.kind == "relu":
        return []  # fused into its producer: _patterns checks that one
    reasons = []
    if spec.kind not in ("add", "batch_matmul"):  # batch_matmul: corrected at run time
        if spec.weight_q.zero_point:
            reasons.append(f"weight zero point {spec.weight_q.zero_point} != 0: VTA multiplies "
                           "the int8 weights as they are (quantize weights symmetric)")
    placed = place(spec.layer(), hw, pad_channels=True)
    if isinstance(placed, str):
        reasons.append(placed)
    if spec.kind == "add":
        (_, a), (_, r) = spec.inputs
        if np.float32(a.scale) != np.float32(r.scale):
            reasons.append(f"an add of inputs at two scales ({a.scale:.6g}, {r.scale:.6g}): "
                           "VTA's ALU adds the int8 values as they are")
    elif spec.kind != "batch_matmul":
        try:
            spec.accumulator_bias()
        except Unsupported as exc:
            reasons.append(str(exc))
    if not reasons:
        refused = schedule_refusal(spec.run_workload(workload_of(spec, hw)), hw)
        if refused is not None:
            reasons.append(refused)
    return reasons


def refusal(spec: LayerSpec, hw: HardwareConfig) -> str | None:
    """Why VTA does not run ``spec`` on ``hw`` (every reason, ``; ``-joined), or None."""
    return "; ".join(refusals(spec, hw)) or None


def workload_of(spec: LayerSpec, hw: HardwareConfig, name: str = "",
                exact: bool = False) -> Workload:
    """The workload VTA runs ``spec`` as: ``network``'s placement, with the epilogue of
    the layer's first VTA pass (its requantization when VTA does it)."""
    placed = place(spec.layer(name), hw, name, pad_channels=True)
    if isinstance(placed, str):
        raise Unsupported(placed)
    req = spec.requantization(exact)
    bias = spec.kind != "add" and req.needs_bias(spec.has_bias)
    return replace(placed, epilogue=req.epilogues(bias)[0])


@dataclass(frozen=True)
class LayerPlan:
    """How VTA runs one accepted layer: ``workload`` as placed (channels padded to whole
    blocks, the first pass's epilogue: what a log's record is looked up by and a task is
    tuned on), ``runs`` the workload VTA runs with that schedule (unpadded on a zero-point
    border, else the same), the requantization, ``epilogues`` one per VTA pass, and whether
    the passes read a bias tensor; ``calls``: how often one inference runs each pass (a
    batch_matmul's heads, each its own GEMM)."""

    workload: Workload
    runs: Workload
    requant: Requantization
    epilogues: tuple
    bias: bool
    calls: int = 1

    @property
    def passes(self) -> tuple[Workload, ...]:
        """What VTA runs, pass by pass (per head for a batch_matmul)."""
        return tuple(replace(self.runs, epilogue=e) for e in self.epilogues)


def layer_plan(spec: LayerSpec, hw: HardwareConfig, name: str = "",
               exact: bool = False) -> LayerPlan:
    """How VTA runs ``spec`` (accepted: :func:`refusals` empty): the one decision the code
    generator builds (``_region.build_layer``) and ``network`` counts
    (:func:`vtatune.deploy.placement`) alike."""
    requant = spec.requantization(exact)
    workload = workload_of(spec, hw, name, exact)
    if spec.kind == "add":
        return LayerPlan(workload, workload, requant, requant.epilogues(bias=False), False)
    if spec.kind == "batch_matmul":  # weight and bias packed at run time, per head
        bias = requant.needs_bias(spec.has_bias)
        heads = int(np.prod(spec.inputs[0][0][:-2]))
        return LayerPlan(workload, workload, requant, requant.epilogues(bias=bias), bias,
                         heads)
    bias = requant.needs_bias(spec.accumulator_bias() is not None)
    runs = spec.run_workload(workload)
    return LayerPlan(workload, replace(runs, epilogue=workload.epilogue), requant,
                     requant.epilogues(bias=bias), bias)


_SCHEDULE_REFUSALS: dict[tuple[Workload, HardwareConfig], str | None] = {}


def schedule_refusal(workload: Workload, hw: HardwareConfig) -> str | None:
    """Why no schedule of ``workload`` runs on ``hw`` (e.g. an ALU-only add on a core with
    BLOCK_IN != BLOCK_OUT, or buffers too small), else None."""
    from search_spaces import default_schedule

    key = (workload, hw)
    if key not in _SCHEDULE_REFUSALS:
        try:
            default_schedule(workload, hw, workload.epilogue.bias)
            _SCHEDULE_REFUSALS[key] = None
        except VtatuneError as exc:
            _SCHEDULE_REFUSALS[key] = str(exc)
    return _SCHEDULE_REFUSALS[key]
