"""Importing an ONNX model with TVM's Relax frontend (``tvm.relax.frontend.onnx``), and
when the importer fails on the model as given, the standard preparation, step by step,
retrying after each (:func:`import_model`):

1. the input's shape fixed (a symbolic dimension as the deploy reads it) and ONNX's shape
   inference with data propagation (``onnx.shape_inference``): shapes computed from
   ``Shape`` ops become known;
2. onnxruntime's symbolic shape inference (``onnxruntime.tools.symbolic_shape_infer``,
   what ``quant_pre_process`` runs), which knows onnxruntime's contrib ops;
3. every shape, axes or size an op reads (a ``Reshape``'s shape, an ``Expand``'s: TVM's
   importer needs them constant) that is computed from shapes and constants alone,
   replaced by the value onnxruntime computes for it with the input's shape fixed, even
   through the QuantizeLinear / DequantizeLinear pairs ``quantize_static`` wraps such
   arithmetic in (MobileViT's patch sizes: no constant folder folds a QDQ pair, the QDQ
   form being what they keep);
4. constant folding and dead-node elimination by onnxslim (no fusion: a QDQ graph keeps
   its DequantizeLinear -> op -> QuantizeLinear form): what else is computed from
   constants.

onnxslim, not onnxsim: it is pure Python (numpy and onnx's reference evaluator, no
compiled extension to build for a board's Python), released monthly, and folds constants
without running onnxruntime's graph optimizer (which rewrites QDQ nodes).

Still failing, the error names the node and operator TVM's importer stopped at.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vtatune.deploy._tvm import onnx as _onnx
from vtatune.deploy._tvm import tvm
from vtatune.deploy.runtime._errors import DeployError

__all__ = ["PREPARATION", "Imported", "import_model"]


@dataclass(frozen=True)
class Imported:
    """A model imported: the Relax module, the ONNX model it was imported from (the one
    given, or its prepared form), and the preparation steps that took (empty: none)."""

    module: Any
    model: Any
    prepared: tuple[str, ...] = ()

    def describe(self) -> str:
        if not self.prepared:
            return "imported as given"
        return "TVM's importer failed on the model as given; imported after " + ", ".join(
            self.prepared)


def _fixed_input(model: Any, shape: tuple[int, ...], name: str) -> Any:
    onnx = _onnx()
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for inp in out.graph.input:
        if inp.name == name:
            dims = inp.type.tensor_type.shape.dim
            for d, n in zip(dims, shape, strict=False):
                d.Clear()
                d.dim_value = int(n)
    return out


def _onnx_shapes(model: Any, shape: tuple[int, ...], name: str) -> Any:
    onnx = _onnx()
    return onnx.shape_inference.infer_shapes(_fixed_input(model, shape, name),
                                             data_prop=True)


def _symbolic_shapes(model: Any, shape: tuple[int, ...], name: str) -> Any:
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    del shape, name
    with contextlib.redirect_stdout(io.StringIO()):
        return SymbolicShapeInference.infer_shapes(model, auto_merge=True)


def _constant_folding(model: Any, shape: tuple[int, ...], name: str) -> Any:
    try:
        import onnxslim
        from onnxslim.core.pattern.registry import DEFAULT_FUSION_PATTERNS
    except ImportError:
        raise _Skipped("onnxslim is not installed: pip install onnxslim") from None
    del shape, name
    with contextlib.redirect_stdout(io.StringIO()):
        return onnxslim.slim(model, skip_fusion_patterns=list(DEFAULT_FUSION_PATTERNS),
                             skip_optimizations=["graph_fusion", "subexpression_elimination",
                                                 "weight_tying"])


#: The inputs that are shapes, axes or indices of a size (what TVM's importer needs as
#: constants): by op, their positions.
SHAPE_INPUTS = {"Reshape": (1,), "Expand": (1,), "Tile": (1,), "Slice": (1, 2, 3, 4),
                "ConstantOfShape": (0,), "Resize": (1, 2, 3), "Upsample": (1,),
                "Unsqueeze": (1,), "Squeeze": (1,), "Pad": (1, 2, 3), "Range": (0, 1, 2),
                "Split": (1,), "TopK": (1,), "OneHot": (1,), "CumSum": (1,),
                "ReduceSum": (1,), "ReduceMean": (1,), "ReduceMax": (1,), "ReduceMin": (1,),
                "ReduceProd": (1,), "ReduceL2": (1,)}


def _shape_values(model: Any, shape: tuple[int, ...], name: str) -> Any:
    """Every shape, axes or size an op reads (:data:`SHAPE_INPUTS`) that is computed from
    tensors' shapes and constants alone (``Shape`` -> arithmetic -> a ``Reshape``'s shape,
    even through the QuantizeLinear/DequantizeLinear pairs ``quantize_static`` wraps such
    arithmetic in, which no folder folds: they are the QDQ form) replaced by the constant
    onnxruntime computes for it with the input's shape fixed; the nodes no longer read
    dropped."""
    import numpy as np
    import onnxruntime as ort

    onnx = _onnx()
    model = _fixed_input(model, shape, name)
    graph = model.graph
    static = {i.name for i in graph.initializer}  # from constants and shapes alone
    for node in graph.node:
        ins = [i for i in node.input if i]
        if node.op_type in ("Shape", "Size", "Constant") or all(i in static for i in ins):
            static.update(node.output)
    frontier = sorted({node.input[k] for node in graph.node
                       for k in SHAPE_INPUTS.get(node.op_type, ())
                       if k < len(node.input) and node.input[k] in static} - {
        i.name for i in graph.initializer})
    if not frontier:
        raise _Skipped("no shape computed from shapes and constants alone")
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    del probe.graph.output[:]
    probe.graph.output.extend(onnx.helper.make_empty_tensor_value_info(v) for v in frontier)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    session = ort.InferenceSession(probe.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    dtype = onnx.helper.tensor_dtype_to_np_dtype(
        next(i for i in graph.input if i.name == name).type.tensor_type.elem_type)
    values = session.run(None, {name: np.zeros(shape, dtype)})
    graph.initializer.extend(onnx.numpy_helper.from_array(np.asarray(v), n)
                             for n, v in zip(frontier, values, strict=True))
    folded = set(frontier)
    outputs = {o.name for o in graph.output}
    keep = [n for n in graph.node if not set(n.output) & folded]
    needed = {i for n in keep for i in n.input} | outputs
    while True:  # the nodes only the folded values read: gone
        live = [n for n in keep if set(n.output) & needed or not n.output]
        if len(live) == len(keep):
            break
        keep = live
        needed = {i for n in keep for i in n.input} | outputs
    del graph.node[:]
    graph.node.extend(keep)
    return model


class _Skipped(Exception):  # noqa: N818  (a step that could not run: the reason)
    pass


#: The preparation steps, in the order tried: what each is called, and the step.
PREPARATION: tuple[tuple[str, Callable[[Any, tuple[int, ...], str], Any]], ...] = (
    ("the input's shape fixed and ONNX shape inference", _onnx_shapes),
    ("onnxruntime's symbolic shape inference", _symbolic_shapes),
    ("the shape computations folded (onnxruntime)", _shape_values),
    ("constant folding (onnxslim)", _constant_folding),
)


def _from_onnx(model: Any, shape: tuple[int, ...], name: str) -> Any:
    """TVM's import, or the exception it raised (its own report, printed, kept quiet)."""
    tvm()
    from tvm.relax.frontend.onnx import from_onnx

    with contextlib.redirect_stdout(io.StringIO()):
        return from_onnx(model, shape_dict={name: list(shape)})


