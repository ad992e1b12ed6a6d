"""``program.c``: a program as the calls to VTA's runtime C API that build its stream.

The calls are recovered from the instruction stream alone: each instruction is mapped back
to the runtime call that creates it (a pop flag is a ``VTADepPop`` before it, a push flag a
``VTADepPush`` after it, a NOP a token-only call, a ``LOAD UOP`` the first use of a
micro-op kernel), and the call list is replayed through vtatune's model of TVM's runtime
(:class:`vtatune.lowering.CommandQueue`) to check that it rebuilds the identical stream.
"""


from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulator.hardware import HardwareConfig
from simulator.isa import (
    AluInsn,
    FinishInsn,
    GemmInsn,
    Instruction,
    MemId,
    MemInsn,
    Opcode,
    Uop,
)
from simulator.program import Program, mem_elem_bytes
from simulator.rows import instructions_of
from vtatune import __version__
from vtatune.builds._program_files import ExportError, _meta, _write
from vtatune.lowering import COMPUTE, LOAD, STORE


# --- program.c ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Call:
    """One runtime API call: ``pop``/``push`` (src, dst stage), ``load``/``store`` (the
    instruction), ``gemm``/``alu`` (kernel id) or ``sync``."""

    op: str
    args: tuple[Any, ...] = ()


@dataclass(frozen=True)
class RuntimeCalls:
    calls: tuple[Call, ...]
    kernels: tuple[Any, ...]  # vtatune.lowering.Kernel, by id


def _trivial(loop: Any) -> bool:
    return loop.extent == 1 and loop.dst == 0 and loop.src == 0 and loop.wgt == 0


def _kernel_of(insn: GemmInsn | AluInsn, uops: tuple[Uop, ...]) -> Any:
    from vtatune.lowering import Kernel, KernelLoop

    out = KernelLoop(insn.iter_out, insn.dst_factor_out, insn.src_factor_out,
                     getattr(insn, "wgt_factor_out", 0))
    inn = KernelLoop(insn.iter_in, insn.dst_factor_in, insn.src_factor_in,
                     getattr(insn, "wgt_factor_in", 0))
    if isinstance(insn, GemmInsn):
        loops = (out, inn) if not _trivial(inn) else ((out,) if not _trivial(out) else ())
        return Kernel(uops, loops, reset=insn.reset)
    # One ALU loop goes to the inner slot (the runtime's quirk), two fill both.
    loops = (out, inn) if not _trivial(out) else ((inn,) if not _trivial(inn) else ())
    return Kernel(uops, loops, reset=insn.reset, alu_op=insn.alu_op, use_imm=insn.use_imm,
                  imm=insn.imm)


def _pops(insn: Instruction) -> list[str]:
    return [k for k, on in (("prev", insn.pop_prev), ("next", insn.pop_next)) if on]


def _pop_call(kind: str, stage: int) -> Call:
    return Call("pop", (stage - 1, stage) if kind == "prev" else (stage + 1, stage))


def _push_calls(insn: Instruction, stage: int) -> list[Call]:
    out = []
    if insn.push_prev:
        out.append(Call("push", (stage, stage - 1)))
    if insn.push_next:
        out.append(Call("push", (stage, stage + 1)))
    return out


def _strip_sync(calls: list[Call]) -> list[Call]:
    """Replace the calls ``VTASynchronize`` makes itself (push store->compute, push
    load->compute, pop store->compute, pop load->compute, in that order) by one ``sync``."""
    out = list(calls)
    pos = len(out)
    for want in (Call("pop", (LOAD, COMPUTE)), Call("pop", (STORE, COMPUTE)),
                 Call("push", (LOAD, COMPUTE)), Call("push", (STORE, COMPUTE))):
        pos = next((k for k in range(pos - 1, -1, -1) if out[k] == want), -1)
        if pos < 0:
            raise ExportError("the stream does not end with the runtime's synchronize")
        del out[pos]
    return [*out, Call("sync")]


