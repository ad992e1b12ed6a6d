"""How closely the timing model follows VTA's RTL: scoring the tsim reference.

The reference (``tsim_reference.jsonl`` beside ``tsim_micro/``, in the reference data
directory: the repository's ``tests/data/``, whose README says what each file is and where
it came from) holds cycles VTA's Chisel RTL counted under Verilator with tsim's simulated
memory, launch to FINISH: lowered schedules (rebuilt here from each record's operator,
shape, hardware, bias and schedule, through the normal lowering) and micro-benchmark
programs (loaded from their ``program.bin``). The codesign reference
(``tsim_codesign_reference.jsonl``) holds the same for other VTA shapes and buses, each
record's ``hw`` naming a ``vta_config.json`` in the data's ``hw/`` directory and its
``named_workload`` the shape. :func:`compare` times each with the model;
:func:`summarize` and :func:`goal_failures` say how close it is (:data:`TSIM_GOAL` for the
stock reference, :data:`CODESIGN_GOAL` for the codesign one).

Example:
    >>> rows = [Comparison({"workload": "w", "bias": False, "operator": "conv2d",
    ...                 "tsim_cycles": 100}, 101),
    ...         Comparison({"workload": "w", "bias": False, "operator": "conv2d",
    ...                 "tsim_cycles": 200}, 199)]
    >>> s = summarize(rows)[("all", None)]
    >>> round(s.mae, 4), s.spearman, s.best_agrees
    (0.0075, 1.0, True)
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from simulator.hardware import HardwareConfig
from simulator.program import Program
from simulator.timing import TimingProfile, time_program
from vtatune.errors import IllegalSchedule, VtatuneError

__all__ = [
    "CODESIGN", "CODESIGN_GOAL", "DATA_ENV", "HW_DIR", "LONG_PROGRAM", "MAX_LONG_ERROR",
    "MAX_MAE", "MICRO_ABS", "MICRO_REL", "MIN_SPEARMAN", "REFERENCE", "REPO_DATA", "TSIM_GOAL",
    "Comparison", "Goal", "ReferenceDataError", "Stats", "compare", "data_dir", "format_report",
    "goal_failures", "load_reference", "program_of", "recorded", "spearman", "stats",
    "summarize",
]

#: File names inside the reference data directory.
REFERENCE = "tsim_reference.jsonl"
CODESIGN = "tsim_codesign_reference.jsonl"
HW_DIR = "hw"  # the codesign records' vta_config.json files, by their ``hw`` name

#: The goal: mean absolute error, the bound on programs of at least LONG_PROGRAM cycles,
#: Spearman within every workload and bias, and micro-benchmarks within MICRO_REL or
#: MICRO_ABS cycles.
MAX_MAE = 0.01
LONG_PROGRAM = 10_000
MAX_LONG_ERROR = 0.03
MIN_SPEARMAN = 0.995
MICRO_REL, MICRO_ABS = 0.02, 2


@dataclass(frozen=True)
class Goal:
    """What a reference holds the model to (``min_spearman`` None: not checked)."""

    max_mae: float
    max_long_error: float
    min_spearman: float | None


TSIM_GOAL = Goal(MAX_MAE, MAX_LONG_ERROR, MIN_SPEARMAN)
#: The codesign reference's goal (issue 26): MAE at most 0.2%, every program of at least
#: LONG_PROGRAM cycles within 1%, the best schedule agreeing per workload, bias and hardware.
#: Its groups are mostly two or three schedules, some tied in the RTL: no Spearman bound.
CODESIGN_GOAL = Goal(0.002, 0.01, None)


#: The reference data's place in a checkout: test data, copied verbatim from the
#: measurements (its README.md gives each file's provenance).
REPO_DATA = Path("tests") / "data"
#: An environment variable naming another directory of the same layout, used instead.
DATA_ENV = "VTATUNE_SHARED_DATA"


def data_dir(repo: str | Path) -> Path:
    """Where the reference data is: ``$VTATUNE_SHARED_DATA`` when set, else the copy in the
    repository ``repo`` (:data:`REPO_DATA`)."""
    env = os.environ.get(DATA_ENV)
    return Path(env) if env else Path(repo).resolve() / REPO_DATA


class ReferenceDataError(VtatuneError):
    """The reference data is missing or a record cannot be rebuilt."""


@dataclass(frozen=True)
class Comparison:
    """One reference record and the model's cycles for it."""

    record: dict[str, Any]
    cycles: int

    @property
    def rtl(self) -> int:
        return int(self.record["tsim_cycles"])

    @property
    def micro(self) -> bool:
        return self.record.get("operator") == "micro"

    @property
    def ratio(self) -> float:
        """RTL / model."""
        return self.rtl / self.cycles

    @property
    def error(self) -> float:
        """|model - RTL| / RTL."""
        return abs(self.cycles - self.rtl) / self.rtl

    @property
    def micro_ok(self) -> bool:
        return abs(self.cycles - self.rtl) <= max(MICRO_ABS, MICRO_REL * self.rtl)


