"""A first, friendly check that a statement only reads, so the model gets a clear message.

It is not the safety: each backend enforces read-only access itself (SQLite through an
immutable read-only file and an authorizer, PostgreSQL through a read-only role and
read-only transactions). This check names what was refused before the database does.
"""

from __future__ import annotations

import re

from toolgym.envs.sql.grading import top_level
from toolgym.envs.sql.results import QueryError

WRITING = frozenset({
    "insert", "update", "delete", "replace", "upsert", "merge", "create", "drop", "alter",
    "truncate", "attach", "detach", "pragma", "vacuum", "reindex", "analyze", "copy", "grant",
    "revoke", "set", "reset", "begin", "commit", "rollback", "savepoint", "release", "lock",
    "call", "do", "load", "listen", "notify", "prepare", "execute", "discard", "cluster",
    "refresh", "comment", "security", "import", "install",
})  # fmt: skip
MAX_QUERY_CHARS = 20_000
_FIRST_WORD = re.compile(r"\s*(?:--[^\n]*\n\s*|/\*.*?\*/\s*)*([A-Za-z_]+)", re.DOTALL)


def check_read_only(sql: str) -> str:
    """`sql` without a trailing semicolon, or QueryError saying why it cannot run. A statement
    that starts with neither a reading nor a writing word goes on to the database, whose
    syntax error says more than this check could."""
    if not isinstance(sql, str) or not sql.strip():
        raise QueryError("the query is empty; write one SELECT statement")
    if len(sql) > MAX_QUERY_CHARS:
        raise QueryError(f"the query is {len(sql):,} characters; the limit is {MAX_QUERY_CHARS:,}")
    if "\x00" in sql:
        raise QueryError("the query contains a NUL character")
    statement = sql.strip().rstrip(";").rstrip()
    if ";" in top_level(statement):
        raise QueryError("only one statement per query; remove the extra ';'")
    match = _FIRST_WORD.match(statement)
    word = match.group(1).lower() if match else ""
    if word in WRITING:
        raise QueryError(
            f"the database is read-only: {word.upper()} is not allowed; write one SELECT (or "
            "WITH) query"
        )
    return statement
