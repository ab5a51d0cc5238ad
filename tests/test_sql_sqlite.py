"""The SQLite backend on generated databases: answers, limits, and a hostile suite that must
leave every file byte-identical while each attempt gets a clear error."""

from __future__ import annotations

import asyncio
import hashlib
import time

import pytest

from toolgym.envs.sql.backends.sqlite import SQLiteBackend
from toolgym.envs.sql.generate import build, default_db_ids, write_sqlite
from toolgym.envs.sql.results import DatabaseUnavailable, QueryError, QueryLimits

LIMITS = QueryLimits(timeout_s=1.0, max_rows=50)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sqlite")
    for db_id in default_db_ids():
        write_sqlite(build(db_id), folder / f"{db_id}.sqlite")
    return folder


def digest(root) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.iterdir())}


def run(root, sql: str, limits: QueryLimits = LIMITS, db_id: str = "shop_0"):
    async def go():
        backend = SQLiteBackend(root)
        try:
            return await backend.query(db_id, sql, limits)
        finally:
            await backend.aclose()

    return asyncio.run(go())


def test_the_generated_rows_are_in_the_file(root):
    db = build("shop_0")
    result = run(root, "SELECT COUNT(*), SUM(quantity) FROM orders")
    assert result.rows == [(len(db.events), sum(e[4] for e in db.events))]
    assert result.columns == ("COUNT(*)", "SUM(quantity)")
    assert build("shop_0") == db  # deterministic


def test_tables_list_the_schema(root):
    async def go():
        backend = SQLiteBackend(root)
        try:
            return await backend.tables("school_1")
        finally:
            await backend.aclose()

    tables = asyncio.run(go())
    assert [t.name for t in tables] == ["courses", "enrollments", "students"]
    assert tables[1].columns == ("id", "student_id", "course_id", "enrolled_on", "grade", "status")
    assert "REFERENCES students(id)" in tables[1].create


def test_rows_past_the_cap_are_cut_and_marked(root):
    result = run(root, "SELECT * FROM orders", QueryLimits(max_rows=7))
    assert len(result.rows) == 7 and result.truncated
    assert not run(root, "SELECT * FROM orders LIMIT 7", QueryLimits(max_rows=7)).truncated


def test_a_result_past_its_byte_budget_is_refused(root):
    with pytest.raises(QueryError, match="larger than"):
        run(
            root,
            "SELECT a.name, b.name FROM customers a, customers b",
            QueryLimits(max_bytes=10_000),
        )


def test_a_missing_database_is_the_infrastructures_fault(root):
    with pytest.raises(DatabaseUnavailable):
        run(root, "SELECT 1", db_id="nowhere_0")
    with pytest.raises(DatabaseUnavailable):
        run(root, "SELECT 1", db_id="../shop_0")


HOSTILE = [
    ("INSERT INTO customers VALUES (999, 'x', 'y', 1)", "read-only: INSERT"),
    ("UPDATE products SET price = 0", "read-only: UPDATE"),
    ("DELETE FROM orders", "read-only: DELETE"),
    ("DROP TABLE orders", "read-only: DROP"),
    ("CREATE TABLE t (a)", "read-only: CREATE"),
    ("ALTER TABLE orders ADD COLUMN x", "read-only: ALTER"),
    ("REPLACE INTO customers VALUES (1, 'x', 'y', 1)", "read-only: REPLACE"),
    ("WITH x AS (SELECT 1) DELETE FROM orders", "read-only"),
    ("WITH x AS (SELECT 1) INSERT INTO customers SELECT * FROM customers", "read-only"),
    ("ATTACH DATABASE '/tmp/evil.db' AS evil", "read-only: ATTACH"),
    ("SELECT 1; DROP TABLE orders", "one statement"),
    ("PRAGMA writable_schema = 1", "read-only: PRAGMA"),
    ("PRAGMA journal_mode = DELETE", "read-only: PRAGMA"),
    ("VACUUM INTO '/tmp/copy.db'", "read-only: VACUUM"),
    ("SELECT load_extension('/tmp/evil')", "not allowed"),
    ("SELECT * FROM pragma_table_info('orders')", "not allowed"),
    ("/* hi */ delete from orders", "read-only: DELETE"),
    ("BEGIN; DELETE FROM orders; COMMIT", "one statement"),
    ("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT COUNT(*) FROM r",
     "budget"),
    ("SELECT COUNT(*) FROM orders a, orders b, orders c", "budget"),
    ("SELECT zeroblob(500000000)", "longer than"),
    ("SELECT randomblob(500000000)", "longer than"),
    ("SELECT group_concat(a.name || b.name) FROM customers a, customers b, customers c", "budget|longer"),
    ("SELECT " + "1 + " * 30000 + "1", "characters"),
    ("", "empty"),
    ("SELECT 1\x00; DROP TABLE orders", "NUL"),
    # the database's failure words in the query's own error text stay the query's fault
    ("SELECT * FROM corrupt", "no such table: corrupt"),
    ('SELECT * FROM "database disk image is malformed"', "no such table"),
    ('SELECT * FROM "unable to open database file"', "no such table"),
    ('SELECT "disk I/O error", "out of memory" FROM "file is not a database"', "no such table"),
    ("SELECT corrupt FROM orders", "no such column: corrupt"),
    # printf pads %c one character at a time, unchecked: bounded before it starts
    ("SELECT printf('%.*c', 2000000000, 'x')", "over the limit"),
    ("SELECT format('%.*c', 2000000000, 'x')", "over the limit"),
    ("SELECT printf('%.2000000000c', 'x')", "over the limit"),
    ("SELECT printf('%s %-*.*c', 'a', 5, 2000000000, 'x')", "over the limit"),
    ("SELECT printf('%.*c', 2e9, 'x')", "over the limit"),
    ("SELECT printf('%.*c', '2000000000', 'x')", "must be a number"),
]  # fmt: skip


