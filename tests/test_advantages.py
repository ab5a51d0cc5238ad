"""Advantage estimators on cases small enough to check by hand (sample std, ddof=1)."""

from __future__ import annotations

import numpy as np
import pytest

from toolgym.errors import ConfigError
from toolgym.training.advantages import GroupRewards, compute_advantages, gigpo, grpo, rloo
from toolgym.training.advantages.gigpo import discounted_returns, episode_advantages


def group(rewards, keys=None, valid=None):
    keys = keys or [[f"s{i}_{t}" for t in range(len(r))] for i, r in enumerate(rewards)]
    valid = np.ones(len(rewards), bool) if valid is None else np.array(valid)
    return GroupRewards([np.array(r, float) for r in rewards], keys, valid)


def close(actual, expected):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected, strict=True):
        np.testing.assert_allclose(a, e, atol=1e-4)


def test_grpo_hand_cases():
    # returns 1,0,0,1: mean 0.5, sample std sqrt(4 * 0.25 / 3) = 0.57735 -> +-0.866025
    close(
        grpo(group([[0, 1], [0], [0, 0, 0], [1]])),
        [[0.866025] * 2, [-0.866025], [-0.866025] * 3, [0.866025]],
    )
    close(grpo(group([[1], [0]]), std_normalize=False), [[0.5], [-0.5]])  # Dr. GRPO: no std
    close(grpo(group([[1], [1], [1]])), [[0], [0], [0]])  # all equal: no signal
    close(grpo(group([[1, 0]])), [[0, 0]])  # one trajectory: nothing to compare with


def test_masked_trajectories_are_left_out_of_the_statistics():
    # stats over returns 1 and 0 only: mean 0.5, sample std 0.70711 -> +-0.70711; masked gets 0
    close(grpo(group([[1], [0], [5]], valid=[True, True, False])), [[0.707107], [-0.707107], [0]])
    close(rloo(group([[1], [0], [9]], valid=[True, True, False])), [[1.0], [-1.0], [0]])


def test_rloo_hand_case():
    # baselines: mean of the others -> 1 - 0 = 1; 0 - 0.5 = -0.5 (twice)
    close(rloo(group([[1], [0], [0]])), [[1.0], [-0.5], [-0.5]])
    close(rloo(group([[1]])), [[0.0]])


def test_discounted_returns():
    np.testing.assert_allclose(discounted_returns(np.array([0.0, 0.0, 1.0]), 0.5), [0.25, 0.5, 1.0])
    np.testing.assert_allclose(discounted_returns(np.array([1.0, 1.0]), 0.95), [1.95, 1.0])


TWO = dict(
    rewards=[[0, 1], [0, 0, 0]],
    keys=[["s0", "s1"], ["s0", "s2", "s0"]],  # s0 recurs within trajectory 2
)


def test_gigpo_hand_case():
    # Episode: returns 1, 0 -> +-0.70711.
    # Anchor s0: discounted returns (gamma 0.5) 0.5 (traj 1, t0), 0 (traj 2, t0), 0 (traj 2, t2);
    #   mean 1/6, sample std 0.288675 -> 1.1547, -0.57735, -0.57735. s1 and s2 are alone -> 0.
    out = gigpo(group(TWO["rewards"], TWO["keys"]), gamma=0.5)
    close(
        out,
        [[0.707107 + 1.154701, 0.707107], [-0.707107 - 0.577350, -0.707107, -0.707107 - 0.577350]],
    )


def test_gigpo_options_mean_norm_omega_and_pooled_episode_statistics():
    g = group(TWO["rewards"], TWO["keys"])
    # step mean-norm: s0 -> 0.5 - 1/6, -1/6, -1/6; omega 2 doubles the step part
    out = gigpo(g, gamma=0.5, omega=2.0, step_std_normalize=False)
    close(
        out,
        [
            [0.707107 + 2 * 0.333333, 0.707107],
            [-0.707107 - 2 * 0.166667, -0.707107, -0.707107 - 2 * 0.166667],
        ],
    )
    # pooled over step rows 1,1,0,0,0: mean 0.4, sample std sqrt(1.2 / 4) = 0.547723
    np.testing.assert_allclose(
        episode_advantages(g, episode_over_steps=True), [1.095445, -0.730297], atol=1e-4
    )


