"""How a SQL env reaches its databases: one backend per process and configuration, shared by
every env instance that asks for the same one (a runtime resource, closed at shutdown), with
the gold results cached beside it; database failures turned into infrastructure errors.

With no `databases` folder and no `dsn`, the generated databases are written once to a folder
under the temp dir (the same files on every machine) and read from there.
"""

from __future__ import annotations

import os
import tempfile
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path

from toolgym.envs.core import Env
from toolgym.envs.sql.backends import SQLBackend, Table, make_backend
from toolgym.envs.sql.generate import build, write_sqlite
from toolgym.envs.sql.results import DatabaseUnavailable, QueryLimits, QueryResult
from toolgym.errors import ConfigError
from toolgym.tools.tool import InfraError

GENERATED_VERSION = 1
"""Bumped whenever generate.py's output changes, so stale files are never read."""
GOLD_CACHE = 4096


def generated_folder() -> Path:
    return Path(tempfile.gettempdir()) / f"toolgym-sql-{os.getuid()}-v{GENERATED_VERSION}"


def ensure_generated(db_ids: list[str]) -> Path:
    """Write the generated databases that are not on disk yet; returns their folder."""
    folder = generated_folder()
    folder.mkdir(mode=0o755, exist_ok=True)
    info = folder.stat()
    if info.st_uid != os.getuid() or info.st_mode & 0o022:
        raise ConfigError(
            f"{folder} belongs to another user or others may write to it, so its databases "
            "cannot be trusted; remove it, or pass databases=FOLDER"
        )
    for db_id in db_ids:
        path = folder / f"{db_id}.sqlite"
        if not path.is_file():
            write_sqlite(build(db_id), path)
    return folder


class Databases:
    """A backend and the gold results computed on it."""

    def __init__(self, backend: SQLBackend) -> None:
        self.backend = backend
        self.gold: OrderedDict[tuple[str, str], QueryResult] = OrderedDict()
        self.texts: dict[Hashable, str] = {}
        """Text computed once per database and reused by every episode (its schema)."""

    async def query(self, db_id: str, sql: str, limits: QueryLimits) -> QueryResult:
        """The query's result; QueryError is the query's fault, InfraError the database's."""
        try:
            return await self.backend.query(db_id, sql, limits)
        except DatabaseUnavailable as exc:
            raise InfraError(str(exc)) from exc

    async def tables(self, db_id: str) -> list[Table]:
        try:
            return await self.backend.tables(db_id)
        except DatabaseUnavailable as exc:
            raise InfraError(str(exc)) from exc

    async def gold_result(self, db_id: str, sql: str, limits: QueryLimits) -> QueryResult:
        key = (db_id, sql)
        if key not in self.gold:
            result = await self.query(db_id, sql, limits)
            if result.truncated:  # the task is unusable, not the policy's fault
                raise InfraError(f"the gold query of {db_id!r} returns over {limits.max_rows} rows")
            self.gold[key] = result
            while len(self.gold) > GOLD_CACHE:
                self.gold.popitem(last=False)
        self.gold.move_to_end(key)
        return self.gold[key]

    async def aclose(self) -> None:
        await self.backend.aclose()


@dataclass(frozen=True)
class SQLConfig:
    """The env arguments that choose the databases.

    Args:
        backend: "sqlite" (default) or "postgres".
        databases: for sqlite, the folder of database files (`<db_id>.sqlite`, or Spider's
            `<db_id>/<db_id>.sqlite`); None for the generated databases.
        dsn: for postgres, the server's connection string (a read-only role's).
        pool_size: connections (postgres) or threads (sqlite).
    """

    backend: str = "sqlite"
    databases: str | None = None
    dsn: str | None = None
    pool_size: int = 4

    def __post_init__(self) -> None:
        if self.backend == "postgres" and not self.dsn:
            raise ConfigError(
                "the postgres backend needs dsn=... (e.g. from `toolgym sql serve-postgres`)"
            )
        if self.backend == "sqlite" and self.dsn:
            raise ConfigError(
                "dsn is for backend='postgres'; sqlite reads files (databases=FOLDER)"
            )

    @property
    def key(self) -> Hashable:
        return ("sql", self.backend, self.databases, self.dsn, self.pool_size)

    @property
    def generated(self) -> bool:
        """Whether databases come from generate.py (written to the temp dir on first use)."""
        return self.backend == "sqlite" and self.databases is None

    async def open(self, env: Env) -> Databases:
        def make() -> Databases:
            if self.backend == "sqlite":
                root = Path(self.databases) if self.databases else generated_folder()
                return Databases(make_backend("sqlite", root=root, threads=self.pool_size))
            return Databases(make_backend(self.backend, dsn=self.dsn, pool_size=self.pool_size))

        return await env.shared(self.key, make)
