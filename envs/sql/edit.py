"""toolgym/EditSQL-v0: SQL self-play's proposer by editing: the model is shown a question and
its gold query and puts another of the database's values in place of the value they quote
(a mutation, as ACCEL edits levels: a tiny model can learn to pick a value where it cannot
learn to write a question and its query from nothing).

Observation: the database's schema (as SQL-v0 shows it), the question to edit with its gold
    query, and the values the database's rows hold in the column of the value it quotes
    (those whose edit makes a training question: evaluation asks the held-out ones).
    The question is the reset task's first example (a self-play pool task on one of the
    env's databases) when it quotes such a value; else a training question of the env's own
    (SQL-v0's generated questions, train split, whatever split the reset draws from). A
    reset task that is a SQL task itself ({"db_id", "question", "gold_sql"}: a client's own
    question) is the question shown; one it cannot edit is refused, saying why.
Tools (style="tools"): replace_value(value), which ends the episode, and run_sql and
    describe_table to explore (read-only). With style="tags": <value> and <sql>.
    replace_value refuses the question's own value and any value not listed, saying why.
Result: a ProposedTask (kind "sql") as ProposeSQL-v0 hands back (the database runs the
    edited query twice, and slipped), its `check` also holding the question it was edited
    "from".
Reward: 0 (the builder pays the proposer from its solvers' results).
Episode end: terminated by replace_value; truncated after `max_turns` turns (default 2).
Arguments: SQL-v0's (which databases and templates its own questions come from).
Scripted proposer: another of the column's values, at random; for demonstrations.
Versions: v0, first release.
"""

from __future__ import annotations

import random
from typing import Any

from toolgym.envs.sql.env import SQLEnv, check_task, held_out_question
from toolgym.envs.sql.generate import default_db_ids
from toolgym.envs.sql.propose import ProposeSQLEnv
from toolgym.envs.sql.slips import held_values, literal, quoted_values
from toolgym.envs.tasks import SeedTasks
from toolgym.errors import ConfigError
from toolgym.tools.parsers import XmlTagParser
from toolgym.tools.records import ToolCall
from toolgym.tools.tool import ToolCallError, tool

EDIT_TAGS = {"sql": ("run_sql", "query"), "value": ("replace_value", "value")}
OWN_TRIES = 50
"""Training questions tried for one that quotes a value to edit (templates such as
group_count quote none)."""
MAX_SHOWN_VALUES = 16
MAX_EXAMPLE_CHARS = 2_000
EditPoint = tuple[str, list[str]]
"""The value a question quotes, and the values an edit may put in its place."""


