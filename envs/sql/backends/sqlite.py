"""SQLite, the embedded default: each database file opened read-only and immutable, an
authorizer that admits reading and nothing else, a time budget enforced by a progress
handler, caps on string length, rows and result size, and printf's widths bounded (its one
built-in loop that no budget stops). A failure is the database's only by its result code
(a corrupt or unreadable file), never by words in the message, which a query can choose.

Databases are found by id under `root`: `root/<id>.sqlite` (or .db), or Spider's layout
`root/<id>/<id>.sqlite`. Queries run on a small thread pool (sqlite3 releases the GIL while
it works); each thread keeps its own connection per database.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import quote

from toolgym.envs.sql.backends.base import SQLBackend, Table
from toolgym.envs.sql.backends.sqlite_printf import BoundedPrintf
from toolgym.envs.sql.readonly import check_read_only
from toolgym.envs.sql.results import (
    DatabaseUnavailable,
    QueryError,
    QueryLimits,
    QueryResult,
    RowCollector,
)

SUFFIXES = (".sqlite", ".db", ".sqlite3")
PROGRESS_OPCODES = 2000
"""How often (in virtual-machine instructions) the progress handler checks the clock."""
READ_PRAGMAS = frozenset(
    {"table_info", "table_xinfo", "index_list", "index_info", "foreign_key_list"}
)
ALLOWED = {
    sqlite3.SQLITE_SELECT,
    sqlite3.SQLITE_READ,
    sqlite3.SQLITE_FUNCTION,
    sqlite3.SQLITE_RECURSIVE,
}
DENIED_FUNCTIONS = frozenset({"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer"})
DATABASE_FAULTS = {
    sqlite3.SQLITE_IOERR: "a disk I/O error",
    sqlite3.SQLITE_CORRUPT: "the database file is corrupt",
    sqlite3.SQLITE_CANTOPEN: "the database file cannot be opened",
    sqlite3.SQLITE_NOTADB: "the file is not a database",
}
"""Primary result codes that are the database file's fault, not the query's. Running out of
memory or temp space is the query's doing (it asked for the work) and stays the query's."""


def _authorize(action: int, arg1: str | None, arg2: str | None, *_: Any) -> int:
    """Reading, functions and recursive CTEs; schema pragmas with no value; nothing else."""
    if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in DENIED_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    if action in ALLOWED:
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() in READ_PRAGMAS and arg2 is None:
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


class SQLiteBackend(SQLBackend):
    """Read-only SQLite databases under a folder.

    Args:
        root: the folder holding the database files.
        threads: queries that may run at once.
    """

    name = "sqlite"

    def __init__(self, root: str | Path, threads: int = 4) -> None:
        self.root = Path(root)
        self._executor = ThreadPoolExecutor(
            max_workers=threads, thread_name_prefix="toolgym-sqlite"
        )
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._tables: dict[str, list[Table]] = {}

    def path(self, db_id: str) -> Path:
        if not db_id or "/" in db_id or "\\" in db_id or db_id.startswith("."):
            raise DatabaseUnavailable(f"no database {db_id!r}: an id is a plain name")
        for base in (self.root, self.root / db_id):
            for suffix in SUFFIXES:
                if (base / f"{db_id}{suffix}").is_file():
                    return base / f"{db_id}{suffix}"
        raise DatabaseUnavailable(f"no database {db_id!r} under {self.root}")

    def _printf(self) -> BoundedPrintf:
        printf: BoundedPrintf | None = getattr(self._local, "printf", None)
        if printf is None:
            printf = self._local.printf = BoundedPrintf(QueryLimits().max_cell_chars)
            with self._lock:
                self._all.append(printf.builtin)
        return printf

    def _connection(self, db_id: str) -> sqlite3.Connection:
        cache: dict[str, sqlite3.Connection] = self._local.__dict__.setdefault("connections", {})
        conn = cache.get(db_id)
        if conn is None:
            uri = f"file:{quote(str(self.path(db_id).resolve()))}?mode=ro&immutable=1"
            try:
                conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
            except sqlite3.Error as exc:
                raise DatabaseUnavailable(f"cannot open database {db_id!r}: {exc}") from exc
            conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
            conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, 100_000)
            conn.set_authorizer(_authorize)
            self._printf().install(conn)
            cache[db_id] = conn
            with self._lock:
                self._all.append(conn)
        return conn

    def _run(
        self, db_id: str, sql: str, limits: QueryLimits, started: list[sqlite3.Connection]
    ) -> QueryResult:
        conn = self._connection(db_id)
        started.append(conn)
        deadline = time.monotonic() + limits.timeout_s
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max(1, limits.max_cell_chars))
        printf = self._printf()
        printf.limit(limits.max_cell_chars)
        printf.refused = None
        conn.set_progress_handler(lambda: int(time.monotonic() > deadline), PROGRESS_OPCODES)
        cursor = conn.cursor()
        try:
            cursor.execute(sql)
            columns = tuple(d[0] for d in cursor.description or ())
            rows = RowCollector(limits)
            while rows.wanted():
                batch = cursor.fetchmany(rows.wanted())
                if not batch:
                    break
                rows.take(batch)
        except sqlite3.Error as exc:
            if printf.refused:
                raise QueryError(printf.refused) from exc
            raise _query_error(exc, limits, time.monotonic() > deadline) from exc
        finally:
            cursor.close()
            conn.set_progress_handler(None, 0)
        return rows.result(columns)

    async def query(self, db_id: str, sql: str, limits: QueryLimits) -> QueryResult:
        statement = check_read_only(sql)
        started: list[sqlite3.Connection] = []
        future = asyncio.get_running_loop().run_in_executor(
            self._executor, self._run, db_id, statement, limits, started
        )
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            for conn in started:  # stop the query, so its thread is free again
                conn.interrupt()
            raise

    def _describe(self, db_id: str) -> list[Table]:
        """The schema, read with the authorizer lifted for our own fixed statements."""
        conn = self._connection(db_id)
        conn.set_authorizer(None)
        try:
            listing = conn.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'table' "
                "AND name NOT LIKE 'sqlite_%' ORDER BY name"
            ).fetchall()
            found = []
            for name, create in listing:
                quoted = '"' + name.replace('"', '""') + '"'
                columns = tuple(r[1] for r in conn.execute(f"PRAGMA table_info({quoted})"))
                found.append(Table(name, create or "", columns))
            return found
        except sqlite3.Error as exc:
            raise DatabaseUnavailable(f"cannot read the schema of {db_id!r}: {exc}") from exc
        finally:
            conn.set_authorizer(_authorize)

    async def tables(self, db_id: str) -> list[Table]:
        if db_id not in self._tables:
            loop = asyncio.get_running_loop()
            self._tables[db_id] = await loop.run_in_executor(self._executor, self._describe, db_id)
        return self._tables[db_id]

    async def aclose(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self._executor.shutdown, True)
        with self._lock:
            for conn in self._all:
                conn.close()
            self._all.clear()


def _query_error(exc: sqlite3.Error, limits: QueryLimits, late: bool) -> Exception:
    """The database file's failures (by result code) are DatabaseUnavailable; everything else
    is the query's, its message chosen by the code too."""
    text = str(exc)
    code = (getattr(exc, "sqlite_errorcode", None) or sqlite3.SQLITE_ERROR) & 0xFF
    if code in DATABASE_FAULTS:
        return DatabaseUnavailable(f"the database failed ({DATABASE_FAULTS[code]}): {text}")
    if code == sqlite3.SQLITE_INTERRUPT:
        if late:
            return QueryError(
                f"the query ran past its {limits.timeout_s:g} s budget and was stopped"
            )
        return QueryError("the query was stopped")
    if code == sqlite3.SQLITE_AUTH or text.startswith("not authorized"):  # denied functions
        return QueryError("the database is read-only: that statement or function is not allowed")
    if code == sqlite3.SQLITE_TOOBIG:
        return QueryError(f"a value is longer than {limits.max_cell_chars:,} characters")
    if code == sqlite3.SQLITE_NOMEM:
        return QueryError("the query ran out of memory")
    return QueryError(f"SQL error: {text}")
