#!/usr/bin/env python3
"""Compile a ResNet with TVM v0.14 + VTA under the AutoTVM log `vtatune export` wrote, and run
it once: on VTA's functional simulator (fsim) in this process, or on a board over RPC.

    python scripts/tvm014/compile_with_log.py --log resnet18.autotvm.log
    python scripts/tvm014/compile_with_log.py --log resnet18.autotvm.log --bitstream my.bit

Where it runs is VTA's own choice, the TARGET of ``$VTA_HW_PATH/config/vta_config.json``:
``sim`` runs on fsim here and prints fsim's counters; a board's (``pynq``, ``ultra96``,
``de10nano``) connects to the RPC server at ``$VTA_RPC_HOST:$VTA_RPC_PORT`` (default
192.168.2.99:9091), rebuilds the board's VTA runtime for this configuration, programs the
FPGA (``--bitstream``, else VTA's prebuilt bitstream for the configuration, downloaded) and
prints the time of a run. Then the five highest scores of the output.

The model is torchvision's (random weights: the schedule is what is measured), compiled as
VTA's deploy tutorial compiles a ResNet: quantized to int8 by ``relay.quantize`` (the first
conv stays in float, on the CPU), packed for VTA by ``graph_pack`` from the first max pool to
the global average pool, and built by ``relay.build`` inside
``autotvm.apply_history_best(log)``: each VTA conv takes the log's record for its workload.
Needs TVM v0.14 with VTA (scripts/tvm014/build_tvm.sh), torch and torchvision; the whole path
is docs/tvm014.md.
"""

from __future__ import annotations

import argparse
import os
import sys

PACK_FROM, PACK_TO = "nn.max_pool2d", "nn.global_avg_pool2d"  # where VTA's region starts, ends
SIMULATED = ("sim", "tsim")  # vta_config.json TARGETs that run in this process


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--log", required=True, help="the AutoTVM log `python -m vtatune export` wrote")
    ap.add_argument("--model", default="resnet18", choices=("resnet18", "resnet34", "resnet50"),
                    help="the torchvision ResNet (default resnet18)")
    ap.add_argument("--bitstream", help="a board's FPGA bitstream (default: VTA's prebuilt one "
                                        "for the configuration)")
    ap.add_argument("--seed", type=int, default=0, help="of the weights and the input image")
    return ap.parse_args(argv)


def import_resnet(name: str, batch: int, seed: int):
    """torchvision's ResNet as a Relay module and its parameters; its final pool written as
    the ``nn.global_avg_pool2d`` that graph_pack stops at (PyTorch's is an adaptive pool to
    1x1, the same operation)."""
    import torch
    import torchvision
    import tvm
    from tvm import relay

    torch.manual_seed(seed)
    model = getattr(torchvision.models, name)(weights=None).eval()
    example = torch.randn(batch, 3, 224, 224)
    with torch.no_grad():
        traced = torch.jit.trace(model, example).eval()
    mod, params = relay.frontend.from_pytorch(traced, [("data", (batch, 3, 224, 224))])

    class GlobalPool(relay.ExprMutator):
        def visit_call(self, call):
            new = super().visit_call(call)
            if (isinstance(new.op, tvm.ir.Op) and new.op.name == "nn.adaptive_avg_pool2d"
                    and [int(s) for s in new.attrs.output_size] == [1, 1]
                    and new.attrs.layout == "NCHW"):
                return relay.nn.global_avg_pool2d(new.args[0])
            return new

    main = GlobalPool().visit(mod["main"])
    return relay.transform.InferType()(tvm.IRModule.from_expr(main)), params


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not os.path.isfile(args.log):
        print(f"compile_with_log.py: error: {args.log}: no such file", file=sys.stderr)
        return 2

    try:
        import numpy as np
        import torchvision  # noqa: F401  (import_resnet's; missing, say so before the build)
        import tvm
        import vta
        from tvm import autotvm, relay, rpc
        from tvm.contrib import graph_executor, utils
        from vta.testing import simulator
        from vta.top import graph_pack
    except ImportError as exc:
        print(f"compile_with_log.py: error: {exc}: this script needs torch, torchvision and "
              "TVM v0.14 with VTA (scripts/tvm014/build_tvm.sh builds it; export the "
              "PYTHONPATH, TVM_LIBRARY_PATH and VTA_HW_PATH it prints)", file=sys.stderr)
        return 2

    env = vta.get_env()  # $VTA_HW_PATH/config/vta_config.json
    if env.BLOCK_IN != env.BLOCK_OUT:
        print(f"compile_with_log.py: error: BLOCK_IN {env.BLOCK_IN} != BLOCK_OUT "
              f"{env.BLOCK_OUT}: graph_pack packs with one block, so TVM v0.14 cannot compile "
              "for this hardware", file=sys.stderr)
        return 2

    # 1. The model in int8, packed into VTA's layout between PACK_FROM and PACK_TO.
    mod, params = import_resnet(args.model, env.BATCH, args.seed)
    with tvm.transform.PassContext(opt_level=3):
        with relay.quantize.qconfig(global_scale=8.0, skip_conv_layers=[0]):
            mod = relay.quantize.quantize(mod, params=params)
        packed = graph_pack(mod["main"], env.BATCH, env.BLOCK_OUT, env.WGT_WIDTH,
                            start_name=PACK_FROM, stop_name=PACK_TO)

    # 2. The build, with the exported schedules. A workload the log has no record for is
    # built with TVM's fallback config, and AutoTVM warns about it.
    target = tvm.target.Target(env.target, host=env.target_host)
    with autotvm.apply_history_best(args.log):
        with vta.build_config(opt_level=3,
                              disabled_pass={"AlterOpLayout", "tir.CommonSubexprElimTIR"}):
            lib = relay.build(packed, target=target, params=params)

    # 3. Where it runs: fsim in this process, or the board's RPC server, its VTA runtime
    # rebuilt for this vta_config.json and its FPGA programmed with the matching bitstream.
    if env.TARGET in SIMULATED:
        remote = rpc.LocalSession()
    else:
        host = os.environ.get("VTA_RPC_HOST", "192.168.2.99")
        port = int(os.environ.get("VTA_RPC_PORT", "9091"))
        remote = rpc.connect(host, port)
        vta.reconfig_runtime(remote)
        vta.program_fpga(remote, bitstream=args.bitstream)

    # 4. Ship the compiled library (the board links it), load it on VTA, run it once.
    temp = utils.tempdir()
    lib.export_library(temp.relpath("graphlib.tar"))
    remote.upload(temp.relpath("graphlib.tar"))
    dev = remote.ext_dev(0)
    module = graph_executor.GraphModule(remote.load_module("graphlib.tar")["default"](dev))
    rng = np.random.default_rng(args.seed)
    module.set_input("data", rng.standard_normal((env.BATCH, 3, 224, 224)).astype("float32"))
    if env.TARGET in SIMULATED:
        simulator.clear_stats()
        module.run()
        for name, value in simulator.stats().items():
            print(f"{name:<16} {value:>12}")
    else:
        costs = module.module.time_evaluator("run", dev, number=4, repeat=3)().results
        print(f"{env.TARGET} {env.MODEL}: {np.mean(costs) * 1e3:.2f} ms per run "
              f"(std {np.std(costs) * 1e3:.2f} ms, {len(costs)} measurements of 4 runs)")
    scores = module.get_output(0).numpy()[0]
    print("top-5 classes:", [int(c) for c in np.argsort(scores)[::-1][:5]])
    return 0


if __name__ == "__main__":
    sys.exit(main())
