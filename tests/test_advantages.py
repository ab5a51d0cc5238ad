"""Advantage estimators on cases small enough to check by hand (sample std, ddof=1)."""

from __future__ import annotations

import numpy as np
import pytest

from toolgym.errors import ConfigError
from toolgym.training.advantages import (
    GroupRewards,
    Scale,
    batch_scaled,
    compute_advantages,
    gigpo,
    grpo,
    rloo,
    turns_centred,
)
from toolgym.training.advantages.gigpo import discounted_returns, episode_advantages


def group(rewards, keys=None, valid=None):
    keys = keys or [[f"s{i}_{t}" for t in range(len(r))] for i, r in enumerate(rewards)]
    valid = np.ones(len(rewards), bool) if valid is None else np.array(valid)
    return GroupRewards([np.array(r, float) for r in rewards], keys, valid)


NONE = Scale("none")


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
    close(grpo(group([[1], [0]]), scale=Scale("none")), [[0.5], [-0.5]])  # Dr. GRPO: no std
    close(grpo(group([[1], [1], [1]])), [[0], [0], [0]])  # all equal: no signal
    close(grpo(group([[1, 0]])), [[0, 0]])  # one trajectory: nothing to compare with


def test_masked_trajectories_are_left_out_of_the_statistics():
    # stats over returns 1 and 0 only: mean 0.5, sample std 0.70711 -> +-0.70711; masked gets 0
    close(grpo(group([[1], [0], [5]], valid=[True, True, False])), [[0.707107], [-0.707107], [0]])
    close(rloo(group([[1], [0], [9]], valid=[True, True, False]), scale=NONE), [[1.0], [-1.0], [0]])


def test_rloo_hand_case():
    # baselines: mean of the others -> 1 - 0 = 1; 0 - 0.5 = -0.5 (twice): the paper's RLOO
    close(rloo(group([[1], [0], [0]]), scale=NONE), [[1.0], [-0.5], [-0.5]])
    close(rloo(group([[1]])), [[0.0]])
    # divided by the group's std, as every estimator is by default: std(1, 0, 0) = 0.57735
    close(rloo(group([[1], [0], [0]])), [[1.732051], [-0.866025], [-0.866025]])


FAILURES = [[0, 0], [0, 0], [-0.2, 0], [0, 0]]
"""A group where no episode succeeded, one paying a -0.2 invalid-call penalty at its first
turn; every episode's first turn acts in the start state, every second turn in state "a"."""
FAILURE_KEYS = [["start", "a"]] * 4


def test_a_group_whose_returns_barely_differ_is_not_blown_up_by_its_tiny_spread():
    """Returns 0, 0, -0.2, 0: mean -0.05, deviations 0.05, 0.05, -0.15, 0.05, sample std 0.1.
    Group std makes the penalty the whole signal (-1.5, as much as a failure beside one
    success in four gets); GiGPO counts it twice, at the episode level and again at the start
    anchor, whose discounted returns are the same (state "a" returns are all 0: no step
    term there). Each scale, worked by hand:"""
    g = group(FAILURES, FAILURE_KEYS)
    first_turns = {
        "group": [1.0, 1.0, -3.0, 1.0],  # (0.05 / 0.1) * 2 levels; -0.15 / 0.1 * 2
        "none": [0.1, 0.1, -0.3, 0.1],  # the deviations, twice
        "floor": [0.2, 0.2, -0.6, 0.2],  # divided by the floor 0.5, as std 0.1 < 0.5
        "batch": [0.1, 0.1, -0.3, 0.1],  # centred here; divided once the step is in
    }
    for kind, expected in first_turns.items():
        out = gigpo(g, gamma=0.95, scale=Scale(kind, floor=0.5))
        close([a[:1] for a in out], [[v] for v in expected])
        episode = [v / 2 for v in expected]  # the second turn: the episode level alone
        close([a[1:] for a in out], [[v] for v in episode])
    # a group where one episode in four succeeded keeps group std's figures under the floor:
    # returns 1, 0, 0, 0: std 0.5 -> 1.5, -0.5 (the floor is not above the spread)
    one_in_four = group([[1], [0], [0], [0]])
    close(grpo(one_in_four, scale=Scale("floor", 0.5)), grpo(one_in_four))
    close(grpo(one_in_four), [[1.5], [-0.5], [-0.5], [-0.5]])