def runtime_calls(program: Program, hw: HardwareConfig) -> RuntimeCalls:
    """The runtime API calls that build ``program``'s stream, verified by replay."""
    insns = program.instructions[:-1]
    last = insns[-1] if insns else None
    # The stream ends with synchronize's FINISH after the compute NOP that commits its pops.
    if (not program.instructions or not isinstance(program.instructions[-1], FinishInsn)
            or not isinstance(last, MemInsn) or not last.is_nop
            or int(last.module) != COMPUTE or not (last.pop_prev and last.pop_next)
            or last.push_prev or last.push_next):
        raise ExportError("the stream does not end with the runtime's synchronize")
    calls: list[Call] = []
    kernels: list[Any] = []
    by_offset: dict[int, int] = {}
    resident: dict[tuple[int, int], int] = {}
    pending: dict[int, set[str]] = {LOAD: set(), COMPUTE: set(), STORE: set()}

    def take_pops(insn: Instruction, stage: int) -> None:
        pops = _pops(insn)
        if not pending[stage] <= set(pops):
            raise ExportError(f"instruction {i}: pending pops {sorted(pending[stage])} are "
                              "not on it")
        calls.extend(_pop_call(k, stage) for k in pops if k not in pending[stage])
        pending[stage] = set()

    i = 0
    while i < len(insns):
        insn = insns[i]
        stage = int(insn.module)
        if i == len(insns) - 1:  # synchronize's commit of the pending compute pops
            # in synchronize's order: store->compute, then load->compute
            calls.extend(_pop_call(k, stage) for k in ("next", "prev")
                         if k not in pending[stage])
            break
        if isinstance(insn, MemInsn) and insn.is_nop:
            if insn.push_prev or insn.push_next:
                take_pops(insn, stage)  # DepPush commits the pending pops into this NOP
                calls.extend(_push_calls(insn, stage))
            else:
                # A second pop of a kind already pending: the runtime commits the first
                # as a NOP; the second is on the stage's next instruction.
                nxt = next((x for x in insns[i + 1:] if int(x.module) == stage), None)
                common = [k for k in _pops(insn) if nxt is not None and k in _pops(nxt)]
                follow = insns[i + 1]
                if common:
                    take_pops(insn, stage)
                    calls.append(_pop_call(common[0], stage))
                    pending[stage] = {common[0]}
                elif (isinstance(follow, MemInsn) and follow.is_nop and stage != STORE
                      and int(follow.module) == stage and not _pops(follow)
                      and (follow.push_prev or follow.push_next)):
                    # DepPush commits the pending pops into a NOP, and a load or compute
                    # NOP has no stage for the runtime (x_size 0): the push is another NOP.
                    take_pops(insn, stage)
                else:
                    raise ExportError(f"instruction {i}: a NOP that no runtime call makes")
            i += 1
            continue
        if isinstance(insn, MemInsn) and insn.mem == MemId.UOP:
            nxt = insns[i + 1] if i + 1 < len(insns) else None
            if (not isinstance(nxt, GemmInsn | AluInsn) or nxt.pop_prev or nxt.pop_next
                    or (nxt.uop_bgn, nxt.uop_end) != (insn.sram_base,
                                                      insn.sram_base + insn.x_size)):
                raise ExportError(f"instruction {i}: LOAD UOP not followed by its GEMM/ALU")
            take_pops(insn, stage)
            uops = program.uops[insn.dram_base:insn.dram_base + insn.x_size]
            kernel = _kernel_of(nxt, tuple(uops))
            kid = by_offset.get(insn.dram_base)
            if kid is None:
                kid = by_offset[insn.dram_base] = len(kernels)
                kernels.append(kernel)
            elif kernels[kid] != kernel:
                raise ExportError(f"instruction {i + 1}: kernel reloaded with other loops")
            lo, hi = insn.sram_base, insn.sram_base + insn.x_size
            for span in [s for s in resident if s[0] < hi and lo < s[1]]:
                del resident[span]
            resident[(lo, hi)] = kid
            calls.append(Call("gemm" if isinstance(nxt, GemmInsn) else "alu", (kid,)))
            calls.extend(_push_calls(nxt, stage))
            i += 2
            continue
        take_pops(insn, stage)
        if isinstance(insn, GemmInsn | AluInsn):
            kid = resident.get((insn.uop_bgn, insn.uop_end))
            if kid is None:
                raise ExportError(f"instruction {i}: kernel [{insn.uop_bgn}, {insn.uop_end}) "
                                  "is not resident")
            calls.append(Call("gemm" if isinstance(insn, GemmInsn) else "alu", (kid,)))
        elif isinstance(insn, MemInsn):
            calls.append(Call("load" if insn.opcode == Opcode.LOAD else "store", (insn,)))
        else:
            raise ExportError(f"instruction {i}: FINISH before the end of the stream")
        calls.extend(_push_calls(insn, stage))
        i += 1
    result = RuntimeCalls(tuple(_strip_sync(calls)), tuple(kernels))
    _check_replay(result, program, hw)
    return result