def test_gigpo_masked_truncated_and_single_trajectories():
    # A masked third trajectory sharing s0 changes nothing for the others.
    masked = group([*TWO["rewards"], [5]], [*TWO["keys"], ["s0"]], valid=[True, True, False])
    close(gigpo(masked, gamma=0.5)[:2], gigpo(group(TWO["rewards"], TWO["keys"]), gamma=0.5))
    assert gigpo(masked, gamma=0.5)[2].tolist() == [0.0]
    # A truncated episode is just shorter, with no bootstrap: returns 0.5*0.5=0.25 and 0.5.
    truncated = group([[0, 0.5], [0, 0]], [["a", "b"], ["a", "c"]])
    # episode: returns 0.5, 0 -> +-0.70711; anchor a: 0.25 vs 0 -> +-0.70711; b, c alone -> 0
    close(gigpo(truncated, gamma=0.5), [[1.414214, 0.707107], [-1.414214, -0.707107]])
    # One trajectory: no episode signal, but a state it revisits forms an anchor group:
    # returns 0.5 then 1 at state s -> mean 0.75, sample std 0.353553 -> -0.70711, +0.70711
    close(gigpo(group([[0, 1]], [["s", "s"]]), gamma=0.5), [[-0.707107, 0.707107]])
    close(gigpo(group([[1, 1], [1, 1]], [["s", "t"], ["s", "t"]])), [[0, 0], [0, 0]])  # all equal


def test_estimators_by_name_and_from_trajectories():
    from toolgym.agents.trajectory import Step, Trajectory

    def traj(tid, rewards, keys, infra=None):
        steps = [Step(0, 0, [], "", [], r, k, k) for r, k in zip(rewards, keys, strict=True)]
        return Trajectory(tid, steps=steps, infra_error=infra)

    trajectories = [
        traj("a", [0, 1], ["s0", "s1"]),
        traj("b", [0, 0, 0], ["s0", "s2", "s0"]),
        traj("c", [5], ["s0"], "server down"),
    ]
    g = GroupRewards.from_trajectories(trajectories)
    assert g.valid.tolist() == [True, True, False]
    close(
        compute_advantages("gigpo", g, gamma=0.5)[:2],
        gigpo(group(TWO["rewards"], TWO["keys"]), gamma=0.5),
    )
    with pytest.raises(
        ConfigError, match="unknown advantage estimator 'gipgo'. Did you mean: gigpo?"
    ):
        compute_advantages("gipgo", g)


def test_anchor_recurrence_counts_turns_whose_state_another_turn_of_the_group_shares():
    from toolgym.training.advantages.base import anchor_recurrence

    # TWO: s0 three times (t0 of both, t2 of trajectory 2), s1 and s2 once: 3 of 5 turns
    # recur; after the first turns, only trajectory 2's t2 (s0) of its 3 later turns
    assert anchor_recurrence(group(TWO["rewards"], TWO["keys"])) == (3, 5, 1, 3)
    # a masked trajectory's states do not count, nor make another's recur
    masked = group([[0, 0], [1, 1]], [["a", "b"], ["a", "b"]], valid=[True, False])
    assert anchor_recurrence(masked) == (0, 2, 0, 1)
    single = group([[1], [0], [1]], [["q"], ["q"], ["q"]])  # one turn each: all recur at t0
    assert anchor_recurrence(single) == (3, 3, 0, 0)


def test_gigpo_step_leave_one_out_hand_case():
    from toolgym.training.advantages.gigpo import step_advantages

    # TWO, gamma 0.5: anchor s0 holds returns 0.5 (traj 1, t0), 0 (traj 2, t0), 0 (traj 2, t2):
    # each less the mean of the other two -> 0.5, -0.25, -0.25. s1 (return 1) and s2 (0) are
    # alone: each less the other trajectory's return from its start (0 and 0.5) -> 1, -0.5
    out = step_advantages(group(TWO["rewards"], TWO["keys"]), gamma=0.5, std_normalize=False,
                          leave_one_out=True)  # fmt: skip
    close(out, [[0.5, 1.0], [-0.25, -0.5, -0.25]])