@dataclass(frozen=True)
class Stats:
    """Agreement over a group of scheduled programs."""

    count: int
    median: float  # of RTL / model
    p10: float
    p90: float
    low: float
    high: float
    mae: float  # mean |model - RTL| / RTL
    spearman: float | None  # None for a group of one
    best_agrees: bool  # the model's fastest schedule is the RTL's fastest


def load_reference(data_dir: str | Path, name: str = REFERENCE) -> list[dict[str, Any]]:
    """The records of ``data_dir/name`` (:data:`REFERENCE` or :data:`CODESIGN`)."""
    path = Path(data_dir) / name
    if not path.is_file():
        raise ReferenceDataError(f"{path}: no such file (the RTL reference data: tests/data/ "
                                 f"in the repository, or ${DATA_ENV})")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def program_of(record: dict[str, Any], data_dir: str | Path) -> tuple[Program, HardwareConfig]:
    """The program a record measured: its micro-benchmark file, or its schedule lowered
    into the stream the RTL ran (vtatune 0.1's: ``lower(..., stream="v0.1")``)."""
    from vtatune.builds import load_bin
    from vtatune.lowering import lower, lower_vadd
    from vtatune.records import schedule_from, workload_from
    from vtatune.workloads import VaddWorkload

    op = record["operator"]
    if op == "micro":
        loaded = load_bin(Path(data_dir) / record["program"])
        return loaded.program, loaded.hw
    hw = _hw_of(record, data_dir)
    if op == "vadd":
        return lower_vadd(VaddWorkload(**record["shape"]), hw), hw
    if "shape" in record:
        wl = workload_from({"workload": {"operator": op, "shape": record["shape"],
                                         "name": record.get("named_workload") or ""}})
    else:  # a codesign record names its workload only
        from vtatune.workloads import get_workload

        wl = get_workload(op, record["named_workload"])
    schedule = schedule_from(record)
    try:
        program = lower(wl, schedule, hw, bias=bool(record["bias"]), stream="v0.1").program
    except IllegalSchedule:
        if not schedule.tvm_strict:
            raise
        # A limit of TVM's own that vtatune now also holds AutoTVM points to: the RTL ran
        # the program all the same, and without the flag it lowers to the same stream.
        schedule = replace(schedule, tvm_strict=False)
        program = lower(wl, schedule, hw, bias=bool(record["bias"]), stream="v0.1").program
    if "insns" in record and len(program) != record["insns"]:
        raise ReferenceDataError(f"{record['workload']}: the schedule lowers to {len(program)} "
                             f"instructions, the RTL ran {record['insns']}")
    return program, hw


def _hw_of(record: dict[str, Any], data_dir: str | Path) -> HardwareConfig:
    """A preset name, else the data's ``hw/<name>.json``; checked against the record's
    ``bus_bits`` where it has one."""
    from simulator.hardware import PRESETS

    name = record["hw"]
    path = Path(data_dir) / HW_DIR / f"{name}.json"
    hw = (HardwareConfig.from_json(path) if name not in PRESETS and path.is_file()
          else HardwareConfig.resolve(name))
    if "bus_bits" in record and hw.bus_bits != record["bus_bits"]:
        raise ReferenceDataError(f"{record['workload']}: hardware {name} has a {hw.bus_bits}-bit "
                             f"bus, the RTL ran {record['bus_bits']} bits")
    return hw