def replay_calls(rc: RuntimeCalls, hw: HardwareConfig) -> tuple[tuple[Instruction, ...],
                                                          tuple[Uop, ...]]:
    """Run the calls through vtatune's model of TVM's runtime command queue."""
    from vtatune.lowering import CommandQueue

    q = CommandQueue(hw)
    for c in rc.calls:
        if c.op == "pop":
            q.dep_pop(*c.args)
        elif c.op == "push":
            q.dep_push(*c.args)
        elif c.op == "gemm":
            q.push_gemm(("k", c.args[0]), rc.kernels[c.args[0]])
        elif c.op == "alu":
            q.push_alu(("k", c.args[0]), rc.kernels[c.args[0]])
        elif c.op == "load":
            x = c.args[0]
            q.load_2d(x.mem, x.sram_base, x.dram_base, x.y_size, x.x_size, x.x_stride,
                      (x.y_pad_0, x.y_pad_1, x.x_pad_0, x.x_pad_1))
        elif c.op == "store":
            x = c.args[0]
            q.store_2d(x.sram_base, x.dram_base, x.y_size, x.x_size, x.x_stride)
        else:
            q.synchronize()
    table, uops = q.run()
    return instructions_of(table), tuple(Uop(*u) for u in uops.tolist())


def _check_replay(rc: RuntimeCalls, program: Program, hw: HardwareConfig) -> None:
    insns, uops = replay_calls(rc, hw)
    if insns != program.instructions or uops != program.uops:
        first = next((k for k, (a, b) in enumerate(zip(insns, program.instructions,
                                                       strict=False)) if a != b),
                     min(len(insns), len(program.instructions)))
        raise ExportError(f"the runtime calls do not rebuild the stream (first difference "
                          f"at instruction {first})")


def _c_name(text: str) -> str:
    return re.sub(r"\W", "_", text).strip("_") or "program"


def c_source(source: Any, function: str | None = None) -> str:
    """C source issuing ``source``'s stream through the VTA runtime API (``vta_runtime.h``).

    The entry point takes one DRAM buffer per tensor, in the program's tensor order, and
    returns 0, or -1 when the runtime refuses a micro-op kernel.

    Every micro-op kernel has its own call site (its own ``uop_handle``) and passes no
    closure data (``NULL, 0``: key 0), as TVM's code generator does for a kernel with no free
    variable, so the runtime's limit of fewer than 100 keys per call site
    (``UopKernelMap``) holds for any number of kernels.
    """
    program, hw = source.program, source.hw
    meta = _meta(source)
    rc = runtime_calls(program, hw)
    wl = meta.get("workload") or {}
    fn = function or _c_name(f"vtatune_{wl.get('operator', 'program')}_"
                             f"{wl.get('name') or 'main'}")
    params = [_c_name(t.name) for t in program.tensors]
    out = [f"/* Generated by vtatune {__version__}. Do not edit.",
           f" * {wl.get('name') or wl.get('key', 'program')} on {hw.target_model}"
           + (" with bias" if meta.get("bias") else ""),
           f" * {len(program.instructions)} instructions, {len(rc.kernels)} micro-op kernels.",
           " * Compile: gcc -c program.c -I <dir of vta_runtime.h>; link with TVM's libvta.",
           " */", "#include <stdbool.h>", "#include <stdint.h>", "",
           '#include "vta_runtime.h"', ""]
    prov = meta.get("provenance")
    if prov:
        out.insert(3, f" * schedule from: {_comment(json.dumps(prov.get('source')))} "
                      f"{_comment(str(prov.get('log') or ''))}"
                      f"{':' + str(prov['line']) if prov.get('line') else ''}")
    for k in range(len(rc.kernels)):
        out.append(f"static void* vtatune_uop_handle_{k} = NULL;")
    if rc.kernels:
        out.append("")
    for k, kernel in enumerate(rc.kernels):
        out += _c_kernel(k, kernel)
    out.append(f"int {fn}({', '.join(f'void* {p}' for p in params) or 'void'}) {{")
    out.append("  VTACommandHandle cmd = VTATLSCommandHandle();")
    for c in rc.calls:
        out.append("  " + _c_call(c, program, hw, params, rc))
    out += ["  return 0;", "}", ""]
    return "\n".join(out)


