"""A network's layers and where each runs: a :class:`Layer` (a conv, transposed conv, dense
or residual add as the model has it) is placed on VTA as a
:class:`~vtatune.workloads.Workload` or sent to the CPU with the reason (:func:`place`), and
the VTA layers of one workload form a :class:`Task` to tune once (:func:`tasks_of`). A
layer a model reader could not read arrives as a :class:`CpuLayer` already, with its
reason; the operations between layers that only the CPU runs (pooling, quantizing, packing)
as :class:`CpuOp`.

Placement follows TVM v0.14's deploy flow (``relay.quantize``, ``graph_pack``,
``vta/python/vta/top/op.py``): a conv or dense VTA takes runs with the epilogue
``relay.quantize`` fuses into it (bias, the layer's ReLU, rounding shift, clip:
:func:`vtatune.workloads.deployed`); a residual add runs on VTA as an ALU-only kernel on the
targets TVM offloads those to (``sim`` and ``intelfocl``) and on the CPU elsewhere. The
network's :class:`Step` sequence is what the deployed model runs, in order.
"""


from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from simulator.hardware import HardwareConfig
from vtatune.errors import VtatuneError, WorkloadError
from vtatune.workloads import (
    DEPLOYED_SHIFT,
    RESIDUAL,
    AddWorkload,
    Conv2dWorkload,
    Epilogue,
    GemmWorkload,
    Workload,
    autotvm_key,
    deployed,
)


class NetworkError(VtatuneError):
    """An unknown network name, or a model file that cannot be read."""


