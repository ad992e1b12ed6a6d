"""The outer search of co-design: hardware configurations evaluated (each by the inner
schedule search of every task), exhaustively or by NSGA-II, in one Optuna study."""


from __future__ import annotations

import contextlib
import json
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from simulator.hardware import HardwareConfig
from simulator.resources import DEVICES, estimate
from vtatune.design._designs import Design, DesignResult, pareto_front
from vtatune.design._hardware import BUILD_FILE, build_file_text, write_atomically
from vtatune.design._inner import (
    DesignError,
    InnerResult,
    network_log,
    placed,
    tune_tasks,
    vta_layers,
)
from vtatune.design._space import (
    BUFFERS,
    KNOB_RANGES,
    SHAPE_KNOBS,
    compute_floor,
    infeasibility,
    maximal_configs,
    nearest_feasible,
    runnable_shapes,
    shape_label,
    shapes,
    smallest,
    stock,
)
from vtatune.errors import VtatuneError
from vtatune.tuning import RUNS_DIR

OBJECTIVES = ("latency", "latency-area")


_KNOBS = (*SHAPE_KNOBS, *BUFFERS)


# --- the search -------------------------------------------------------------------------
def _params(hw: HardwareConfig) -> dict[str, int]:
    return {k: getattr(hw, k) for k in _KNOBS}


def _evaluate(args: tuple[str, HardwareConfig, int, int, str]) -> InnerResult:
    network, hw, trials, seed, logdir = args
    return tune_tasks(network, hw, trials, seed, logdir)


def _open_study(out: Path, storage: str | None, base: str, resume: bool,
                seed: int) -> tuple[Any, str]:
    """The design study (created, or loaded on ``resume``) and where it lives: ``out``'s
    ``design.journal`` (a :class:`~vtatune.tuning.storages.JournalFile`: whole records, a
    failed write is one line), ``journal:FILE`` or an Optuna storage URL.

    A storage that cannot be created (a read-only or full file system, a database that
    refuses) is one line (DesignError, StorageError) and leaves nothing behind: the
    directories made and the journal started here are removed again."""
    import optuna

    from vtatune.tuning.storages import JournalFile

    path = out / "design.journal" if storage is None else \
        Path(storage.removeprefix("journal:")) if storage.startswith("journal:") else None
    # What this call creates, removed again if it fails: the journal, the directories.
    new_journal = path if path is not None and not path.exists() else None
    new_dirs = sorted({d for top in (out, *([path.parent] if path is not None else []))
                       for d in (top, *top.parents) if not d.exists()},
                      key=lambda d: len(d.parts), reverse=True)  # deepest first
    backend = None
    try:
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DesignError(f"cannot create {out}: {exc.strerror}") from None
        if path is not None:
            backend = JournalFile(path)
            store: Any = optuna.storages.JournalStorage(backend)
        else:
            store = storage
        try:
            names = {s.study_name for s in optuna.storages.get_storage(store).get_all_studies()}
            name = base
            if not resume:
                i = 1
                while name in names:
                    i += 1
                    name = f"{base}#{i}"
            sampler = optuna.samplers.NSGAIISampler(seed=seed, population_size=8)
            study = optuna.create_study(study_name=name, storage=store, sampler=sampler,
                                        directions=["minimize", "minimize"],
                                        load_if_exists=True)
        except VtatuneError:
            raise
        except Exception as exc:  # noqa: BLE001 - a driver's error is one line for the user
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise DesignError(f"cannot open storage {storage or path}: {first}") from None
    except VtatuneError:
        if backend is not None:
            with contextlib.suppress(VtatuneError, OSError):
                backend.close()
        with contextlib.suppress(OSError):
            if new_journal is not None:
                new_journal.unlink(missing_ok=True)
        for d in new_dirs:
            with contextlib.suppress(OSError):
                d.rmdir()
        raise
    return study, str(path) if path is not None else str(storage)


