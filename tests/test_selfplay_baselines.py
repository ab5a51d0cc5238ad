"""Per-role advantages, worked by hand: solver groups are their task's rollouts as usual;
proposers are grouped by task kind, so each proposal is compared with its kind's others (the
(env, role, kind) partition), and a kind with one proposal has no baseline (0, with a warning)."""

from __future__ import annotations

import logging

import numpy as np

from toolgym.agents.trajectory import Step, Trajectory
from toolgym.envs.proposed import ProposedTask
from toolgym.envs.ref import EnvRef
from toolgym.training.advantages import GroupRewards, compute_advantages
from toolgym.training.config import SelfPlaySection
from toolgym.training.selfplay.builder import SelfPlay
from toolgym.training.selfplay.pool import TaskPool
from toolgym.training.selfplay.validation import Proposal


class Domain:
    name = "fixture"
    proposer = EnvRef("propose", "fixture/Propose-v0")
    solver = EnvRef("solve", "fixture/Solve-v0")


def proposal(i: int, kind: str, reward: float) -> Proposal:
    step = Step(0, 1, [0.0], "x", [], reward, 0, 1)
    task = ProposedTask(kind=kind, instruction=f"task number {i} of kind {kind}")
    return Proposal(Trajectory(f"p{i}:0", steps=[step]), task)


def test_proposers_are_normalised_within_their_kind_and_a_lone_kind_gets_zero(caplog):
    builder = SelfPlay(Domain(), TaskPool([]), SelfPlaySection(domain="code"), solvers=4)
    proposals = [proposal(0, "code.deduction", 1.0), proposal(1, "code.deduction", 0.0),
                 proposal(2, "code.deduction", 0.5), proposal(3, "code.induction", 0.75),
                 proposal(4, "code.abduction", 0.2), proposal(5, "code.abduction", 0.2)]  # fmt: skip
    with caplog.at_level(logging.WARNING):
        groups = builder._proposer_groups(7, proposals)
    assert [g.group_id for g in groups] == [
        "s7:code.deduction:proposer",
        "s7:code.induction:proposer",
        "s7:code.abduction:proposer",
    ]
    advantages = [
        [a[0] for a in compute_advantages("grpo", GroupRewards.from_trajectories(g.trajectories))]
        for g in groups
    ]
    # deduction (1, 0, 0.5): mean 0.5, sample std 0.5 -> +1, -1, 0
    np.testing.assert_allclose(advantages[0], [1.0, -1.0, 0.0], atol=1e-5)
    assert advantages[1] == [0.0]  # induction alone: no baseline
    np.testing.assert_allclose(advantages[2], [0.0, 0.0])  # abduction: no spread
    assert "code.induction proposers' partition holds one proposal" in caplog.text
