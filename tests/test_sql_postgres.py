"""The PostgreSQL backend against a real server: answers equal SQLite's on the same generated
data, and a hostile suite leaves every database's row counts and checksums unchanged while
each attempt gets a clear error."""

from __future__ import annotations

import asyncio
import time

import psycopg
import pytest

from toolgym.envs.sql.backends.postgres import PostgresBackend
from toolgym.envs.sql.generate import build, default_db_ids
from toolgym.envs.sql.grading import compare, gold_mode
from toolgym.envs.sql.questions import generate_question
from toolgym.envs.sql.results import DatabaseUnavailable, QueryError, QueryLimits

LIMITS = QueryLimits(timeout_s=1.0, max_rows=50)


def with_backend(dsn: str, work):
    async def go():
        backend = PostgresBackend(dsn, pool_size=4)
        try:
            return await work(backend)
        finally:
            await backend.aclose()

    return asyncio.run(go())


def checksums(server) -> dict[str, tuple]:
    """Per database and table: row count and an md5 over the rows in id order."""
    out = {}
    for db_id in default_db_ids():
        with psycopg.connect(server.dsn(db_id, reader=False)) as conn:
            for table in build(db_id).tables():
                row = conn.execute(
                    f"SELECT COUNT(*), md5(string_agg(t::text, '|' ORDER BY id)) FROM {table} t"
                ).fetchone()
                out[f"{db_id}.{table}"] = row
        with psycopg.connect(server.dsn(db_id, reader=False)) as conn:
            names = conn.execute(
                "SELECT string_agg(relname, ',' ORDER BY relname) FROM pg_class "
                "WHERE relnamespace = 'public'::regnamespace"
            ).fetchone()
            out[f"{db_id}.relations"] = names
    return out


def test_gold_queries_answer_alike_on_postgres_and_sqlite(postgres, tmp_path):
    from toolgym.envs.sql.backends.sqlite import SQLiteBackend
    from toolgym.envs.sql.generate import write_sqlite

    for db_id in default_db_ids():
        write_sqlite(build(db_id), tmp_path / f"{db_id}.sqlite")
    questions = [generate_question(seed) for seed in range(150)]

    async def both(pg):
        lite = SQLiteBackend(tmp_path)
        try:
            pairs = []
            for q in questions:
                pairs.append((await pg.query(q.db_id, q.gold_sql, LIMITS),
                              await lite.query(q.db_id, q.gold_sql, LIMITS)))  # fmt: skip
            return pairs
        finally:
            await lite.aclose()

    pairs = with_backend(postgres.reader_dsn, both)
    assert {q.template for q in questions} >= {
        "top_k",
        "nested_never",
        "group_join_sum",
        "ordering",
    }
    for q, (on_pg, on_lite) in zip(questions, pairs, strict=True):
        assert on_pg.rows, q
        assert compare(on_pg, on_lite, gold_mode(q.gold_sql)).matched, (q, on_pg, on_lite)


def test_tables_are_described_with_their_keys(postgres):
    tables = with_backend(postgres.reader_dsn, lambda b: b.tables("clinic_0"))
    assert [t.name for t in tables] == ["doctors", "patients", "visits"]
    assert "FOREIGN KEY (patient_id) REFERENCES patients(id)" in tables[2].create
    assert tables[0].columns == ("id", "name", "specialty", "fee")


