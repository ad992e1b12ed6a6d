"""ONNX import, the deployed model: a ResNet-18 built with onnx.helper (float and quantized)
deploys as the catalogue's; ReLUs fused into the layer before them, residual adds, TVM's
execution order, the CPU's nodes in order with their bytes; torchvision exports (slow, only
where torch is installed)."""

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from tests.networks._onnx_models import load_network, quantize, save, shapes, weight  # noqa: E402
from vtatune.networks import DEPLOYED_SHIFT, CpuOp, network_from_logs  # noqa: E402
from vtatune.workloads import AddWorkload, deployed  # noqa: E402


def resnet18_model(batch=1, seed=0):
    """torchvision's resnet18 as its ONNX export has it before BN folding: conv + BN (+ ReLU),
    max pool, basic blocks (main path, then the downsample shortcut, then add + ReLU),
    global average pool, flatten, Gemm. Seeded random weights."""
    rng = np.random.RandomState(seed)
    nodes, inits = [], []

    def init(name, array):
        inits.append(numpy_helper.from_array(array.astype(np.float32), name))
        return name

    def conv_bn(x, conv, bn, ci, co, k, stride, relu):
        w = init(f"{conv}.weight", rng.randn(co, ci, k, k) * np.sqrt(2 / (ci * k * k)))
        nodes.append(helper.make_node("Conv", [x, w], [f"{conv}.out"], kernel_shape=[k, k],
                                      pads=[k // 2] * 4, strides=[stride] * 2, name=conv))
        params = [init(f"{bn}.{p}", v) for p, v in (
            ("weight", 1 + 0.1 * rng.rand(co)), ("bias", 0.1 * rng.randn(co)),
            ("running_mean", 0.1 * rng.randn(co)), ("running_var", 1 + 0.1 * rng.rand(co)))]
        nodes.append(helper.make_node("BatchNormalization", [f"{conv}.out", *params],
                                      [f"{bn}.out"], name=bn))
        if not relu:
            return f"{bn}.out"
        nodes.append(helper.make_node("Relu", [f"{bn}.out"], [f"{conv}.relu"]))
        return f"{conv}.relu"

    x = conv_bn("input", "conv1", "bn1", 3, 64, 7, 2, True)
    nodes.append(helper.make_node("MaxPool", [x], ["pool"], kernel_shape=[3, 3], pads=[1] * 4,
                                  strides=[2, 2], name="maxpool"))
    x, ci = "pool", 64
    for stage, width in enumerate((64, 128, 256, 512)):
        for b in range(2):
            stride, pre = (2 if stage and not b else 1), f"layer{stage + 1}.{b}"
            y = conv_bn(x, f"{pre}.conv1", f"{pre}.bn1", ci, width, 3, stride, True)
            y = conv_bn(y, f"{pre}.conv2", f"{pre}.bn2", width, width, 3, 1, False)
            shortcut = x if stride == 1 and ci == width else conv_bn(
                x, f"{pre}.downsample.0", f"{pre}.downsample.1", ci, width, 1, stride, False)
            nodes += [helper.make_node("Add", [y, shortcut], [f"{pre}.sum"], name=f"{pre}.add"),
                      helper.make_node("Relu", [f"{pre}.sum"], [f"{pre}.out"])]
            x, ci = f"{pre}.out", width
    nodes += [helper.make_node("GlobalAveragePool", [x], ["gap"], name="avgpool"),
              helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"),
              helper.make_node("Gemm", ["flat", init("fc.weight", 0.05 * rng.randn(1000, 512)),
                                        init("fc.bias", 0.01 * rng.randn(1000))],
                               ["logits"], transB=1, name="fc")]
    graph = helper.make_graph(
        nodes, "main_graph",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, 224, 224])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 1000])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def resnet18_onnx(tmp_path_factory):
    path = tmp_path_factory.mktemp("resnet18") / "resnet18_onnx.onnx"
    onnx.save(resnet18_model(), str(path))
    return path


def anonymous(workload):
    return replace(workload, name="")


def deployed_vta(net):
    """The network's tasks (workload with its epilogue, multiplicity) and the VTA steps in
    order, the names aside."""
    return ([(anonymous(t.workload), t.multiplicity) for t in net.tasks],
            [anonymous(s.workload) for s in net.steps if s.workload is not None])


