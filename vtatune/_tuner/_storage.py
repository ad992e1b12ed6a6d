"""Where studies live: a journal file beside the log by default, or any Optuna URL.

A study is named after its problem (workload x hardware x template x bias). A fresh run
on a storage that already holds that study gets the next free name (``...#2``) so no run
silently mixes into another; ``--resume`` continues the newest one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
from optuna.storages.journal import BaseJournalBackend

from ..errors import VtatuneError


class StorageError(VtatuneError):
    """A storage URL that cannot be opened, or a study that belongs to another problem."""


class BufferedJournal(BaseJournalBackend):
    """A journal file written once per finished trial instead of once per operation.

    Optuna's JournalFileBackend takes a lock, appends and fsyncs for every operation (a trial
    is ~10 of them: create, each param, attrs, value): that alone cost ~10 ms a trial here.
    This backend keeps the journal in memory, and :meth:`flush` appends the new operations
    in one locked, fsynced write. The file stays in Optuna's journal format, so
    ``--storage journal:FILE`` or ``JournalFileBackend`` read it. One writer at a time:
    workers that share a study use ``--storage``.
    """

    def __init__(self, path: str) -> None:
        from optuna.storages.journal import JournalFileBackend

        self._file = JournalFileBackend(path)
        self._logs: list[dict[str, Any]] = list(self._file.read_logs(0))
        self._pending: list[dict[str, Any]] = []

    def read_logs(self, log_number_from: int) -> list[dict[str, Any]]:
        return self._logs[log_number_from:]

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        self._logs.extend(logs)
        self._pending.extend(logs)

    def flush(self) -> None:
        if self._pending:
            pending, self._pending = self._pending, []
            self._file.append_logs(pending)


def _no_flush() -> None:
    return None


def default_storage_path(log: Path) -> Path:
    return log.with_suffix(".journal")


def open_storage(url: str | None, log: Path) -> tuple[Any, str, Callable[[], None]]:
    """``(storage, description, flush)``: the journal file next to ``log``, or ``url``.

    ``flush()`` persists what the storage buffers; call it after each told trial."""
    if url is None:
        path = default_storage_path(log)
        path.parent.mkdir(parents=True, exist_ok=True)
        from optuna.storages.journal import JournalStorage

        try:
            backend = BufferedJournal(str(path))
        except (OSError, ValueError) as exc:
            raise StorageError(f"cannot open journal {path}: "
                               f"{getattr(exc, 'strerror', None) or exc}") from None
        return JournalStorage(backend), str(path), backend.flush
    if url.startswith("journal:"):
        from optuna.storages.journal import JournalFileBackend, JournalStorage

        return JournalStorage(JournalFileBackend(url[len("journal:"):])), url, _no_flush
    if "://" not in url:
        raise StorageError(f"bad storage URL {url!r}: give an Optuna storage URL such as "
                           "sqlite:///tune.db, postgresql://host/db or journal:FILE")
    try:
        return optuna.storages.get_storage(url), url, _no_flush
    except Exception as exc:  # noqa: BLE001 - any driver error is one line for the user
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise StorageError(f"cannot open storage {url}: {msg}") from None


def study_names(storage: Any) -> list[tuple[str, dict[str, Any]]]:
    """Every study in ``storage`` with its user attributes."""
    return [(s.study_name, dict(s.user_attrs))
            for s in optuna.study.get_all_study_summaries(storage, include_best_trial=False)]


def problem_of(attrs: dict[str, Any]) -> dict[str, Any] | None:
    return attrs.get("vtatune")


def same_problem(a: dict[str, Any], b: dict[str, Any]) -> bool:
    keys = ("workload_key", "hw_model", "template", "bias")
    return all(a.get(k) == b.get(k) for k in keys)


def describe(problem: dict[str, Any]) -> str:
    return (f"{problem.get('workload_key')} on {problem.get('hw_model')} "
            f"({problem.get('template')}{', bias' if problem.get('bias') else ''})")


def pick_study_name(storage: Any, base: str, problem: dict[str, Any], resume: bool,
                    where: str, allow_others: bool) -> tuple[str, bool]:
    """``(name, exists)`` of the study to use.

    ``resume``: the newest study of this problem; if the storage holds studies but none
    of this problem (and ``allow_others`` is false), the storage belongs to another
    workload or hardware: refuse. Otherwise: ``base``, or ``base#N`` when taken.
    """
    existing = study_names(storage)
    mine = [n for n, attrs in existing
            if problem_of(attrs) and same_problem(problem_of(attrs), problem)]
    if resume:
        if mine:
            return mine[-1], True
        others = [problem_of(a) for _, a in existing if problem_of(a)]
        if others and not allow_others:
            raise StorageError(f"cannot resume: {where} belongs to {describe(others[0])}, "
                               f"not {describe(problem)}")
        return base, False
    taken = {n for n, _ in existing}
    name, i = base, 1
    while name in taken:
        i += 1
        name = f"{base}#{i}"
    return name, False