def test_the_batch_scale_divides_every_group_by_one_spread():
    """Two groups, the near-constant one and one where an episode in four succeeded, centred
    by GRPO: (0.05, 0.05, -0.15, 0.05) and (0.75, -0.25, -0.25, -0.25). The eight values
    have mean 0 and squares summing to 0.03 + 0.75: a population std of sqrt(0.78 / 8) =
    0.31225. Each is divided by it, so the failures' group stays a fifth of the successful
    one's, where group std made them level."""
    centred = [
        *grpo(group([[sum(r)] for r in FAILURES]), scale=NONE),
        *grpo(group([[1], [0], [0], [0]]), scale=NONE),
    ]
    out = batch_scaled(centred)
    std = np.sqrt((0.03 + 0.75) / 8)
    np.testing.assert_allclose(std, 0.31225, atol=1e-5)
    close(out, [[v / std] for v in (0.05, 0.05, -0.15, 0.05, 0.75, -0.25, -0.25, -0.25)])
    assert batch_scaled([]) == []
    close(batch_scaled([np.zeros(1)]), [[0.0]])  # one value: nothing to scale by


def test_an_unknown_scale_is_refused_in_words():
    with pytest.raises(ValueError, match="group, none, floor, batch"):
        Scale("std")


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
    out = gigpo(g, gamma=0.5, omega=2.0, scale=NONE)
    close(
        out,
        [
            [0.5 + 2 * 0.333333, 0.5],  # the episode level is not divided either: 1, 0 -> +-0.5
            [-0.5 - 2 * 0.166667, -0.5, -0.5 - 2 * 0.166667],
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
    out = step_advantages(group(TWO["rewards"], TWO["keys"]), gamma=0.5, scale=NONE,
                          leave_one_out=True)  # fmt: skip
    close(out, [[0.5, 1.0], [-0.25, -0.5, -0.25]])


def test_centred_turns_leave_the_call_format_no_net_push():
    """A success of one turn against three failures of three: GRPO gives +1.5 and -0.5 a
    turn, so the step's ten turns sum to 1.5 - 9 * 0.5 = -3 and every call's shared tokens
    are pushed down by it. Centred (mean -0.3): +1.8 and -0.2, summing to 0, each episode
    still ranked as before."""
    centred = turns_centred(grpo(group([[1], [0, 0, 0], [0, 0, 0], [0, 0, 0]])))
    close(centred, [[1.8], [-0.2] * 3, [-0.2] * 3, [-0.2] * 3])
    assert sum(a.sum() for a in centred) == pytest.approx(0.0)


def test_the_step_passes_centre_then_divide_every_trained_turn():
    """Through the run's own credit stage: the group above, played as episodes and scored by
    the env's reward, with `centre_turns` and the `batch` scale: the centred values (+1.8,
    -0.2) divided by their population std over the ten turns, sqrt((1.8^2 + 9 * 0.2^2) /
    10) = 0.6; each turn keeps its value on `Step.advantage`."""
    import asyncio

    from toolgym.agents.trajectory import Step, Trajectory, TrajectoryGroup
    from toolgym.training.config import AdvantageSection
    from toolgym.training.credit import assign_credit
    from toolgym.training.rewards import RewardStage, WeightedSource, make_source

    def episode(name, rewards):
        steps = [Step(0, 0, [], "a", [], r, f"{name}{t}", f"{name}{t + 1}")
                 for t, r in enumerate(rewards)]  # fmt: skip
        return Trajectory(id=name, steps=steps)

    played = [episode("w", [1.0]), *(episode(n, [0.0] * 3) for n in "xyz")]
    groups = [TrajectoryGroup("g", 0, played)]
    stage = RewardStage([WeightedSource("env", make_source("env"), 1.0)])
    setting = AdvantageSection(estimator="grpo", scale="batch", centre_turns=True)
    trained, advantages = asyncio.run(assign_credit(groups, stage, setting))
    close(advantages, [[3.0], [-1 / 3] * 3, [-1 / 3] * 3, [-1 / 3] * 3])
    assert [s.advantage for s in trained[1].steps] == pytest.approx([-1 / 3] * 3, abs=1e-5)
