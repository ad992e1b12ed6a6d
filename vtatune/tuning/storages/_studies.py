"""Opening a storage and the study of a problem in it, and reading a study incrementally.

A study is named after its problem (workload x hardware x template x space x bias), so
every worker of one problem on one storage opens the same study, whether they start
together or one after another (:func:`open_study`; the first creates it, the rest load it;
no ``#2`` copies).
"""
from __future__ import annotations

import contextlib
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.storages import BaseStorage

from vtatune.tuning import optuna_compat
from vtatune.tuning.storages._common import (
    GRACE_FACTOR,
    StorageError,
    heartbeat_seconds,
    outage_seconds,
)
from vtatune.tuning.storages._database import _rdb, resolve_url
from vtatune.tuning.storages._journal import HeartbeatJournalStorage, JournalFile
from vtatune.tuning.storages._resilient import Resilient, _first_line


# --- reading a study ---------------------------------------------------------------------
class TrialFeed:
    """One study's trials in number order (``trials[i].number == i``), kept up to date.

    Optuna's ``get_all_trials`` builds the list of every trial on every call, and a worker
    reads its study several times per trial (the sampler, the claim before simulating):
    work that grew with the study. On a journal, :meth:`read` asks only for the trials
    created since the last read and for those unfinished then (the only ones that can
    change), by trial number; other storages are read whole (a database query either way).
    The list returned is the feed's own: read it, do not change it.
    """

    def __init__(self, storage: BaseStorage, study_id: int, *, incremental: bool) -> None:
        self._storage, self._study_id, self._incremental = storage, study_id, incremental
        self._trials: list[optuna.trial.FrozenTrial] = []
        self._open: list[int] = []  # numbers of the trials unfinished when last read
        self.reads = 0  # storage calls made (tests count them)

    def read(self) -> list[optuna.trial.FrozenTrial]:
        storage, trials = self._storage, self._trials
        if not self._incremental:
            self.reads += 1
            self._trials = storage.get_all_trials(self._study_id, deepcopy=False)
            return self._trials
        changed = self._open
        for number in changed:
            self.reads += 1
            trials[number] = storage.get_trial(optuna_compat.trial_id(trials[number]))
        first_new = len(trials)
        while True:
            self.reads += 1
            try:
                trial_id = storage.get_trial_id_from_study_id_trial_number(self._study_id,
                                                                           len(trials))
            except KeyError:
                break
            self.reads += 1
            trials.append(storage.get_trial(trial_id))
        self._open = [n for n in (*changed, *range(first_new, len(trials)))
                      if not trials[n].state.is_finished()]
        return trials


# --- opening a storage --------------------------------------------------------------------
@dataclass
class Store:
    """An opened storage: ``storage`` for Optuna, ``desc`` for people, ``batch()`` to group
    the writes of one ask or one tell (one locked write on a journal)."""

    storage: Resilient
    desc: str
    journal: JournalFile | None = None

    def batch(self, durable: bool = True) -> contextlib.AbstractContextManager[None]:
        return self.journal.batch(durable) if self.journal else contextlib.nullcontext()

    def others_mark(self) -> int | None:
        """A number that changes whenever another worker writes to the storage, or None
        when the storage cannot tell (a database: read it)."""
        return self.journal.others_mark() if self.journal else None

    def feed(self, study_id: int) -> TrialFeed:
        """The trials of one study, read incrementally (see :class:`TrialFeed`)."""
        return TrialFeed(self.storage, study_id, incremental=self.journal is not None)

    def close(self) -> None:
        if self.journal is not None:
            self.journal.close()
        else:
            self.storage.remove_session()


def default_storage_path(log: Path) -> Path:
    return log.with_suffix(".journal")


