"""Deterministic multi-table databases: `build(db_id)` gives the same rows on every machine,
written to SQLite by `write_sqlite` and to PostgreSQL by the postgres backend's loader.

A database id is `<domain>_<index>` (see domains.py), e.g. "shop_0", whose rows name the
domain's own places, kinds and states, or `<domain>_wide_<index>` and
`<domain>_held_out_<index>`, whose rows name made-up values drawn for that database
(values.py); the index seeds its rows. Each has 150 people, 48 items and 900 events: enough
that a wrong filter, join or grouping gives a visibly different result. Measures are unique within a database, so
"the k most expensive" has one answer; about one person in seven has no events, so
"who never..." questions have answers.
"""

from __future__ import annotations

import datetime
import random
import re
import sqlite3
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from toolgym.envs.sql.domains import DOMAINS, FIRST_NAMES, LAST_NAMES, Domain
from toolgym.envs.sql.values import VALUE_SETS, Vocabulary, vocabulary
from toolgym.errors import ConfigError

PEOPLE, ITEMS, EVENTS = 150, 48, 900
WIDE_PER_DOMAIN = 25
FIRST_DAY = datetime.date(2023, 1, 1)
DAYS = 730
Dialect = Literal["sqlite", "postgres"]
_DB_ID = re.compile(r"^([a-z]+)_(?:(wide|held_out)_)?(\d{1,6})$")


@dataclass(frozen=True)
class Database:
    """A generated database: its domain and its tables' rows, in column order."""

    db_id: str
    domain: Domain
    vocabulary: Vocabulary
    people: list[tuple[Any, ...]]
    items: list[tuple[Any, ...]]
    events: list[tuple[Any, ...]]

    def columns(self, table: str) -> list[str]:
        c, d = self.domain.columns, self.domain
        if table == d.people:
            return ["id", c["name"], c["place"], c["number"]]
        if table == d.items:
            return ["id", c["title"], c["kind"], c["measure"]]
        return ["id", f"{_singular(d.people)}_id", f"{_singular(d.items)}_id", c["day"],
                c["amount"], c["state"]]  # fmt: skip

    def tables(self) -> dict[str, list[tuple[Any, ...]]]:
        d = self.domain
        return {d.people: self.people, d.items: self.items, d.events: self.events}

    def ddl(self, dialect: Dialect) -> list[str]:
        """CREATE TABLE statements, parents first."""
        d, c = self.domain, self.domain.columns
        money = "NUMERIC(10,2)" if dialect == "postgres" else "REAL"
        day = "DATE" if dialect == "postgres" else "TEXT"
        person_fk, item_fk = self.columns(d.events)[1:3]
        return [
            f"CREATE TABLE {d.people} (\n  id INTEGER PRIMARY KEY,\n  {c['name']} TEXT NOT NULL,"
            f"\n  {c['place']} TEXT NOT NULL,\n  {c['number']} INTEGER NOT NULL\n)",
            f"CREATE TABLE {d.items} (\n  id INTEGER PRIMARY KEY,\n  {c['title']} TEXT NOT NULL,"
            f"\n  {c['kind']} TEXT NOT NULL,\n  {c['measure']} {money} NOT NULL\n)",
            f"CREATE TABLE {d.events} (\n  id INTEGER PRIMARY KEY,\n"
            f"  {person_fk} INTEGER NOT NULL REFERENCES {d.people}(id),\n"
            f"  {item_fk} INTEGER NOT NULL REFERENCES {d.items}(id),\n"
            f"  {c['day']} {day} NOT NULL,\n  {c['amount']} INTEGER NOT NULL,\n"
            f"  {c['state']} TEXT NOT NULL\n)",
        ]


def _singular(table: str) -> str:
    return {"people": "person", "classes": "class"}.get(table, table[:-1])


@dataclass(frozen=True)
class DatabaseId:
    domain: Domain
    index: int
    values: str
    """The value set its rows name: "domain", "wide" or "held_out" (values.py)."""


def parse_db_id(db_id: str) -> DatabaseId:
    match = _DB_ID.match(db_id)
    if not match or match.group(1) not in DOMAINS:
        raise ConfigError(
            f"no generated database {db_id!r}: ids are <domain>_<index> (the domain's own "
            f"values) or <domain>_wide_<index> / <domain>_held_out_<index> (made-up values), "
            f"with a domain among {', '.join(DOMAINS)}, e.g. shop_0 or shop_wide_0"
        )
    return DatabaseId(DOMAINS[match.group(1)], int(match.group(3)), match.group(2) or "domain")


@lru_cache(maxsize=256)  # a run on made-up values reads 200 (its own and its transfer set's)
def build(db_id: str) -> Database:
    """The database `db_id`, generated from its domain and index."""
    parsed = parse_db_id(db_id)
    domain, index = parsed.domain, parsed.index
    words = vocabulary(domain, parsed.values, db_id)
    rows_seed = "" if parsed.values == "domain" else f"{parsed.values}-"
    rng = random.Random(f"toolgym-sql-{domain.name}-{rows_seed}{index}")
    names = rng.sample([f"{first} {last}" for first in FIRST_NAMES for last in LAST_NAMES], PEOPLE)
    place_weights = [rng.uniform(0.3, 1.0) for _ in words.places]
    people = [
        (
            i + 1,
            names[i],
            rng.choices(words.places, place_weights)[0],
            rng.randint(*domain.number_range),
        )
        for i in range(PEOPLE)
    ]
    first, second = domain.title_words
    titles = rng.sample([f"{a} {b}" for a in first for b in second], ITEMS)
    low, high = domain.measure_range
    measures: set[float] = set()
    while len(measures) < ITEMS:
        measures.add(round(rng.uniform(low, high), 2))
    ordered = rng.sample(sorted(measures), ITEMS)
    items = [(i + 1, titles[i], rng.choice(words.kinds), ordered[i]) for i in range(ITEMS)]
    active = rng.sample(range(1, PEOPLE + 1), PEOPLE * 6 // 7)
    state_weights = [0.6, 0.3, 0.1]
    events = []
    for i in range(EVENTS):
        day = FIRST_DAY + datetime.timedelta(days=rng.randrange(DAYS))
        events.append((
            i + 1, rng.choice(active), rng.randint(1, ITEMS), day.isoformat(),
            rng.randint(*domain.amount_range), rng.choices(words.states, state_weights)[0],
        ))  # fmt: skip
    return Database(db_id, domain, words, people, items, events)


def write_sqlite(db: Database, path: str | Path) -> Path:
    """Write `db` to a new SQLite file at `path` (replacing one left half-written)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.unlink(missing_ok=True)
    conn = sqlite3.connect(partial)
    try:
        for statement in db.ddl("sqlite"):
            conn.execute(statement)
        for table, rows in db.tables().items():
            marks = ", ".join("?" * len(rows[0]))
            conn.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
        conn.commit()
    finally:
        conn.close()
    partial.replace(path)
    return path


def default_db_ids(per_domain: int | None = None, values: str = "domain") -> list[str]:
    """`per_domain` databases of each domain (by default 2 with the domain's own values, 25
    with made-up ones, so that their values are too many to learn by heart)."""
    if values not in VALUE_SETS:
        raise ConfigError(f"values {values!r}: choose one of {', '.join(VALUE_SETS)}")
    if per_domain is None:
        per_domain = 2 if values == "domain" else WIDE_PER_DOMAIN
    infix = "" if values == "domain" else f"{values}_"
    return [f"{name}_{infix}{i}" for name in DOMAINS for i in range(per_domain)]