def _time_one(record: dict[str, Any], data_dir: str, profile: TimingProfile | None) -> int:
    program, hw = program_of(record, data_dir)
    return time_program(program, hw, profile).cycles


def compare(records: Iterable[dict[str, Any]], data_dir: str | Path,
          profile: TimingProfile | None = None, jobs: int = 1) -> list[Comparison]:
    """Time every record's program (``profile``: the board's own when None)."""
    records = list(records)
    if jobs > 1:
        from joblib import Parallel, delayed

        cycles = Parallel(n_jobs=jobs)(delayed(_time_one)(r, str(data_dir), profile)
                                       for r in records)
    else:
        cycles = [_time_one(r, str(data_dir), profile) for r in records]
    return [Comparison(r, int(c)) for r, c in zip(records, cycles, strict=True)]


def _ranks(values: list[float]) -> np.ndarray:
    """Ranks with ties averaged."""
    a = np.asarray(values, float)
    order = a.argsort(kind="stable")
    ranks = np.empty(len(a))
    ranks[order] = np.arange(len(a), dtype=float)
    for v in np.unique(a):
        tie = a == v
        ranks[tie] = ranks[tie].mean()
    return ranks


def spearman(xs: list[float], ys: list[float]) -> float | None:
    """Spearman's rank correlation; None for fewer than two points or a constant side."""
    if len(xs) < 2:
        return None
    rx, ry = _ranks(xs), _ranks(ys)
    if rx.std() == 0 or ry.std() == 0:
        return None
    return round(float(np.corrcoef(rx, ry)[0, 1]), 12)


def stats(rows: list[Comparison]) -> Stats:
    ratios = np.array([r.ratio for r in rows])
    best_model = min(rows, key=lambda r: r.cycles)
    return Stats(len(rows), float(np.median(ratios)), float(np.percentile(ratios, 10)),
                 float(np.percentile(ratios, 90)), float(ratios.min()), float(ratios.max()),
                 float(np.mean([r.error for r in rows])),
                 spearman([r.rtl for r in rows], [r.cycles for r in rows]),
                 best_model.rtl == min(r.rtl for r in rows))


def _hardware(scored: Iterable[Comparison]) -> list[str]:
    """The hardware names of the scheduled programs, in order of first appearance."""
    return list(dict.fromkeys(str(r.record.get("hw")) for r in scored if not r.micro))


def summarize(scored: Iterable[Comparison]) -> dict[tuple[str, bool | None], Stats]:
    """Stats of the scheduled programs per (workload, bias), then ``("all", None)``. Where
    the programs span several hardware configurations, a workload is one per configuration,
    named ``workload [hw]``."""
    sched = [r for r in scored if not r.micro]
    several = len(_hardware(sched)) > 1
    groups: dict[tuple[str, bool | None], list[Comparison]] = {}
    for r in sched:
        name = r.record["workload"] + (f" [{r.record['hw']}]" if several else "")
        groups.setdefault((name, bool(r.record["bias"])), []).append(r)
    out = {k: stats(v) for k, v in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1]))}
    if sched:
        out[("all", None)] = stats(sched)
    return out


def _percent(x: float) -> str:
    return f"{x * 100:g}%"


