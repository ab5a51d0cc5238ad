"""PostgreSQL, the real server: one connection pool per database, each query in a read-only
transaction that is always rolled back, a statement timeout set for that transaction, and
rows read through a server-side cursor, so a huge result never crosses the wire whole.

Connect as a role that may only read (`toolgym sql serve-postgres` makes one): the read-only
transaction stops writes, the role's grants stop the rest (files, programs, large objects,
other sessions). A failure of the server or the connection is DatabaseUnavailable; anything
the query did wrong is QueryError with PostgreSQL's own message.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from toolgym.envs.sql.backends.base import SQLBackend, Table
from toolgym.envs.sql.readonly import check_read_only
from toolgym.envs.sql.results import (
    DatabaseUnavailable,
    QueryError,
    QueryLimits,
    QueryResult,
    RowCollector,
)
from toolgym.errors import ConfigError

INFRA_CLASSES = ("08", "53", "57P", "58", "XX", "3D")
"""SQLSTATE prefixes that are the server's fault: connection, resources, shutdown, system,
internal, a missing database."""
SLACK_S = 2.0
BOUNDED_TYPES = frozenset(
    {16, 18, 20, 21, 23, 26, 700, 701, 1700, 1082, 1083, 1114, 1184, 1186, 1266, 2950}
)
"""Type OIDs whose values are small whatever the query (bool, numbers, dates, times, uuid)."""
TEXT_TYPES = frozenset({19, 25, 1042, 1043})
"""How long past a query's own timeout to wait before giving up on the server."""


class PostgresBackend(SQLBackend):
    """Read-only PostgreSQL databases on one server.

    Args:
        dsn: a libpq connection string or URL for the server; its database name is replaced by
            each query's db_id.
        pool_size: connections per database.
        connect_timeout_s: how long to wait for a connection before DatabaseUnavailable.
    """

    name = "postgres"

    def __init__(self, dsn: str, pool_size: int = 8, connect_timeout_s: float = 10.0) -> None:
        self.dsn = dsn
        self.pool_size = pool_size
        self.connect_timeout_s = connect_timeout_s
        self._pools: dict[str, Any] = {}
        self._opening: dict[str, asyncio.Lock] = {}
        self._tables: dict[str, list[Table]] = {}
        self._names = itertools.count()

    async def _pool(self, db_id: str) -> Any:
        try:
            from psycopg.conninfo import make_conninfo
            from psycopg_pool import AsyncConnectionPool
        except ImportError as exc:
            raise ConfigError(
                "the postgres backend needs psycopg: pip install 'toolgym[sql]'"
            ) from exc

        lock = self._opening.setdefault(db_id, asyncio.Lock())
        async with lock:
            if db_id not in self._pools:
                conninfo = make_conninfo(self.dsn, dbname=db_id, application_name="toolgym")
                pool = AsyncConnectionPool(
                    conninfo, min_size=1, max_size=self.pool_size, open=False,
                    timeout=self.connect_timeout_s, kwargs={"connect_timeout": 5},
                )  # fmt: skip
                try:
                    await pool.open(wait=True, timeout=self.connect_timeout_s)
                except Exception as exc:
                    await pool.close()
                    raise DatabaseUnavailable(
                        f"cannot connect to database {db_id!r}: {exc}"
                    ) from exc
                self._pools[db_id] = pool
        return self._pools[db_id]

    async def query(self, db_id: str, sql: str, limits: QueryLimits) -> QueryResult:
        statement = check_read_only(sql)
        pool = await self._pool(db_id)
        try:
            return await asyncio.wait_for(
                self._run(pool, statement, limits),
                limits.timeout_s + self.connect_timeout_s + SLACK_S,
            )
        except TimeoutError as exc:
            raise DatabaseUnavailable(f"database {db_id!r} did not answer in time") from exc

    async def _run(self, pool: Any, sql: str, limits: QueryLimits) -> QueryResult:
        import psycopg
        import psycopg_pool

        try:
            async with pool.connection() as conn, conn.transaction(force_rollback=True):
                timeout_ms = max(1, int(limits.timeout_s * 1000))
                await conn.execute(  # one round trip for both
                    f"SET TRANSACTION READ ONLY; SET LOCAL statement_timeout = {timeout_ms}"
                )
                cursor = conn.cursor(name=f"toolgym_{next(self._names)}")
                await cursor.execute(sql)  # declares the cursor; nothing runs until a fetch
                description = list(cursor.description or ())
                columns = tuple(d.name for d in description)
                bounded = _bounded_cells(sql, [d.type_code for d in description], limits)
                if bounded is not None:
                    await cursor.close()
                    cursor = conn.cursor(name=f"toolgym_{next(self._names)}")
                    await cursor.execute(bounded)
                rows = RowCollector(limits)
                while rows.wanted():
                    batch = await cursor.fetchmany(rows.wanted())
                    if not batch:
                        break
                    if bounded is not None:
                        batch = _strip_flags(batch, len(columns), limits)
                    rows.take(batch)
                await cursor.close()
                return rows.result(columns)
        except psycopg_pool.PoolTimeout as exc:
            raise DatabaseUnavailable(f"no free database connection: {exc}") from exc
        except psycopg.Error as exc:
            raise _classify(exc, limits) from exc

    async def tables(self, db_id: str) -> list[Table]:
        if db_id in self._tables:
            return self._tables[db_id]
        listing = await self.query(
            db_id,
            "SELECT c.table_name, c.column_name, c.data_type, c.is_nullable "
            "FROM information_schema.columns c JOIN information_schema.tables t "
            "ON t.table_schema = c.table_schema AND t.table_name = c.table_name "
            "WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE' "
            "ORDER BY c.table_name, c.ordinal_position",
            QueryLimits(max_rows=100_000),
        )
        keys = await self.query(
            db_id,
            "SELECT conrelid::regclass::text, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE connamespace = 'public'::regnamespace AND contype IN ('p', 'f') "
            "ORDER BY conrelid::regclass::text, contype DESC, conname",
            QueryLimits(max_rows=100_000),
        )
        found: dict[str, list[tuple[str, str, str]]] = {}
        for table, column, kind, nullable in listing.rows:
            found.setdefault(table, []).append((column, kind, nullable))
        constraints: dict[str, list[str]] = {}
        for table, definition in keys.rows:
            constraints.setdefault(table.strip('"'), []).append(definition)
        self._tables[db_id] = [
            Table(
                name,
                _create(name, columns, constraints.get(name, [])),
                tuple(c[0] for c in columns),
            )
            for name, columns in found.items()
        ]
        return self._tables[db_id]

    async def aclose(self) -> None:
        pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            await pool.close()


