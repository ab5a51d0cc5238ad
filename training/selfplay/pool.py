"""The self-play task pool: the tasks a proposer is shown as examples, and what solvers play
when a step's proposals fall short.

Seeded with reference tasks (curated, never evicted), it takes each step's valid proposals
and keeps at most `capacity` of them, the oldest evicted first. `show(k, step)` picks the
examples for a proposer's context by a sampling policy from POLICIES, for each proposer
apart; `fill(n)` gives the n tasks that top up a step's solver batch when too few proposals
were valid: past proposals, newest first, and the references only while there are too few
of those (the start of a run). Draws are a function of the run's seed and the step, so a
resumed run draws what it would have; the pool rides in the checkpoint as JSON.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from toolgym.envs.tasks.proposed import ProposedTask
from toolgym.errors import lookup

Policy = Callable[[list[ProposedTask], int, random.Random], list[ProposedTask]]


def uniform(tasks: list[ProposedTask], k: int, rng: random.Random) -> list[ProposedTask]:
    return rng.sample(tasks, min(k, len(tasks)))


def recent(tasks: list[ProposedTask], k: int, rng: random.Random) -> list[ProposedTask]:
    """The newest k (the proposer sees where the pool is going)."""
    return tasks[-k:][::-1] if k else []


POLICIES: dict[str, Policy] = {"uniform": uniform, "recent": recent}


class TaskPool:
    def __init__(
        self,
        references: Sequence[ProposedTask],
        capacity: int = 256,
        policy: str = "uniform",
        seed: int = 0,
    ) -> None:
        if capacity < 1:
            raise ValueError(f"capacity {capacity}: give at least 1")
        self.references = list(references)
        self.capacity, self.seed = capacity, seed
        self.policy_name, self.policy = policy, lookup(POLICIES, policy, "pool sampling policy")
        self.proposed: list[ProposedTask] = []

    @property
    def tasks(self) -> list[ProposedTask]:
        return self.references + self.proposed

    def __len__(self) -> int:
        return len(self.references) + len(self.proposed)

    def add(self, tasks: Sequence[ProposedTask]) -> None:
        self.proposed += list(tasks)
        del self.proposed[: max(len(self.proposed) - self.capacity, 0)]

    def show(self, k: int, step: int, proposal: int = 0) -> list[ProposedTask]:
        """The k examples the step's `proposal`-th proposer is shown: drawn for each one, so
        a step's proposers see different tasks (with the uniform policy)."""
        return self.policy(self.tasks, k, self._rng(step, proposal))

    def fill(self, n: int) -> list[tuple[str, ProposedTask]]:
        """n tasks for solvers with where each came from ("pool" or "reference"): the
        proposals newest first, then the references, again from the newest when the pool
        holds fewer than n (none when it holds nothing)."""
        order = [("pool", t) for t in reversed(self.proposed)]
        order += [("reference", t) for t in self.references]
        return [order[i % len(order)] for i in range(n)] if order else []

    def _rng(self, step: int, proposal: int) -> random.Random:
        return random.Random(f"{self.seed}-{step}-{proposal}")

    def state_dict(self) -> dict[str, Any]:
        return {"proposed": [t.model_dump(mode="json") for t in self.proposed]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.proposed = [ProposedTask.model_validate(t) for t in state.get("proposed", [])]