def goal_failures(scored: list[Comparison], goal: Goal = TSIM_GOAL) -> list[str]:
    """Every way the model misses ``goal`` (empty: it meets it)."""
    fails = []
    summary = summarize(scored)
    overall = summary.get(("all", None))
    if overall is not None and overall.mae > goal.max_mae:
        fails.append(f"mean absolute error {overall.mae:.2%} > {_percent(goal.max_mae)}")
    several = len(_hardware(scored)) > 1
    for line, r in enumerate(scored, 1):
        where = f" [{r.record['hw']}]" if several else ""
        name = r.record.get("program") or (
            f"{r.record['workload']}{where} bias={int(bool(r.record['bias']))} (record {line})")
        if r.micro and not r.micro_ok:
            fails.append(f"micro-benchmark {name}: model {r.cycles} vs RTL {r.rtl}")
        if not r.micro and r.rtl >= LONG_PROGRAM and r.error > goal.max_long_error:
            fails.append(f"{name}: model {r.cycles} vs RTL {r.rtl} ({r.error:.2%})")
    for (wl, bias), s in summary.items():
        if wl == "all":
            continue
        if (goal.min_spearman is not None and s.spearman is not None
                and s.spearman < goal.min_spearman):
            fails.append(f"{wl} bias={bias}: Spearman {s.spearman:.4f} < {goal.min_spearman}")
        if not s.best_agrees:
            fails.append(f"{wl} bias={bias}: the model's best schedule is not the RTL's")
    return fails


def format_report(scored: list[Comparison], goal: Goal = TSIM_GOAL) -> str:
    """The figures as a table: per workload and bias, overall, per hardware configuration
    (where there are several), and the micro-benchmarks."""
    summary = summarize(scored)
    width = max([24] + [len(wl) for wl, _ in summary])
    lines = [f"{'workload':{width}} {'bias':>4} {'n':>3} {'median':>7} {'p10':>7} {'p90':>7} "
             f"{'min':>7} {'max':>7} {'MAE':>7} {'Spearman':>8} best",
             "(RTL / model ratios; MAE = mean |model - RTL| / RTL)"]
    for (wl, bias), s in summary.items():
        rho = "-" if s.spearman is None else f"{s.spearman:.4f}"
        lines.append(f"{wl:{width}} {'' if bias is None else int(bias):>4} {s.count:>3} "
                     f"{s.median:7.4f} {s.p10:7.4f} {s.p90:7.4f} {s.low:7.4f} {s.high:7.4f} "
                     f"{s.mae:7.2%} {rho:>8} {'yes' if s.best_agrees else 'NO'}")
    hardware = _hardware(scored)
    if len(hardware) > 1:
        for hw in hardware:
            rows = [r for r in scored if not r.micro and str(r.record.get("hw")) == hw]
            groups = [s for (wl, _), s in summary.items() if wl.endswith(f" [{hw}]")]
            lines.append(f"hardware {hw}: {len(rows)} programs, MAE "
                         f"{np.mean([r.error for r in rows]):.3%}, largest error "
                         f"{max(r.error for r in rows):.3%}, best schedule agrees on "
                         f"{sum(s.best_agrees for s in groups)} of {len(groups)} workloads")
    micro = [r for r in scored if r.micro]
    if micro:
        exact = sum(r.cycles == r.rtl for r in micro)
        ok = sum(r.micro_ok for r in micro)
        worst = max(micro, key=lambda r: abs(r.cycles - r.rtl))
        lines.append(f"micro-benchmarks: {ok} of {len(micro)} within {MICRO_REL:.0%} or "
                     f"{MICRO_ABS} cycles, {exact} exact; largest difference "
                     f"{worst.cycles - worst.rtl:+d} cycles ({worst.record['program']})")
    long_ = [r for r in scored if not r.micro and r.rtl >= LONG_PROGRAM]
    if long_:
        worst = max(long_, key=lambda r: r.error)
        lines.append(f"programs of >= {LONG_PROGRAM:,} cycles: largest error "
                     f"{worst.error:.2%} (limit {_percent(goal.max_long_error)})")
    fails = goal_failures(scored, goal)
    shown = fails[:12] + ([f"... and {len(fails) - 12} more"] if len(fails) > 12 else [])
    lines.append("goal: met" if not fails else "goal: MISSED\n  " + "\n  ".join(shown))
    return "\n".join(lines)


def recorded(records: Iterable[dict[str, Any]]) -> list[Comparison]:
    """The reference's own ``vtatune_cycles``: the model as it was when the RTL ran."""
    return [Comparison(r, r["vtatune_cycles"]) for r in records
            if isinstance(r.get("vtatune_cycles"), int)]
