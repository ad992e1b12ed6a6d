#!/usr/bin/env python3
# ruff: noqa: E501, UP031  (the reference build script as it was run under TVM v0.14)
"""Deploy a quantized torchvision ResNet with TVM v0.14 + VTA and run it once on VTA's fsim.

Follows vta/tutorials/frontend/deploy_classification.py of apache/tvm v0.14.0:
  relay.quantize (global_scale 8.0, skip_conv_layers [0]) under opt_level 3,
  graph_pack from the first nn.max_pool2d to nn.global_avg_pool2d,
  autotvm.apply_history_best(LOG) when a log is given (else TVM's fallback configs, TopHub off),
  relay.build under vta.build_config(opt_level=3, disabled_pass={AlterOpLayout, tir.CommonSubexprElimTIR}),
  one run on the fsim device.
Differences from the tutorial:
  * the model is torchvision's (random weights, torch.manual_seed(SEED)) through relay.frontend.from_pytorch;
    nn.adaptive_avg_pool2d(output_size=1) is rewritten to the equivalent nn.global_avg_pool2d (the
    quantizer and graph_pack only know global_avg_pool2d; MXNet's model in the tutorial has it);
  * TARGET pynq: VTA_HW_PATH points at a copy of vta-hw whose vta_config.json says "pynq" (same
    1x16_i8w8a32_15_15_18_17 hardware), and the host is x86 "llvm" instead of env.target_host (armv7), so
    that the pynq-target program runs here with the VTA calls served by libvta_fsim.
  * per-function counters: the graph is run node by node with the debug executor's execute_node, the
    simulator's counters cleared before and read after each node; then the whole graph is run once more
    with the plain run() for the whole-network counters (must equal the sum).
  * instruction streams: the VTA runtime's debug flag (VTA_DEBUG_DUMP_INSN | VTA_DEBUG_DUMP_UOP by
    default) is set on the runtime's command queue (VTASetDebugMode(VTATLSCommandHandle(), flag)) for the
    node-by-node run; the runtime prints to fd 1, which is redirected into the dump file, with a
    '### node ...' marker line before each node.

Environment: TVM v0.14 built with fsim by scripts/tvm014/build_tvm.sh (docs/tvm014.md); TVM_HOME its
source tree, PYTHONPATH=$TVM_HOME/python:$TVM_HOME/vta/python, TVM_LIBRARY_PATH=$TVM_HOME/build;
VTA_HW_PATH_PYNQ a copy of $TVM_HOME/3rdparty/vta-hw whose config/vta_config.json says
"TARGET": "pynq" (everything else may be symlinks; build_tvm.sh makes $TVM_HOME/build/vta-hw-pynq). tests/networks/data/README.md: how the
tests' references were made with it.
"""

import argparse
import ctypes
import hashlib
import json
import os
import sys
import tempfile
import time

ENVIRONMENT = ("the TVM v0.14 that scripts/tvm014/build_tvm.sh builds, with the variables it "
               'prints exported (docs/tvm014.md, "Building TVM v0.14 with VTA")')
COUNTER_KEYS = [
    "inp_load_nbytes",
    "wgt_load_nbytes",
    "acc_load_nbytes",
    "uop_load_nbytes",
    "out_store_nbytes",
    "gemm_counter",
    "alu_counter",
]


def parse_args():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--model", choices=["resnet18", "resnet34", "resnet50"], default="resnet18")
    ap.add_argument(
        "--target",
        choices=["sim", "pynq"],
        default="sim",
        help="vta_config.json TARGET (chooses VTA_HW_PATH)",
    )
    ap.add_argument(
        "--log", default=None, help="AutoTVM log for apply_history_best (omit: fallback configs)"
    )
    ap.add_argument("--log-label", default=None, help="short name of the log for the JSON")
    ap.add_argument("--out", required=True, help="JSON to write")
    ap.add_argument(
        "--insn-dump",
        default=None,
        help="instruction dump file (default: OUT minus .json + .insn.txt)",
    )
    ap.add_argument(
        "--debug-flag",
        type=int,
        default=6,
        help="VTA runtime debug flag for the node-by-node run (2 = DUMP_INSN, 4 = DUMP_UOP; default 6)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--host",
        default="llvm",
        help="target host; 'env' = env.target_host (armv7 for pynq: build only)",
    )
    ap.add_argument("--build-only", action="store_true", help="build (and dump TIR), do not run")
    ap.add_argument(
        "--cache-dir",
        default=None,
        help="reuse the quantized+packed Relay program (it does not depend on TARGET) from/to this folder",
    )
    ap.add_argument(
        "--tir-dump",
        default=None,
        help="write each function's TIR after VTA's lowering passes (after tir.vta.CPUAccessRewrite)",
    )
    return ap.parse_args()