class _Search:
    """The design study: one Optuna trial per evaluated configuration."""

    def __init__(self, network: str, board: str, objective: str, trials: int, seed: int,
                 out: Path, storage: str | None, resume: bool, jobs: int) -> None:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.network, self.board, self.objective = network, board, objective
        self.trials, self.seed, self.out, self.jobs = trials, seed, out, jobs
        self.device = DEVICES[board]
        self.stock_net = placed(network, stock(board))  # an unknown network fails here
        self.reference = vta_layers(self.stock_net)
        self.logdir = out / "tuning"
        base = f"design.{self.stock_net.name}.{board}.{objective}.t{trials}.s{seed}"
        self.study, self.storage_desc = _open_study(out, storage, base, resume, seed)
        self.results: dict[str, InnerResult] = {}
        self.infeasible: dict[str, str] = {}
        for tr in self.study.get_trials(deepcopy=False):
            key = tr.user_attrs.get("bitstream")
            if key and "tasks" in tr.user_attrs:
                reason = tr.user_attrs.get("reason")
                self.results[key] = InnerResult(tr.user_attrs["tasks"],
                                                tr.user_attrs.get("counts", {}), reason, 0.0,
                                                tr.user_attrs.get("vta_cycles"))
            elif key and "reason" in tr.user_attrs:
                self.infeasible[key] = tr.user_attrs["reason"]
        self.new = 0
        self.stock_bitstream = stock(board).bitstream
        self.stock_cycles: int | None = None

    # Each configuration evaluated becomes one finished trial, whatever the outer search.
    def _add(self, hw: HardwareConfig, inner: InnerResult | None, reason: str | None) -> None:
        import optuna

        attrs: dict[str, Any] = {"bitstream": hw.bitstream}
        if inner is not None:
            attrs |= {"tasks": inner.cycles, "counts": inner.counts,
                      "vta_cycles": inner.vta_cycles, "seconds": round(inner.seconds, 2)}
        if reason:
            attrs["reason"] = reason
            self.infeasible[hw.bitstream] = reason
        values = None if reason else [self._design(hw, inner).total_ms,
                                      self._design(hw, inner).area]
        dists = {k: optuna.distributions.IntDistribution(*KNOB_RANGES[k]) for k in _KNOBS}
        self.study.add_trial(optuna.trial.create_trial(
            params=_params(hw), distributions=dists, user_attrs=attrs, values=values,
            state=optuna.trial.TrialState.FAIL if reason else
            optuna.trial.TrialState.COMPLETE))

    def _design(self, hw: HardwareConfig, inner: InnerResult | None) -> Design:
        assert inner is not None
        total = inner.total_cycles
        stock_cycles = self.stock_cycles or total
        return Design(hw, estimate(hw, self.device), dict(inner.cycles), total, stock_cycles)

    @property
    def candidates_tuned(self) -> int:
        """Candidates tuned so far, resumed ones included: every configuration besides the
        stock one whose tasks were tuned (``results``; one found infeasible after its tuning,
        which is also in ``infeasible``, counts once). A configuration refused before tuning
        (``infeasibility``: only in ``infeasible``) is no candidate: it cost no trial."""
        return sum(key != self.stock_bitstream for key in self.results)

    def evaluate(self, candidates: list[HardwareConfig]) -> list[Design | None]:
        """Tune the configurations not yet known (``jobs`` at a time) that pass every rule
        decided without tuning (:func:`infeasibility`; one that fails is recorded infeasible
        with its reason, untuned); a design or None each."""
        todo = []
        for hw in candidates:
            if hw.bitstream in self.results or hw.bitstream in self.infeasible:
                continue
            reason = infeasibility(hw, self.device, self.network, self.reference)
            if reason:
                self.infeasible[hw.bitstream] = reason
                self._add(hw, None, reason)
            elif hw.bitstream not in {h.bitstream for h in todo}:
                todo.append(hw)
        args = [(self.network, hw, self.trials, self.seed, str(self.logdir)) for hw in todo]
        if self.jobs > 1 and len(todo) > 1:
            with ProcessPoolExecutor(min(self.jobs, len(todo))) as pool:
                inners = list(pool.map(_evaluate, args))
        else:
            inners = [_evaluate(a) for a in args]
        for hw, inner in zip(todo, inners, strict=True):
            self.new += 1
            self.results[hw.bitstream] = inner
            self._add(hw, inner, inner.reason)
        out = []
        for hw in candidates:
            inner = self.results.get(hw.bitstream)
            ok = inner is not None and inner.reason is None
            out.append(self._design(hw, inner) if ok else None)
        return out

    def designs(self) -> list[Design]:
        from simulator.hardware import HardwareConfig as HW

        out = []
        for tr in self.study.get_trials(deepcopy=False):
            if tr.state.name != "COMPLETE" or "tasks" not in tr.user_attrs:
                continue
            hw = HW(target=self.board, **_knobs(tr.params))
            if hw.bitstream not in self.results:
                continue
            out.append(self._design(hw, self.results[hw.bitstream]))
        unique = {d.hw.bitstream: d for d in out}
        return list(unique.values())


