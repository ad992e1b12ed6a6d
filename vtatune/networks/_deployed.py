"""What a deployed network runs on VTA: every VTA kernel of its steps, in order, with the
schedule of its task, each stream after the one before it (the tokens and pending pops one
leaves to the next: :class:`vtatune.lowering.Carry`), counted as fsim counts them and timed.

The network's VTA time is the sum over its kernels, as the model runs them again and again
(the first kernel takes what the last one left: the steady state of repeated inferences).
It is told apart as TVM's deploy flow adds to the conv kernels: the GEMM kernels alone (the
benchmark epilogue AutoTVM tunes with), what their fused epilogues add, and the ALU-only
kernels (residual adds on the ``sim`` and ``intelfocl`` targets).

Which schedule a task runs, from a log, is chosen as TVM v0.14's ``apply_history_best``
chooses it (:func:`schedules_from_logs`): the best record of the task's AutoTVM key (the
operator and shapes; not the epilogue, which TVM's key leaves out), preferring records of
the same target model, else any of the same VTA configuration (TVM's target key ``vta``: a
log of ``pynq`` records applies to ``sim``); an imported AutoTVM record ranks by its own
measured cost, as TVM ranks it. A task no record fits takes TVM's fallback config
(:func:`vtatune.schedule.tvm_fallback`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from simulator.functional import count
from simulator.timing import time_program
from vtatune.lowering import FRESH, Carry, lower
from vtatune.networks._layers import Network
from vtatune.records import hw_from, read_records, schedule_from, workload_from
from vtatune.schedule import Schedule, tvm_fallback
from vtatune.workloads import BENCHMARK, AddWorkload, autotvm_key

COUNTERS = ("inp_load_nbytes", "wgt_load_nbytes", "acc_load_nbytes", "uop_load_nbytes",
            "out_store_nbytes", "gemm_counter", "alu_counter")


@dataclass(frozen=True)
class KernelRun:
    """One VTA kernel of the deployed model: its step, task, cycles (after the kernel
    before it) and instructions."""

    step: str
    task: str
    cycles: int
    instructions: int


@dataclass(frozen=True)
class DeployedRun:
    """The deployed network's VTA kernels, run in order (steady state).

    ``gemm_kernels``: the conv and dense kernels with the benchmark epilogue, each alone
    (what AutoTVM tunes); ``epilogues``: what their fused epilogues (and carried tokens)
    add; ``alu_kernels``: the ALU-only kernels. The three sum to ``cycles``."""

    cycles: int
    counters: dict[str, int]
    kernels: tuple[KernelRun, ...]
    gemm_kernels: int
    epilogues: int
    alu_kernels: int

    def as_dict(self) -> dict[str, Any]:
        return {"cycles": self.cycles, "counters": dict(self.counters),
                "kernels": len(self.kernels),
                "breakdown": {"gemm_kernels": self.gemm_kernels, "epilogues": self.epilogues,
                              "alu_kernels": self.alu_kernels}}


def deployed_run(net: Network, schedules: dict[str, Schedule]) -> DeployedRun:
    """Run every VTA step of ``net`` with its task's schedule (``schedules`` by task name;
    every VTA task must have one)."""
    hw = net.hw
    tasks = {t.name: t for t in net.tasks}
    vta = [s for s in net.steps if s.task is not None]
    counters = dict.fromkeys(COUNTERS, 0)
    alone: dict[str, int] = {}  # a GEMM task with the benchmark epilogue, run alone
    for name in {s.task for s in vta}:
        wl = tasks[name].workload
        if not isinstance(wl, AddWorkload):
            low = lower(replace(wl, epilogue=BENCHMARK), schedules[name], hw)
            alone[name] = time_program(low.program, hw).cycles
    # one lowering per (workload, schedule, what the stream before left)
    programs: dict[tuple[Any, Schedule, Carry], Any] = {}

    def run(carry: Carry) -> tuple[list[tuple[KernelRun, Any]], Carry]:
        runs = []
        for step in vta:
            workload = step.workload or tasks[step.task].workload
            key = (workload, schedules[step.task], carry)
            if key not in programs:
                low = lower(workload, schedules[step.task], hw, carry=carry)
                timing = time_program(low.program, hw)
                programs[key] = (low.program, timing.cycles,
                                 Carry(timing.tokens_out, low.pending_out))
            program, cycles, carry = programs[key]
            runs.append((KernelRun(step.name, step.task, cycles, len(program)), program))
        return runs, carry

    _, last = run(FRESH)  # the first inference, for what its last kernel leaves
    pairs, _ = run(last)
    runs = [r for r, _ in pairs]
    counted: dict[int, dict[str, int]] = {}
    for _, program in pairs:  # the carry moves no byte: count each program once
        c = counted.setdefault(id(program), count(program, hw).as_dict())
        for k, v in c.items():
            counters[k] += v
    cycles = sum(r.cycles for r in runs)
    alu = sum(r.cycles for r in runs if isinstance(tasks[r.task].workload, AddWorkload))
    gemm = sum(alone[r.task] for r in runs if r.task in alone)
    return DeployedRun(cycles, counters, tuple(runs), gemm, cycles - alu - gemm, alu)


@dataclass(frozen=True)
class Applied:
    """The schedule a task takes from a log, and where it comes from (``log:line`` of the
    record, or ``fallback``: no record fits, TVM's fallback config)."""

    schedule: Schedule
    source: str


def schedules_from_logs(net: Network, logs: Iterable[str | Path]) -> dict[str, Applied]:
    """Per VTA task of ``net``, the schedule TVM's ``apply_history_best`` would give it from
    ``logs`` (see the module docstring)."""
    hw = net.hw
    same_config = replace(hw, target="sim").to_dict()
    best: dict[tuple[tuple[str, str], bool], tuple[float, str, dict[str, Any]]] = {}
    for path in logs:
        for line, r in read_records(path):
            if r.get("status") != "ok":
                continue
            try:
                rwl, rhw = workload_from(r), hw_from(r)
            except (KeyError, TypeError, ValueError):
                continue
            if replace(rhw, target="sim").to_dict() != same_config:
                continue
            exact = rhw.target == hw.target
            cost = (r["autotvm"]["seconds"] if isinstance(r.get("autotvm"), dict)
                    and r["autotvm"].get("seconds") is not None else r["cycles"])
            key = (autotvm_key(rwl), exact)
            if key not in best or cost < best[key][0]:
                best[key] = (cost, f"{path}:{line}", r)
    out = {}
    for task in net.tasks:
        key = autotvm_key(task.workload)
        hit = best.get((key, True)) or best.get((key, False))
        if hit is None:
            out[task.name] = Applied(tvm_fallback(task.workload, hw), "fallback")
        else:
            out[task.name] = Applied(schedule_from(hit[2]), hit[1])
    return out
