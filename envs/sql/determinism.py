"""Why a query may answer differently run to run, read from its text: a gold query must have
one answer, and two runs that agree prove little (`abs(random()) % 1000 = 0` agrees with
itself 99.8% of the time)."""

from __future__ import annotations

import re

NONDETERMINISTIC = (
    # SQLite
    "random", "randomblob", "changes", "total_changes", "last_insert_rowid",
    # PostgreSQL
    "setseed", "now", "clock_timestamp", "statement_timestamp", "transaction_timestamp",
    "timeofday", "gen_random_uuid", "uuid_generate_v1", "uuid_generate_v4", "txid_current",
    "pg_backend_pid", "inet_client_addr", "pg_postmaster_start_time",
)  # fmt: skip
"""Functions whose value is not a function of the database."""
_CALL = re.compile(r"\b(" + "|".join(NONDETERMINISTIC) + r")\s*\(", re.IGNORECASE)
_CLOCK = re.compile(
    r"\b(current_timestamp|current_date|current_time|localtimestamp|localtime)\b"
    r"|'\s*now\s*'",
    re.IGNORECASE,
)
_STRING = re.compile(r"'(?:[^']|'')*'")


def nondeterminism(sql: str) -> str | None:
    """What in `sql` can change its answer between runs (a random or clock function), or
    None. Names inside string literals are not calls, but 'now' is a clock wherever it is."""
    bare = _STRING.sub(lambda m: "'now'" if m[0].strip("' ").lower() == "now" else "''", sql)
    if (found := _CALL.search(bare)) is not None:
        return f"it calls {found[1].lower()}(), which answers differently run to run"
    if (found := _CLOCK.search(bare)) is not None:
        return f"it reads the clock ({found[0].strip()}), which answers differently run to run"
    return None