def co_design(network: str, board: str, *, trials_per_task: int = 20,
              objective: str = "latency", candidates: int | None = None, jobs: int = 1,
              seed: int = 0,
              out: str | Path | None = None, storage: str | None = None,
              resume: bool = False) -> DesignResult:
    """Search VTA configurations for ``network`` on ``board``; see the module docstring.

    ``candidates``: at most this many candidates, a candidate being a configuration
    besides the stock one whose tasks are tuned: ranked, or found infeasible after its
    tuning (a task without a legal schedule in its trials), each counted once; a
    configuration refused before tuning by a rule that needs no trial (encoding, layout,
    resources, placement, a task's shape rule: :func:`infeasibility`) is not one (default:
    the whole exhaustive walk for ``latency``, 24 for ``latency-area``). A resumed study's
    candidates count.
    ``network``: a catalogue name or an ONNX file; a design must run on VTA the layers the
    stock design runs. ``out``: where the design study, the tuning logs and the Pareto
    designs' ``vta_config.json``, ``hardware_build.json`` and logs go (default
    ``runs/design-<network>-<board>``); a file system that cannot take them (read-only,
    full) raises DesignError, leaving no design file half-written.
    """
    if board not in DEVICES:
        raise DesignError(f"unknown board {board!r} (known: {', '.join(DEVICES)})")
    if objective not in OBJECTIVES:
        raise DesignError(f"unknown objective {objective!r} (known: {', '.join(OBJECTIVES)})")
    if candidates is None:
        candidates = 24 if objective == "latency-area" else 1 << 30
    for name, value in (("trials_per_task", trials_per_task), ("jobs", jobs),
                        ("candidates", candidates)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise DesignError(f"{name} must be a positive integer, got {value!r}")
    t0 = time.perf_counter()
    out_dir = Path(out) if out is not None else \
        RUNS_DIR / f"design-{Path(network).stem}-{board}"
    try:
        return _co_design(network, board, trials_per_task, objective, candidates, jobs, seed,
                          out_dir, storage, resume, t0)
    except OSError as exc:  # a read-only or full file system, a file in the way
        where = f"{exc.filename}: " if exc.filename else ""
        raise DesignError(f"cannot write the design search's files under {out_dir}: "
                          f"{where}{exc.strerror or exc}") from None


def _co_design(network: str, board: str, trials_per_task: int, objective: str,
               candidates: int, jobs: int, seed: int, out_dir: Path, storage: str | None,
               resume: bool, t0: float) -> DesignResult:
    search = _Search(network, board, objective, trials_per_task, seed, out_dir, storage,
                     resume, jobs)
    base = stock(board)
    (stock_design,) = search.evaluate([base])
    if stock_design is None:
        raise DesignError(f"the stock design cannot run {network}: "
                          f"{search.infeasible.get(base.bitstream)}")
    search.stock_cycles = stock_design.total_cycles
    stock_design = replace(stock_design, stock_cycles=stock_design.total_cycles)
    skipped: list[str] = []
    if objective == "latency":
        _exhaustive(search, skipped, candidates)
    else:
        _nsga(search, candidates)
    evaluated = tuple(sorted(search.designs(), key=lambda d: d.total_cycles))
    front = pareto_front(evaluated)
    _write(front, search, out_dir)
    return DesignResult(network, board, objective, trials_per_task, stock_design, front,
                        evaluated, dict(search.infeasible), tuple(skipped),
                        search.study.study_name, search.storage_desc, str(out_dir), search.new,
                        time.perf_counter() - t0)


def _exhaustive(search: _Search, skipped: list[str], candidates: int) -> None:
    best = min(d.total_cycles for d in search.designs())
    for shape in shapes(search.network, search.board, search.reference):
        floor = compute_floor(placed(search.network, smallest(search.board, shape)))
        label = shape_label(shape)
        if floor >= best:
            skipped.append(f"{label}: compute floor {floor} cycles >= best {best}")
            continue
        if search.candidates_tuned >= candidates:  # its configurations need not be found
            skipped.append(f"{label}: not tuned: the candidate limit ({candidates}) is "
                           "reached")
            continue
        configs = maximal_configs(search.board, search.device, shape)
        if not configs:
            probe = smallest(search.board, shape)
            why = infeasibility(probe, search.device, search.network, search.reference) \
                or "no buffer sizes fit"
            skipped.append(f"{label}: no feasible buffer sizes even at the smallest ({why})")
            continue
        # Configurations known already (resumed, or the stock one) are neither tuned again
        # nor new candidates; one refused before tuning is no candidate, so the room it
        # would have taken goes to the next.
        fresh = [hw for hw in configs
                 if hw.bitstream not in search.results and hw.bitstream not in search.infeasible]
        tuned_here = 0
        while fresh:
            room = candidates - search.candidates_tuned
            if room <= 0:
                # Say how many were left: the shape may hold the design chosen, tuned
                # before the limit was reached.
                total = len(fresh) + tuned_here
                left = f"{len(fresh)} of its {total} configurations" if tuned_here else \
                    ("its configuration" if total == 1 else f"its {total} configurations")
                skipped.append(f"{label}: {left} not tuned: the candidate limit "
                               f"({candidates}) is reached")
                break
            batch, fresh = fresh[:room], fresh[room:]
            tuned_here += len(batch)
            for d in search.evaluate(batch):
                if d is not None:
                    best = min(best, d.total_cycles)


def _nsga(search: _Search, candidates: int) -> None:
    """NSGA-II over the knobs; each proposal is evaluated as the feasible configuration
    nearest it (:func:`nearest_feasible`), so no ask is spent on a design that cannot be
    built, and the population is made of the designs evaluated."""
    import optuna

    # Only shapes whose tasks can run: a proposal mapped to one that cannot would be refused.
    found = runnable_shapes(search.network, search.board, search.reference)
    dists = {k: optuna.distributions.IntDistribution(*KNOB_RANGES[k]) for k in _KNOBS}
    for i, knob in enumerate(SHAPE_KNOBS):
        values = sorted({shape[i] for shape in found})
        if values:
            dists[knob] = optuna.distributions.IntDistribution(values[0], values[-1])
    maximal: dict[Any, tuple[HardwareConfig, ...]] = {}
    asks = 0
    while search.candidates_tuned < candidates and asks < 50 * candidates:
        batch = []
        for _ in range(search.jobs):
            trial = search.study.ask(dists)
            asks += 1
            hw = nearest_feasible(search.board, search.device, _knobs(trial.params), found,
                                  maximal)
            # The study records each configuration once, as the trial _add writes.
            search.study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            if hw is not None:
                batch.append(hw)
        search.evaluate(batch)


def _knobs(params: dict[str, Any]) -> dict[str, int]:
    """A trial's knobs (a study written before BLOCK_IN/BLOCK_OUT had one log_block)."""
    if "log_block" in params:
        params = {**params, "log_block_in": params["log_block"],
                  "log_block_out": params["log_block"]}
    return {k: int(params[k]) for k in _KNOBS}


def _write(front: tuple[Design, ...], search: _Search, out: Path) -> None:
    """Per Pareto design ``out/<bitstream>/``: ``vta_config.json``, ``hardware_build.json``
    (what building it on the Chisel RTL takes) and ``<network>.jsonl`` (its tuned log),
    all written whole or not at all."""
    files: dict[Path, bytes] = {}
    for d in front:
        where = out / d.hw.bitstream
        files[where / "vta_config.json"] = (json.dumps(d.hw.to_dict(), indent=2) + "\n").encode()
        files[where / BUILD_FILE] = build_file_text(d.hw).encode()
        path = network_log(search.logdir, search.network, d.hw)
        if path.exists():
            files[where / path.name] = path.read_bytes()
    write_atomically(files, "the Pareto designs")
