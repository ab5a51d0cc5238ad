"""Templated questions with gold SQL over the generated databases (generate.py), across the
difficulties text-to-SQL sets grade: filter, aggregate, group, join, nested, ordering, top-k.

Each template draws its parameters from the database's own rows, so every gold result is
non-empty, and it words the question with the domain's nouns. A value the query must match
is quoted in the question as in the SQL ('Old Town'), so it is exact and reads the same in
both. The gold SQL is written in the SQL that SQLite and PostgreSQL share, so one question
grades on either.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from toolgym.envs.sql.generate import Database, build, default_db_ids
from toolgym.envs.sql.slips import literal as _q
from toolgym.errors import ConfigError, chosen_names


@dataclass(frozen=True)
class Question:
    db_id: str
    question: str
    gold_sql: str
    template: str
    difficulty: str

    def task(self) -> dict[str, str]:
        """The task row, in the Spider/BIRD JSONL shape."""
        return {"db_id": self.db_id, "question": self.question, "gold_sql": self.gold_sql,
                "template": self.template, "difficulty": self.difficulty}  # fmt: skip


class _Words:
    """A database's table, column and noun names, for writing templates briefly."""

    def __init__(self, db: Database) -> None:
        d = db.domain
        self.db, self.d, self.n = db, d, d.nouns
        self.P, self.I, self.E = d.people, d.items, d.events
        self.name, self.place, self.number = (d.columns[k] for k in ("name", "place", "number"))
        self.title, self.kind, self.measure = (d.columns[k] for k in ("title", "kind", "measure"))
        self.day, self.amount, self.state = (d.columns[k] for k in ("day", "amount", "state"))
        self.pfk, self.ifk = db.columns(d.events)[1:3]


Template = Callable[[_Words, random.Random], tuple[str, str] | None]


def filter_count(w: _Words, rng: random.Random) -> tuple[str, str]:
    place = rng.choice([p[2] for p in w.db.people])
    return (f"How many {w.n['persons']} have {_q(place)} as their {w.n['place']}?",
            f"SELECT COUNT(*) FROM {w.P} WHERE {w.place} = {_q(place)}")  # fmt: skip


def filter_list(w: _Words, rng: random.Random) -> tuple[str, str]:
    kind = rng.choice([i[2] for i in w.db.items])
    return (f"List the {w.title}s of the {w.n['items']} whose {w.kind} is {_q(kind)}.",
            f"SELECT {w.title} FROM {w.I} WHERE {w.kind} = {_q(kind)}")  # fmt: skip


