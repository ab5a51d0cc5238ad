"""A weaker demonstrator for the generated questions: it sometimes writes another of the
database's values (a city, a kind, a status) where the question names one, so an SFT student
imitating it is right only part of the time and RL has something to remove."""

from __future__ import annotations

import random
import re

from toolgym.envs.sql.generate import build
from toolgym.errors import ConfigError

_LITERAL = re.compile(r"'((?:[^']|'')*)'")


def slip(gold_sql: str, db_id: str, rng: random.Random) -> str:
    """`gold_sql` with its first quoted value swapped for another that the database's rows
    draw the same column from; unchanged when the query quotes none (or the database is not
    generated)."""
    try:
        words = build(db_id).vocabulary
    except ConfigError:
        return gold_sql
    for match in _LITERAL.finditer(gold_sql):
        value = match.group(1).replace("''", "'")
        for values in words.columns():
            if value in values:
                other = rng.choice([v for v in values if v != value]).replace("'", "''")
                return f"{gold_sql[: match.start()]}'{other}'{gold_sql[match.end() :]}"
    return gold_sql
