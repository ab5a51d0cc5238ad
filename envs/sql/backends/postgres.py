"""PostgreSQL, the real server: one connection pool per database, each query in a read-only
transaction that is always rolled back, a statement timeout set for that transaction, and
rows read through a server-side cursor, so a huge result never crosses the wire whole.

The time budget is kept from outside the query too, because a query can lift its own
statement timeout (`set_config`) for the fetches after the first: past the budget the server
is sent a cancel request, and a connection whose query still will not stop is closed, never
reused. A connection goes back to the pool with its session-level advisory locks released,
in the same round trip as the rollback (which undoes settings).

Connect as a role that may only read (`toolgym sql serve-postgres` makes one): the read-only
transaction stops writes, the role's grants stop the rest (files, programs, large objects,
other sessions). A failure of the server or the connection is DatabaseUnavailable; anything
the query did wrong is QueryError with PostgreSQL's own message.
"""

from __future__ import annotations

import asyncio
import contextlib
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

SERVER_DOWN_CLASSES = ("08", "57P")
"""SQLSTATE prefixes that say the connection or the server went away (connection
exceptions; shutdown, crash, a dropped database): the infrastructure's, even when the
server still answered. Every other error the server answers a query with is the query's."""
QUERY_LIMIT_STATES = ("53200", "53400")
"""Out of memory, and a configured limit (temp_file_limit): the query asked for the work."""
SERVER_FIRST_S = 0.25
"""Past a query's budget, how long the server's own statement timeout gets to answer first."""
CANCEL_GRACE_S = 1.0
"""How long a cancelled query gets to stop before its connection is closed."""
BOUNDED_TYPES = frozenset(
    {16, 18, 20, 21, 23, 26, 700, 701, 1700, 1082, 1083, 1114, 1184, 1186, 1266, 2950}
)
"""Type OIDs whose values are small whatever the query (bool, numbers, dates, times, uuid)."""
TEXT_TYPES = frozenset({19, 25, 1042, 1043})


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
                    configure=_autocommit,
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
        import psycopg_pool

        statement = check_read_only(sql)
        pool = await self._pool(db_id)
        try:
            async with pool.connection() as conn:
                return await self._within_budget(conn, statement, limits)
        except psycopg_pool.PoolTimeout as exc:
            raise DatabaseUnavailable(f"no free database connection: {exc}") from exc

    async def _within_budget(self, conn: Any, sql: str, limits: QueryLimits) -> QueryResult:
        """Run the query, stopping it from outside once its budget is spent: a cancel request
        first, then the connection itself. A server that cannot take the cancel is the
        infrastructure's failure; a query that had to be cancelled is the query's."""
        task = asyncio.ensure_future(self._run(conn, sql, limits))
        try:
            done, _ = await asyncio.wait({task}, timeout=limits.timeout_s + SERVER_FIRST_S)
            if task in done:
                return task.result()
            try:
                await conn.cancel_safe(timeout=CANCEL_GRACE_S)
            except Exception as exc:
                await _drop(conn, task)
                raise DatabaseUnavailable(
                    f"the database did not take a cancel request: {exc}"
                ) from exc
            done, _ = await asyncio.wait({task}, timeout=CANCEL_GRACE_S)
            if task in done:
                task.exception()  # seen: the query's own error, replaced by the budget's
            else:
                await _drop(conn, task)
            raise QueryError(
                f"the query ran past its {limits.timeout_s:g} s budget and was stopped"
            )
        except BaseException:
            if not task.done():  # cancelled from outside: the query must not run on unobserved
                await asyncio.shield(_drop(conn, task))
            raise

    async def _run(self, conn: Any, sql: str, limits: QueryLimits) -> QueryResult:
        import psycopg

        timeout_ms = max(1, int(limits.timeout_s * 1000))
        try:
            await conn.execute(f"BEGIN READ ONLY; SET LOCAL statement_timeout = {timeout_ms}")
            try:
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
                return rows.result(columns)
            finally:  # one round trip: undo everything, and free what a rollback keeps
                await conn.execute("ROLLBACK; SELECT pg_advisory_unlock_all()")
        except psycopg.Error as exc:
            raise _classify(exc, limits, lost=bool(conn.broken or conn.closed)) from exc

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


async def _autocommit(conn: Any) -> None:
    """Each query opens and ends its transaction itself (`_run`)."""
    await conn.set_autocommit(True)


async def _drop(conn: Any, task: asyncio.Future[Any]) -> None:
    """Close a connection from under its running query (the pool then replaces it) and wait
    for the query's task to see it."""
    with contextlib.suppress(Exception):
        await conn.close()
    task.cancel()
    with contextlib.suppress(BaseException):
        await asyncio.wait_for(task, CANCEL_GRACE_S)


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


def _classify(exc: Any, limits: QueryLimits, lost: bool) -> Exception:
    """Whose fault, by where it happened. An error the server answered the query with, its
    connection still up, is the query's whatever its SQLSTATE: a read-only query can raise
    an "internal error" (`pg_describe_object(1, 1, 1)`, XX000) or a "missing database"
    (`pg_database_size('nope')`, 3D000) by itself, and a policy must not be able to mask its
    episode so. A lost connection, or a server saying it is going away, is the
    infrastructure's; an error raised here in the client is the query's when it is about a
    value the client cannot read (a date past year 9999). Never by the words of the message,
    which a query can choose."""
    import psycopg

    state = getattr(exc, "sqlstate", None) or ""
    message = getattr(getattr(exc, "diag", None), "message_primary", None) or str(exc)
    if lost or state.startswith(SERVER_DOWN_CLASSES):
        return DatabaseUnavailable(f"the database failed: {message}")
    if state == "57014":
        return QueryError(f"the query ran past its {limits.timeout_s:g} s budget and was stopped")
    if state in QUERY_LIMIT_STATES:
        return QueryError(f"the query needed more than the server allows: {message}")
    if not state and isinstance(exc, psycopg.DataError | psycopg.NotSupportedError):
        return QueryError(f"a value in the result cannot be read: {message}")
    if not state:
        return DatabaseUnavailable(f"the database failed: {message}")
    if state == "25006":
        return QueryError(f"the database is read-only: {message}")
    if state == "42501":
        return QueryError(f"not allowed: {message}")
    return QueryError(f"SQL error: {message}")