def refuse(why):
    """One line and exit 2, as the command line does (--help works without TVM)."""
    print(f"deploy.py: error: {why}", file=sys.stderr)
    sys.exit(2)


args = parse_args()
if not os.environ.get("TVM_HOME"):
    refuse(f"TVM_HOME is not set: the source tree of {ENVIRONMENT}")
VTA_HW = {
    "sim": os.path.join(os.environ["TVM_HOME"], "3rdparty", "vta-hw"),
    "pynq": os.environ.get("VTA_HW_PATH_PYNQ", ""),
}
if not VTA_HW[args.target]:
    refuse("VTA_HW_PATH_PYNQ is not set: the vta-hw tree whose vta_config.json says "
           '"TARGET": "pynq" ($TVM_HOME/build/vta-hw-pynq, made by build_tvm.sh)')
os.environ["VTA_HW_PATH"] = VTA_HW[args.target]
os.environ.setdefault("TOPHUB_LOCATION", "NONE")  # never try to download TopHub

try:
    import numpy as np
    import torch
    import torchvision
    import tvm
    import vta
    import vta.testing.simulator  # noqa: F401  (loads libvta_fsim)
    from tvm import autotvm, relay
    from tvm.contrib.debugger import debug_executor
    from vta.libinfo import find_libvta
    from vta.top import graph_pack
except ImportError as exc:
    refuse(f"{exc}: this script needs torch, torchvision and {ENVIRONMENT}")

env = vta.get_env()
assert env.TARGET == args.target, (env.TARGET, args.target)


