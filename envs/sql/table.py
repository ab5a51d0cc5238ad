"""A query result as the model reads it: a compact pipe-separated table, cut to a number of
rows and characters with a notice saying what was left out."""

from __future__ import annotations

from typing import Any

from toolgym.envs.sql.results import QueryResult

CELL_CHARS = 60


def cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float):
        return f"{value:.10g}"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"<{len(bytes(value))} bytes>"
    text = str(value).replace("\n", " ").replace("|", "/")
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 3] + "..."


def format_table(result: QueryResult, max_rows: int, max_chars: int) -> str:
    """Header, then up to `max_rows` rows, then a count line ("3 rows", "10 of 57 rows
    shown", "10 of more than 10000 rows shown"), the whole kept within `max_chars`."""
    if not result.columns:
        return "The statement returned no columns."
    total = len(result.rows)
    header = " | ".join(result.columns)
    lines = [header if len(header) <= max_chars else header[: max_chars - 3] + "..."]
    shown = 0
    for row in result.rows[:max_rows]:
        line = " | ".join(cell(v) for v in row)
        if sum(len(x) + 1 for x in lines) + len(line) > max_chars:
            break
        lines.append(line)
        shown += 1
    if result.truncated:
        count = f"{shown} of more than {total} rows shown"
    elif shown < total:
        count = f"{shown} of {total} rows shown"
    else:
        count = f"{total} row{'s' if total != 1 else ''}"
    return "\n".join(lines) + f"\n({count})"