class EditSQLEnv(ProposeSQLEnv):
    instructions = (
        "Edit the question into a new one for a solver who should answer it sometimes, but "
        "not always: call replace_value with another of the values listed, which takes the "
        "place of the value the question quotes, in the question and in its query."
    )
    tag_instructions = (
        "Edit the question into a new one for a solver who should answer it sometimes, but "
        "not always: write another of the values listed inside <value> and </value>; it "
        "takes the place of the value the question quotes, in the question and in its query."
    )
    shared_items = (
        "an editor is shown training questions only, whatever split it is drawn from, so that "
        "no held-out question reaches training through its prompt; the solver's held-out "
        "questions are what a run evaluates"
    )
    write_question = None  # an editor changes a value; it does not write from nothing
    submit_query = None

    def __init__(self, **kwargs: Any) -> None:
        if kwargs.get("style") == "tags":
            kwargs.setdefault("parser", XmlTagParser(EDIT_TAGS))
            kwargs.setdefault("max_calls_per_turn", 1)
        kwargs.setdefault("max_turns", 2)
        super().__init__(**kwargs)
        self.value = ""
        """The value the shown question quotes, which an edit replaces."""
        self.values: list[str] = []
        """The other values its column holds in this database that an edit may use (listed)."""

    async def start(self, seed: int | None, options: dict[str, Any] | None) -> list[dict[str, Any]]:
        task_seed = seed if seed is not None else int(self.np_random.integers(2**31))
        given = dict((options or {}).get("task") or {})
        if set(given) - {"examples", "proposal", "seed"}:  # a question of the caller's own
            shown, (self.value, values) = _client_question(given, self.db_ids)
        else:
            shown, (self.value, values) = (self._pool_question(given.get("examples"))
                                           or self._own_question(task_seed, given))  # fmt: skip
        await SQLEnv.start(self, seed, {"task": shown})  # the shown question's database
        self.question, self.proposed = None, None
        self.values = values[:MAX_SHOWN_VALUES]
        schema = await self.schema(shown["db_id"])
        listed = ", ".join(literal(v) for v in self.values)
        return [{"role": "user", "content": f"Database schema:\n\n{schema}\n\n"
                 f"Question: {shown['question']}\nSQL: {shown['gold_sql']}\n\n"
                 f"Other values of the column {literal(self.value)} comes from: {listed}\n\n"
                 "Edit the question: choose the value to put in its place."}]  # fmt: skip

    @tool
    async def replace_value(self, value: str) -> str:
        """Put another value in place of the one the question quotes, in the question and in
        its query, and hand the edited question to the solver. This ends the episode.

        Args:
            value: another of the listed values, e.g. "Lyon".
        """
        value = str(value).strip().strip("'\"")[:200]
        if value == self.value:
            raise ToolCallError("that is the value the question already quotes: choose another")
        if value not in self.values:
            listed = ", ".join(literal(v) for v in self.values)
            raise ToolCallError(f"{value[:60]!r} is not one of the values listed: {listed}")
        question, query = _edited(self.task, self.value, value)
        self.question = question
        return await self.hand_back_question(question, query, **{"from": self.task["question"]})

    def scripted_action(self) -> str | None:
        """Another of the listed values, at random."""
        if not self.task or self.proposed is not None or not self.values:
            return None
        rng = random.Random(f"edit-{self.task['db_id']}-{self.task['question']}")
        return self.parser.render([ToolCall("replace_value", {"value": rng.choice(self.values)})])

    def _pool_question(self, examples: Any) -> tuple[dict[str, Any], EditPoint] | None:
        """The first example, as a question to edit, if it is a training question on this
        env's databases that quotes a value its database holds (a pool task is a proposal,
        and a restored pool is a file: checked here)."""
        if not isinstance(examples, list) or not examples or not isinstance(examples[0], dict):
            return None
        example, check = examples[0], examples[0].get("check")
        if not isinstance(check, dict):
            return None
        shown = {"db_id": check.get("db_id"), "question": example.get("instruction"),
                 "gold_sql": check.get("gold_sql")}  # fmt: skip
        found = _editable(shown, self.db_ids)
        return (shown, found) if not isinstance(found, str) else None

    def _own_question(
        self, task_seed: int, given: dict[str, Any]
    ) -> tuple[dict[str, Any], EditPoint]:
        """A training question of the env's own that quotes a value to edit: the reset
        task's generated one ({"seed": n}) if it is one, else the next training one that
        does."""
        if set(given) == {"seed"} and isinstance(given["seed"], int):
            made = self._generate(given["seed"])
            if not held_out_question(made) and (point := _edit_point(made)) is not None:
                return made, point
        for k in range(OWN_TRIES):
            made = self.train_question((task_seed + k) % SeedTasks.SPAN)
            if (point := _edit_point(made)) is not None:
                return made, point
        raise ConfigError(
            f"templates {list(self.templates)} give no question that quotes a value to edit: "
            "choose templates that filter on a value (filter_count, filter_list, ...)"
        )


def _editable(shown: dict[str, Any], db_ids: list[str] | None) -> EditPoint | str:
    """The question's edit point, or why it cannot be edited here."""
    if not all(isinstance(v, str) and len(v) <= MAX_EXAMPLE_CHARS for v in shown.values()):
        return f"its db_id, question and gold_sql must be strings of at most {MAX_EXAMPLE_CHARS} characters"
    if shown["db_id"] not in (db_ids or default_db_ids()):
        return f"its database {shown['db_id'][:60]!r} is not one of this env's"
    if held_out_question(shown):
        return "it is held out for evaluation (an editor is shown training questions only)"
    point = _edit_point(shown)
    if point is None:
        return ("neither it nor its gold query quotes a value of its database whose edit "
                "makes a training question")  # fmt: skip
    return point


def _client_question(
    given: dict[str, Any], db_ids: list[str] | None
) -> tuple[dict[str, Any], EditPoint]:
    """A reset task of the caller's own: a SQL task whose question can be edited, else a
    ConfigError that says why."""
    check_task(given)
    shown = {k: given[k] for k in ("db_id", "question", "gold_sql")}
    found = _editable(shown, db_ids)
    if isinstance(found, str):
        raise ConfigError(f"EditSQL-v0 cannot edit the question it was given: {found}")
    return shown, found


def _edit_point(task: dict[str, Any]) -> EditPoint | None:
    """The first value the gold query quotes that the question quotes too and that a column
    of the database holds, with the column's other values whose edit makes a training
    question (evaluation asks the held-out ones); None when there is none."""
    for value in quoted_values(task["gold_sql"]):
        if literal(value) not in task["question"]:
            continue
        others = [
            other
            for other in held_values(task["db_id"], value)
            if other != value
            and not held_out_question(
                {"db_id": task["db_id"], "question": _edited(task, value, other)[0]}
            )
        ]
        if others:
            return value, others
    return None


def _edited(task: dict[str, Any], value: str, other: str) -> tuple[str, str]:
    """The question and its gold query with `other` quoted where they quote `value`."""
    old, new = literal(value), literal(other)
    return task["question"].replace(old, new), task["gold_sql"].replace(old, new)
