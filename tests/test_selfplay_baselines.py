"""Per-role advantages, worked by hand: solver groups are their task's rollouts as usual;
proposers are grouped by task kind, so each proposal is compared with its kind's others (the
(env, role, kind) partition), and a kind with one proposal has no baseline (0, with a warning)."""

from __future__ import annotations

import logging

import numpy as np

from toolgym.agents.trajectory import Step, Trajectory
from toolgym.envs.ref import EnvRef
from toolgym.envs.tasks.proposed import ProposedTask
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


def test_a_running_baseline_per_kind_moves_by_each_step_and_every_estimator_subtracts_it(caplog):
    """SPIRAL's role-conditioned advantage: b = 0.5 * b + 0.5 * this step's mean, the first
    step's mean starting it; the advantage is each reward less b, whatever the estimator, and
    a kind alone in its step has a baseline (no warning)."""
    settings = SelfPlaySection(domain="code", baseline="running", baseline_decay=0.5)
    builder = SelfPlay(Domain(), TaskPool([]), settings, solvers=4)
    first = builder._proposer_groups(0, [proposal(0, "code.deduction", 1.0),
                                         proposal(1, "code.deduction", 0.0),
                                         proposal(2, "code.induction", -0.5)])  # fmt: skip
    assert [g.baseline for g in first] == [0.5, -0.5]
    with caplog.at_level(logging.WARNING):
        second = builder._proposer_groups(1, [proposal(3, "code.deduction", 0.25),
                                              proposal(4, "code.deduction", 0.75),
                                              proposal(5, "code.deduction", 0.5)])  # fmt: skip
    assert "no baseline" not in caplog.text
    (deduction,) = second
    assert deduction.baseline == 0.5  # 0.5 * 0.5 + 0.5 * 0.5
    for name in ("grpo", "rloo", "gigpo"):
        rewards = GroupRewards.from_trajectories(
            deduction.trajectories, baseline=deduction.baseline
        )
        values = [a[0] for a in compute_advantages(name, rewards)]
        np.testing.assert_allclose(values, [-0.25, 0.25, 0.0])
    third = builder._proposer_groups(2, [proposal(6, "code.deduction", 1.0)])
    assert third[0].baseline == 0.75  # 0.5 * 0.5 + 0.5 * 1.0
    assert builder.state_dict()["baselines"] == {"code.deduction": 0.75, "code.induction": -0.5}
    again = SelfPlay(Domain(), TaskPool([]), settings, solvers=4)
    again.load_state_dict(builder.state_dict())  # a resumed run goes on from the same means
    assert again.baselines == builder.baselines


def test_a_masked_trajectory_gets_no_advantage_from_a_baseline():
    masked = Trajectory("p9:0", steps=[Step(0, 1, [0.0], "x", [], 1.0, 0, 1)])
    masked.infra_error = "its solvers all failed to run"
    ran = Trajectory("p8:0", steps=[Step(0, 1, [0.0], "x", [], 1.0, 0, 1)])
    values = compute_advantages(
        "grpo", GroupRewards.from_trajectories([ran, masked], baseline=0.25)
    )
    assert [v.tolist() for v in values] == [[0.75], [0.0]]