def cpu_gaps(net):
    """How many CPU steps come before each VTA step, and after the last."""
    gaps = [0]
    for step in net.steps:
        if step.workload is None:
            gaps[-1] += 1
        else:
            gaps.append(0)
    return gaps


@pytest.mark.parametrize("hw", ["sim", "pynq"])
def test_resnet18_onnx_deploys_as_the_catalogue(resnet18_onnx, hw):
    ref, net = load_network("resnet18", hw), load_network(resnet18_onnx, hw)
    assert deployed_vta(net) == deployed_vta(ref)
    assert len(net.tasks) == (14 if hw == "sim" else 10)  # the residual adds' 4 on sim
    assert cpu_gaps(net) == cpu_gaps(ref)
    # the stem and max pool in float, then pack, quantize, cast to int8: as TVM's deploy flow
    head = [(s.name, s.cpu.ops if isinstance(s.cpu, CpuOp) else s.cpu.operator, s.cpu.shape)
            for s in net.steps[:5]]
    assert head == [
        ("conv1", "conv2d", "conv2d 1x3x224x224 -> 64, k7 p3 s2"),
        ("maxpool", "MaxPool", "1x64x112x112 -> 1x64x56x56 float32"),
        ("layer1.0.conv1.pack", "reshape+transpose", "1x64x56x56 float32 packed"),
        ("layer1.0.conv1.quantize", "multiply+round+clip", "1x64x56x56 float32"),
        ("layer1.0.conv1.cast", "cast", "1x64x56x56 float32 -> int8")]
    # layer1.0's shortcut is the quantized max pool output: cast from float32 to int32 for
    # the add (TVM v0.14: a CPU cast float32 -> int32, then the add reads int32)
    cast, add = net.steps[7:9]
    assert (cast.name, cast.cpu.shape, cast.cpu.bytes) == (
        "layer1.0.add.cast", "1x64x56x56 float32 -> int32", 64 * 56 * 56 * 8)
    assert add.name == "layer1.0.add"
    assert [(layer.name, layer.rhs_bits) for layer in net.layers if layer.operator == "add"
            ][:2] == [("layer1.0.add", 32), ("layer1.1.add", 8)]
    assert [(s.name, s.cpu.ops, s.cpu.bytes) for s in net.steps[-4:-1]] == [
        ("avgpool.unpack", "cast+transpose+reshape", 512 * 49 * 5),
        ("avgpool", "GlobalAveragePool", 512 * 50 * 4),
        ("avgpool.dequantize", "cast+multiply", 512 * 8)]
    assert net.steps[-1].name == "fc" and net.notes == ()


@pytest.mark.parametrize("fmt, kinds", [("QDQ", "QDQ Conv, QDQ Add, QDQ Gemm"),
                                        ("QOperator", "QLinearConv, QLinearAdd, QGemm")])
def test_quantized_resnet18_deploys_the_same(resnet18_onnx, tmp_path, fmt, kinds):
    """onnxruntime's quantize_static (int8, symmetric activations: its Relu nodes stay)
    lists the nodes in its own order: the deployed model is the float one's."""
    path = quantize(resnet18_onnx, tmp_path / f"resnet18_{fmt}.onnx", fmt, samples=1,
                    symmetric=True)
    for hw in ("sim", "pynq"):
        ref, net = load_network("resnet18", hw), load_network(path, hw)
        assert deployed_vta(net) == deployed_vta(ref)
        assert all(mine >= 1 for mine, theirs in zip(cpu_gaps(net), cpu_gaps(ref), strict=True)
                   if theirs)
        assert net.notes == (f"int8: 29 of 29 layers are quantized in the model ({kinds})",)
    # the model's own quantize of its input and dequantize of its output run on the CPU
    assert [(s.cpu.ops, s.cpu.shape) for s in (net.steps[0], net.steps[-1])] == [
        ("QuantizeLinear", "1x3x224x224 -> 1x3x224x224 int8"),
        ("DequantizeLinear", "1x1000 -> 1x1000 float32")]


DATA = Path(__file__).resolve().parent / "data"


