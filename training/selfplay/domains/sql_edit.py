"""SQL self-play by editing: the proposer is shown a pool question with its gold query and
puts another of the database's values in place of the one they quote (toolgym/EditSQL-v0);
solvers are SQL-v0's agent, graded by execution match, as in the sql domain. Paid by
learnability, the proposer is pushed toward the values its solvers copy some of the time.

Stages: `rules` (the shared text checks; an editor need not explore), `edited` refuses a
question no edit changed, then the sql domain's `execution`, `skill` and `held out`.
"""

from __future__ import annotations

from toolgym.envs.tasks.proposed import ProposedTask
from toolgym.training.selfplay.domains.sql import SQLDomain, execution, skill
from toolgym.training.selfplay.validation import Proposal, Rules, Stage


def edited(task: ProposedTask, proposal: Proposal) -> str | None:
    if task.instruction == task.check.get("from"):
        return "the question is the one it was shown"
    return None


class SQLEditDomain(SQLDomain):
    name = "sql_edit"
    proposer_env = ("edit-sql", "toolgym/EditSQL-v0")

    def stages(self) -> list[tuple[str, Stage]]:
        return [("rules", Rules()), ("edited", edited), ("execution", execution),
                ("skill", skill), *self.held_out_stage()]  # fmt: skip
