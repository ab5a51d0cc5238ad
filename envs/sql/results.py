"""What a query gives back, the limits it runs under, and whose fault a failure is.

A `QueryError` is the policy's: a syntax error, a write refused, a budget spent. The message
goes back to the model. A `DatabaseUnavailable` is the infrastructure's: a server down, a
connection lost, a database file missing. The env turns it into InfraError, masked from
training and never scored 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolgym.errors import ToolgymError


class QueryError(ToolgymError, ValueError):
    """The query failed through its own fault; the message says how, for the model."""


class DatabaseUnavailable(ToolgymError, RuntimeError):
    """The database could not answer for reasons that are not the query's."""


@dataclass(frozen=True)
class QueryLimits:
    """Bounds on one query.

    Args:
        timeout_s: wall-clock budget; a query past it is stopped (QueryError).
        max_rows: rows fetched; a result with more is cut there and marked `truncated`.
        max_cell_chars: the longest string or blob one cell may hold.
        max_bytes: the whole fetched result's text and blob size; past it, QueryError.
    """

    timeout_s: float = 5.0
    max_rows: int = 10_000
    max_cell_chars: int = 100_000
    max_bytes: int = 16_000_000


@dataclass(frozen=True)
class QueryResult:
    """Column names and rows as Python values (None for NULL)."""

    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    truncated: bool = False
    """More rows existed than the limits let through."""


class RowCollector:
    """Keeps a result's rows within the limits as batches arrive: at most `max_rows` (one
    more is asked for, to know whether the result was cut) and `max_bytes` in all."""

    def __init__(self, limits: QueryLimits) -> None:
        self.limits = limits
        self.rows: list[tuple[Any, ...]] = []
        self.size = 0

    def wanted(self) -> int:
        """How many rows to fetch next; 0 when the cap is reached."""
        return max(0, min(1000, self.limits.max_rows + 1 - len(self.rows)))

    def take(self, batch: list[Any]) -> None:
        for row in batch:
            self.size += 8 * len(row) + sum(
                len(v) for v in row if isinstance(v, (str, bytes, bytearray, memoryview))
            )
        if self.size > self.limits.max_bytes:
            raise QueryError(
                f"the result is larger than {self.limits.max_bytes:,} bytes; select fewer rows "
                "or columns (LIMIT, aggregates)"
            )
        self.rows.extend(tuple(r) for r in batch)

    def result(self, columns: tuple[str, ...]) -> QueryResult:
        cut = len(self.rows) > self.limits.max_rows
        return QueryResult(columns, self.rows[: self.limits.max_rows], cut)