HOSTILE = [
    ("INSERT INTO customers VALUES (999, 'x', 'y', 1)", "read-only"),
    ("UPDATE products SET price = 0", "read-only"),
    ("DELETE FROM orders", "read-only"),
    ("TRUNCATE orders", "read-only"),
    ("DROP TABLE orders", "read-only"),
    ("CREATE TABLE t (a int)", "read-only"),
    ("CREATE TEMP TABLE t AS SELECT 1", "read-only"),
    ("WITH x AS (DELETE FROM orders RETURNING *) SELECT * FROM x", "data-modifying"),
    ("SELECT 1; DROP TABLE orders", "one statement"),
    ("COPY orders TO PROGRAM 'id'", "read-only"),
    ("COPY orders TO '/tmp/orders.csv'", "read-only"),
    ("SELECT pg_read_file('/etc/passwd')", "permission denied"),
    ("SELECT pg_read_binary_file('/etc/passwd')", "permission denied"),
    ("SELECT pg_ls_dir('.')", "permission denied"),
    ("SELECT lo_import('/etc/passwd')", "permission denied"),
    ("SELECT lo_export(1, '/tmp/x')", "permission denied"),
    ("SELECT * FROM pg_authid", "permission denied"),
    ("SELECT pg_terminate_backend(pid) FROM pg_stat_get_backend_idset() pid", "permission denied"),
    ("SELECT pg_cancel_backend(pid) FROM pg_stat_get_backend_idset() pid", "permission denied"),
    ("SELECT dblink_exec('dbname=shop_0', 'DELETE FROM orders')", "does not exist"),
    ("SET ROLE toolgym_admin", "read-only"),
    ("SELECT pg_sleep(30)", "budget"),
    ("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT COUNT(*) FROM r",
     "budget"),
    ("SELECT COUNT(*) FROM orders a, orders b, orders c", "budget"),
    ("SELECT repeat('x', 5000000)", "longer than"),
    ("SELECT array_fill(7, ARRAY[200000])", "longer than"),
    ("SELECT " + "1 + " * 30000 + "1", "characters"),
    # values the client cannot read are the query's fault, not the database's
    ("SELECT 'infinity'::date", "cannot be read"),
    ("SELECT '4713-01-01 BC'::date", "cannot be read"),
    ("SELECT 'infinity'::timestamp", "cannot be read"),
    # and so are failure words in its own error text
    ("SELECT * FROM \"connection failure\"", "does not exist"),
    ("SELECT * FROM \"could not connect to server\"", "does not exist"),
    # errors a query raises by itself, whatever their SQLSTATE class, are its own: a policy
    # cannot mask its episode with them
    ("SELECT pg_database_size('nope')", "does not exist"),
    ("SELECT pg_describe_object(1, 1, 1)", "SQL error"),
    ("SELECT 'x'::regclass", "does not exist"),
    # other sessions' query text (the grader's gold queries) is not readable
    ("SELECT query FROM pg_stat_activity", "permission denied"),
    ("SELECT pg_stat_get_backend_activity(s) FROM pg_stat_get_backend_idset() s",
     "permission denied"),
    ("SELECT * FROM pg_stat_get_activity(NULL)", "permission denied"),
]  # fmt: skip


def test_hostile_queries_change_nothing(postgres):
    before = checksums(postgres)
    limits = QueryLimits(timeout_s=0.5, max_rows=50)

    async def attack(backend):
        for sql, message in HOSTILE:
            started = time.monotonic()
            with pytest.raises(QueryError, match=message):
                await backend.query("shop_0", sql, limits)
            assert time.monotonic() - started < 5, sql
        # a setting changed inside one query does not outlive it
        await backend.query(
            "shop_0", "SELECT set_config('default_transaction_read_only', 'off', false)", limits
        )
        with pytest.raises(QueryError, match="read-only"):
            await backend.query(
                "shop_0", "WITH x AS (SELECT 1) SELECT * FROM orders FOR UPDATE", limits
            )
        return (await backend.query("shop_0", "SELECT COUNT(*) FROM customers", limits)).rows

    assert with_backend(postgres.reader_dsn, attack) == [(150,)]
    assert checksums(postgres) == before


