"""Workloads: the operators vtatune schedules, with their shapes, the named ones, and the
numpy reference of what each computes.

- Operators (``_operators``): packed conv2d (NCHW), GEMM (dense; lowered as a 1x1
  convolution of a 1x1 image), grouped conv2d, transposed conv2d, and the getting-started
  vector add. A workload is a frozen value: equal shapes are equal workloads, and
  :meth:`key` names the shape in logs.
- Named workloads (``_catalogue``): ResNet-18's ten VTA conv tasks ``resnet18.C2`` …
  ``C11``, the tutorials' layers, TVM's MobileNet grouped and DCGAN transposed benchmarks;
  :func:`resolve` names a workload by text as the command line and the Python API do.
- Epilogue (``_epilogue``): the elementwise steps VTA's ALU applies to the accumulators
  before the int8 store (shift, bias, ReLU, rounding, clip); a workload carries its own
  (:data:`BENCHMARK` by default, what TVM's benchmarks and AutoTVM tune).
- Reference (``_reference``): each operator in numpy on unpacked int8 operands, bit for
  bit what a VTA run must produce.
- Layouts (``_layouts``): operands packed as a program reads them from DRAM, its output
  unpacked (numpy only: the compiler and the deployed runtime share them).

Example:
    >>> conv = WORKLOADS["conv2d"]["resnet18.C8"]
    >>> conv.describe()
    'resnet18.C8 conv2d 1x256x14x14 -> 256, k3 p1 s1'
    >>> resolve("C8")[0] is conv
    True
"""

from vtatune.workloads._catalogue import (
    RESNET18_COUNTS,
    WORKLOADS,
    get_workload,
    resnet18_layers,
    resolve,
)
from vtatune.workloads._epilogue import (
    BENCHMARK,
    BENCHMARK_BIAS,
    CHANNEL_TENSORS,
    DEPLOYED_SHIFT,
    INTO_SAVED,
    RESIDUAL,
    SAVED,
    SHIFTS,
    SHR_IMMEDIATES,
    Epilogue,
    EpilogueOp,
    benchmark,
    deployed,
    epilogue_name,
    named_epilogues,
    shift_range_error,
)
from vtatune.workloads._layouts import (
    dilate,
    input_pack,
    output_pack,
    pack_bias,
    pack_conv_data,
    pack_conv_kernel,
    pack_data,
    pack_matrix,
    pack_weight,
    packed_inputs,
    transpose_kernel,
    unpack_conv_output,
    unpack_matrix,
    unpack_output,
)
from vtatune.workloads._operators import (
    WORKLOAD_CLASSES,
    AddWorkload,
    Conv2dTransposeWorkload,
    Conv2dWorkload,
    ElementwiseWorkload,
    GemmWorkload,
    GroupConv2dWorkload,
    MultiplyWorkload,
    VaddWorkload,
    Workload,
    autotvm_key,
    shape_fields,
)
from vtatune.workloads._reference import (
    Operands,
    conv2d_reference,
    conv2d_transpose_reference,
    elementwise_reference,
    gemm_reference,
    group_conv2d_reference,
    operand_shapes,
    random_operands,
    reference_output,
)

__all__ = [
    "AddWorkload", "BENCHMARK", "BENCHMARK_BIAS", "CHANNEL_TENSORS", "INTO_SAVED", "SAVED",
    "SHIFTS", "SHR_IMMEDIATES",
    "Conv2dTransposeWorkload",
    "Conv2dWorkload",
    "DEPLOYED_SHIFT", "ElementwiseWorkload", "Epilogue", "EpilogueOp", "GemmWorkload",
    "GroupConv2dWorkload", "MultiplyWorkload", "Operands", "RESIDUAL", "RESNET18_COUNTS",
    "VaddWorkload", "WORKLOADS", "WORKLOAD_CLASSES", "Workload", "autotvm_key", "benchmark",
    "conv2d_reference", "conv2d_transpose_reference", "deployed", "dilate",
    "elementwise_reference", "epilogue_name", "gemm_reference", "get_workload",
    "group_conv2d_reference", "input_pack", "named_epilogues", "operand_shapes", "output_pack",
    "pack_bias", "pack_conv_data", "pack_conv_kernel", "pack_data", "pack_matrix", "pack_weight",
    "packed_inputs", "random_operands", "reference_output", "resnet18_layers", "resolve",
    "shape_fields", "shift_range_error", "transpose_kernel", "unpack_conv_output",
    "unpack_matrix", "unpack_output",
]