@pytest.mark.slow
@pytest.mark.parametrize("case", ["sim-fallback", "pynq-fallback", "pynq-vtatunelog"])
def test_resnet18_onnx_counts_as_tvms_fsim(resnet18_onnx, case):
    """Read from ONNX, ResNet-18 runs on VTA what TVM v0.14 ran deploying it (fsim's
    counters over the whole model; tests/networks/test_deployed.py for the data)."""
    ref = json.loads((DATA / "tvm014_resnet18.json").read_text())["cases"][case]
    target, schedules = case.split("-")
    logs = [DATA / "resnet18-f4385aa.autotvm.log"] if schedules == "vtatunelog" else []
    # placed as TVM v0.14 places it (an ONNX model's default placement is deploy's, which
    # also runs the first conv and the classifier, padded to whole blocks)
    assert network_from_logs(load_network(resnet18_onnx, target), logs,
                             target).deployed.counters == ref["whole_network_fsim"]


def conv_then(tmp_path, after, inits=(), opset=13, name="fused"):
    """conv 16->32 (3x3) on 1x16x8x8, then the nodes ``after`` (reading ``c``), then a
    conv 32->32 on the last output (so the tail is a layer)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 8, 8])
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c"], pads=[1] * 4, name="c1"), *after]
    nodes.append(helper.make_node("Conv", [nodes[-1].output[0], "w2"], ["y"], pads=[1] * 4,
                                  name="c2"))
    return save(tmp_path, nodes, [x], [weight("w1", 32, 16, 3, 3, seed=1),
                                       weight("w2", 32, 32, 3, 3, seed=2), *inits], name, opset)


def const(name, *values, shape=None):
    data = np.array(values, np.float32)
    return numpy_helper.from_array(data if shape is None else data.reshape(shape), name)


def bn_params():
    return [const(f"bn.{p}", *[v] * 32) for p, v in (("s", 1.5), ("b", 0.1), ("m", 0.0),
                                                      ("v", 1.0))]


@pytest.mark.parametrize("after, inits, opset, relu", [
    ([helper.make_node("Relu", ["c"], ["r"])], [], 13, True),
    ([helper.make_node("Clip", ["c", "lo", "hi"], ["r"])], [const("lo", 0), const("hi", 6)],
     13, True),  # ReLU6
    ([helper.make_node("Clip", ["c", "lo"], ["r"])], [const("lo", 0)], 13, True),
    ([helper.make_node("Clip", ["c"], ["r"], min=0.0, max=6.0)], [], 6, True),  # attributes
    ([helper.make_node("BatchNormalization", ["c", "bn.s", "bn.b", "bn.m", "bn.v"], ["n"]),
      helper.make_node("Relu", ["n"], ["r"])], bn_params(), 13, True),
    ([helper.make_node("Add", ["c", "bias"], ["a"]), helper.make_node("Relu", ["a"], ["r"])],
     [const("bias", *[0.5] * 32, shape=(32, 1, 1))], 13, True),  # a bias the conv fuses
    ([helper.make_node("Clip", ["c", "lo"], ["r"])], [const("lo", -1)], 13, False),
    ([helper.make_node("Sigmoid", ["c"], ["r"])], [], 13, False),
], ids=["relu", "relu6", "clip-min-0", "clip-attrs", "bn-relu", "bias-relu", "clip-min--1",
        "sigmoid"])
def test_a_relu_after_a_layer_is_fused(tmp_path, after, inits, opset, relu):
    net = load_network(conv_then(tmp_path, after, inits, opset), "pynq")
    assert [(layer.name, layer.relu) for layer in net.layers] == [("c1", relu), ("c2", False)]
    assert net.tasks[0].workload.epilogue == deployed(DEPLOYED_SHIFT, relu)
    # what is not fused is a node of the CPU's between the two layers
    names = [s.name for s in net.steps]
    between = net.steps[names.index("c1") + 1:names.index("c2")]
    assert [s.cpu.ops for s in between if s.cpu.reason == ""] == \
        ([] if relu else [after[0].op_type])


def test_a_relu_two_readers_need_is_not_fused(tmp_path):
    """c's pre-ReLU value is read by the add too: c1 cannot fuse the ReLU."""
    after = [helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Add", ["c", "r"], ["s"], name="add")]
    net = load_network(conv_then(tmp_path, after), "sim")
    assert [(layer.name, layer.operator, layer.relu) for layer in net.layers] == [
        ("c1", "conv2d", False), ("add", "add", False), ("c2", "conv2d", False)]
    assert [(s.name, s.cpu.ops) for s in net.steps if s.name == "relu"] == [
        ("relu", "Relu")]  # on the packed data
    # without a ReLU after it the ALU kernel only clips (TVM's cast + add + clip + cast)
    assert net.task("fused.T2").workload.epilogue.describe() == "clip(-127,127)"


@pytest.mark.parametrize("fmt", ["QDQ", "QOperator"])
@pytest.mark.parametrize("symmetric", [True, False], ids=["relu-kept", "relu-dropped"])
def test_a_quantized_relu_is_fused(tmp_path, fmt, symmetric):
    """onnxruntime keeps a Relu between the conv's quantize and dequantize when the
    activations are symmetric, and drops it when they are not: the conv's QuantizeLinear
    (QDQ) or QLinearConv (QOperator) then writes uint8 with the zero point 0, nothing below
    zero."""
    src = conv_then(tmp_path, [helper.make_node("Relu", ["c"], ["r"], name="relu")])
    path = quantize(src, tmp_path / "q.onnx", fmt, symmetric=symmetric,
                    activations="QInt8" if symmetric else "QUInt8")
    ops = [n.op_type for n in onnx.load(str(path)).graph.node]
    assert ("Relu" in ops) == symmetric
    net = load_network(path, "pynq")
    assert [(layer.relu, layer.quantized) for layer in net.layers] == [(True, True),
                                                                     (False, True)]
    assert net.tasks[0].workload.epilogue == deployed(DEPLOYED_SHIFT, relu=True)
    # the model quantizes its input and dequantizes its output: TVM only packs, unpacks
    assert [s.cpu.ops if s.cpu else "VTA" for s in net.steps] == [
        "QuantizeLinear", "reshape+transpose", "VTA", "VTA", "transpose+reshape",
        "DequantizeLinear"]


def residual(tmp_path, shortcut_first=False, relu=True, operand=None, name="res"):
    """conv1 (+ReLU) -> conv2, added to ``operand`` (default the block's input after a
    first conv: x -> c0 -> a), then ReLU and a conv: a residual block."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 8, 8])
    main = [helper.make_node("Conv", ["a", "w1"], ["c"], pads=[1] * 4, name="conv1"),
            helper.make_node("Relu", ["c"], ["r"]),
            helper.make_node("Conv", ["r", "w2"], ["d"], pads=[1] * 4, name="conv2")]
    short = [helper.make_node("Conv", ["a", "wd"], ["e"], name="downsample")]
    nodes = [helper.make_node("Conv", ["x", "w0"], ["a"], pads=[1] * 4, name="c0"),
             *(short + main if shortcut_first else main + short),
             helper.make_node("Add", ["d", operand or "e"], ["s"], name="add"),
             *([helper.make_node("Relu", ["s"], ["t"])] if relu else []),
             helper.make_node("Conv", ["t" if relu else "s", "w3"], ["y"], name="tail")]
    inits = [weight(n, 32, ci, k, k, seed=i) for i, (n, ci, k) in enumerate(
        (("w0", 16, 3), ("w1", 32, 3), ("w2", 32, 3), ("wd", 32, 1), ("w3", 32, 1)))]
    return save(tmp_path, nodes, [x], inits, name)


def test_a_residual_add_is_an_add_layer(tmp_path):
    net = load_network(residual(tmp_path), "sim")
    add = next(layer for layer in net.layers if layer.operator == "add")
    assert (add.name, add.relu, add.rhs_bits, add.describe()) == ("add", True, 8,
                                                                   "add 1x32x8x8")
    assert AddWorkload(1, 32, 8, 8, 8, "res.T4") in [t.workload for t in net.tasks]
    assert net.steps[[s.name for s in net.steps].index("add") - 1].name == "downsample"
    assert [layer.name for layer in load_network(residual(tmp_path), "pynq").cpu] == ["add"]


def test_steps_follow_tvms_execution_order(tmp_path):
    """The file lists the shortcut first; TVM runs the add's first operand's path first."""
    path = residual(tmp_path, shortcut_first=True, name="reordered")
    assert [n.name for n in onnx.load(str(path)).graph.node][1] == "downsample"
    steps = [s.name for s in load_network(path, "sim").steps if s.workload is not None]
    assert steps == ["c0", "conv1", "conv2", "downsample", "add", "tail"]


def test_an_operand_from_outside_the_packed_region_is_added_in_int32(tmp_path):
    """The stem (3 channels) and its max pool stay on the CPU in float, as in TVM's ResNet:
    the first block adds the max pool's output, quantized and cast to int32."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])
    nodes = [helper.make_node("Conv", ["x", "w0"], ["a"], pads=[1] * 4, name="stem"),
             helper.make_node("Relu", ["a"], ["ar"]),
             helper.make_node("MaxPool", ["ar"], ["p"], kernel_shape=[2, 2], strides=[2, 2],
                              name="pool"),
             helper.make_node("Conv", ["p", "w1"], ["c"], pads=[1] * 4, name="conv1"),
             helper.make_node("Add", ["c", "p"], ["s"], name="add"),
             helper.make_node("Relu", ["s"], ["y"])]
    path = save(tmp_path, nodes, [x], [weight("w0", 16, 3, 3, 3), weight("w1", 16, 16, 3, 3)],
                "stem")
    net = load_network(path, "sim")
    elems = 16 * 8 * 8
    assert [(s.name, s.cpu.ops if isinstance(s.cpu, CpuOp) else None, s.cpu.bytes
             if isinstance(s.cpu, CpuOp) else None) for s in net.steps] == [
        ("stem", None, None),
        ("pool", "MaxPool", 4 * (16 * 16 * 16 + elems)),
        ("conv1.pack", "reshape+transpose", 8 * elems),
        ("conv1.quantize", "multiply+round+clip", 8 * elems),
        ("conv1.cast", "cast", 5 * elems),
        ("conv1", None, None),
        ("add.cast", "cast", 8 * elems),  # float32 -> int32
        ("add", None, None),
        ("y.unpack", "cast+transpose+reshape", 5 * elems),
        ("y.dequantize", "cast+multiply", 8 * elems)]
    assert net.steps[7].workload == AddWorkload(1, 16, 8, 8, 32, "stem.T2")


@pytest.mark.parametrize("operand, init, fused", [
    ("bias", const("bias", *[0.5] * 32, shape=(1, 32, 1, 1)), True),
    ("scale", helper.make_tensor_value_info("scale", TensorProto.FLOAT, [1, 32, 1, 1]), False),
], ids=["constant-bias", "broadcast-activation"])
def test_a_broadcast_add_is_not_a_residual_add(tmp_path, operand, init, fused):
    """Adding a per-channel vector: a constant is the conv's bias (fused); an activation (a
    second input, as a squeeze-excitation branch) is an add the CPU runs."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 8, 8])
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c"], pads=[1] * 4, name="c1"),
             helper.make_node("Add", ["c", operand], ["s"], name="add"),
             helper.make_node("Conv", ["s", "w2"], ["y"], pads=[1] * 4, name="c2")]
    inits = [weight("w1", 32, 16, 3, 3), weight("w2", 32, 32, 3, 3)]
    inputs = [x]
    if fused:
        inits.append(init)
    else:
        inputs.append(init)
    net = load_network(save(tmp_path, nodes, inputs, inits, "bcast"), "sim")
    assert [layer.operator for layer in net.layers] == ["conv2d", "conv2d"]
    cpu = [(s.name, s.cpu.ops) for s in net.steps if isinstance(s.cpu, CpuOp)
           and s.cpu.reason == ""]
    assert cpu == ([] if fused else [("add", "Add")])


def test_the_cpus_nodes_in_order(tmp_path):
    """A classifier whose input is normalized first: every node that computes is listed, in
    order, with its bytes; views and weight preparation are not."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])
    nodes = [helper.make_node("Sub", ["x", "mean"], ["xm"], name="sub"),
             helper.make_node("Div", ["xm", "std"], ["xn"], name="div"),
             helper.make_node("Conv", ["xn", "w0"], ["a"], pads=[1] * 4, name="stem"),
             helper.make_node("Relu", ["a"], ["ar"]),
             helper.make_node("Conv", ["ar", "w1"], ["b"], pads=[1] * 4, strides=[2, 2],
                              name="conv"),
             helper.make_node("Relu", ["b"], ["br"]),
             helper.make_node("GlobalAveragePool", ["br"], ["g"], name="gap"),
             helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
             helper.make_node("Transpose", ["wfc"], ["wfct"], perm=[1, 0], name="wt"),
             helper.make_node("MatMul", ["f", "wfct"], ["logits"], name="fc"),
             helper.make_node("Softmax", ["logits"], ["y"], name="softmax")]
    inits = [const("mean", 0.5, 0.5, 0.5, shape=(1, 3, 1, 1)),
             const("std", 0.2, 0.2, 0.2, shape=(1, 3, 1, 1)),
             weight("w0", 16, 3, 3, 3), weight("w1", 32, 16, 3, 3), weight("wfc", 10, 32)]
    net = load_network(save(tmp_path, nodes, [x], inits, "classifier"), "pynq")
    image, act = 3 * 16 * 16, 32 * 8 * 8
    got = [(s.name, s.cpu.ops if isinstance(s.cpu, CpuOp) else "", s.cpu.bytes
            if isinstance(s.cpu, CpuOp) else "") if s.cpu else (s.name, "VTA", "")
           for s in net.steps]
    assert got == [
        ("sub", "Sub", 4 * 2 * image), ("div", "Div", 4 * 2 * image), ("stem", "", ""),
        ("conv.pack", "reshape+transpose", 8 * 16 * 16 * 16),
        ("conv.quantize", "multiply+round+clip", 8 * 16 * 16 * 16),
        ("conv.cast", "cast", 5 * 16 * 16 * 16), ("conv", "VTA", ""),
        ("gap.unpack", "cast+transpose+reshape", 5 * act),
        ("gap", "GlobalAveragePool", 4 * (act + 32)), ("gap.dequantize", "cast+multiply", 8 * 32),
        ("fc", "", ""), ("softmax", "Softmax", 4 * 2 * 10)]
    assert net.steps[0].cpu.shape == "1x3x16x16 -> 1x3x16x16 float32"


# --- torchvision exports (slow; only where torch is installed) --------------------------------
def torchvision_export(tmp_path, name, dynamic_batch=False):
    torch = pytest.importorskip("torch")
    torchvision = pytest.importorskip("torchvision")
    model = getattr(torchvision.models, name)(weights=None).eval()
    path = tmp_path / f"{name}.onnx"
    dynamic = {"input": {0: "batch"}} if dynamic_batch else None
    kwargs = {"dynamo": False} if "dynamo" in torch.onnx.export.__code__.co_varnames else {}
    torch.onnx.export(model, torch.randn(1, 3, 224, 224), str(path), input_names=["input"],
                      opset_version=17, dynamic_axes=dynamic, **kwargs)
    return path


@pytest.mark.slow
def test_torchvision_shufflenet_v2(tmp_path):
    net = load_network(torchvision_export(tmp_path, "shufflenet_v2_x1_0"), "pynq")
    assert net.name == "shufflenet_v2_x1_0" and len(net.layers) == 57
    assert not any("unknown" in c.reason for c in net.cpu)
    assert [shape for _, shape, _ in shapes(net)] == [(1, 7, 7, 464, 1024, 1, 0, 1)]


@pytest.mark.slow
def test_torchvision_resnet18_batch(tmp_path):
    path = torchvision_export(tmp_path, "resnet18", dynamic_batch=True)
    assert load_network(path, "4x8").vta_layers == 0
    net = load_network(path, "4x8", batch=4)
    assert net.vta_layers == 20 and [c.name for c in net.cpu if c.operator != "add"] == [
        "/conv1/Conv"]
    assert sum(c.operator == "add" for c in net.cpu) == 8  # pynq's 4x8: adds on the CPU
    assert deployed_vta(load_network(path, "sim")) == deployed_vta(load_network("resnet18",
                                                                                "sim"))
