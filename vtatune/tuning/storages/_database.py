"""Database storages: Optuna's RDBStorage (PostgreSQL, MySQL, SQLite) with heartbeats, the
driver each URL needs, and concurrent first starts on an empty database."""
from __future__ import annotations

import importlib.util
import random
import time
import warnings
from typing import Any

import optuna
from optuna.storages import BaseStorage

from vtatune.tuning.storages._common import GRACE_FACTOR, StorageError

# The DB-API module each URL scheme needs, and the package that provides it.
_DRIVERS = {
    "postgresql": [("psycopg", "psycopg", "vtatune[postgres]"),
                   ("psycopg2", "psycopg2", "psycopg2-binary")],
    "mysql": [("pymysql", "pymysql", "vtatune[mysql]"), ("mysqldb", "MySQLdb", "mysqlclient")],
}


def resolve_url(url: str) -> str:
    """``postgresql://`` / ``mysql://`` with the driver that is installed.

    SQLAlchemy 2.1 maps a bare ``postgresql://`` to psycopg (3) and ``mysql://`` to
    mysqlclient. vtatune's extras install psycopg 3 and PyMySQL; a bare scheme gets the
    first installed driver of each list, and a missing driver is one line naming the
    package to install.
    """
    scheme, sep, rest = url.partition("://")
    dialect, _, driver = scheme.partition("+")
    dialect = {"postgres": "postgresql", "mariadb": "mysql"}.get(dialect, dialect)
    if dialect not in _DRIVERS:
        return url
    choices = _DRIVERS[dialect]
    if driver:
        for name, module, package in choices:
            if name == driver and importlib.util.find_spec(module) is None:
                raise StorageError(f"storage {dialect}+{driver}:// needs the {module} module: "
                                   f"pip install '{package}'")
        return url
    for name, module, _ in choices:
        if importlib.util.find_spec(module) is not None:
            return f"{dialect}+{name}{sep}{rest}"
    raise StorageError(f"storage {dialect}:// needs a database driver: pip install "
                       f"'{choices[0][2]}' (or {choices[1][2]})")


def _rdb(url: str, heartbeat: float) -> BaseStorage:
    """Optuna's RDBStorage with heartbeats; concurrent first starts on an empty database race
    to create the schema (one wins, the others see "already exists"): retry those."""
    from optuna.storages import RDBStorage
    from sqlalchemy import exc as sa

    engine: dict[str, Any] = {"pool_pre_ping": True}  # a connection lost in an outage
    if url.startswith("sqlite"):
        # SQLite locks the whole file per write: wait for it instead of failing at once.
        engine["connect_args"] = {"timeout": 60}
    interval = max(1, round(heartbeat))
    rng = random.Random()
    for attempt in range(8):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return RDBStorage(url, engine_kwargs=engine, heartbeat_interval=interval,
                                  grace_period=GRACE_FACTOR * interval)
        except (sa.IntegrityError, sa.ProgrammingError, sa.OperationalError,
                optuna.exceptions.StorageInternalError) as exc:
            text = str(getattr(exc, "orig", None) or exc.__cause__ or exc).lower()
            racing = any(w in text for w in ("already exists", "duplicate", "unique",
                                             "locked", "alembic_version"))
            if not racing or attempt == 7:
                raise
            time.sleep(0.05 + rng.random() * 0.2 * (attempt + 1))
    raise AssertionError("unreachable")  # pragma: no cover
