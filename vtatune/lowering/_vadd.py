"""The getting-started program: two int32 vectors loaded into ACC, one ALU ADD, stored int8."""

from __future__ import annotations

from simulator.hardware import HardwareConfig
from simulator.isa import AluOp, MemId, Uop
from simulator.program import Program, layout_tensors
from vtatune.errors import IllegalSchedule
from vtatune.lowering._ir import Dep, Stage, expand_threads, insert_deps
from vtatune.lowering._runtime import COMPUTE, STORE, CommandQueue, Kernel, KernelLoop
from vtatune.workloads import VaddWorkload


def lower_vadd(workload: VaddWorkload, hw: HardwareConfig) -> Program:
    workload.check(hw)
    m = workload.elements // (hw.batch * hw.block_out)
    if 2 * m > hw.acc_depth:
        raise IllegalSchedule("acc_capacity", f"two vectors of {m * hw.acc_elem_bytes} B need "
                                              f"{2 * m * hw.acc_elem_bytes} B, ACC buffer has "
                                              f"{hw.acc_buff_bytes} B")
    shape = (1, m, hw.batch, hw.block_out)
    tensors, dram_bytes = layout_tensors(
        [("a", shape, "int32", "input"), ("b", shape, "int32", "input"),
         ("output", shape, "int8", "output")], hw.acc_elem_bytes)
    a0, b0 = (t.address // hw.acc_elem_bytes for t in tensors[:2])
    out0 = tensors[2].address // hw.out_elem_bytes
    q = CommandQueue(hw)
    loops = (KernelLoop(m, 1, 1),) if m > 1 else ()
    add = Kernel((Uop(0, m),), loops, alu_op=AluOp.ADD)
    compute = [
        lambda: q.load_2d(MemId.ACC, 0, a0, 1, m, m),
        lambda: q.load_2d(MemId.ACC, m, b0, 1, m, m),
        lambda: q.push_alu(("alu", "add", 0), add),
    ]
    store = [lambda: q.store_2d(0, out0, 1, m, m)]
    tree = expand_threads(insert_deps([Stage(COMPUTE, compute), Stage(STORE, store)]), 1)
    for item in tree:
        for op in item.node.ops:
            if isinstance(op, Dep):
                (q.dep_push if op.push else q.dep_pop)(op.src, op.dst)
            else:
                op()
    q.synchronize()
    table, uops = q.run()
    return Program(table, uops, tensors, dram_bytes)