def test_hostile_queries_leave_every_file_unchanged(root):
    before = digest(root)
    limits = QueryLimits(timeout_s=0.5, max_rows=50)

    async def go():
        backend = SQLiteBackend(root)
        try:
            for sql, message in HOSTILE:
                started = time.monotonic()
                with pytest.raises(QueryError) as caught:
                    await backend.query("shop_0", sql, limits)
                assert any(m in str(caught.value) for m in message.split("|")), (sql, caught.value)
                assert time.monotonic() - started < 5, sql
            # and the backend still answers
            assert (
                await backend.query("shop_0", "SELECT COUNT(*) FROM customers", limits)
            ).rows == [(150,)]
        finally:
            await backend.aclose()

    asyncio.run(go())
    assert digest(root) == before
    assert not any(p.suffix in (".db", "-journal", "-wal") for p in root.iterdir())


def test_a_cancelled_query_is_interrupted_and_frees_its_thread(root):
    async def go():
        backend = SQLiteBackend(root, threads=1)
        slow = asyncio.create_task(backend.query(
            "shop_0", "SELECT COUNT(*) FROM orders a, orders b, orders c", QueryLimits(timeout_s=30)
        ))  # fmt: skip
        await asyncio.sleep(0.2)
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        started = time.monotonic()
        quick = await backend.query("shop_0", "SELECT 1", LIMITS)
        waited = time.monotonic() - started
        await backend.aclose()
        return quick, waited

    quick, waited = asyncio.run(go())
    assert quick.rows == [(1,)] and waited < 2


def test_printf_still_formats_as_sqlite_does(root):
    result = run(
        root, "SELECT printf('%5.2f|%-4d|%.*c|%%|%q|%s', 3.14159, 7, 3, 'x', 'it''s', NULL)"
    )
    assert result.rows == [(" 3.14|7   |xxx|%|it''s|",)]
    assert run(
        root, "SELECT format('%d-%d', 1, 2), printf(NULL), printf('%.*c', NULL, 'y')"
    ).rows == [("1-2", None, "y")]


def test_four_printf_bombs_at_once_leave_the_threads_free(root):
    async def go():
        backend = SQLiteBackend(root, threads=4)
        bomb = "SELECT printf('%.*c', 2000000000, 'x')"
        started = time.monotonic()
        outcomes = await asyncio.gather(
            *(backend.query("shop_0", bomb, QueryLimits(timeout_s=5)) for _ in range(4)),
            return_exceptions=True,
        )
        quick = await backend.query("shop_0", "SELECT 1", LIMITS)
        await backend.aclose()
        return outcomes, quick, time.monotonic() - started

    outcomes, quick, took = asyncio.run(go())
    assert all(isinstance(o, QueryError) for o in outcomes), outcomes
    assert quick.rows == [(1,)] and took < 2


def test_only_a_broken_file_is_the_databases_fault(tmp_path):
    """A real corrupt file is infrastructure; the same words from a query are not."""
    folder = tmp_path / "dbs"
    folder.mkdir()
    write_sqlite(build("shop_0"), folder / "shop_0.sqlite")
    data = bytearray((folder / "shop_0.sqlite").read_bytes())
    data[4096:8192] = b"\xff" * 4096  # wreck a page of the b-trees
    (folder / "broken_0.sqlite").write_bytes(bytes(data))
    (folder / "notadb_0.sqlite").write_bytes(b"hello, this is not SQLite" * 100)
    with pytest.raises(DatabaseUnavailable, match="corrupt|not a database"):
        run(folder, "SELECT COUNT(*), MAX(name) FROM customers", db_id="broken_0")
    with pytest.raises(DatabaseUnavailable, match="not a database"):
        run(folder, "SELECT 1 FROM customers", db_id="notadb_0")
    with pytest.raises(QueryError, match="no such table: corrupt"):
        run(folder, "SELECT * FROM corrupt", db_id="shop_0")