@dataclass(frozen=True)
class Layer:
    """One compute layer as the model has it (``height``/``width`` are the input's).

    ``operator`` is ``conv2d`` (``groups`` > 1: grouped), ``conv2d_transpose`` or
    ``dense`` (``in_channels`` -> ``out_channels``; the spatial fields unused) or
    ``batch_matmul`` (a MatMul of two activations, attention's Q.K^T and P.V: ``heads``
    GEMMs of ``batch`` rows, ``in_channels`` -> ``out_channels``, the second operand the
    weight, packed at run time). ``pad`` is
    (top, left, bottom, right) as in ONNX. ``quantized``: the model computes the layer in
    int8 (an ONNX QOperator or QDQ layer); VTA runs every layer it takes in int8 either way.
    """

    name: str
    operator: str
    batch: int
    in_channels: int
    out_channels: int
    height: int = 1
    width: int = 1
    kernel: tuple[int, int] = (1, 1)
    pad: tuple[int, int, int, int] = (0, 0, 0, 0)
    stride: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    groups: int = 1
    output_padding: tuple[int, int] = (0, 0)
    label: str = ""  # the task name the catalogue gives this shape (e.g. ResNet-18's C8)
    quantized: bool = False
    relu: bool = False  # a ReLU follows the layer in the model (fused into its epilogue)
    rhs_bits: int = 8  # an ``add``: its second operand's width (32: still the int32 input)
    heads: int = 1  # a ``batch_matmul``: how many GEMMs (the product of its leading axes)

    @property
    def macs(self) -> int:
        """Multiply-accumulates (0 for an add)."""
        if self.operator in ("dense", "batch_matmul"):
            return self.heads * self.batch * self.in_channels * self.out_channels
        if self.operator == "add":
            return 0
        kh, kw = self.kernel
        if self.operator == "conv2d_transpose":  # every input pixel scatters a kernel
            pixels = self.height * self.width
        else:
            pixels = (((self.height + self.pad[0] + self.pad[2] - self.dilation[0] * (kh - 1)
                        - 1) // self.stride[0] + 1)
                      * ((self.width + self.pad[1] + self.pad[3] - self.dilation[1] * (kw - 1)
                          - 1) // self.stride[1] + 1))
        return (self.batch * pixels * self.out_channels * self.in_channels // self.groups
                * kh * kw)

    def describe(self) -> str:
        if self.operator == "dense":
            return f"dense {self.batch}x{self.in_channels} -> {self.out_channels}"
        if self.operator == "batch_matmul":
            return (f"batch_matmul {self.heads}x {self.batch}x{self.in_channels} * "
                    f"{self.in_channels}x{self.out_channels}")
        if self.operator == "add":
            return f"add {self.batch}x{self.in_channels}x{self.height}x{self.width}"
        k = _pair(self.kernel)
        g = f" g{self.groups}" if self.groups > 1 else ""
        return (f"{self.operator} {self.batch}x{self.in_channels}x{self.height}x{self.width} "
                f"-> {self.out_channels}, k{k} p{_pads(self.pad)} s{_pair(self.stride)}{g}")


def _pair(v: tuple[int, int]) -> str:
    return str(v[0]) if v[0] == v[1] else f"{v[0]}x{v[1]}"


def _pads(p: tuple[int, int, int, int]) -> str:
    return str(p[0]) if len(set(p)) == 1 else ",".join(map(str, p))


@dataclass(frozen=True)
class Task:
    """Layers of one shape that VTA runs: tuned once, counted ``multiplicity`` times.

    ``skip`` is why the task cannot be tuned with this vtatune (its operator has no
    template yet), else ``""``.
    """

    workload: Workload
    multiplicity: int
    layers: tuple[str, ...]
    skip: str = ""

    @property
    def name(self) -> str:
        return self.workload.name

    @property
    def operator(self) -> str:
        return self.workload.operator


@dataclass(frozen=True)
class CpuLayer:
    """A layer VTA does not run, and why (``quantized`` as for :class:`Layer`)."""

    name: str
    operator: str
    shape: str
    reason: str
    quantized: bool = False
    macs: int = 0


@dataclass(frozen=True)
class CpuOp:
    """An operation of the deployed model that only the CPU runs (TVM keeps it there):
    ``ops`` are Relay's fused ops, ``shape`` what it reads and writes, ``macs`` its
    multiply-accumulates or ``bytes`` the bytes it reads and writes."""

    name: str
    ops: str
    shape: str
    macs: int = 0
    bytes: int = 0
    reason: str = ""


@dataclass(frozen=True)
class Step:
    """One function the deployed model runs, in order: a VTA kernel (``workload``, its
    epilogue included) with the schedule of the task named ``task``, or ``cpu`` (a
    :class:`CpuOp`, or a :class:`CpuLayer`)."""

    name: str
    task: str | None = None
    cpu: CpuOp | CpuLayer | None = None
    workload: Workload | None = None


#: The VTA targets TVM v0.14 offloads ALU-only kernels (residual adds) to (``op.py``).
ALU_TARGETS = ("sim", "intelfocl")


@dataclass(frozen=True)
class Network:
    """A network placed on one hardware config: VTA tasks and CPU layers; ``layers`` are
    the network's layers as read, in order."""

    name: str
    source: str
    hw: HardwareConfig
    tasks: tuple[Task, ...]
    cpu: tuple[CpuLayer, ...]
    notes: tuple[str, ...] = ()
    layers: tuple[Layer | CpuLayer, ...] = ()
    steps: tuple[Step, ...] = ()
    placement: str = "tvm014"

    def task(self, name: str) -> Task:
        return next(t for t in self.tasks if t.name == name)

    @property
    def cpu_ops(self) -> tuple[CpuOp | CpuLayer, ...]:
        """What the deployed model runs on the CPU, in order."""
        return tuple(s.cpu for s in self.steps if s.cpu is not None)

    @property
    def tunable(self) -> tuple[Task, ...]:
        return tuple(t for t in self.tasks if not t.skip)

    @property
    def vta_layers(self) -> int:
        """The model's layers VTA runs (a batch_matmul once, whatever its heads)."""
        return sum(len(t.layers) for t in self.tasks)

    @property
    def vta_macs(self) -> int:
        """The multiply-accumulates of its VTA layers, as the model has them."""
        cpu = {c.name for c in self.cpu}
        return sum(x.macs for x in self.layers if isinstance(x, Layer) and x.name not in cpu)

    @property
    def vta_mac_share(self) -> float:
        """The share of the network's multiply-accumulates (its layers' as the model has
        them) that its VTA layers compute."""
        total = sum(x.macs for x in self.layers)
        return self.vta_macs / total if total else 0.0

    @property
    def float_macs(self) -> int:
        """The multiply-accumulates of the CPU layers a quantized model computes in float
        (the quantizer left them so: a dynamically quantized transformer's attention
        MatMuls); 0 for a model with no quantized layer."""
        if not any(x.quantized for x in self.layers):
            return 0
        return sum(c.macs for c in self.cpu if isinstance(c, CpuLayer) and not c.quantized)

    @property
    def vta_quantized_share(self) -> float:
        """The share of the multiply-accumulates the quantizer quantized that VTA runs."""
        total = sum(x.macs for x in self.layers) - self.float_macs
        return self.vta_macs / total if total else 0.0


@dataclass(frozen=True)
class NetworkSpec:
    """A catalogue entry: ``build(batch)`` gives the layers."""

    name: str
    source: str
    build: Callable[[int], list[Layer]] = field(repr=False)


def place(layer: Layer, hw: HardwareConfig, name: str = "", pad_channels: bool = False,
          max_merge: int | None = None) -> Workload | str:
    """The workload VTA runs ``layer`` as (named ``name``), or why it stays on the CPU.

    ``pad_channels``: channel counts that are not whole blocks (a first convolution's 3
    input channels, a classifier's 1000 outputs) are padded with zeros to whole blocks, as
    ``vtatune deploy`` runs them (the workload has the padded counts), instead of refused
    as TVM v0.14's graph packing refuses them; a grouped convolution's groups that are not
    whole blocks are merged :func:`group_merge` at a time (at most ``max_merge``, default
    :data:`MAX_GROUP_MERGE`) into groups that are, the groups padded to a whole number of
    merged ones.

    Example:
        >>> from simulator.hardware import DEFAULT
        >>> place(Layer("dw", "conv2d", 1, 32, 32, 112, 112, (3, 3), (1, 1, 1, 1),
        ...             groups=32), DEFAULT)
        'depthwise convolution (1 input channel per group; VTA needs multiples of BLOCK_IN 16)'
    """
    op = layer.operator
    if op == "add":
        if hw.target not in ALU_TARGETS:
            return (f"residual add: TVM v0.14 runs ALU-only kernels on VTA for the "
                    f"{' and '.join(ALU_TARGETS)} targets only")
        try:
            # without a ReLU after it: TVM's cast + add + clip + cast
            wl = AddWorkload(layer.batch, layer.in_channels, layer.height, layer.width,
                             layer.rhs_bits, name, RESIDUAL if layer.relu
                             else Epilogue(RESIDUAL.ops[1:]))
            wl.check(hw)
        except WorkloadError as exc:
            return str(exc)
        return wl
    if op in ("dense", "batch_matmul"):  # a batch_matmul: one such GEMM per head
        return _place_gemm(layer, hw, name, pad_channels)
    if op not in ("conv2d", "conv2d_transpose"):
        return f"{op} has no VTA template"
    kh, kw = layer.kernel
    if kh != kw:
        return f"non-square kernel {kh}x{kw} (VTA's templates take square kernels)"
    if layer.stride[0] != layer.stride[1]:
        return f"stride {layer.stride[0]}x{layer.stride[1]} (VTA's templates take one stride)"
    if len(set(layer.pad)) != 1:
        return f"asymmetric padding {_pads(layer.pad)} (VTA's templates pad all sides alike)"
    if layer.dilation != (1, 1):
        return f"dilation {_pair(layer.dilation)} (VTA's templates do not dilate)"
    g = layer.groups
    if g > 1 and op == "conv2d_transpose":
        return f"grouped transposed convolution ({g} groups; no VTA template)"
    ci, co = layer.in_channels // g, layer.out_channels // g
    if g > 1 and pad_channels:  # k neighbouring groups as one (block-diagonal weight)
        k, most = group_merge(ci, co, hw), max_merge or MAX_GROUP_MERGE
        if k > most:
            what = "depthwise convolution (1" if ci == 1 else f"grouped convolution ({ci}"
            return (f"{what} input channel{'s' * (ci > 1)} per group): VTA would run "
                    f"{k} groups merged into one of {k * ci} input channels, {k}x its MACs "
                    f"(deploy merges at most {most})")
        g, ci, co = -(-g // k), ci * k, co * k
    elif g > 1 and g == layer.in_channels:
        return (f"depthwise convolution (1 input channel per group; VTA needs multiples of "
                f"BLOCK_IN {hw.block_in})")
    if pad_channels and g == 1:
        ci, co = padded(ci, hw.block_in), padded(co, hw.block_out)
    per = " per group" if g > 1 else ""
    if ci % hw.block_in:
        first = " (the first convolution stays on the CPU)" if layer.in_channels == 3 else ""
        return f"{ci} input channels{per} are not a multiple of BLOCK_IN {hw.block_in}{first}"
    if co % hw.block_out:
        return f"{co} output channels{per} are not a multiple of BLOCK_OUT {hw.block_out}"
    if layer.batch % hw.batch:
        return f"batch {layer.batch} is not a multiple of BATCH {hw.batch}"
    if op == "conv2d" and g == 1:
        cls, extra = Conv2dWorkload, {}
    else:
        cls, extra = _operator_class(op, g)
        if isinstance(cls, str):
            return cls
    if op == "conv2d_transpose":
        if layer.output_padding[0] != layer.output_padding[1]:
            return f"output padding {_pair(layer.output_padding)} differs by axis"
        extra = {"output_padding": layer.output_padding[0]}
    elif g > 1:
        extra = {"groups": g}
    try:
        return cls(layer.batch, layer.height, layer.width, ci * g, co * g, kh, layer.pad[0],
                   layer.stride[0], **extra, name=name,
                   epilogue=deployed(DEPLOYED_SHIFT, layer.relu))
    except WorkloadError as exc:
        return str(exc)


#: The most groups deploy merges into one (:func:`group_merge`): merging ``k`` groups
#: multiplies the MACs VTA does by ``k`` (the zeros between the groups). RegNet's 8
#: channels per group merged (k = 2 on BLOCK 16, 4 on BLOCK 32) still compute 25-65 of the
#: model's MACs a cycle; a depthwise conv (k = 16) 4-7, against 50-110 for the other
#: layers: ``scripts/group_merge_cycles.py`` (docs/deploy.md, "What runs where").
MAX_GROUP_MERGE = 4


def group_merge(in_per_group: int, out_per_group: int, hw: HardwareConfig) -> int:
    """How many neighbouring groups of a grouped conv VTA runs as one: the fewest ``k``
    whose ``k x in_per_group`` input channels are whole BLOCK_IN blocks and ``k x
    out_per_group`` outputs whole BLOCK_OUT blocks (1: the groups are whole blocks already).
    The merged group's weight is block-diagonal (each output channel reads its own group's
    inputs, zeros elsewhere): the same products, exactly, plus ``k - 1`` zeros for each.

    Example:
        >>> from simulator.hardware import DEFAULT
        >>> group_merge(8, 8, DEFAULT), group_merge(1, 1, DEFAULT), group_merge(16, 32, DEFAULT)
        (2, 16, 1)
    """
    from math import gcd, lcm

    return lcm(hw.block_in // gcd(in_per_group, hw.block_in),
               hw.block_out // gcd(out_per_group, hw.block_out))


def padded(channels: int, block: int) -> int:
    """``channels`` rounded up to whole blocks of ``block``."""
    return -(-channels // block) * block


def _place_gemm(layer: Layer, hw: HardwareConfig, name: str, pad_channels: bool
                ) -> Workload | str:
    """A dense or batch_matmul layer as one GEMM workload; with ``pad_channels`` (as
    ``vtatune deploy`` runs it) its channels padded to whole blocks and its rows (a
    MatMul's leading axes folded with S) with zero rows to whole BATCH blocks."""
    rows, cin, cout = layer.batch, layer.in_channels, layer.out_channels
    if pad_channels:
        # the padding rows are zeros, their outputs dropped
        rows, cin, cout = (padded(rows, hw.batch), padded(cin, hw.block_in),
                           padded(cout, hw.block_out))
    checks = [(rows, hw.batch, "batch", "BATCH"),
              (cin, hw.block_in, "input channels", "BLOCK_IN"),
              (cout, hw.block_out, "output channels", "BLOCK_OUT")]
    for v, block, what, const in checks:
        if v % block:
            return f"{v} {what} are not a multiple of {const} {block}"
    return GemmWorkload(rows, cin, cout, name, deployed(DEPLOYED_SHIFT, layer.relu))


def _operator_class(op: str, groups: int) -> tuple[type | str, dict]:
    """The workload class of a grouped or transposed convolution (when this vtatune has it)."""
    from vtatune import workloads

    cls_name = "Conv2dTransposeWorkload" if op == "conv2d_transpose" else "GroupConv2dWorkload"
    cls = getattr(workloads, cls_name, None)
    if cls is None:
        what = "transposed" if op == "conv2d_transpose" else "grouped"
        return f"this vtatune has no {what} convolution workload", {}
    return cls, {}


def _untunable(workload: Workload, hw: HardwareConfig) -> str:
    """Why ``workload`` cannot be tuned here (no template for its operator yet), else ''."""
    from search_spaces import get_template

    try:
        get_template(workload, hw)
    except VtatuneError as exc:
        return f"not tunable yet: {exc}"
    except (TypeError, AttributeError, KeyError, NotImplementedError):
        return f"not tunable yet: no {workload.operator} template in this vtatune"
    return ""


#: How a network's VTA layers are grouped into tasks: ``deployed``, one task per workload
#: with its epilogue (vtatune runs each with its own schedule); ``autotvm``, one task per
#: AutoTVM key, the operator and shapes with the benchmark epilogue (TVM v0.14 applies one
#: record per key to every layer of it, ReLU or not).
TASK_KINDS = ("deployed", "autotvm")


#: How a network's layers are placed: ``tvm014`` as TVM v0.14's graph packing places them
#: (channel counts must be whole blocks), ``deploy`` as ``vtatune deploy`` runs them with
#: today's TVM (channel counts padded to whole blocks: :func:`place`'s ``pad_channels``).
PLACEMENTS = ("tvm014", "deploy")


#: A layer placed by its reader (``vtatune.deploy.placement``): the workload its task is
#: tuned on and the workload of each VTA pass it runs, or why it stays on the CPU.
Placed = tuple[Workload, tuple[Workload, ...]] | str


def tasks_of(layers: list[Layer | CpuLayer | CpuOp], hw: HardwareConfig, network: str,
             kind: str = "deployed", placement: str = "tvm014",
             placed: Mapping[str, Placed] | None = None
             ) -> tuple[tuple[Task, ...], tuple[CpuLayer, ...], tuple[Step, ...]]:
    """Place every layer; the VTA layers of one AutoTVM key (:func:`autotvm_key`: operator
    and shapes) become one task (first occurrence order), as TVM tunes and applies one
    config per key whatever epilogue each layer fuses. The task's workload is what it is
    tuned on (``kind``, :data:`TASK_KINDS`): ``deployed``, the epilogue most of its layers
    fuse (the first of them on a tie); ``autotvm``, the benchmark epilogue AutoTVM tunes
    with. A CpuLayer (a layer its reader could not read) and a CpuOp stay on the CPU as
    they are. Returns the tasks, the layers left on the CPU and the steps of the deployed
    model in order (each VTA step runs its own workload, its own epilogue, with its task's
    schedule; a batch_matmul of ``h`` heads is ``h`` steps, ``<layer>#0`` ...).

    A task is named ``<network>.<label>`` after the catalogue's label for its shape, else
    ``<network>.T<i>`` in order of first occurrence. ``placement``: :data:`PLACEMENTS`.
    ``placed``: the layers a reader placed already, by name (:data:`Placed`: deploy's
    placement, which :func:`place` is part of); each VTA pass of such a layer is a step
    (``<layer>/<pass>`` after the first), a batch_matmul's per head.
    """
    if kind not in TASK_KINDS:
        raise NetworkError(f"unknown task kind {kind!r} (known: {', '.join(TASK_KINDS)})")
    if placement not in PLACEMENTS:
        raise NetworkError(f"unknown placement {placement!r} (known: {', '.join(PLACEMENTS)})")
    groups: dict[tuple[str, str], tuple[str, list[Workload], list[str]]] = {}
    runs: dict[tuple[str, str], int] = {}
    cpu = []
    order: list[tuple[str, tuple[str, str] | None, CpuOp | CpuLayer | None,
                      Workload | None]] = []
    for layer in layers:
        if isinstance(layer, CpuOp):
            order.append((layer.name, None, layer, None))
            continue
        if isinstance(layer, CpuLayer):
            cpu.append(layer)
            order.append((layer.name, None, layer, None))
            continue
        verdict = placed[layer.name] if placed is not None and layer.name in placed else \
            place(layer, hw, pad_channels=placement == "deploy")
        if isinstance(verdict, str):
            cpu.append(CpuLayer(layer.name, layer.operator, layer.describe(), verdict,
                                layer.quantized, layer.macs))
            order.append((layer.name, None, cpu[-1], None))
            continue
        wl, passes = verdict if isinstance(verdict, tuple) else (verdict, (verdict,))
        key = autotvm_key(wl)
        label, variants, names = groups.setdefault(key, (layer.label, [], []))
        variants.append(wl)
        names.append(layer.name)
        runs[key] = runs.get(key, 0) + layer.heads  # a batch_matmul runs once per head
        for h in range(layer.heads):
            head = layer.name if layer.heads == 1 else f"{layer.name}#{h}"
            order += [(head if j == 0 else f"{head}/{j}", key, None, p)
                      for j, p in enumerate(passes)]
    tasks, names_of = [], {}
    for i, (key, (label, variants, names)) in enumerate(groups.items(), start=1):
        if kind == "autotvm":
            wl = replace(variants[0], epilogue=type(variants[0]).__dataclass_fields__[
                "epilogue"].default)
        else:  # Counter keeps first-occurrence order: most_common breaks ties by it
            wl = Counter(variants).most_common(1)[0][0]
        named = replace(wl, name=f"{network}.{label or f'T{i}'}")
        tasks.append(Task(named, runs[key], tuple(names), _untunable(named, hw)))
        names_of[key] = named.name
    steps = tuple(Step(name, names_of[key] if key else None, op,
                       replace(wl, name=names_of[key]) if wl is not None else None)
                  for name, key, op, wl in order)
    return tuple(tasks), tuple(cpu), steps
