"""What a pattern match is: the layer it stands for (:class:`LayerSpec`, plain numpy and
numbers), read from the match's annotated expressions, and whether VTA runs it
(:func:`refusal`: the reason it does not, else None).

The check functions of the pattern table (``_patterns``) and the code generator
(``_codegen``) read matches through this one module, so what was accepted is what is built.

Annotations a pattern gives (``_patterns``): ``x_q`` / ``x_scale`` / ``x_zp`` (the int8
input of a conv or dense, or of a ReLU), ``w_*`` (the int8 weight constant), ``b_*`` (the
int32 bias constant), ``a_*`` and ``r_*`` (an add's two int8 inputs), ``core`` (the conv,
matmul or add call), ``w_perm`` (a Gemm's ``permute_dims`` of its weight), ``relu``,
``out_scale`` / ``out_zp`` and ``root`` (the final ``quantize``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from simulator.hardware import HardwareConfig
from vtatune.deploy._requantize import Requantization
from vtatune.errors import VtatuneError
from vtatune.networks import Layer, place
from vtatune.workloads import Workload

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
    """

    kind: str
    inputs: tuple[tuple[tuple[int, ...], QParams], ...]
    out_shape: tuple[int, ...]
    out: QParams
    relu: bool = False
    weight: np.ndarray | None = None
    weight_q: QParams | None = None
    bias: np.ndarray | None = None
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

    def requantization(self, exact: bool = False) -> Requantization:
        """How the layer's accumulators become its int8 output (see ``_requantize``;
        ``exact``: on the CPU wherever VTA's rounding could differ from TVM's)."""
        if self.kind == "add":
            return Requantization(self.x.scale, self.out.scale, self.out.zero_point,
                                  self.relu, rounding="imm", exact=exact)
        acc_scale = float(np.float32(self.x.scale) * np.float32(self.weight_q.scale))
        return Requantization(acc_scale, self.out.scale, self.out.zero_point, self.relu,
                              exact=exact)

    def accumulator_bias(self) -> np.ndarray | None:
        """The int32 VTA adds to its accumulators: the model's bias, and ``-zx * sum(w)``
        per output channel when the input has a zero point (exact only without padding,
        which :func:`refusal` checks)."""
        zx = self.x.zero_point
        if self.kind not in ("conv2d", "conv2d_transpose", "dense") or (
                self.bias is None and not zx):
            return self.bias
        bias = np.zeros(self.channels, np.int64) if self.bias is None \
            else self.bias.astype(np.int64)
        if zx:
            bias -= zx * self.weight.astype(np.int64).reshape(self.weight.shape[0], -1).sum(1)
        if np.abs(bias).max(initial=0) >= 1 << 31:
            raise Unsupported("the bias with the input zero point's correction overflows int32")
        return bias.astype(np.int32)

    def with_relu(self, relu_spec: LayerSpec) -> LayerSpec:
        """This layer with the ReLU that follows it fused (the ReLU keeps the quantization,
        so it is the requantization's low bound)."""
        return replace(self, relu=True, out_shape=relu_spec.out_shape)

    def describe(self) -> str:
        return self.layer().describe()


# --- reading a match --------------------------------------------------------------------------
def _np(expr: Any) -> np.ndarray:
    return expr.value.numpy()


def _dtype(expr: Any) -> str:
    return str(expr.ty.dtype)


def _shape(expr: Any) -> tuple[int, ...]:
    return tuple(int(s) for s in expr.ty.shape)


def _qparams(ann: dict[str, Any], prefix: str) -> QParams:
    scale, zp = _np(ann[f"{prefix}_scale"]), _np(ann[f"{prefix}_zp"])
    if scale.size != 1 or zp.size != 1:
        what = {"x": "input", "w": "weight", "a": "input", "r": "input", "out": "output",
                "b": "bias"}[prefix]
        raise Unsupported(f"per-channel {what} scales ({scale.size}): VTA requantizes per "
                          "tensor (quantize with per_channel=False)")
    return QParams(float(scale.reshape(-1)[0]), int(zp.reshape(-1)[0]))


def _int8(ann: dict[str, Any], key: str, what: str) -> None:
    dtype = _dtype(ann[key])
    if dtype != "int8":
        raise Unsupported(f"{what} is {dtype}: VTA computes int8 (quantize with "
                          "QuantType.QInt8)")


def _pair(values: Any) -> tuple[int, int]:
    v = [int(x) for x in values]
    return (v[0], v[1]) if len(v) == 2 else (v[0], v[0])