def _comment(text: str) -> str:
    return text.replace("*/", "* /")


def _c_kernel(k: int, kernel: Any) -> list[str]:
    alu = kernel.alu_op is not None
    lines = [f"static int vtatune_kernel_{k}(void* signature) {{", "  (void)signature;"]
    for lp in kernel.loops:
        lines.append(f"  VTAUopLoopBegin({lp.extent}, {lp.dst}, {lp.src}, {lp.wgt});")
    for u in kernel.uops:
        if alu:
            lines.append(f"  VTAUopPush(VTA_UOP_ALU, {int(kernel.reset)}, {u.dst}, {u.src}, 0, "
                         f"VTA_ALU_OPCODE_{kernel.alu_op.name}, {int(kernel.use_imm)}, "
                         f"{kernel.imm});")
        else:
            lines.append(f"  VTAUopPush(VTA_UOP_GEMM, {int(kernel.reset)}, {u.dst}, {u.src}, "
                         f"{u.wgt}, 0, 0, 0);")
    lines += ["  VTAUopLoopEnd();"] * len(kernel.loops)
    lines += ["  return 0;", "}", ""]
    return lines


def _tensor_at(program: Program, hw: HardwareConfig, x: MemInsn, params: list[str]
               ) -> tuple[str, int]:
    eb = mem_elem_bytes(x.mem, hw)
    addr = x.dram_base * eb
    for t, p in zip(program.tensors, params, strict=True):
        if t.address <= addr < t.address + t.nbytes:
            return p, x.dram_base - t.address // eb
    raise ExportError(f"{x.kind} at DRAM element {x.dram_base} is outside every tensor")


def _c_call(c: Call, program: Program, hw: HardwareConfig, params: list[str],
            rc: RuntimeCalls) -> str:
    if c.op in ("pop", "push"):
        return f"VTADep{c.op.capitalize()}(cmd, {c.args[0]}, {c.args[1]});"
    if c.op in ("gemm", "alu"):
        k = c.args[0]
        fn = "VTAPushGEMMOp" if c.op == "gemm" else "VTAPushALUOp"
        return (f"if ({fn}(&vtatune_uop_handle_{k}, vtatune_kernel_{k}, "
                "NULL, 0) != 0) return -1;")
    if c.op == "load":
        x = c.args[0]
        buf, off = _tensor_at(program, hw, x, params)
        return (f"VTALoadBuffer2D(cmd, {buf}, {off}, {x.x_size}, {x.y_size}, {x.x_stride}, "
                f"{x.x_pad_0}, {x.y_pad_0}, {x.x_pad_1}, {x.y_pad_1}, {x.sram_base}, "
                f"VTA_MEM_ID_{x.mem.name});")
    if c.op == "store":
        x = c.args[0]
        buf, off = _tensor_at(program, hw, x, params)
        return (f"VTAStoreBuffer2D(cmd, {x.sram_base}, VTA_MEM_ID_OUT, {buf}, {off}, "
                f"{x.x_size}, {x.y_size}, {x.x_stride});")
    return "VTASynchronize(cmd, 1u << 31, true);"


def write_c(source: Any, path: str | Path, function: str | None = None) -> Path:
    return _write(path, c_source(source, function).encode())
