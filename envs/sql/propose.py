"""toolgym/ProposeSQL-v0: the proposer's side of SQL self-play.

Observation: a database's schema (as SQL-v0 shows it), the example questions the reset task
    carries ("examples": typed tasks from the self-play pool; without them, two generated
    questions), and the request to write a new question that one query answers.
Tools (style="tools"): run_sql(query) and describe_table(name) to explore (read-only, as in
    SQL-v0); write_question(text); submit_query(query), which ends the episode. With
    style="tags": <sql>, <question> and <solution>.
Result: on submit_query the step hands back a ProposedTask (kind "sql"): the question, and
    in `check` the database, the gold query and what running it twice gave (each run's
    digest, its row count, or the error), the values it quotes, and for each of those a
    column of the database holds whether the query slipped to other values of that column
    still gives the same answer. The database computes the answer; nothing the
    proposer writes is trusted as one. Whether the task is valid is the self-play builder's
    to say (training/selfplay/domains/sql.py), with its reason.
Reward: 0 (the builder pays the proposer from its solvers' results).
Episode end: terminated by submit_query; truncated after `max_turns` turns.
Arguments: SQL-v0's (the database is a hidden question's: the reset task's generated one,
    else the training question of the reset's seed; its question and gold query drive only
    the scripted proposer, for SFT).
Versions: v0, first release.
"""

from __future__ import annotations

from typing import Any

from toolgym.envs.sql.env import SQLEnv, result_digest
from toolgym.envs.sql.results import QueryError, QueryResult
from toolgym.envs.sql.slips import quoted_values, slipped_queries
from toolgym.envs.tasks import SeedTasks
from toolgym.envs.tasks.proposed import (
    MAX_ANSWER_CHARS,
    MAX_INSTRUCTION_CHARS,
    example_lines,
    example_tasks,
)
from toolgym.envs.tool_env import Outcome
from toolgym.tools.parsers import XmlTagParser
from toolgym.tools.records import ToolCall
from toolgym.tools.tool import ToolCallError, tool

PROPOSE_TAGS = {
    "sql": ("run_sql", "query"),
    "question": ("write_question", "text"),
    "solution": ("submit_query", "query"),
}
MAX_EXAMPLES = 8
MAX_QUOTED = 8
"""The quoted values of a gold query checked (and handed back) at most."""
OWN_EXAMPLES = 2
"""Examples shown when the reset task brings none (a pool's are the same shape), so a
demonstration's prompt looks like a self-play step's."""