def filter_number(w: _Words, rng: random.Random) -> tuple[str, str]:
    numbers = sorted(p[3] for p in w.db.people)
    bound = numbers[rng.randrange(len(numbers) * 3 // 4, len(numbers) - 3)]
    return (f"Give the names of the {w.n['persons']} whose {w.n['number']} is greater than {bound}.",
            f"SELECT {w.name} FROM {w.P} WHERE {w.number} > {bound}")  # fmt: skip


def aggregate_average(w: _Words, rng: random.Random) -> tuple[str, str]:
    kind = rng.choice([i[2] for i in w.db.items])
    return (f"What is the average {w.n['measure']} of the {w.n['items']} whose {w.kind} is {_q(kind)}?",
            f"SELECT AVG({w.measure}) FROM {w.I} WHERE {w.kind} = {_q(kind)}")  # fmt: skip


def aggregate_state(w: _Words, rng: random.Random) -> tuple[str, str]:
    state = rng.choice([e[5] for e in w.db.events])
    return (f"How many {w.n['events']} have the status {_q(state)}?",
            f"SELECT COUNT(*) FROM {w.E} WHERE {w.state} = {_q(state)}")  # fmt: skip


def group_count(w: _Words, rng: random.Random) -> tuple[str, str]:
    return (f"How many {w.n['persons']} are there for each {w.n['place']}?",
            f"SELECT {w.place}, COUNT(*) FROM {w.P} GROUP BY {w.place}")  # fmt: skip


def group_join_sum(w: _Words, rng: random.Random) -> tuple[str, str]:
    return (f"What is the total {w.n['amount']} of all {w.n['events']} for each {w.kind} of {w.n['item']}?",
            f"SELECT i.{w.kind}, SUM(e.{w.amount}) FROM {w.E} AS e JOIN {w.I} AS i "
            f"ON e.{w.ifk} = i.id GROUP BY i.{w.kind}")  # fmt: skip


def join_titles(w: _Words, rng: random.Random) -> tuple[str, str]:
    person = w.db.people[rng.choice(w.db.events)[1] - 1][1]
    return (f"Which {w.n['items']} has {_q(person)} {w.n['verb']}? Give their {w.title}s.",
            f"SELECT DISTINCT i.{w.title} FROM {w.E} AS e JOIN {w.I} AS i ON e.{w.ifk} = i.id "
            f"JOIN {w.P} AS p ON e.{w.pfk} = p.id WHERE p.{w.name} = {_q(person)}")  # fmt: skip


def join_count(w: _Words, rng: random.Random) -> tuple[str, str]:
    place = w.db.people[rng.choice(w.db.events)[1] - 1][2]
    return (f"How many {w.n['events']} were made by {w.n['persons']} whose {w.n['place']} is {_q(place)}?",
            f"SELECT COUNT(*) FROM {w.E} AS e JOIN {w.P} AS p ON e.{w.pfk} = p.id "
            f"WHERE p.{w.place} = {_q(place)}")  # fmt: skip


def nested_never(w: _Words, rng: random.Random) -> tuple[str, str]:
    return (f"Which {w.n['persons']} have no {w.n['events']} at all? Give their names.",
            f"SELECT {w.name} FROM {w.P} WHERE id NOT IN (SELECT {w.pfk} FROM {w.E})")  # fmt: skip


def nested_above_average(w: _Words, rng: random.Random) -> tuple[str, str]:
    kind = rng.choice([i[2] for i in w.db.items])
    return (f"Which {w.n['items']} whose {w.kind} is {_q(kind)} have a {w.n['measure']} above the "
            f"average {w.n['measure']} of all {w.n['items']}? Give their {w.title}s.",
            f"SELECT {w.title} FROM {w.I} WHERE {w.kind} = {_q(kind)} AND {w.measure} > "
            f"(SELECT AVG({w.measure}) FROM {w.I})")  # fmt: skip


def ordering(w: _Words, rng: random.Random) -> tuple[str, str]:
    place = rng.choice([p[2] for p in w.db.people])
    return (f"List the names of the {w.n['persons']} whose {w.n['place']} is {_q(place)}, in alphabetical order.",
            f"SELECT {w.name} FROM {w.P} WHERE {w.place} = {_q(place)} ORDER BY {w.name}")  # fmt: skip


def top_k(w: _Words, rng: random.Random) -> tuple[str, str]:
    k = rng.randint(2, 5)
    return (f"What are the {k} {w.n['items']} with the highest {w.n['measure']}, highest first? "
            f"Give their {w.title}s.",
            f"SELECT {w.title} FROM {w.I} ORDER BY {w.measure} DESC LIMIT {k}")  # fmt: skip


def top_person(w: _Words, rng: random.Random) -> tuple[str, str] | None:
    counts = Counter(e[1] for e in w.db.events).most_common(2)
    if counts[0][1] == counts[1][1]:
        return None  # a tie has no single answer
    return (f"Which {w.n['person']} has the most {w.n['events']}? Give the name.",
            f"SELECT p.{w.name} FROM {w.P} AS p JOIN {w.E} AS e ON e.{w.pfk} = p.id "
            f"GROUP BY p.id, p.{w.name} ORDER BY COUNT(*) DESC LIMIT 1")  # fmt: skip


TEMPLATES: dict[str, tuple[str, Template]] = {
    "filter_count": ("filter", filter_count),
    "filter_list": ("filter", filter_list),
    "filter_number": ("filter", filter_number),
    "aggregate_average": ("aggregate", aggregate_average),
    "aggregate_state": ("aggregate", aggregate_state),
    "group_count": ("group", group_count),
    "group_join_sum": ("group", group_join_sum),
    "join_titles": ("join", join_titles),
    "join_count": ("join", join_count),
    "nested_never": ("nested", nested_never),
    "nested_above_average": ("nested", nested_above_average),
    "ordering": ("ordering", ordering),
    "top_k": ("top-k", top_k),
    "top_person": ("top-k", top_person),
}


def check_templates(names: list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    return chosen_names(TEMPLATES, names or None, "question template")


def generate_question(
    seed: int, db_ids: list[str] | None = None, templates: tuple[str, ...] | None = None
) -> Question:
    """The question of `seed`: a database, a template and its parameters, all drawn from it."""
    rng = random.Random(f"toolgym-sql-question-{seed}")
    ids = db_ids or default_db_ids()
    names = check_templates(templates)
    for _ in range(100):
        db_id, name = rng.choice(ids), rng.choice(names)
        difficulty, template = TEMPLATES[name]
        made = template(_Words(build(db_id)), rng)
        if made is not None:
            return Question(db_id, made[0], made[1], name, difficulty)
    raise ConfigError(f"templates {names} give no question on databases {ids}")
