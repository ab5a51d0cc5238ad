"""Search self-play (Search Self-Play): the proposer is given an answer from the corpus and
how many hops to take (toolgym/ProposeSearch-v0), searches, and writes the question; solvers
are the ordinary search agent (Search-v0), graded by exact match against that answer.

Stages: the shared rules (the question must not hold its answer, or tool-call markup, and
the proposer must have searched before proposing), then grounding: a reader (the policy, on
Search-v0 with searching off) is shown the proposer's own retrieved documents shuffled with
`distractors` documents retrieved by other proposers (this step's, then earlier steps'), and
must answer the question from them. SSP found four distractors did best; a question its own
evidence cannot answer is refused.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Sequence
from typing import Any

from toolgym.agents.trajectory import TrajectoryGroup
from toolgym.envs import make
from toolgym.envs.ref import EnvRef
from toolgym.envs.search.scoring import normalize_answer
from toolgym.envs.tasks.proposed import ProposedTask
from toolgym.training.selfplay.validation import Proposal, Rules, Stage

REFERENCE_INDICES = 10**6
"""Reference tasks are the solver's train tasks from here on (past what a step draws)."""
REMEMBERED = 64
"""Documents of earlier steps kept as distractors."""


def searched_per_hop(task: ProposedTask, proposal: Proposal) -> str | None:
    """A question of N hops needs at least N distinct searches of its proposer's own."""
    hops = int(task.kind.removeprefix("search.").removesuffix("hop") or 1)
    searches = {
        repr(c.get("arguments"))
        for s in proposal.trajectory.steps
        for c in s.tool_calls
        if c.get("name") == "search"
    }
    if len(searches) < hops:
        return f"a {hops}-hop question after {len(searches)} distinct searches (one per hop)"
    return None


class SearchDomain:
    name = "search"

    def __init__(
        self, solver: EnvRef, proposer_kwargs: dict[str, Any] | None = None, distractors: int = 4
    ) -> None:
        self.solver = solver
        shared = {k: v for k, v in solver.kwargs.items() if k != "tasks"}
        self.proposer = EnvRef("propose-search", "toolgym/ProposeSearch-v0",
                               {**shared, **(proposer_kwargs or {})})  # fmt: skip
        self.distractors = distractors
        self.remembered: deque[str] = deque(maxlen=REMEMBERED)

    def stages(self) -> list[tuple[str, Stage]]:
        explored = Rules(min_distinct_tool_calls=1, explored_with=("search", "open"),
                         needs_answer=True)  # fmt: skip
        return [("rules", explored), ("hops", searched_per_hop)]

    def solver_task(self, task: ProposedTask) -> dict[str, Any]:
        return {"question": task.instruction, "answers": [task.answer or ""]}

    def identity(self, task: ProposedTask) -> str:
        """The question, as answers are compared (case, punctuation and articles aside)."""
        return normalize_answer(task.instruction)

    def references(self, k: int) -> list[ProposedTask]:
        """k of the solver env's own training questions."""
        env = make(self.solver.env_id, **self.solver.kwargs)
        try:
            tasks = [env.unwrapped.task_source().task("train", REFERENCE_INDICES + i)
                     for i in range(k)]  # fmt: skip
        finally:
            env.close()
        hops = [len(t.get("hops") or []) or 1 for t in tasks]
        return [ProposedTask(kind=f"search.{h}hop", instruction=t["question"],
                             answer=t["answers"][0]) for t, h in zip(tasks, hops, strict=True)]  # fmt: skip

    def grounding_tasks(self, tasks: Sequence[ProposedTask], step: int) -> list[dict[str, Any]]:
        """Each task's evidence with distractors from the others' (and earlier steps'),
        never one that holds the task's answer: a distractor that answers the question
        would let an ungrounded question pass on another proposer's evidence."""
        rng = random.Random(f"grounding-{step}")
        evidence = [[str(d) for d in t.check.get("documents") or []] for t in tasks]
        out = []
        for i, task in enumerate(tasks):
            own = set(evidence[i])
            others = [d for j, docs in enumerate(evidence) if j != i for d in docs]
            answer = f" {normalize_answer(task.answer or '')} "
            pool = list(dict.fromkeys(
                d for d in [*others, *self.remembered]
                if d not in own and (answer.isspace() or answer not in f" {normalize_answer(d)} ")
            ))  # fmt: skip
            shown = [*evidence[i], *rng.sample(pool, min(self.distractors, len(pool)))]
            rng.shuffle(shown)
            out.append({"question": task.instruction, "answers": [task.answer or ""],
                        "documents": shown})  # fmt: skip
        self.remembered.extend(d for docs in evidence for d in docs)
        return out

    def grounded(self, readers: TrajectoryGroup) -> str | None:
        ran = [t for t in readers.trajectories if not t.masked]
        if not ran:
            return "its readers failed to run"
        if not any(t.success for t in ran):
            return "a reader given its evidence and distractors could not answer it"
        return None