class ProposeSQLEnv(SQLEnv):
    instructions = (
        "Write a new question about this database that exactly one SQL query answers. "
        "Explore with run_sql (read-only) and describe_table, write the question with "
        "write_question, then submit the query that answers it with submit_query."
    )
    tag_instructions = (
        "Write a new question about this database that exactly one SQL query answers. Run "
        "queries inside <sql> and </sql>; results come back inside <observation>. Write the "
        "question inside <question> and </question>, then its query inside <solution> and "
        "</solution>."
    )
    submit = None  # a proposer submits a task, not an answer

    def __init__(self, **kwargs: Any) -> None:
        if kwargs.get("style") == "tags":
            kwargs.setdefault("parser", XmlTagParser(PROPOSE_TAGS))
            kwargs.setdefault("max_calls_per_turn", 2)  # a question and its query in one turn
        super().__init__(**kwargs)
        self.question: str | None = None
        self.proposed: dict[str, Any] | None = None

    async def start(self, seed: int | None, options: dict[str, Any] | None) -> list[dict[str, Any]]:
        task_seed = seed if seed is not None else int(self.np_random.integers(2**31))
        given = dict((options or {}).get("task") or {})
        # the database, and the scripted proposer's task: the reset task's generated question
        # ({"seed": n}, its split the caller's choice), else a training one
        seeded = set(given) == {"seed"} and isinstance(given["seed"], int)
        hidden = (self._generate(given["seed"]) if seeded
                  else self.train_question(task_seed % SeedTasks.SPAN))  # fmt: skip
        await super().start(seed, {"task": hidden})
        self.question, self.proposed = None, None
        schema = f"Database schema:\n\n{await self.schema(self.task['db_id'])}"
        examples = given.get("examples")
        if examples is None:  # played alone (sft, eval): examples of its own, as a pool shows
            made = [self._generate(task_seed + k + 1) for k in range(OWN_EXAMPLES)]
            examples = [{"instruction": q["question"], "check": {"gold_sql": q["gold_sql"]}}
                        for q in made]  # fmt: skip
        return [{"role": "user", "content": f"{schema}{_examples(examples)}\n\n"
                 "Write a new question about this database and the query that answers it."}]  # fmt: skip

    @tool
    async def write_question(self, text: str) -> str:
        """Write the question a solver will be asked (plain words, no SQL).

        Args:
            text: the question, e.g. "How many orders were shipped to Lyon?".
        """
        self.question = str(text)[: MAX_INSTRUCTION_CHARS + 1]  # the reader says if too long
        return "Question noted; now submit the query that answers it with submit_query."

    @tool
    async def submit_query(self, query: str) -> str:
        """Submit the query that answers your question; the database runs it (twice) to
        compute the answer. This ends the episode.

        Args:
            query: one SELECT statement.
        """
        if self.question is None:
            raise ToolCallError("write the question first (write_question), then its query")
        return await self.hand_back_question(self.question, str(query)[: MAX_ANSWER_CHARS + 1])

    async def hand_back_question(self, question: str, query: str, **check: Any) -> str:
        """Run `query` (twice, and slipped) and hand back `question` with it as the proposed
        task; `check` adds fields to its check (an edit's source)."""
        runs, rows, error, blank = [], 0, None, False
        databases = await self.databases()
        for _ in range(2):  # a query that answers differently twice has no one answer
            try:
                result = await databases.query(self.task["db_id"], query, self.grading_limits)
            except QueryError as exc:
                error = str(exc)[:300]
                break
            runs.append(_answer(result))
            rows = len(result.rows)
            blank = all(value is None for row in result.rows for value in row)
        slips = [] if error is not None else await self._slips(query, runs[0])
        self.proposed = {
            "kind": "sql",
            "instruction": question,
            "check": {"db_id": self.task["db_id"], "gold_sql": query, "runs": runs,
                      "rows": rows, "error": error, "blank": blank,
                      "quoted": quoted_values(query)[:MAX_QUOTED], "slips": slips, **check},
        }  # fmt: skip
        self.hand_back(self.proposed)
        if error is not None:
            return f"Your query failed: {error}"
        return f"Proposed; the query returned {rows} row{'s' if rows != 1 else ''}."

    async def _slips(self, query: str, answer: str) -> list[dict[str, Any]]:
        """For each value the query quotes that a column of the database holds: whether the
        query with another of that column's values in its place (three of them) still gives
        `answer`. One that does for all three does not hinge on the value its question names:
        a solver could ignore the value and be right. A slipped query that fails is no
        evidence either way and is left out."""
        databases = await self.databases()
        out = []
        for value, slipped in slipped_queries(query, self.task["db_id"])[:MAX_QUOTED]:
            answers = []
            for other in slipped:
                try:
                    result = await databases.query(self.task["db_id"], other, self.grading_limits)
                except QueryError:
                    continue
                answers.append(_answer(result))
            if answers:
                out.append({"value": value[:100], "same": all(a == answer for a in answers)})
        return out

    def outcome(self) -> Outcome:
        return Outcome(0.0, True) if self.proposed is not None else Outcome()

    def scripted_action(self) -> str | None:
        """Look at the answer's rows once, then propose the hidden generated question."""
        if not self.task:
            return None
        gold = self.task["gold_sql"]
        if not self.seen:
            return self.parser.render([ToolCall("run_sql", {"query": gold})])
        return self.parser.render([ToolCall("write_question", {"text": self.task["question"]}),
                                   ToolCall("submit_query", {"query": gold})])  # fmt: skip


def _answer(result: QueryResult) -> str:
    """A run's result as the check compares runs: its digest, "+" when it was cut off."""
    return result_digest(result) + ("+" if result.truncated else "")


def _examples(examples: Any) -> str:
    """Pool tasks shown as examples, each question with its gold query (bounded: they are
    proposals)."""
    shown = example_tasks(examples, MAX_EXAMPLES, 300, lambda e: f"SQL: {e['check']['gold_sql']}")
    lines = [f"- {line}" for line in example_lines(shown, escape=True)]
    return "\n\nExample questions (on other databases too):\n" + "\n".join(lines) if lines else ""
