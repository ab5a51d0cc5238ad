"""The step term: process rewards normalised over the group's steps and added to the
estimators' advantages, against values worked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from toolgym.training.advantages import GroupRewards, compute_advantages
from toolgym.training.advantages.base import Scale
from toolgym.training.advantages.step_term import redistributed, step_term, with_step_term


def test_the_step_term_normalises_over_every_step_of_the_group():
    # steps 1, 3 | 2: mean 2, sample std 1 -> -1, 1 | 0; the masked trajectory is left out
    process = [np.array([1.0, 3.0]), np.array([2.0]), np.array([50.0])]
    valid = np.array([True, True, False])
    term = step_term(process, valid)
    assert np.allclose(term[0], [-1.0, 1.0], atol=1e-5) and np.allclose(term[1], [0.0])
    assert term[2].tolist() == [0.0]
    centred = step_term(process, valid, scale=Scale("none"))
    assert np.allclose(centred[0], [-1.0, 1.0]) and np.allclose(centred[1], [0.0])


def test_the_step_term_joins_the_episode_advantage_with_its_weight():
    advantages = [np.array([0.5, 0.5]), np.array([-0.5]), np.array([9.0])]
    process = [np.array([1.0, 3.0]), np.array([2.0]), np.array([0.0])]
    valid = np.array([True, True, False])
    out = with_step_term(advantages, process, valid, alpha=2.0)
    # 0.5 + 2 * (-1) = -1.5, 0.5 + 2 * 1 = 2.5, -0.5 + 2 * 0 = -0.5; masked: 0
    assert np.allclose(out[0], [-1.5, 2.5], atol=1e-4) and np.allclose(out[1], [-0.5])
    assert out[2].tolist() == [0.0]


def test_estimators_add_the_step_term_when_the_group_has_process_rewards():
    from toolgym.training.advantages import GroupRewards, compute_advantages

    # returns 1 and 0: GRPO gives +-0.707107; process 1, 3 | 2 gives step terms -1, 1 | 0
    group = GroupRewards(
        rewards=[np.array([0.0, 1.0]), np.array([0.0])],
        state_keys=[["a", "b"], ["a"]],
        valid=np.array([True, True]),
        process=[np.array([1.0, 3.0]), np.array([2.0])],
    )
    out = compute_advantages("grpo", group, step_alpha=0.5, step_combine="add")
    assert np.allclose(out[0], [0.707107 - 0.5, 0.707107 + 0.5], atol=1e-4)
    assert np.allclose(out[1], [-0.707107], atol=1e-4)
    plain = compute_advantages("grpo", group, step_alpha=0.0)
    assert np.allclose(plain[0], [0.707107, 0.707107], atol=1e-4)


def test_redistributing_keeps_each_episodes_credit_and_its_sign():
    """Two episodes credited +1 and -1 a turn, each with process scores 0 then 1: centred
    -0.5, 0.5; their pooled sample std is sqrt(4 * 0.25 / 3) = 0.57735, so the shares are
    tanh(-+0.86603) = -+0.69935. At alpha 0.5 the success's turns get 1 -+ 0.34967 and the
    failure's -1 -+ 0.34967: the later turn, which the process reward prefers, gets more
    credit in the success and less blame in the failure; each episode still sums to its
    own, and no turn changes sign. A one-turn episode and a masked one are left as they were."""
    advantages = [np.array([1.0, 1.0]), np.array([-1.0, -1.0]), np.array([0.7]), np.array([3.0])]
    process = [np.array([0.0, 1.0]), np.array([0.0, 1.0]), np.array([5.0]), np.array([9.0])]
    valid = np.array([True, True, True, False])
    out = redistributed(advantages, process, valid, alpha=0.5)
    np.testing.assert_allclose(out[0], [0.650326, 1.349674], atol=1e-5)
    np.testing.assert_allclose(out[1], [-1.349674, -0.650326], atol=1e-5)
    np.testing.assert_allclose(out[2], [0.7])
    np.testing.assert_allclose(out[3], [0.0])
    assert out[0].sum() == pytest.approx(2.0) and out[1].sum() == pytest.approx(-2.0)
    # added at a weight that outscores the outcome, it pays the failure's later turn (-1 +
    # 2 * 0.86603); redistributed at any weight up to 1/2, the failure's turns stay blamed
    added = with_step_term(advantages[:2], process[:2], valid[:2], alpha=2.0)
    assert added[1][1] > 0 and (out[1] < 0).all()


def test_a_config_chooses_how_process_rewards_join_the_advantage():
    rewards = [np.array([0.0, 1.0]), np.array([0.0, 0.0])]
    process = [np.array([0.0, 1.0]), np.array([1.0, 0.0])]
    group = GroupRewards(rewards, [["a", "b"], ["a", "c"]], np.array([True, True]), process)
    plain = compute_advantages("grpo", group, step_alpha=0.0)
    moved = compute_advantages("grpo", group, step_alpha=0.5, step_combine="redistribute")
    for a, b in zip(plain, moved, strict=True):
        assert a.sum() == pytest.approx(b.sum()) and not np.allclose(a, b)
