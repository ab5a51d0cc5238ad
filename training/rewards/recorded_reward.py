"""Scores recorded while an episode was played (`Trajectory.scores`), as reward sources: each
is given to the episode's last step. The gateway records an agent harness's `result` (its
answer, as `harness.reward` checks it) and what the agent itself reported (`agent`: a proxy
the config weighs, never what success counts); self-play records a proposer's `proposer` reward (its
rule, from its task's solve rate, or a validation penalty). An episode without the score
gets 0 (a solver's episode in a self-play step)."""

from __future__ import annotations

from toolgym.agents.gateway.result_check import AGENT, RESULT
from toolgym.agents.trajectory import Trajectory
from toolgym.training.selfplay.proposer_rules import PROPOSER


class RecordedScore:
    name: str

    def __call__(self, trajectory: Trajectory) -> list[float]:
        steps = len(trajectory.steps)
        return [0.0] * (steps - 1) + [trajectory.scores.get(self.name, 0.0)] if steps else []


class ResultScore(RecordedScore):
    name = RESULT


class ProposerScore(RecordedScore):
    name = PROPOSER


class AgentScore(RecordedScore):
    name = AGENT