def spec_of(kind: str, ann: dict[str, Any]) -> LayerSpec:
    """The layer a match of ``kind`` annotates (Relax expressions by annotation name);
    Unsupported when it is not an int8 per-tensor layer of that kind."""
    _int8(ann, "root", "the output")
    out = _qparams(ann, "out")
    out_shape = _shape(ann["root"])
    relu = "relu" in ann
    if kind == "relu":
        _int8(ann, "x_q", "the input")
        return LayerSpec("relu", ((_shape(ann["x_q"]), _qparams(ann, "x")),), out_shape, out,
                         relu=True)
    if kind == "add":
        _int8(ann, "a_q", "an input")
        _int8(ann, "r_q", "an input")
        a, r = (_shape(ann["a_q"]), _qparams(ann, "a")), (_shape(ann["r_q"]), _qparams(ann, "r"))
        if a[0] != r[0] or a[0] != out_shape:
            raise Unsupported(f"broadcasting add {list(a[0])} + {list(r[0])}")
        if len(out_shape) != 4:
            raise Unsupported(f"add of {len(out_shape)}-D tensors (VTA adds NCHW tensors)")
        return LayerSpec("add", (a, r), out_shape, out, relu=relu)
    if kind == "batch_matmul":
        return _batch_matmul(ann, out_shape, out)
    _int8(ann, "x_q", "the input")
    _int8(ann, "w_q", "the weight")
    x, wq = _qparams(ann, "x"), _qparams(ann, "w")
    x_shape, w = _shape(ann["x_q"]), _np(ann["w_q"])
    core = ann["core"]
    bias = None
    if "b_q" in ann:
        if _dtype(ann["b_q"]) != "int32":
            raise Unsupported(f"the bias is {_dtype(ann['b_q'])}, not int32 in the "
                              "accumulator's scale")
        bq = _qparams(ann, "b")
        acc_scale = np.float32(np.float32(x.scale) * np.float32(wq.scale))
        if np.float32(bq.scale) != acc_scale or bq.zero_point:
            raise Unsupported(f"the bias's scale {bq.scale:.6g} is not input scale x weight "
                              f"scale {float(acc_scale):.6g} (or it has a zero point)")
        bias = _np(ann["b_q"]).reshape(-1).astype(np.int32)
        channels = _channels(kind, out_shape)
        if channels is None or bias.size != channels:
            raise Unsupported(f"a bias of {bias.size} values for {channels} channels")
    common = dict(inputs=((x_shape, x),), out_shape=out_shape, out=out, relu=relu,
                  weight_q=wq, bias=bias)
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
    attrs = core.attrs
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
    return out_shape[-1] if kind == "dense" else out_shape[1]


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
    _int8(ann, "x_q", "the first operand")
    _int8(ann, "w_q", "the second operand")
    xs, ws = _shape(ann["x_q"]), _shape(ann["w_q"])
    if len(xs) < 3 or len(xs) != len(ws) or xs[:-2] != ws[:-2]:
        raise Unsupported(f"matmul of {list(xs)} by {list(ws)} (VTA multiplies matrices of "
                          "equal leading axes, one GEMM each)")
    if xs[-1] != ws[-2] or out_shape != (*xs[:-1], ws[-1]):
        raise Unsupported(f"matmul of {list(xs)} by {list(ws)} -> {list(out_shape)}")
    x, w = _qparams(ann, "x"), _qparams(ann, "w")
    return LayerSpec("batch_matmul", ((xs, x), (ws, w)), out_shape, out, weight_q=w)


# --- deciding --------------------------------------------------------------------------------
def refusal(spec: LayerSpec, hw: HardwareConfig) -> str | None:
    """Why VTA does not run ``spec`` on ``hw`` (``network``'s placement first: the same
    layer is offloaded by both or by neither, for the same reason), or None."""
    if spec.kind == "relu":
        return None  # fused into its producer: _patterns checks that one
    if spec.kind not in ("add", "batch_matmul"):  # batch_matmul: corrected at run time
        if spec.weight_q.zero_point:
            return (f"weight zero point {spec.weight_q.zero_point} != 0: VTA multiplies the "
                    "int8 weights as they are (quantize weights symmetric)")
        zx = spec.x.zero_point
        if zx and (spec.kind == "conv2d_transpose" or any(spec.padding)):
            return (f"input zero point {zx} != 0 with padding: VTA pads with 0 (quantize "
                    "activations symmetric: ActivationSymmetric=True)")
    placed = place(spec.layer(), hw)
    if isinstance(placed, str):
        return placed
    if spec.kind == "add":
        (_, a), (_, r) = spec.inputs
        if a.zero_point or r.zero_point:
            return "an add of inputs with zero points: VTA's ALU adds the int8 values as they are"
        if np.float32(a.scale) != np.float32(r.scale):
            return (f"an add of inputs at two scales ({a.scale:.6g}, {r.scale:.6g}): VTA's "
                    "ALU adds the int8 values as they are")
    try:
        spec.accumulator_bias()
    except Unsupported as exc:
        return str(exc)
    return schedule_refusal(workload_of(spec, hw), hw)


def workload_of(spec: LayerSpec, hw: HardwareConfig, name: str = "",
                exact: bool = False) -> Workload:
    """The workload VTA runs ``spec`` as: ``network``'s placement, with the epilogue of
    the layer's first VTA pass (its requantization when VTA does it)."""
    placed = place(spec.layer(name), hw, name)
    if isinstance(placed, str):
        raise Unsupported(placed)
    req = spec.requantization(exact)
    bias = spec.kind != "add" and req.needs_bias(spec.has_bias)
    return replace(placed, epilogue=req.epilogues(bias)[0])


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
