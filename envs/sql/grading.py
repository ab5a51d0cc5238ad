"""Execution match: does the predicted query's result equal the gold query's?

Rules, as text-to-SQL evaluation uses them (Spider's test suite, BIRD):
- columns may come in any order: a predicted result matches if some ordering of its columns
  matches (names are ignored; values decide);
- `ordered` compares rows in sequence (used when the gold query sorts its result at the top
  level), `multiset` compares rows with their counts, `set` ignores duplicates;
- numbers compare by value at `digits` significant digits (1 == 1.0, 0.1 + 0.2 == 0.3),
  Decimal and bool included; NULL equals NULL; dates and times compare by their ISO text, so
  SQLite's text dates equal PostgreSQL's date values.
"""

from __future__ import annotations

import datetime
import decimal
import itertools
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from toolgym.envs.sql.results import QueryResult

Mode = Literal["set", "multiset", "ordered"]
MODES: tuple[Mode, ...] = ("set", "multiset", "ordered")
MAX_COLUMN_ORDERINGS = 720
"""Column orderings tried when several columns hold the same values in a different order."""

_ORDER_BY = re.compile(r"\border\s+by\b", re.IGNORECASE)


@dataclass(frozen=True)
class Match:
    matched: bool
    reason: str
    """Why not (empty when matched): for logs and for the model's feedback."""


def gold_mode(gold_sql: str, unordered: Mode = "multiset") -> Mode:
    """`ordered` when the gold query sorts its final result (an ORDER BY outside every
    parenthesis and string), else `unordered`."""
    return "ordered" if _ORDER_BY.search(top_level(gold_sql)) else unordered


def top_level(sql: str) -> str:
    """`sql` with everything inside parentheses, quotes and comments blanked out."""
    out, depth, i = [], 0, 0
    while i < len(sql):
        ch = sql[i]
        if ch in "'\"":
            end = sql.find(ch, i + 1)
            i = len(sql) if end < 0 else end + 1
            out.append(" ")
            continue
        if sql.startswith("--", i):
            end = sql.find("\n", i)
            i = len(sql) if end < 0 else end
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
            i += 1
            continue
        out.append(" ")
        i += 1
    return "".join(out)


def normalize(value: Any, digits: int = 6) -> Any:
    """A comparable, hashable form of one cell."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (bool, int, float, decimal.Decimal)):
        number = float(value)
        if math.isnan(number):
            return "NaN"
        if math.isinf(number):
            return number
        return float(f"{number:.{digits}g}")
    if isinstance(value, (datetime.date, datetime.time, datetime.datetime)):
        return (
            value.isoformat(sep=" ") if isinstance(value, datetime.datetime) else value.isoformat()
        )
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    return str(value)


def _sort_key(value: Any) -> tuple[int, Any]:
    """Orders values of mixed types (None, numbers, text, bytes) without comparing across."""
    if value is None:
        return (0, 0)
    if isinstance(value, float):
        return (1, value)
    if isinstance(value, str):
        return (2, value)
    return (3, value)


def compare(predicted: QueryResult, gold: QueryResult, mode: Mode, digits: int = 6) -> Match:
    """Whether `predicted` equals `gold` under `mode` (module docstring has the rules)."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: choose one of {', '.join(MODES)}")
    if predicted.truncated:
        return Match(False, "the result has more rows than can be compared")
    width = len(gold.columns)
    if len(predicted.columns) != width:
        return Match(False, f"{len(predicted.columns)} columns where {width} are expected")
    gold_rows = [tuple(normalize(v, digits) for v in row) for row in gold.rows]
    rows = [tuple(normalize(v, digits) for v in row) for row in predicted.rows]
    if mode != "set" and len(rows) != len(gold_rows):
        return Match(False, f"{len(rows)} rows where {len(gold_rows)} are expected")
    for order in _column_orders(rows, gold_rows, width, mode):
        moved = [tuple(row[i] for i in order) for row in rows]
        if _same_rows(moved, gold_rows, mode):
            return Match(True, "")
    return Match(False, "the values differ")


def _same_rows(
    rows: Sequence[tuple[Any, ...]], gold: Sequence[tuple[Any, ...]], mode: Mode
) -> bool:
    if mode == "ordered":
        return list(rows) == list(gold)
    if mode == "multiset":
        return Counter(rows) == Counter(gold)
    return set(rows) == set(gold)


def _column_orders(
    rows: Sequence[tuple[Any, ...]], gold: Sequence[tuple[Any, ...]], width: int, mode: Mode
) -> list[tuple[int, ...]]:
    """Orderings of the predicted columns worth trying: each predicted column may only stand
    where a gold column holds the same values (as a multiset, or a set in set mode)."""

    def signature(table: Sequence[tuple[Any, ...]], column: int) -> Any:
        values = [row[column] for row in table]
        if mode == "set":
            return tuple(sorted(set(values), key=_sort_key))
        return tuple(sorted(values, key=_sort_key))

    predicted = [signature(rows, c) for c in range(width)]
    wanted = [signature(gold, c) for c in range(width)]
    candidates = [[p for p in range(width) if predicted[p] == wanted[g]] for g in range(width)]
    if any(not c for c in candidates):
        return []
    orders: list[tuple[int, ...]] = []
    for order in itertools.product(*candidates):
        if len(set(order)) == width:
            orders.append(order)
            if len(orders) >= MAX_COLUMN_ORDERINGS:
                break
    return orders
