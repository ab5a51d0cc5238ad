"""SQL self-play: the proposer explores a database with run_sql (toolgym/ProposeSQL-v0),
writes a question and its gold query; the database computes the answer; solvers are SQL-v0's
agent, graded by execution match against that query.

Stages after the shared rules (which need the proposer to have run a query of its own before
proposing): `execution` refuses a gold query that failed (a write is refused by the
read-only database, and the error is the reason), one that calls a random or clock function
(read from its text: two runs that agree prove little), one whose two runs differ, one whose
result is empty or only NULLs (any wrong query that finds nothing would match it) or too long
for the grader, and a question that holds SQL (the solver would copy it, not answer it).
Then `skill` refuses a question that does not name a value its query quotes, or whose query
gives the same answer with other values of that column in its place, and `held out` one the
solver env holds out of training (its eval or test item, by content, where it plays the
generated questions), since evaluation asks those.
"""

from __future__ import annotations

import re
from typing import Any

from toolgym.envs.ref import EnvRef
from toolgym.envs.registration import make
from toolgym.envs.search.scoring import normalize_answer
from toolgym.envs.sql.determinism import nondeterminism
from toolgym.envs.sql.env import SQLEnv, held_out_question
from toolgym.envs.tasks.proposed import ProposedTask
from toolgym.errors import ConfigError
from toolgym.training.selfplay.validation import Proposal, Rules, Stage

SQL_IN_TEXT = re.compile(r"\bselect\b.+\bfrom\b", re.I | re.S)
REFERENCE_INDEX = 10**8
"""Reference tasks are training questions from this index on (far from where runs draw)."""


def execution(task: ProposedTask, proposal: Proposal) -> str | None:
    check = task.check
    if check.get("error"):
        return f"the gold query failed: {check['error']}"
    if (why := nondeterminism(str(check.get("gold_sql", "")))) is not None:
        return f"the gold query has no one answer: {why}"
    runs = check.get("runs") or []
    if len(runs) != 2 or runs[0] != runs[1]:
        return "two runs of the gold query gave different results"
    if str(runs[0]).endswith("+"):
        return "the gold query returns more rows than the grader reads"
    if not check.get("rows"):
        return "the gold query returns no rows"
    if check.get("blank"):
        return "the gold query returns only NULLs (any query that finds nothing would match)"
    if SQL_IN_TEXT.search(task.instruction):
        return "the question holds SQL"
    return None


def skill(task: ProposedTask, proposal: Proposal) -> str | None:
    """The question must name each value its gold query quotes, and the answer must hinge on
    it: held-out SQL asks a solver to carry a value from the question into its query, so a
    question that hides the value, or whose query gives the same answer for other values of
    that column, does not test that skill (the env ran those slipped queries)."""
    question = task.instruction.casefold()
    for value in task.check.get("quoted") or []:
        if str(value).casefold() not in question:
            return f"the gold query's value {str(value)[:60]!r} is not in the question"
    for slipped in task.check.get("slips") or []:
        if isinstance(slipped, dict) and slipped.get("same") is True:
            value = str(slipped.get("value"))[:60]
            return (f"the gold query gives the same answer with other values in place of "
                    f"{value!r}: the question does not hinge on it")  # fmt: skip
    return None


def held_out(task: ProposedTask, proposal: Proposal) -> str | None:
    if held_out_question({"db_id": task.check.get("db_id"), "question": task.instruction}):
        return "the solver env holds this question out of training (evaluation asks it)"
    return None


class SQLDomain:
    name = "sql"
    proposer_env = ("propose-sql", "toolgym/ProposeSQL-v0")

    def __init__(self, solver: EnvRef, proposer_kwargs: dict[str, Any] | None = None) -> None:
        self.solver = solver
        shared = {k: v for k, v in solver.kwargs.items() if k not in ("tasks", "solver_slips")}
        self.proposer = EnvRef(*self.proposer_env, {**shared, **(proposer_kwargs or {})})

    def stages(self) -> list[tuple[str, Stage]]:
        explored = Rules(min_distinct_tool_calls=1, explored_with=("run_sql", "describe_table"))
        return [("rules", explored), ("execution", execution), ("skill", skill),
                *self.held_out_stage()]  # fmt: skip

    def held_out_stage(self) -> list[tuple[str, Stage]]:
        """`held out`, where the solver's questions are the generated ones (a task file
        splits its own questions, which no proposal can be)."""
        return [] if "tasks" in self.solver.kwargs else [("held out", held_out)]

    def solver_task(self, task: ProposedTask) -> dict[str, Any]:
        return {"db_id": task.check["db_id"], "question": task.instruction,
                "gold_sql": task.check["gold_sql"]}  # fmt: skip

    def identity(self, task: ProposedTask) -> str:
        """The database and the question: the same question on another database is another
        task, and one question is one task whatever query its proposer wrote for it."""
        return f"{task.check.get('db_id')}\n{normalize_answer(task.instruction)}"

    def references(self, k: int) -> list[ProposedTask]:
        """k generated training questions of the solver env (its databases and templates;
        none an eval or test item)."""
        env = make(self.solver.env_id, **self.solver.kwargs)
        try:
            sql = env.unwrapped
            if not isinstance(sql, SQLEnv):
                raise ConfigError(f"SQL self-play solves on SQL-v0, not {self.solver.env_id}")
            made = [sql.train_question(REFERENCE_INDEX + i) for i in range(k)]
        finally:
            env.close()
        return [
            ProposedTask(kind="sql", instruction=q["question"],
                         check={"db_id": q["db_id"], "gold_sql": q["gold_sql"]})
            for q in made
        ]  # fmt: skip
