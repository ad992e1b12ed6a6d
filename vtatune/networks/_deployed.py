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

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from math import inf
from pathlib import Path
from typing import Any

from simulator.functional import count
from simulator.hardware import HardwareConfig
from simulator.timing import time_program
from vtatune.autotvm import import_autotvm
from vtatune.errors import VtatuneError
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
    before it), instructions and fsim's counters."""

    step: str
    task: str
    cycles: int
    instructions: int
    counters: dict[str, int]


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

    def run(carry: Carry) -> tuple[list[KernelRun], Carry]:
        runs = []
        for step in vta:
            workload = step.workload or tasks[step.task].workload
            key = (workload, schedules[step.task], carry)
            if key not in programs:
                low = _lower(workload, schedules[step.task], tasks[step.task].workload, hw,
                             carry)
                timing = time_program(low.program, hw)
                # the carry moves no byte: a program's counters are its own
                programs[key] = (len(low.program), timing.cycles,
                                 Carry.left_by(low.pending_out, timing.tokens_out),
                                 count(low.program, hw).as_dict())
            size, cycles, carry, counted = programs[key]
            runs.append(KernelRun(step.name, step.task, cycles, size, counted))
        return runs, carry

    _, last = run(FRESH)  # the first inference, for what its last kernel leaves
    runs, _ = run(last)
    for r in runs:
        for k, v in r.counters.items():
            counters[k] += v
    cycles = sum(r.cycles for r in runs)
    alu = sum(r.cycles for r in runs if isinstance(tasks[r.task].workload, AddWorkload))
    gemm = sum(alone[r.task] for r in runs if r.task in alone)
    return DeployedRun(cycles, counters, tuple(runs), gemm, cycles - alu - gemm, alu)


def _lower(workload: Any, schedule: Schedule, tuned: Any, hw: HardwareConfig,
           carry: Carry) -> Any:
    """``workload`` lowered with its task's schedule; a pass deploy runs in another form
    than its task (unpadded on a zero-point border, another epilogue) takes the default
    schedule where the task's does not lower, as deploy's builder does."""
    try:
        return lower(workload, schedule, hw, carry=carry)
    except VtatuneError:
        if workload == replace(tuned, name=workload.name):
            raise
        from search_spaces import default_schedule

        return lower(workload, default_schedule(workload, hw, workload.epilogue.bias), hw,
                     carry=carry)


@dataclass(frozen=True)
class Applied:
    """The schedule a task takes from a log, and where it comes from (``log:line`` of the
    record, or ``fallback``: no record fits, TVM's fallback config)."""

    schedule: Schedule
    source: str


def _is_autotvm_log(path: Path) -> bool:
    """Whether ``path`` holds AutoTVM records (its first record has AutoTVM's ``input``)."""
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            for text in f:
                if text.strip() and not text.lstrip().startswith("#"):
                    return '"input"' in text and '"workload"' not in text
    except OSError:
        return False
    return False


def _candidates(path: Path) -> Iterator[tuple[Any, HardwareConfig, Schedule, float, str]]:
    """(workload, hardware, schedule, cost in seconds, ``path:line``) of every usable
    record of a vtatune log or an AutoTVM log. The cost is what TVM ranks by: an AutoTVM
    record's measured mean, a vtatune record's simulated time."""
    if _is_autotvm_log(path):
        for rec in import_autotvm(path, simulate=False):
            cost = rec.autotvm_seconds if rec.autotvm_seconds is not None else inf
            yield rec.workload, rec.hw, rec.schedule, cost, f"{path}:{rec.line}"
        return
    for line, r in read_records(path):
        if r.get("status") != "ok":
            continue
        try:
            wl, rhw, schedule = workload_from(r), hw_from(r), schedule_from(r)
        except (KeyError, TypeError, ValueError, VtatuneError):
            continue
        measured = r.get("autotvm") if isinstance(r.get("autotvm"), dict) else {}
        cost = measured.get("seconds")
        yield wl, rhw, schedule, cost if cost is not None else r["seconds"], f"{path}:{line}"


def schedules_from_logs(net: Network, logs: Iterable[str | Path]) -> dict[str, Applied]:
    """Per VTA task of ``net``, the schedule TVM's ``apply_history_best`` would give it from
    ``logs``: vtatune logs, AutoTVM logs (TVM's own, TopHub's) or both (see the module
    docstring)."""
    hw = net.hw
    same_config = replace(hw, target="sim").to_dict()
    best: dict[tuple[tuple[str, str], bool], tuple[float, str, Schedule]] = {}
    for path in logs:
        for wl, rhw, schedule, cost, where in _candidates(Path(path)):
            if replace(rhw, target="sim").to_dict() != same_config:
                continue
            key = (autotvm_key(wl), rhw.target == hw.target)
            if key not in best or cost < best[key][0]:
                best[key] = (cost, where, schedule)
    out = {}
    for task in net.tasks:
        key = autotvm_key(task.workload)
        hit = best.get((key, True)) or best.get((key, False))
        if hit is None:
            out[task.name] = Applied(tvm_fallback(task.workload, hw), "fallback")
        else:
            out[task.name] = Applied(hit[2], hit[1])
    return out
