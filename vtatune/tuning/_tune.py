"""Tune schedules with Optuna: one study per workload x hardware (x template), every trial
simulated, logged and replayable.

Example (AutoTVM's ``tuner.tune(n_trial=..., callbacks=[log_to_file(...)])`` in one call):

    >>> import vtatune
    >>> result = vtatune.tune("gemm", trials=20, seed=0, log="logs/gemm.jsonl")  # doctest: +SKIP
    >>> result.best_cycles, result.speedup_default  # doctest: +SKIP
    (131534, 1.21)

``trials`` counts distinct legal configs simulated in the study: illegal points are rejected
by the template's legality check without simulation, repeats are answered from the cache.
A resumed study runs until it holds ``trials`` of them (or the whole legal space).
"""

from __future__ import annotations

import time
from pathlib import Path

from search_spaces import get_template
from simulator.hardware import HardwareConfig
from vtatune.errors import VtatuneError
from vtatune.logging import optuna_verbosity
from vtatune.records import RecordWriter, check_log_target, read_records, target_key
from vtatune.tuning._batches import parallel_pool
from vtatune.tuning._study import OpenStudy, TuneResult
from vtatune.tuning.samplers import DEFAULT_SAMPLER, check_sampler
from vtatune.tuning.storages import open_storage
from vtatune.workloads import Workload, resolve

#: Where tuning writes its logs unless told (``--log``): the runs of this checkout, which git
#: ignores; the tracked, shipped logs live in ``logs/`` and are never a default.
RUNS_DIR = Path("runs")


#: numpy's seed range (Optuna's samplers seed numpy generators with it).
SEED_MAX = 2**32 - 1


def check_seed(seed: int | None) -> None:
    """A sampler seed numpy and Optuna accept (None: drawn later), or :class:`TunerError`."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)
                             or not 0 <= seed <= SEED_MAX):
        raise TunerError(f"seed must be an integer in 0..{SEED_MAX}, got {seed!r}")


class TunerError(VtatuneError):
    """Bad tuning input (trials < 1, jobs < 1, a log of another problem on resume)."""


def default_log_path(workload: Workload, hw: HardwareConfig, space: str = "full",
                     bias: bool = False, directory: str | Path = RUNS_DIR) -> Path:
    """``runs/<operator>-<workload>-<hw model>[-autotvm][-bias].jsonl``."""
    name = workload.name or workload.key()
    parts = [workload.operator, name, hw.target_model]
    if space != "full":
        parts.append(space)
    if bias:
        parts.append("bias")
    return Path(directory) / ("-".join(parts) + ".jsonl")


def check_log_belongs(log: Path, workloads: list[Workload], hw: HardwareConfig,
                       bias: bool) -> None:
    """On resume, a log holding only other problems is somebody else's: refuse. A log that
    holds one of ``workloads`` among others (a network's log, one layer resumed) is this
    problem's."""
    if not log.exists():
        return
    wanted = {(w.key(), hw.target_model, bool(bias)) for w in workloads}
    held: dict[tuple[str, str, bool], str] = {}  # the log's problems, in order, by name
    for _, r in read_records(log):
        try:
            k = target_key(r)
        except (KeyError, TypeError):
            continue
        if k in wanted:
            return
        held.setdefault(k, r["workload"].get("name") or k[0])
    if not held:
        return
    names = list(held.values())
    shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    models = sorted({k[1] + (" with bias" if k[2] else "") for k in held})
    raise TunerError(f"cannot resume: {log} holds {shown} on {', '.join(models)}, not "
                     f"{' / '.join(w.name or w.key() for w in workloads)} on "
                     f"{hw.target_model}{' with bias' if bias else ''}")


@optuna_verbosity()
def tune(workload: Workload | str, hw: HardwareConfig | str | None = None, *,
         trials: int = 200, sampler: str = DEFAULT_SAMPLER, seed: int | None = None, jobs: int = 1,
         log: str | Path | None = None, storage: str | None = None, resume: bool = False,
         space: str = "full", bias: bool = False, progress: bool = False) -> TuneResult:
    """Tune one workload on one hardware config; see the module docstring.

    ``workload``: a Workload, an operator (``"conv2d"``, ``"gemm"``: its tutorial), a
    workload name as the command line takes it (``"resnet18.C8"``, ``"C8"``,
    ``"dense128"``) or both (``"conv2d:resnet18.C8"``).
    ``hw``: a HardwareConfig, a preset name or a ``vta_config.json`` path (default pynq).
    ``sampler``: one of :data:`SAMPLERS`. ``seed``: fixes a serial run (when omitted, a
    new study draws one and records it, and a later run of the study keeps it). ``jobs``:
    simulation processes (joblib/loky). ``log``: the JSON-lines log (default
    :func:`default_log_path`). ``storage``: an Optuna storage URL shared by several workers
    (default: a journal file beside the log). ``resume``: continue the
    newest study of this problem in the storage. Optuna's INFO lines are shown only when
    asked (:mod:`vtatune.logging`).
    """

    if not isinstance(trials, int) or trials < 1:
        raise TunerError(f"trials must be a positive integer, got {trials!r}")
    if not isinstance(jobs, int) or jobs < 1:
        raise TunerError(f"jobs must be a positive integer, got {jobs!r}")
    check_seed(seed)
    check_sampler(sampler)
    wl, hw = resolve(workload, hw)
    if space not in ("full", "autotvm"):
        raise TunerError(f"unknown space {space!r} (known: full, autotvm)")
    log_path = Path(log) if log is not None else default_log_path(wl, hw, space, bias)
    check_log_target(log_path)
    if resume:
        check_log_belongs(log_path, [wl], hw, bias)
    t0 = time.perf_counter()
    impossible = get_template(wl, hw, bias=bias, space=space).no_legal_config()
    if impossible is not None:
        raise TunerError(f"no schedule of {wl.describe()} can run on {hw.target_model}: "
                         f"{impossible} ({impossible.rule})")
    store = open_storage(storage, log_path)
    try:
        study = OpenStudy(wl, hw, store, log=log_path, sampler=sampler, seed=seed, jobs=jobs,
                          resume=resume, space=space, bias=bias, allow_others=False,
                          progress=progress)
        with RecordWriter(log_path) as writer, parallel_pool(jobs) as pool:
            study.run(trials, writer, pool)
    finally:
        store.close()
    return study.result(trials, time.perf_counter() - t0)