BUDGET_BREAKERS = [
    # lifts its own statement timeout in the first fetch, then sleeps in the second
    "SELECT n, CASE WHEN n = 1 THEN set_config('statement_timeout', '0', true) END, "
    "pg_sleep(CASE WHEN n > 1001 THEN 20 ELSE 0 END) FROM generate_series(1, 2000) n",
    "SELECT set_config('statement_timeout', '0', false), pg_sleep(20)",
    "SELECT repeat('x', 900000000)",
    "WITH RECURSIVE t(s, n) AS (SELECT 'x', 1 UNION ALL SELECT s || s, n + 1 FROM t "
    "WHERE n < 30) SELECT s FROM t",
    "WITH RECURSIVE t(s, n) AS (SELECT 'x', 1 UNION ALL SELECT s || s, n + 1 FROM t "
    "WHERE n < 30) SELECT n, length(s) FROM t",
]


def test_the_budget_covers_every_fetch_and_is_kept_from_outside(postgres):
    """However a query spends its time (lifting its own timeout, huge values the server
    cannot interrupt), it is stopped within the budget plus the cancel grace (or by the role's
    temp-file limit), as the query's fault, and the backend answers at once afterwards."""
    limits = QueryLimits(timeout_s=1.0)

    async def attack(backend):
        took = []
        for sql in BUDGET_BREAKERS:
            started = time.monotonic()
            with pytest.raises(QueryError, match="budget|more than the server allows"):
                await backend.query("shop_0", sql, QueryLimits(timeout_s=1.0, max_rows=5000))
            took.append(time.monotonic() - started)
        started = time.monotonic()
        rows = (await backend.query("shop_0", "SELECT COUNT(*) FROM customers", limits)).rows
        return took, rows, time.monotonic() - started

    took, rows, after = with_backend(postgres.reader_dsn, attack)
    assert max(took) < 1.0 + 0.25 + 2 * 1.0 + 0.5, took
    assert rows == [(150,)] and after < 1.0


def test_connections_go_back_to_the_pool_clean_and_are_kept(postgres):
    def try_locks():
        with psycopg.connect(postgres.dsn("shop_0", reader=False)) as other:
            return other.execute(
                "SELECT pg_try_advisory_lock(42), pg_try_advisory_lock(43)"
            ).fetchone()

    async def work(backend):
        sql = "SELECT pg_advisory_lock(42), pg_advisory_lock_shared(43)"
        await backend.query("shop_0", sql, LIMITS)
        got = await asyncio.to_thread(try_locks)  # while the pool still holds the connection
        for _ in range(20):
            await backend.query("shop_0", "SELECT 1", LIMITS)
        return got, backend._pools["shop_0"].get_stats()

    got, stats = with_backend(postgres.reader_dsn, work)
    assert got == (True, True)
    assert stats["connections_num"] <= 4, stats  # reused, not replaced after every query


def test_many_rows_are_cut_at_the_cap_without_fetching_them(postgres):
    async def work(backend):
        return await backend.query(
            "shop_0", "SELECT a.id, b.id FROM orders a, orders b", QueryLimits(max_rows=10)
        )

    result = with_backend(postgres.reader_dsn, work)
    assert len(result.rows) == 10 and result.truncated


def test_a_server_that_is_not_there_is_the_infrastructures_fault(postgres):
    dsn = postgres.reader_dsn.replace(f"port={postgres.port}", "port=1")

    async def work(backend):
        backend.connect_timeout_s = 2
        return await backend.query("shop_0", "SELECT 1", LIMITS)

    with pytest.raises(DatabaseUnavailable):
        with_backend(dsn, work)
    with pytest.raises(DatabaseUnavailable):
        with_backend(postgres.reader_dsn, lambda b: b.query("nowhere_0", "SELECT 1", LIMITS))


def test_sql_on_postgres_passes_the_reward_integrity_check(postgres):
    """Through SQL-v0's own tools: the self-masking queries and blind answers of
    `toolgym check` neither mask an episode nor count as solved."""
    from toolgym.envs.checker import check_env

    report = check_env("toolgym/SQL-v0", kwargs={"backend": "postgres", "dsn": postgres.reader_dsn})
    integrity = next(f for f in report.findings if f.check == "reward integrity")
    assert integrity.status == "pass", integrity.message
    assert report.ok, [f"{f.check}: {f.message}" for f in report.failures()]
