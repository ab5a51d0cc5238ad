"""What the SQL env's query tool costs over a raw database call, and how many queries a
second a PostgreSQL server answers for 64 concurrent episodes.

Sequential paths, each over the same gold queries of generated questions (p50 and p99 in ms):
- sqlite3 raw:     a plain sqlite3 connection per database, execute + fetchall
- env (sqlite):    the env's run_sql tool through `astep` (parse the call, read-only checks,
                   time budget, row caps, table formatting) on the same files
- psycopg raw:     a plain psycopg connection per database (autocommit), execute + fetchall
- env (postgres):  run_sql through `astep` on the same server (a read-only transaction,
                   statement timeout, server-side cursor, rollback)
Then 64 episodes at once on PostgreSQL (reset first), each running its question's queries
through run_sql: queries per second over that phase. Everything in one run, against a throwaway server
started here, because these machines are shared and noisy.

    python bench/sql_query.py [--queries 300] [--episodes 64] [--steps 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

import psycopg

import toolgym
from toolgym.envs.resources import Resources
from toolgym.envs.sql.generate import build, default_db_ids, write_sqlite
from toolgym.envs.sql.postgres_server import start_postgres
from toolgym.envs.sql.questions import generate_question


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return statistics.median(ordered) * 1e3, p99 * 1e3


def call(query: str) -> str:
    return (
        f"<tool_call>{json.dumps({'name': 'run_sql', 'arguments': {'query': query}})}</tool_call>"
    )


def raw_sqlite(folder: Path, questions: list) -> list[float]:
    conns = {d: sqlite3.connect(folder / f"{d}.sqlite") for d in default_db_ids()}
    samples = []
    for q in questions:
        start = time.perf_counter()
        conns[q.db_id].execute(q.gold_sql).fetchall()
        samples.append(time.perf_counter() - start)
    return samples


def raw_psycopg(server, questions: list) -> list[float]:
    conns = {d: psycopg.connect(server.dsn(d), autocommit=True) for d in default_db_ids()}
    samples = []
    for q in questions:
        start = time.perf_counter()
        conns[q.db_id].execute(q.gold_sql).fetchall()
        samples.append(time.perf_counter() - start)
    for conn in conns.values():
        conn.close()
    return samples


async def through_env(questions: list, **env_args) -> list[float]:
    env = toolgym.make("toolgym/SQL-v0", max_turns=10**6, **env_args).unwrapped
    samples = []
    try:
        for q in questions:
            await env.areset(options={"task": q.task()})
            start = time.perf_counter()
            obs, *_, info = await env.astep(call(q.gold_sql))
            samples.append(time.perf_counter() - start)
            assert not info.get("infra_error") and not obs[-1]["content"].startswith("Error"), obs
    finally:
        await env.aclose()
    return samples


async def concurrent_episodes(dsn: str, episodes: int, steps: int) -> tuple[float, int]:
    resources = Resources()
    envs = [toolgym.make("toolgym/SQL-v0", backend="postgres", dsn=dsn, pool_size=16,
                         max_turns=steps + 1).unwrapped for _ in range(episodes)]  # fmt: skip
    for env in envs:
        env.use_resources(resources)

    questions = [generate_question(10_000 + i) for i in range(episodes)]

    async def episode(env, q) -> int:
        for _ in range(steps):
            obs, *_ = await env.astep(call(q.gold_sql))
            assert not obs[-1]["content"].startswith("Error"), obs
        return steps

    await asyncio.gather(
        *(env.areset(options={"task": q.task()}) for env, q in zip(envs, questions, strict=True))
    )
    start = time.perf_counter()
    done = await asyncio.gather(*(episode(env, q) for env, q in zip(envs, questions, strict=True)))
    elapsed = time.perf_counter() - start
    for env in envs:
        await env.aclose()
    await resources.aclose()
    return sum(done) / elapsed, sum(done)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    questions = [generate_question(seed) for seed in range(args.queries)]
    folder = Path(tempfile.mkdtemp(prefix="toolgym-bench-sql-"))
    pg_folder = tempfile.mkdtemp(prefix="toolgym-bench-pg-")
    for db_id in default_db_ids():
        write_sqlite(build(db_id), folder / f"{db_id}.sqlite")
    server = start_postgres(pg_folder, 55_000 + int(time.time()) % 5000)
    try:
        server.load([build(db_id) for db_id in default_db_ids()])
        rows = [
            ("sqlite3 raw", percentiles(raw_sqlite(folder, questions))),
            ("env (sqlite)", percentiles(asyncio.run(through_env(questions, databases=str(folder))))),
            ("psycopg raw", percentiles(raw_psycopg(server, questions))),
            ("env (postgres)", percentiles(asyncio.run(
                through_env(questions, backend="postgres", dsn=server.reader_dsn)))),
        ]  # fmt: skip
        rate, total = asyncio.run(concurrent_episodes(server.reader_dsn, args.episodes, args.steps))
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(pg_folder, ignore_errors=True)
    print(f"{args.queries} gold queries of generated questions, sequential")
    print(f"{'path':<16} {'p50 ms':>8} {'p99 ms':>8} {'p50 overhead':>13}")
    for i, (label, (p50, p99)) in enumerate(rows):
        base = rows[i - 1][1][0] if i % 2 else None
        extra = f"{p50 - base:+11.2f}ms" if base is not None else f"{'':>13}"
        print(f"{label:<16} {p50:8.2f} {p99:8.2f} {extra}")
    print(f"postgres, {args.episodes} concurrent episodes x {args.steps} queries: "
          f"{rate:.0f} queries/s ({total} queries)")  # fmt: skip


if __name__ == "__main__":
    main()