def open_storage(url: str | None, log: Path, *, heartbeat: float | None = None,
                 outage: float | None = None) -> Store:
    """The journal file next to ``log`` (``url`` None), ``journal:FILE`` or an RDB URL;
    ``heartbeat`` and ``outage`` default to :func:`heartbeat_seconds`, :func:`outage_seconds`.
    """
    heartbeat = heartbeat_seconds() if heartbeat is None else heartbeat
    outage = outage_seconds() if outage is None else outage
    if url is None or url.startswith("journal:"):
        path = default_storage_path(log) if url is None else Path(url[len("journal:"):])
        if path.is_dir():
            raise StorageError(f"cannot open journal {path}: it is a directory")
        backend = JournalFile(path)
        store = HeartbeatJournalStorage(backend, heartbeat, GRACE_FACTOR * heartbeat)
        return Store(Resilient(store, str(path), outage), str(path), backend)
    if "://" not in url:
        raise StorageError(f"bad storage URL {url!r}: give an Optuna storage URL such as "
                           "postgresql://host/db, sqlite:///tune.db or journal:FILE")
    full = resolve_url(url)
    try:
        inner = _rdb(full, heartbeat)
    except Exception as exc:  # noqa: BLE001 - any driver error is one line for the user
        raise StorageError(f"cannot open storage {url}: {_first_line(exc)}") from None
    return Store(Resilient(optuna.storages.get_storage(inner), url, outage), url)


# --- studies ------------------------------------------------------------------------------
def problem_of(attrs: dict[str, Any]) -> dict[str, Any] | None:
    return attrs.get("vtatune")


PROBLEM_KEYS = ("workload_key", "hw_model", "template", "space", "bias")


def same_problem(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return all(a.get(k) == b.get(k) for k in PROBLEM_KEYS)


def describe(problem: dict[str, Any]) -> str:
    return (f"{problem.get('workload_key')} on {problem.get('hw_model')} "
            f"({problem.get('template')}{', bias' if problem.get('bias') else ''})")


@dataclass(frozen=True)
class OpenedStudy:
    study: optuna.Study
    name: str
    id: str  # unique per study, recorded in every log record
    created: bool  # this worker created it
    attrs: dict[str, Any]  # the study's vtatune attrs


ATTRS_WAIT_SECONDS = 10.0


def open_study(storage: Any, base: str, problem: dict[str, Any], where: str, *,
               allow_others: bool, resume: bool, extra: dict[str, Any],
               sampler: optuna.samplers.BaseSampler | None = None) -> OpenedStudy:
    """Create or join the study of ``problem`` in ``storage``.

    The study is called ``base``. The worker that creates it stores the problem (with
    ``extra``: encoding, sampler, seed) and a fresh id in its user attrs; the others load it
    and read them. A storage whose studies all belong to other problems is refused on
    ``resume`` (unless ``allow_others``: a network's layers share one). Studies of older
    versions (``base#2`` ...) are joined, newest first, when ``base`` is absent.
    """
    # the studies alone: optuna's get_all_study_summaries also copies every trial of every
    # study (a deploy's cache journal holds hundreds of studies: 35 s of ResNet-50's 54 s of
    # tuning went to copying trials it never read)
    studies = optuna.storages.get_storage(storage).get_all_studies()
    mine = [s.study_name for s in studies
            if problem_of(s.user_attrs) and same_problem(problem_of(s.user_attrs), problem)]
    if resume and not mine and not allow_others:
        others = [problem_of(s.user_attrs) for s in studies if problem_of(s.user_attrs)]
        if others:
            raise StorageError(f"cannot resume: {where} belongs to {describe(others[0])}, "
                               f"not {describe(problem)}")
    name = base if base in mine or not mine else mine[-1]
    created = False
    try:
        study = optuna.create_study(study_name=name, storage=storage, direction="minimize",
                                    sampler=sampler)
        created = True
    except optuna.exceptions.DuplicatedStudyError:
        study = optuna.load_study(study_name=name, storage=storage, sampler=sampler)
    if created:
        attrs = {**problem, **extra, "id": uuid.uuid4().hex}
        study.set_user_attr("vtatune", attrs)
        return OpenedStudy(study, name, attrs["id"], True, attrs)
    deadline = time.monotonic() + ATTRS_WAIT_SECONDS
    attrs = problem_of(study.user_attrs)
    while attrs is None and time.monotonic() < deadline:
        time.sleep(0.05)  # its creator is about to write them
        attrs = problem_of(study.user_attrs)
    if attrs is None:  # its creator died before describing it
        attrs = {**problem, **extra}
    elif not same_problem(attrs, problem):
        raise StorageError(f"study {name} in {where} belongs to {describe(attrs)}, "
                           f"not {describe(problem)}")
    if "id" not in attrs:
        # A study of an older version (or an orphan): an id every worker derives alike.
        attrs = {**attrs, "id": uuid.uuid5(uuid.NAMESPACE_URL, f"{where}#{name}").hex}
        study.set_user_attr("vtatune", attrs)
    return OpenedStudy(study, name, attrs["id"], False, attrs)
