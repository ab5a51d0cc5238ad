"""Another of the database's values (a city, a kind, a status) where a query quotes one. A
weaker demonstrator for the generated questions slips so, now and then, so an SFT student
imitating it is right only part of the time and RL has something to remove; and a proposed
question is checked to hinge on the values it quotes by running its query slipped so
(self-play's SQL domain)."""

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
    for match, others in _swappable(gold_sql, db_id):
        return _swapped(gold_sql, match, rng.choice(others))
    return gold_sql


def literal(value: str) -> str:
    """`value` as a SQL string literal (and as a question quotes it: 'O''Brien')."""
    return "'" + value.replace("'", "''") + "'"


def quoted_values(sql: str) -> list[str]:
    """The values `sql` quotes ('Old Town'), unescaped."""
    return [_unquoted(m) for m in _LITERAL.finditer(sql)]


def slipped_queries(gold_sql: str, db_id: str, per_value: int = 3) -> list[tuple[str, list[str]]]:
    """For each quoted value of `gold_sql` that the database's rows draw a column from: the
    value, and the query with it swapped for `per_value` of that column's other values (the
    same ones each time: a proposal is checked alike in every run)."""
    return [
        (_unquoted(match), [_swapped(gold_sql, match, o) for o in others[:per_value]])
        for match, others in _swappable(gold_sql, db_id)
    ]


def held_values(db_id: str, value: str) -> list[str]:
    """The values the database's rows hold in the column whose values include `value` (a
    place, a kind, a state), in the order the rows first name them; none when no column
    does or the database is not a generated one. An edit that puts one of them in place of
    `value` asks about rows that exist."""
    try:
        db = build(db_id)
    except ConfigError:
        return []
    tables = ((db.people, 2), (db.items, 2), (db.events, 5))  # place, kind, state columns
    for words, (rows, at) in zip(db.vocabulary.columns(), tables, strict=True):
        if value in words:
            return list(dict.fromkeys(str(row[at]) for row in rows))
    return []


def _swappable(sql: str, db_id: str) -> list[tuple[re.Match[str], list[str]]]:
    """The quoted values of `sql` that one of the database's value columns holds, each with
    that column's other values; none when the database is not a generated one."""
    try:
        words = build(db_id).vocabulary
    except ConfigError:
        return []
    out = []
    for match in _LITERAL.finditer(sql):
        value = _unquoted(match)
        column = next((values for values in words.columns() if value in values), None)
        if column is not None:
            out.append((match, [v for v in column if v != value]))
    return out


def _unquoted(match: re.Match[str]) -> str:
    return match.group(1).replace("''", "'")


def _swapped(sql: str, match: re.Match[str], other: str) -> str:
    return sql[: match.start()] + literal(other) + sql[match.end() :]
