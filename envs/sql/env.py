"""toolgym/SQL-v0: answer a question about a database by querying it.

Observation: the schema (each table's CREATE statement and a few sample rows), then the
    question and its evidence, if the task has one (last, as SkyRL-SQL's prompt has it, so
    the words a query copies sit close to where it is written). Tool results are compact
    tables cut to `max_rows_shown` rows and `max_chars` characters with a notice, each ending
    with how many turns are left.
Tools (style="tools", the default): run_sql(query), describe_table(name), submit(query).
    With style="tags" (SkyRL-SQL's format) <sql>query</sql> runs a query and
    <solution>query</solution> submits; results come back inside <observation>.
Reward: 1.0 when the submitted query's result matches the gold query's (execution match:
    grading.py; ordered when the gold query sorts its result at the top level), else 0. With
    `shaped=True`: -1 for a submission that does not run, 0 wrong, 1 right.
Episode end: terminated by a submission; truncated after `max_turns` turns.
state_key: the results of the episode's queries so far (hashed, normalised as the grader
    sees them), so trajectories that explored alike share a state for GiGPO whatever their
    queries' text.
Safety: databases are read-only (backends/); a query that tries to write gets a clear error.
Infrastructure: a database that cannot answer flags the step `infra_error` (masked from
    training), never reward 0. A query's own error (syntax, budget, write) is the policy's.
Arguments: tasks (JSONL path or list of {db_id, question, gold_sql, evidence?}; default: the
    generated questions over the generated databases, questions.py, split by the question:
    `ContentTasks`), db_ids and templates
    (which generated databases and question templates), values (instead of db_ids: "domain",
    the default, for two databases per domain whose rows name the domain's own few places,
    kinds and states; "wide" for 25 per domain whose rows name made-up words from a space too
    large to learn by heart, so a query can only name the question's value by copying it;
    "held_out" for 25 more whose words "wide" never draws, to evaluate a policy trained on
    "wide" on values it never saw: values.py), backend ("sqlite" or "postgres"),
    databases (a folder of SQLite files), dsn (PostgreSQL), pool_size, timeout_s, max_rows_shown,
    max_chars, sample_rows (0: the CREATE statements alone), unordered ("multiset" or "set":
    how unsorted results compare), shaped, style, solver_slips (the share of episodes in which
    the scripted solver writes another of the database's values where the question names one:
    a weaker demonstrator, generated questions only: slips.py), plus ToolEnv's.
Versions: v0, first release.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Hashable, Iterable, Mapping
from pathlib import Path
from typing import Any

from toolgym.envs.needs import Need
from toolgym.envs.sql.access import Databases, SQLConfig, ensure_generated
from toolgym.envs.sql.generate import default_db_ids
from toolgym.envs.sql.grading import MODES, compare, gold_mode, normalize
from toolgym.envs.sql.questions import check_templates, generate_question
from toolgym.envs.sql.results import QueryError, QueryLimits, QueryResult
from toolgym.envs.sql.slips import slip
from toolgym.envs.sql.table import format_table
from toolgym.envs.tasks import ListTasks, TaskSource, choose_task, needs_keys
from toolgym.envs.tasks import client as client_tasks
from toolgym.envs.tasks.content import ContentTasks, split_of
from toolgym.envs.tool_env import Outcome, ToolEnv
from toolgym.errors import ConfigError, did_you_mean
from toolgym.tools.parsers import XmlTagParser
from toolgym.tools.records import ToolCall
from toolgym.tools.tool import ToolCallError, tool

TAGS = {"sql": ("run_sql", "query"), "solution": ("submit", "query")}
GRADING_ROWS = 10_000


check_task = needs_keys("a SQL task", "db_id", "question", "gold_sql")


class SQLEnv(ToolEnv):
    instructions = (
        "Answer the question with one SQL query. Explore with run_sql (the database is "
        "read-only) and describe_table; when your query returns exactly the answer, submit it "
        "with submit."
    )
    tag_instructions = (
        "Answer the question with one SQL query. Run queries inside <sql> and </sql>; results "
        "come back inside <observation>. Give your final query inside <solution> and </solution>."
    )

    @classmethod
    def system_needs(cls, kwargs: Mapping[str, Any]) -> set[Need]:
        """SQLite needs nothing; the postgres backend a server (`toolgym sql serve-postgres`)."""
        return {"postgres"} if kwargs.get("backend") == "postgres" else set()

    def __init__(
        self,
        tasks: str | Path | Iterable[Mapping[str, Any]] | None = None,
        db_ids: list[str] | None = None,
        templates: list[str] | None = None,
        values: str = "domain",
        backend: str = "sqlite",
        databases: str | None = None,
        dsn: str | None = None,
        pool_size: int = 4,
        timeout_s: float = 5.0,
        max_turns: int = 6,
        max_rows_shown: int = 10,
        max_chars: int = 2000,
        sample_rows: int = 3,
        unordered: str = "multiset",
        shaped: bool = False,
        style: str = "tools",
        solver_slips: float = 0.0,
        **kwargs: Any,
    ) -> None:
        if style not in ("tools", "tags"):
            raise ConfigError(f"style {style!r}: choose 'tools' or 'tags'")
        if style == "tags":
            kwargs.setdefault("parser", XmlTagParser(TAGS))
            kwargs.setdefault("max_calls_per_turn", 1)
            self.instructions = self.tag_instructions
        super().__init__(max_turns=max_turns, **kwargs)
        if unordered not in MODES or unordered == "ordered":
            raise ConfigError(f"unordered {unordered!r}: choose 'multiset' or 'set'")
        if not 0.0 <= solver_slips <= 1.0:
            raise ConfigError(f"solver_slips {solver_slips}: it must be between 0 and 1")
        if sample_rows < 0:
            raise ConfigError(f"sample_rows {sample_rows}: it must be 0 or more")
        self.style = style
        self.tasks = ListTasks.load(tasks, check=check_task) if tasks is not None else None
        if db_ids and values != "domain":
            raise ConfigError(
                "give db_ids or values, not both: values chooses the generated databases "
                "(db ids such as shop_wide_0 name their value set themselves)"
            )
        wide = default_db_ids(values=values) if values != "domain" else None
        self.db_ids = list(db_ids) if db_ids else wide
        self.templates = check_templates(templates)
        self.config = SQLConfig(backend, databases, dsn, pool_size)
        self.limits = QueryLimits(timeout_s=timeout_s, max_rows=max(max_rows_shown, 1000))
        self.grading_limits = QueryLimits(timeout_s=timeout_s, max_rows=GRADING_ROWS)
        self.max_rows_shown, self.max_chars, self.sample_rows = (
            max_rows_shown,
            max_chars,
            sample_rows,
        )
        self.unordered = unordered
        self.shaped = shaped
        self.solver_slips = solver_slips
        self.slip: random.Random | None = None
        self.task: dict[str, Any] = {}
        self.reward: float | None = None
        self.seen: list[str] = []

    def expected_answer(self) -> str | None:
        """The task's gold query (ExposesAnswer): what the submitted query's result is
        compared with."""
        return str((self.task or {}).get("gold_sql") or "") or None

    def task_source(self) -> TaskSource:
        return self.tasks if self.tasks is not None else ContentTasks(self.question_item)

    def client_task(self, task: Mapping[str, Any]) -> dict[str, Any]:
        """A question about one of the env's databases (by its plain name) and its gold
        query, which runs read-only as any query does."""
        fields = ("db_id", "question", "gold_sql", "evidence")
        given = client_tasks.only_fields(task, fields, "SQL task")
        check_task(given)
        for field in fields:
            if field in given:
                client_tasks.text(given[field], field, 200 if field == "db_id" else 20_000)
        return given

    async def start(self, seed: int | None, options: dict[str, Any] | None) -> list[dict[str, Any]]:
        task_seed = seed if seed is not None else int(self.np_random.integers(2**31))
        task = choose_task(task_seed, options, self.tasks, self._generate)
        check_task(task)
        self.task, self.reward, self.seen = task, None, []
        chooser = random.Random(f"slip-{task_seed}")
        self.slip = chooser if chooser.random() < self.solver_slips else None
        if self.config.generated:
            ensure_generated([task["db_id"]])
        evidence = f"\nEvidence: {task['evidence']}" if task.get("evidence") else ""
        schema = await self.schema(task["db_id"])  # the question last, next to the answer
        return [{"role": "user", "content": f"Database schema:\n\n{schema}\n\n"
                 f"Question: {task['question']}{evidence}"}]  # fmt: skip

    async def schema(self, db_id: str) -> str:
        """Each table's CREATE statement (and sample rows), made once per database and
        reused by every episode on it."""
        databases = await self.databases()
        key = ("schema", db_id, self.sample_rows, self.max_chars)
        if key not in databases.texts:
            tables = []
            for table in await databases.tables(db_id):
                rows = await self._sample(databases, table.name)
                example = f"\n/* {self.sample_rows} example rows:\n{rows} */" if rows else ""
                tables.append(f"{table.create};{example}")
            databases.texts[key] = "\n\n".join(tables)
        return databases.texts[key]

    async def databases(self) -> Databases:
        return await self.config.open(self)

    @tool
    async def run_sql(self, query: str) -> str:
        """Run a read-only SQL query and see its result (the first rows).

        Args:
            query: one SELECT statement, e.g. "SELECT COUNT(*) FROM orders".
        """
        databases = await self.databases()
        try:
            result = await databases.query(self.task["db_id"], query, self.limits)
        except QueryError as exc:  # the model reads what went wrong and tries again
            self.seen.append(f"error: {exc}")
            return self._wrap(f"Error: {exc}")
        self.seen.append(result_digest(result))
        return self._wrap(format_table(result, self.max_rows_shown, self.max_chars))

    @tool
    async def describe_table(self, name: str) -> str:
        """Show a table's columns and a few rows.

        Args:
            name: the table's name, e.g. "orders".
        """
        databases = await self.databases()
        tables = {t.name.lower(): t for t in await databases.tables(self.task["db_id"])}
        table = tables.get(str(name).strip().strip('"').lower())
        if table is None:
            raise ToolCallError(
                f"no table {name!r}.{did_you_mean(str(name), list(tables))} Tables: {', '.join(tables)}"
            )
        rows = await self._sample(databases, table.name)
        return self._wrap(f"{table.create};" + (f"\n{rows}" if rows else ""))

    @tool
    async def submit(self, query: str) -> str:
        """Submit your final query; its result is compared with the right answer's. This ends
        the episode.

        Args:
            query: one SELECT statement whose result answers the question.
        """
        databases = await self.databases()
        db_id, gold_sql = self.task["db_id"], self.task["gold_sql"]
        gold = await databases.gold_result(db_id, gold_sql, self.grading_limits)
        try:
            predicted = await databases.query(db_id, query, self.grading_limits)
        except QueryError as exc:
            self.reward = -1.0 if self.shaped else 0.0
            return f"Your query failed: {exc}"
        match = compare(predicted, gold, gold_mode(gold_sql, self.unordered))
        self.reward = 1.0 if match.matched else 0.0
        return "Correct." if match.matched else f"Incorrect: {match.reason}."

    def outcome(self) -> Outcome:
        return Outcome() if self.reward is None else Outcome(self.reward, True)

    def state_key(self) -> Hashable:
        seen = "\n".join([str(self.task.get("db_id")), str(self.task.get("question")), *self.seen])
        return "sql:" + hashlib.sha256(seen.encode()).hexdigest()[:16]

    def scripted_action(self) -> str | None:
        """Submit the gold query (the oracle), or in a slipped episode the gold query with
        another of the database's values in it."""
        if not self.task:
            return None
        query = self.task["gold_sql"]
        if self.slip is not None:
            query = slip(query, self.task["db_id"], self.slip)
        return self.parser.render([ToolCall("submit", {"query": query})])

    async def _sample(self, databases: Databases, table: str) -> str:
        """A few of the table's rows, as the model reads them ("" when none are asked for)."""
        if self.sample_rows == 0:
            return ""
        sample = await databases.query(
            self.task["db_id"],
            f"SELECT * FROM {_quote(table)} LIMIT {self.sample_rows}",
            self.limits,
        )
        return format_table(sample, self.sample_rows, self.max_chars)

    def question_item(self, seed: int) -> str:
        """What identifies generated question `seed` (question_item below)."""
        return question_item(self._generate(seed))

    def train_question(self, index: int) -> dict[str, Any]:
        """Generated training question `index`: one whose item train owns."""
        return self._generate(ContentTasks(self.question_item).task("train", index)["seed"])

    def _generate(self, seed: int) -> dict[str, Any]:
        return generate_question(seed, self.db_ids, self.templates).task()

    def _wrap(self, text: str) -> str:
        body = f"{text}\n{self._turns_left()}"
        return f"<observation>{body}</observation>" if self.style == "tags" else body

    def _turns_left(self) -> str:
        left = self.max_turns - (self.turn or 0)
        return f"[{left} turn{'s' if left != 1 else ''} left]"


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def question_item(task: Mapping[str, Any]) -> str:
    """What identifies a question: its domain's schema and its text. The databases of one
    domain (shop_0, shop_1) share their CREATE statements, so the same question on either
    opens alike and is one item."""
    domain = str(task["db_id"]).rpartition("_")[0] or task["db_id"]
    return json.dumps([domain, task["question"], task.get("evidence")])


def held_out_question(task: Mapping[str, Any]) -> bool:
    """Whether a generated SQL-v0 holds this question out of training (its eval or test
    item, by content): self-play never trains on what evaluation plays."""
    return split_of(question_item(task)) != "train"


def result_digest(result: QueryResult) -> str:
    rows = sorted(repr(tuple(normalize(v) for v in row)) for row in result.rows)
    return hashlib.sha256("\n".join([str(len(result.columns)), *rows]).encode()).hexdigest()[:16]
