"""SQLite's printf (and its alias format) with every width and precision bounded.

The built-in pads `%.*c` one character at a time and checks neither the time budget nor the
length limit between characters, so `printf('%.*c', 2000000000, 'x')` holds a worker thread
for tens of seconds, past any progress handler. This wrapper reads the format as SQLite
does, refuses a width or precision over the cell limit, and lets SQLite's own printf (on a
private in-memory connection of the same thread) format the rest, so results are SQLite's.
"""

from __future__ import annotations

import math
import re
import sqlite3
from typing import Any

SPEC = re.compile(r"%[-+ #!,0]*(\*|\d+)?(?:\.(\*|\d*))?(?:ll|l)?(.)", re.S)
TAKES_NO_VALUE = frozenset("%n")
TAKES_A_VALUE = frozenset("dsgzqQwcouxXfeEGipr")
"""Conversions as SQLite's printf knows them; at any other it stops formatting."""


class PrintfRefused(Exception):
    """A format asked for more than the cell limit; the message is for the model."""


class BoundedPrintf:
    """Registered as `printf` and `format` on a connection; one per thread (sqlite3
    connections serve one thread at a time)."""

    def __init__(self, max_chars: int) -> None:
        self.builtin = sqlite3.connect(":memory:", check_same_thread=False)
        self.limit(max_chars)
        self.refused: str | None = None
        """Why the last call was refused: sqlite3 reports only that a function failed."""

    def install(self, conn: sqlite3.Connection) -> None:
        for name in ("printf", "format"):
            conn.create_function(name, -1, self, deterministic=True)

    def limit(self, max_chars: int) -> None:
        """The longest value one query may make (its cell limit)."""
        self.max_chars = max_chars
        self.builtin.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max(1, max_chars))

    def __call__(self, *args: Any) -> Any:
        if args and isinstance(args[0], str):
            try:
                self.check(args[0], args[1:])
            except PrintfRefused as exc:
                self.refused = str(exc)
                raise
        marks = ", ".join("?" * len(args))
        return self.builtin.execute(f"SELECT printf({marks})", args).fetchone()[0]

    def check(self, fmt: str, values: tuple[Any, ...]) -> None:
        position = 0
        for width, precision, kind in SPEC.findall(fmt):
            for number in (width, precision):
                if number == "*":
                    size = _as_int(values[position] if position < len(values) else None)
                    position += 1
                else:
                    size = int(number) if number else 0
                if abs(size) > self.max_chars:
                    raise PrintfRefused(
                        f"a printf width or precision of {size:,} is over the limit of "
                        f"{self.max_chars:,} characters"
                    )
            if kind in TAKES_A_VALUE:
                position += 1
            elif kind not in TAKES_NO_VALUE:
                return


def _as_int(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return int(value)
    raise PrintfRefused("a printf `*` width or precision must be a number")
