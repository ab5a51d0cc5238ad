"""The database contract the SQL env uses, so SQLite, PostgreSQL and DuckDB are
interchangeable: run a read-only query under limits, and describe a database's tables."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from toolgym.envs.sql.results import QueryLimits, QueryResult


@dataclass(frozen=True)
class Table:
    """One table: its name, its CREATE statement (as the database reports it, or rebuilt from
    its columns) and its column names."""

    name: str
    create: str
    columns: tuple[str, ...]


class SQLBackend(ABC):
    """Read-only access to a set of databases by id."""

    name: str = ""

    @abstractmethod
    async def query(self, db_id: str, sql: str, limits: QueryLimits) -> QueryResult:
        """Run one read-only statement. Raises QueryError (the query's fault) or
        DatabaseUnavailable (the database's)."""

    @abstractmethod
    async def tables(self, db_id: str) -> list[Table]:
        """The database's tables, in a stable order."""

    async def aclose(self) -> None:  # noqa: B027 (a backend with nothing to release keeps it)
        """Release connections and threads."""