def _create(name: str, columns: list[tuple[str, str, str]], constraints: list[str]) -> str:
    """A CREATE TABLE statement rebuilt from the catalog (PostgreSQL keeps none)."""
    lines = [
        f"  {c} {kind.upper()}{'' if nullable == 'YES' else ' NOT NULL'}"
        for c, kind, nullable in columns
    ]
    lines += [f"  {definition}" for definition in constraints]
    return f"CREATE TABLE {name} (\n" + ",\n".join(lines) + "\n)"


def _bounded_cells(sql: str, types: list[int], limits: QueryLimits) -> str | None:
    """The query rewrapped so the server cuts every value that could be large (text, bytes,
    arrays, JSON...) at `max_cell_chars` and flags the cut, so no huge value crosses the
    wire; None when every column is of a small type."""
    if all(t in BOUNDED_TYPES for t in types):
        return None
    cap = limits.max_cell_chars
    names = [f'"c{i}"' for i in range(len(types))]
    values, flags = [], []
    for name, kind in zip(names, types, strict=True):
        if kind in BOUNDED_TYPES:
            values.append(f"q.{name}")
        elif kind in TEXT_TYPES:
            values.append(f"left(q.{name}, {cap})")
            flags.append(f"coalesce(length(q.{name}) > {cap}, false)")
        elif kind == 17:  # bytea
            values.append(f"substring(q.{name} from 1 for {cap})")
            flags.append(f"coalesce(octet_length(q.{name}) > {cap}, false)")
        else:
            values.append(f"left(q.{name}::text, {cap})")
            flags.append(f"coalesce(length(q.{name}::text) > {cap}, false)")
    too_long = " OR ".join(flags)
    return f"SELECT {', '.join(values)}, ({too_long}) FROM ({sql}) AS q({', '.join(names)})"


def _strip_flags(batch: list[Any], width: int, limits: QueryLimits) -> list[tuple[Any, ...]]:
    if any(row[width] for row in batch):
        raise QueryError(f"a value is longer than {limits.max_cell_chars:,} characters")
    return [tuple(row[:width]) for row in batch]


def _classify(exc: Any, limits: QueryLimits) -> Exception:
    state = getattr(exc, "sqlstate", None) or ""
    message = getattr(getattr(exc, "diag", None), "message_primary", None) or str(exc)
    if state == "57014":
        return QueryError(f"the query ran past its {limits.timeout_s:g} s budget and was stopped")
    if not state or state.startswith(INFRA_CLASSES):
        return DatabaseUnavailable(f"the database failed: {message}")
    if state == "25006":
        return QueryError(f"the database is read-only: {message}")
    if state == "42501":
        return QueryError(f"not allowed: {message}")
    return QueryError(f"SQL error: {message}")
