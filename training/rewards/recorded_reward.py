"""Scores recorded while an episode was played, as reward sources: an episode's
(`Trajectory.scores`) is given to its last step, a turn's (`Step.scores`) to that turn. The
gateway records an agent harness's `result` (its answer, as `harness.reward` checks it) and
what the agent itself reported (`agent`: a proxy the config weighs, never what success
counts; for the episode or for one of its model calls); self-play records a proposer's
`proposer` reward (its rule, from its task's solve rate, or a validation penalty). An episode
without the score gets 0 (a solver's episode in a self-play step)."""

from __future__ import annotations

from toolgym.agents.gateway.result_check import AGENT, RESULT
from toolgym.agents.trajectory import Trajectory
from toolgym.training.selfplay.proposer_rules import PROPOSER


class RecordedScore:
    name: str

    def __call__(self, trajectory: Trajectory) -> list[float]:
        """Each turn's own score of this name, and the episode's added to the last turn's."""
        values = [step.scores.get(self.name, 0.0) for step in trajectory.steps]
        if values:
            values[-1] += trajectory.scores.get(self.name, 0.0)
        return values


class ResultScore(RecordedScore):
    name = RESULT


class ProposerScore(RecordedScore):
    name = PROPOSER


class AgentScore(RecordedScore):
    name = AGENT