def import_model(model: Any, shape: tuple[int, ...] | None = None, name: str = "") -> Imported:
    """``model`` imported with its input ``name`` of ``shape`` (default: the model's own,
    :func:`~vtatune.deploy.model_input`); on failure, prepared step by step
    (:data:`PREPARATION`) and imported again after each; DeployError naming the node and
    operator the importer stopped at when none helps."""
    if shape is None:
        from vtatune.deploy._model import model_input

        name, shape, _ = model_input(model)
    try:
        return Imported(_from_onnx(model, shape, name), model)
    except Exception as exc:  # noqa: BLE001  (the frontend raises whatever it meets)
        failed, error = model, exc
    prepared, steps = model, []
    for what, step in PREPARATION:
        try:
            prepared = step(prepared, shape, name)
        except _Skipped as exc:
            steps.append(f"{what} (skipped: {exc})")
            continue
        except Exception as exc:  # noqa: BLE001  (a step that cannot run on this model)
            text = str(exc).strip().splitlines()
            steps.append(f"{what} (could not run: {text[0] if text else type(exc).__name__})")
            continue
        steps.append(what)
        try:
            return Imported(_from_onnx(prepared, shape, name), prepared, tuple(steps))
        except Exception as exc:  # noqa: BLE001  (the next step, then)
            failed, error = prepared, exc
    raise DeployError(f"TVM cannot import the model: {_failure(failed, shape, name, error)} "
                      f"(also after {', '.join(steps)})") from None


def _failure(model: Any, shape: tuple[int, ...], name: str, exc: Exception) -> str:
    """What stopped the importer: the node (found by importing the graph up to a node of
    the failing op type: the first prefix that fails) and the error's first line."""
    text = str(exc).strip().splitlines()
    first = text[0] if text else type(exc).__name__
    if "not supported for frontend ONNX" in first:
        return first
    op = _failing_op(model, shape, name)
    if op is None:
        return first
    candidates = [i for i, n in enumerate(model.graph.node) if n.op_type == op]
    lo, hi = 0, len(candidates) - 1  # the first candidate whose prefix fails
    while lo < hi:
        mid = (lo + hi) // 2
        if _prefix_fails(model, candidates[mid], shape, name):
            hi = mid
        else:
            lo = mid + 1
    node = model.graph.node[candidates[lo]]
    return f"node {node.name or node.output[0]} ({op}): {first}"


def _failing_op(model: Any, shape: tuple[int, ...], name: str) -> str | None:
    """The op type TVM's importer reports it failed to convert (it prints it)."""
    tvm()
    from tvm.relax.frontend.onnx import from_onnx

    report = io.StringIO()
    try:
        with contextlib.redirect_stdout(report):
            from_onnx(model, shape_dict={name: list(shape)})
    except Exception:  # noqa: BLE001, S110  (the failure we came to read)
        pass
    marker = "Error converting operator "
    for line in report.getvalue().splitlines():
        if line.startswith(marker):
            return line[len(marker):].split(",")[0].strip()
    return None


def _prefix_fails(model: Any, last: int, shape: tuple[int, ...], name: str) -> bool:
    """Whether importing the graph's nodes up to ``last`` fails (its outputs the graph's)."""
    onnx = _onnx()
    prefix = onnx.ModelProto()
    prefix.CopyFrom(model)
    graph = prefix.graph
    node = graph.node[last]
    del graph.node[last + 1:]
    del graph.output[:]
    graph.output.extend(onnx.helper.make_empty_tensor_value_info(o) for o in node.output if o)
    try:
        _from_onnx(prefix, shape, name)
    except Exception:  # noqa: BLE001
        return True
    return False
