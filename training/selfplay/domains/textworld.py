"""Text-game self-play: the proposer designs a game as a spec (toolgym/ProposeTextWorld-v0),
TextWorld builds it (the planner finds its walkthrough), and solvers play the game on
TextWorld-v0. The proposer is paid by how its solvers fared (the builder's reward, e.g.
learnability), so a game every solver wins or none does earns it nothing.

The `built` stage refuses a spec that did not parse or was refused by its checks or the
planner (a goal out of reach, or one that holds before the first step), with the reason.
Games are built into the cache folder the solver env reads (its `cache_dir`), once a spec.
"""

from __future__ import annotations

import json
from typing import Any

from toolgym.envs.ref import EnvRef
from toolgym.envs.tasks.proposed import ProposedTask
from toolgym.envs.textworld.propose import compact
from toolgym.envs.textworld.spec_maker import random_spec
from toolgym.training.selfplay.validation import Proposal, Rules, Stage

REFERENCE_SEEDS = 10**8
"""Reference games are spec_maker's specs from here on (seeds no proposer draws)."""


def built(task: ProposedTask, proposal: Proposal) -> str | None:
    check = task.check
    if check.get("error"):
        return str(check["error"])
    return None


class TextWorldDomain:
    name = "textworld"

    def __init__(self, solver: EnvRef, proposer_kwargs: dict[str, Any] | None = None) -> None:
        self.solver = solver
        shared = {k: v for k, v in solver.kwargs.items() if k == "cache_dir"}
        self.proposer = EnvRef("propose-textworld", "toolgym/ProposeTextWorld-v0",
                               {**shared, **(proposer_kwargs or {})})  # fmt: skip

    def stages(self) -> list[tuple[str, Stage]]:
        return [("rules", Rules()), ("built", built)]

    def solver_task(self, task: ProposedTask) -> dict[str, Any]:
        return {"spec": task.check["spec"]}

    def identity(self, task: ProposedTask) -> str:
        """The game's spec: one spec builds one game."""
        return json.dumps(task.check.get("spec"), sort_keys=True)

    def references(self, k: int) -> list[ProposedTask]:
        """k of spec_maker's games (built by the solver env the first time one is played)."""
        specs = [random_spec(REFERENCE_SEEDS + i) for i in range(k)]
        return [ProposedTask(kind="textworld", instruction=compact(spec), check={"spec": spec})
                for spec in specs]  # fmt: skip