def log(*a):
    print(f"[deploy {args.model}-{args.target}]", *a, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------- model
class AdaptiveToGlobal(relay.ExprMutator):
    """nn.adaptive_avg_pool2d(x, output_size=[1, 1], NCHW) -> nn.global_avg_pool2d(x)."""

    def visit_call(self, call):
        new = super().visit_call(call)
        if (
            isinstance(new.op, tvm.ir.Op)
            and new.op.name == "nn.adaptive_avg_pool2d"
            and [int(v) for v in new.attrs.output_size] == [1, 1]
            and new.attrs.layout == "NCHW"
        ):
            return relay.nn.global_avg_pool2d(new.args[0])
        return new


def load_model():
    torch.manual_seed(args.seed)
    model = getattr(torchvision.models, args.model)(weights=None).eval()
    example = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        traced = torch.jit.trace(model, example).eval()
    mod, params = relay.frontend.from_pytorch(traced, [("data", (env.BATCH, 3, 224, 224))])
    main = AdaptiveToGlobal().visit(mod["main"])
    mod = relay.transform.InferType()(tvm.IRModule.from_expr(main))
    return mod, params


# ----------------------------------------------------------------------------------------- autotvm
class Recorder(autotvm.task.dispatcher.DispatchContext):
    """Dispatch context that forwards to `inner` and records every (workload, config) query."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.queries = {}

    def _query_inside(self, target, workload):
        cfg = self.inner.query(target, workload)
        self.queries[workload] = cfg
        return cfg

    def update(self, target, workload, cfg):
        self.inner.update(target, workload, cfg)


def knobs_of(cfg):
    out = {}
    for k, v in cfg._entity_map.items():
        if hasattr(v, "size"):
            out[k] = [int(x) for x in v.size]
        elif hasattr(v, "val"):
            out[k] = v.val
        else:
            out[k] = str(v)
    return out


def conv_task_str(wkl):
    # ('conv2d_packed.vta', ('TENSOR', dshape, dt), ('TENSOR', kshape, dt), strides, padding, dilation, layout, odt)
    d, k = wkl[1][1], wkl[2][1]
    strides, padding = wkl[3], wkl[4]
    return "N%d H%d W%d CI%d CO%d K%d P%d S%d" % (
        d[0] * d[4],
        d[2],
        d[3],
        d[1] * d[5],
        k[0] * k[4],
        k[2],
        padding[0],
        strides[0],
    )


# ----------------------------------------------------------------------------------------- capture
@tvm.instrument.pass_instrument
class Capture:
    def __init__(self, want_tir):
        self.fused = None
        self.want_tir = want_tir
        self.tir = {}

    def run_after_pass(self, mod, info):
        if info.name == "FuseOps":
            names = [gv.name_hint for gv in mod.get_global_vars()]
            if "main" in names and any(p.name_hint == "data" for p in mod["main"].params):
                self.fused = mod
        elif self.want_tir and info.name == "tir.vta.CPUAccessRewrite":
            for gv, f in mod.functions.items():
                self.tir.setdefault(gv.name_hint, []).append(f.script())


def fused_calls(mod):
    """Primitive-function calls of main in post-DFS order (the graph executor's node order)."""
    mod = relay.transform.InferType()(mod)
    calls = []

    def fvisit(e):
        if isinstance(e, relay.Call) and isinstance(e.op, relay.Function):
            ops = []

            def inner(x):
                if isinstance(x, relay.Call) and isinstance(x.op, tvm.ir.Op):
                    ops.append(x.op.name)

            relay.analysis.post_order_visit(e.op.body, inner)
            calls.append({"relay_ops": "+".join(ops), "out_type": str(e.checked_type)})

    relay.analysis.post_order_visit(mod["main"].body, fvisit)
    return calls


def shape_str(shape, dtype):
    return "Tensor[({}), {}]".format(", ".join(str(int(s)) for s in shape), dtype)


# ----------------------------------------------------------------------------------------- main
def main():
    t0 = time.time()
    cache = None
    if args.cache_dir:
        os.makedirs(args.cache_dir, exist_ok=True)
        cache = os.path.join(
            args.cache_dir,
            "%s-seed%d-b%d-c%d-w%d.packed.json"
            % (args.model, args.seed, env.BATCH, env.BLOCK_OUT, env.WGT_WIDTH),
        )
    if cache and os.path.exists(cache):
        relay_prog = tvm.ir.load_json(open(cache).read())
        params = {}  # quantize binds the weights as constants: the packed program's only input is data
        log("loaded the quantized+packed program from", cache)
    else:
        mod, params = load_model()
        log("imported in %.1fs" % (time.time() - t0))
        t1 = time.time()
        with tvm.transform.PassContext(opt_level=3):
            with relay.quantize.qconfig(global_scale=8.0, skip_conv_layers=[0]):
                mod = relay.quantize.quantize(mod, params=params)
            relay_prog = graph_pack(
                mod["main"],
                env.BATCH,
                env.BLOCK_OUT,
                env.WGT_WIDTH,
                start_name="nn.max_pool2d",
                stop_name="nn.global_avg_pool2d",
            )
        log("quantized+packed in %.1fs" % (time.time() - t1))
        if cache:
            txt = tvm.ir.save_json(relay_prog)
            assert tvm.ir.structural_equal(tvm.ir.load_json(txt), relay_prog, map_free_vars=True)
            with open(cache + ".tmp", "w") as f:
                f.write(txt)
            os.replace(cache + ".tmp", cache)
            log("saved the quantized+packed program to", cache)
    assert [p.name_hint for p in relay_prog.params] == ["data"], [
        p.name_hint for p in relay_prog.params
    ]

    inner = autotvm.apply_history_best(args.log) if args.log else autotvm.FallbackContext()
    host = env.target_host if args.host == "env" else args.host
    target = tvm.target.Target(env.target, host=host)
    cap = Capture(bool(args.tir_dump))
    t2 = time.time()
    with Recorder(inner) as rec:
        with vta.build_config(
            opt_level=3,
            disabled_pass={"AlterOpLayout", "tir.CommonSubexprElimTIR"},
            instruments=[cap],
        ):
            lib = relay.build(relay_prog, target=target, params=params)
    build_s = time.time() - t2
    log(f"relay.build in {build_s:.1f}s (target {target})")

    if args.tir_dump:
        with open(args.tir_dump, "w") as f:
            for name in sorted(cap.tir):
                for i, s in enumerate(cap.tir[name]):
                    f.write("### %s [%d]\n%s\n" % (name, i, s))

    graph = json.loads(lib.get_graph_json())
    nodes = graph["nodes"]
    shapes = graph["attrs"]["shape"][1]
    dtypes = graph["attrs"]["dltype"][1]
    node_row_ptr = graph["node_row_ptr"]

    def eid(nid, idx=0):
        return node_row_ptr[nid] + idx

    op_nids = [i for i, n in enumerate(nodes) if n["op"] == "tvm_op"]
    calls = fused_calls(cap.fused) if cap.fused is not None else []
    aligned = len(calls) == len(op_nids)
    if aligned:
        for nid, c in zip(op_nids, calls, strict=False):
            fname = nodes[nid]["attrs"]["func_name"]
            oshape = shapes[eid(nid)]
            if shape_str(oshape, dtypes[eid(nid)]) != c["out_type"]:
                aligned = False
                log("alignment: out type differs at node", nid, fname, c["out_type"])
                break
    if not aligned:
        log(
            "WARNING: FuseOps capture does not align with the graph (%d calls, %d nodes)"
            % (len(calls), len(op_nids))
        )

    entries = []
    for k, nid in enumerate(op_nids):
        n = nodes[nid]
        ins = [eid(i[0], i[1]) for i in n["inputs"]]
        outs = [eid(nid, j) for j in range(int(n["attrs"].get("num_outputs", 1)))]
        e = {
            "nid": nid,
            "func_name": n["attrs"]["func_name"],
            "relay_ops": calls[k]["relay_ops"] if aligned else None,
            "out_type": calls[k]["out_type"]
            if aligned
            else shape_str(shapes[outs[0]], dtypes[outs[0]]),
            "arg_shapes": [shapes[x] for x in ins + outs],
            "arg_dtypes": [dtypes[x] for x in ins + outs],
        }
        entries.append(e)

    # autotvm configs actually used
    conv_cfgs = {}
    alu_cfgs = {}
    for wkl, cfg in rec.queries.items():
        info = {
            "knobs": knobs_of(cfg),
            "fallback": bool(cfg.is_fallback),
            "index": None if cfg.is_fallback else int(cfg.index),
        }
        if wkl[0] == "conv2d_packed.vta":
            d, k_ = tuple(wkl[1][1]), tuple(wkl[2][1])
            conv_cfgs[(d, k_)] = (wkl, info)
        elif wkl[0] in ("add.vta", "multiply.vta"):
            alu_cfgs.setdefault(tuple(wkl[1][1]), []).append((wkl, info))
    for e in entries:
        if (
            e["relay_ops"]
            and e["relay_ops"].startswith("nn.conv2d")
            and len(e["arg_shapes"][0]) == 6
        ):
            key = (tuple(e["arg_shapes"][0]), tuple(e["arg_shapes"][1]))
            if key in conv_cfgs:
                wkl, info = conv_cfgs[key]
                e["conv_task"] = conv_task_str(wkl)
                e["autotvm_knobs"] = info["knobs"]
                e["autotvm_fallback"] = info["fallback"]
                e["autotvm_index"] = info["index"]

    result = {
        "about": None,
        "config": {
            "tvm": tvm.__version__,
            "model": args.model,
            "target": env.TARGET,
            "vta_model": env.MODEL,
            "target_str": str(target),
            "host": host,
            "log": os.path.abspath(args.log) if args.log else None,
            "log_label": args.log_label
            or ("fallback" if not args.log else os.path.basename(args.log)),
            "log_sha256": hashlib.sha256(open(args.log, "rb").read()).hexdigest()
            if args.log
            else None,
            "torch": torch.__version__,
            "torchvision": torchvision.__version__,
            "seed": args.seed,
            "relay_build_seconds": round(build_s, 1),
            "fuseops_aligned": aligned,
            "packed_program_cache": cache,
        },
        "autotvm_queries": [
            {
                "workload": json.loads(json.dumps(w, default=str)),
                **{
                    "knobs": knobs_of(c),
                    "fallback": bool(c.is_fallback),
                    "index": None if c.is_fallback else int(c.index),
                },
            }
            for w, c in rec.queries.items()
        ],
    }
    if args.build_only:
        result["nodes"] = entries
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
        log("build only; wrote", args.out)
        return

    # ------------------------------------------------------------------------------------ run
    tmp = tempfile.mkdtemp(prefix="tvm014_")
    so = os.path.join(tmp, "graphlib.so")
    lib.export_library(so)
    rlib = tvm.runtime.load_module(so)
    dev = tvm.ext_dev(0)
    m = debug_executor.create(lib.get_graph_json(), rlib, dev, dump_root=os.path.join(tmp, "dbg"))
    m.set_input(**lib.get_params())
    rng = np.random.default_rng(args.seed)
    image = rng.standard_normal((env.BATCH, 3, 224, 224)).astype("float32")
    m.set_input("data", image)

    f_clear = tvm.get_global_func("vta.simulator.profiler_clear")
    f_status = tvm.get_global_func("vta.simulator.profiler_status")
    L = ctypes.CDLL(find_libvta("libvta_fsim")[0], ctypes.RTLD_GLOBAL)
    L.VTATLSCommandHandle.restype = ctypes.c_void_p
    L.VTASetDebugMode.argtypes = [ctypes.c_void_p, ctypes.c_int]
    L.VTASetDebugMode.restype = None
    libc = ctypes.CDLL(None)
    execute_node = m.module["execute_node"]

    insn_path = (
        args.insn_dump
        or (args.out[:-5] if args.out.endswith(".json") else args.out) + ".insn.txt.gz"
    )
    by_nid = {e["nid"]: e for e in entries}
    sys.stdout.flush()
    libc.fflush(None)
    saved = os.dup(1)
    gz = None
    if insn_path.endswith(".gz"):  # compress on the fly (fallback schedules make GBs of text)
        import subprocess

        gz = subprocess.Popen(["gzip", "-6"], stdin=subprocess.PIPE, stdout=open(insn_path, "wb"))
        fd = os.dup(gz.stdin.fileno())
        gz.stdin.close()
    else:
        fd = os.open(insn_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    t3 = time.time()
    try:
        os.dup2(fd, 1)
        L.VTASetDebugMode(L.VTATLSCommandHandle(), args.debug_flag)
        for nid in op_nids:
            e = by_nid[nid]
            os.write(
                1,
                (
                    "### node %d %s relay_ops=%s out=%s\n"
                    % (nid, e["func_name"], e["relay_ops"], e["out_type"])
                ).encode(),
            )
            f_clear()
            execute_node(nid)
            libc.fflush(None)
            st = json.loads(f_status())
            c = {k: int(st[k]) for k in COUNTER_KEYS}
            if any(c.values()):
                e["device"] = "VTA"
                e["counters"] = c
            else:
                e["device"] = "CPU"
        L.VTASetDebugMode(L.VTATLSCommandHandle(), 0)
    finally:
        libc.fflush(None)
        os.dup2(saved, 1)
        os.close(fd)
        os.close(saved)
        if gz is not None:
            assert gz.wait() == 0
    per_node_s = time.time() - t3
    out_nodes = m.get_output(0).numpy()

    f_clear()
    t4 = time.time()
    m.module["run"]()
    whole_s = time.time() - t4
    st = json.loads(f_status())
    whole = {k: int(st[k]) for k in COUNTER_KEYS}
    out_run = m.get_output(0).numpy()
    summed = {k: sum(e.get("counters", {}).get(k, 0) for e in entries) for k in COUNTER_KEYS}

    # order keys like the shared file
    ordered = []
    for e in entries:
        o = {
            "nid": e["nid"],
            "device": e["device"],
            "relay_ops": e["relay_ops"],
            "out_type": e["out_type"],
            "func_name": e["func_name"],
            "arg_shapes": e["arg_shapes"],
            "arg_dtypes": e["arg_dtypes"],
        }
        for k in ("counters", "conv_task", "autotvm_knobs", "autotvm_fallback", "autotvm_index"):
            if k in e:
                o[k] = e[k]
        ordered.append(o)

    result["about"] = (
        "TVM v0.14.0 (LLVM 14, VTA fsim; vta_config TARGET %s = %s) deploying torchvision %s (random weights, "
        "torch.manual_seed(%d)) via relay.frontend.from_pytorch (adaptive_avg_pool2d(1) rewritten to "
        "global_avg_pool2d), quantized with relay.quantize (global_scale 8.0, skip_conv_layers [0]) and graph_packed "
        "from the first max-pool to the global average pool, as VTA's deploy tutorial; AutoTVM configs: %s. "
        "Built for %s and run once on the fsim device (host %s). One entry per fused function in execution order "
        "(graph nid). counters: fsim's, for that function alone (the graph run node by node with the debug "
        "executor's execute_node); device VTA = the function issued VTA instructions. whole_network_fsim: a "
        "separate plain run() of the whole graph. Instruction streams (VTA runtime debug flag %d) in %s."
        % (
            env.TARGET,
            env.MODEL,
            args.model,
            args.seed,
            ("apply_history_best({})".format(result["config"]["log_label"]))
            if args.log
            else "none (TVM's fallback configs, TopHub off)",
            str(target),
            host,
            args.debug_flag,
            os.path.basename(insn_path),
        )
    )
    result["whole_network_fsim"] = whole
    result["sum_of_nodes_fsim"] = summed
    result["sum_equals_whole"] = summed == whole
    result["run"] = {
        "node_by_node_seconds": round(per_node_s, 1),
        "whole_run_seconds": round(whole_s, 1),
        "outputs_equal_between_runs": bool(np.array_equal(out_nodes, out_run)),
        "top5": [int(i) for i in np.argsort(out_run[0])[-5:][::-1]],
        "insn_dump": os.path.basename(insn_path),
    }
    result["nodes"] = ordered
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    log("whole network fsim:", whole, "sum==whole:", summed == whole)
    log("wrote", args.out, "and", insn_path, "in %.0fs total" % (time.time() - t0))


if __name__ == "__main__":
    main()
