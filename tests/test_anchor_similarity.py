"""Anchor states by similarity (advantage.anchor_similarity), on cases checked by hand: which
steps share an anchor, the step advantages that follows, and the coverage it logs."""

from __future__ import annotations

import numpy as np

from toolgym.agents.trajectory import Step, Trajectory, TrajectoryGroup
from toolgym.config import load_config
from toolgym.training.advantages import GroupRewards, gigpo
from toolgym.training.advantages.anchors import jaccard, similar_state_keys, words
from toolgym.training.advantages.gigpo import step_advantages
from toolgym.training.advantages.metrics import advantage_metrics
from toolgym.training.config import TrainConfig
from toolgym.training.trainer import Trainer

OPENING = [{"role": "user", "content": "Find the fruit."}]
APPLE = "Query returned 3 rows: apple banana cherry"
GRAPE = "Query returned 3 rows: apple banana grape"  # 6 words of APPLE's 7, 8 in all: 0.75


def step(key, observation, reward):
    return Step(
        response_start=0, response_end=0, logprobs=[], action="a",
        observation=[{"role": "tool", "content": observation}], reward=reward,
        state_key=key, next_state_key=None,
    )  # fmt: skip


def trajectory(name, keys, observations, rewards):
    steps = [step(*parts) for parts in zip(keys, observations, rewards, strict=True)]
    return Trajectory(id=name, messages=OPENING, steps=steps)


def two_paths():
    """Both start at s0; their first results differ in one word and are keyed apart."""
    return [
        trajectory("a", ["s0", "a1"], [APPLE, "done"], [0.0, 1.0]),
        trajectory("b", ["s0", "b1"], [GRAPE, "done"], [0.0, 0.0]),
    ]


def test_the_word_overlap_of_two_results_is_counted_by_hand():
    apple, grape = words([{"content": APPLE}]), words([{"content": GRAPE}])
    assert len(apple) == len(grape) == 7
    assert jaccard(apple, grape) == 6 / 8
    assert jaccard(frozenset(), frozenset()) == 1.0
    image = [
        {"content": [{"type": "text", "text": "Apple"}, {"type": "image_url", "image_url": "x"}]}
    ]
    assert words(image) == {"apple"}  # images are not words


def test_states_this_alike_share_the_first_ones_key_and_others_keep_their_own():
    paths = two_paths()
    assert similar_state_keys(paths, 0.75) == [["s0", "a1"], ["s0", "a1"]]
    assert similar_state_keys(paths, 0.76) == [["s0", "a1"], ["s0", "b1"]]
    assert similar_state_keys(paths, 1.0) == [["s0", "a1"], ["s0", "b1"]]


def test_a_joined_anchor_gives_the_later_steps_their_own_comparison():
    """Returns (gamma 0.95): a [0.95, 1], b [0, 0]. At s0 the two first steps compare
    0.95 with 0: +-0.70711 (two values, sample std). Keyed apart, a1 and b1 are alone and
    get 0; joined, 1 against 0 gives +-0.70711."""
    paths = two_paths()
    exact = step_advantages(GroupRewards.from_trajectories(paths))
    similar = step_advantages(GroupRewards.from_trajectories(paths, anchor_similarity=0.7))
    np.testing.assert_allclose(np.array(exact), [[0.70711, 0.0], [-0.70711, 0.0]], atol=1e-4)
    np.testing.assert_allclose(
        np.array(similar), [[0.70711, 0.70711], [-0.70711, -0.70711]], atol=1e-4
    )
    # the episode level is untouched: GiGPO's whole advantage differs by the step term alone
    whole = gigpo(GroupRewards.from_trajectories(paths, anchor_similarity=0.7))
    np.testing.assert_allclose(
        np.array(whole) - np.array(similar), [[0.70711] * 2, [-0.70711] * 2], atol=1e-4
    )


def test_coverage_is_logged_with_the_same_anchors_the_advantages_use():
    group = TrajectoryGroup(group_id="g", seed=0, trajectories=two_paths())
    advantages = [np.zeros(2), np.zeros(2)]
    assert advantage_metrics(advantages, [group])["adv/anchor_coverage_after_first"] == 0.0
    joined = advantage_metrics(advantages, [group], anchor_similarity=0.7)
    assert joined["adv/anchor_coverage_after_first"] == 1.0
    assert joined["adv/anchor_coverage"] == 1.0


def test_a_masked_trajectory_draws_no_anchor():
    masked, *rest = two_paths()
    masked.infra_error = "the env died"
    assert masked.masked
    assert similar_state_keys([masked, *rest], 0.7) == [["s0", "a1"], ["s0", "b1"]]


def test_equal_keys_stay_together_whatever_their_text_and_the_order_decides_the_first():
    paths = [
        trajectory("a", ["s0", "x"], [APPLE, "done"], [0.0, 1.0]),
        trajectory("b", ["s0", "x"], ["nothing alike at all", "done"], [0.0, 0.0]),
        trajectory("c", ["s0", "y"], [GRAPE, "done"], [0.0, 0.0]),
    ]
    # x was first met after APPLE; y's GRAPE is 0.75 alike it, so y joins x
    assert similar_state_keys(paths, 0.7) == [["s0", "x"], ["s0", "x"], ["s0", "x"]]
    assert similar_state_keys(list(reversed(paths)), 0.9) == [["s0", "y"], ["s0", "x"], ["s0", "x"]]


def test_the_trainer_draws_its_anchors_as_the_setting_says(tool_calling_model_dir, tmp_path):
    """The two paths through the trainer's reward stage and advantages: the episode level
    gives +-0.70711 to each step; the step level adds the hand-worked values above, so the
    later steps get +-0.70711 more only when their anchors are joined."""
    expected = {
        None: [[1.41421, 0.70711], [-1.41421, -0.70711]],
        0.7: [[1.41421] * 2, [-1.41421] * 2],
    }
    for threshold, values in expected.items():
        config = load_config(TrainConfig, None, [
            f"model={tool_calling_model_dir}", f"run_dir={tmp_path / str(threshold)}",
            f"advantage.anchor_similarity={'null' if threshold is None else threshold}",
            "env.kwargs={size: 3}",
        ])  # fmt: skip
        trainer = Trainer(config)
        group = TrajectoryGroup(group_id="g", seed=0, trajectories=two_paths())
        _, advantages = trainer.runtime.run(trainer.advantages([group]))
        trainer.close()
        np.testing.assert_allclose(np.array(advantages), values, atol=1e-4)
        # each turn keeps its credit and the anchor it was compared in, for the rollouts
        kept = [[s.advantage for s in t.steps] for t in group.trajectories]
        np.testing.assert_allclose(np.array(kept), values, atol=1e-4)
        anchors = [[s.anchor for s in t.steps] for t in group.trajectories]
        assert anchors == (
            [["s0", "a1"], ["s0", "b1"]] if threshold is None else [["s0", "a1"]] * 2
        )
