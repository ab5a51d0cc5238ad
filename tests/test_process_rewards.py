"""Process-reward computations, each against values worked by hand."""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest
import torch

from toolgym.training.process.implicit_prm import dpo_loss, preference_pairs, step_rewards


def test_implicit_step_rewards_are_the_prms_log_ratio_over_each_action():
    prm = np.array([-1.0, -2.0, -0.5, -1.0])
    old = np.array([-1.5, -2.0, -1.0, -2.0])  # log-ratios 0.5, 0, 0.5, 1
    rewards = step_rewards(prm, old, [(0, 2), (2, 4)], beta=0.1)
    assert np.allclose(rewards, [0.05, 0.15])
    with pytest.raises(ValueError):
        step_rewards(prm, old[:3], [(0, 2)])


def test_preferences_pair_higher_outcomes_over_lower_within_the_group():
    assert preference_pairs([1.0, 0.0, 1.0, 0.5], [True, True, True, False]) == [(0, 1), (2, 1)]
    assert preference_pairs([1.0, 1.0], [True, True]) == []


def test_the_dpo_loss_and_its_gradient():
    prm = torch.tensor([-3.0, -5.0], requires_grad=True)
    old = torch.tensor([-4.0, -4.0])
    loss = dpo_loss(prm, old, [(0, 1)], beta=0.5)  # margins 0.5 and -0.5: their gap is 1
    assert loss.item() == pytest.approx(math.log(1 + math.exp(-1)), abs=1e-6)  # 0.31326
    loss.backward()
    sigmoid = 1 / (1 + math.exp(-1))
    assert prm.grad.tolist() == pytest.approx([-(1 - sigmoid) * 0.5, (1 - sigmoid) * 0.5])
    empty = dpo_loss(prm, old, [])
    assert empty.item() == 0.0 and empty.requires_grad


def test_branch_budgets_choose_steps_before_the_last():
    from toolgym.errors import ConfigError
    from toolgym.training.process.mc_values import steps_to_branch

    assert steps_to_branch(5) == [0, 1, 2, 3]
    assert steps_to_branch(7, "every:3") == [2, 5]
    entropies = [0.1, 0.9, 0.3, 0.8, 2.0]  # the last step's 2.0 never counts
    assert steps_to_branch(5, "entropy:2", entropies) == [1, 3]
    assert steps_to_branch(1) == []
    for bad in ("every:0", "some", "entropy:x"):
        with pytest.raises(ConfigError):
            steps_to_branch(5, bad)
    with pytest.raises(ConfigError, match="entropy"):
        steps_to_branch(5, "entropy:2")
    # GiGPO compares nothing at a step whose anchor state is its group's alone: branch there
    alone = [False, True, False, True, True]  # the last step's never counts
    assert steps_to_branch(5, "alone", alone=alone) == [1, 3]
    with pytest.raises(ConfigError, match="alone"):
        steps_to_branch(5, "alone")


def test_step_values_are_continuation_means_filled_back_from_the_outcome():
    from toolgym.training.process.mc_values import step_values

    # 4 steps, outcome 1; step 1 branched (1, 0, 0, 1 -> 0.5), steps 0 and 2 not:
    # V = [0.5 (next known: step 1), 0.5, 1.0 (next known: the outcome), 1.0]
    values = step_values(4, {1: [1.0, 0.0, 0.0, 1.0]}, outcome=1.0)
    assert values.tolist() == [0.5, 0.5, 1.0, 1.0]
    assert step_values(3, {2: [0.0]}, outcome=1.0).tolist() == [1.0, 1.0, 1.0]  # last: outcome


def hand_made_group(vocab: int, rewards: list[float], seed: int = 0):
    """Trajectories of random tokens (a prompt, then two 3-token actions around a 2-token
    observation), with behaviour logprobs and the given final rewards."""
    from toolgym.agents.trajectory import Step, Trajectory, TrajectoryGroup

    rng = np.random.default_rng(seed)
    out = []
    for i, reward in enumerate(rewards):
        prompt = int(rng.integers(3, 6))
        ids = rng.integers(0, vocab, prompt + 8).tolist()
        spans = [(prompt, prompt + 3), (prompt + 5, prompt + 8)]
        steps = [
            Step(start, end, rng.uniform(-4, -1, 3).tolist(), "a", [], r, i, i)
            for (start, end), r in zip(spans, [0.0, reward], strict=True)
        ]
        out.append(Trajectory(id=f"g{seed}:{i}", token_ids=ids, steps=steps))
    return TrajectoryGroup(f"g{seed}", 0, out)


@pytest.fixture
def prm(tiny_model_dir):
    from toolgym.agents.models.device import resolve_precision
    from toolgym.training.rewards import RunContext, make_source

    context = RunContext(str(tiny_model_dir), resolve_precision("cpu", "float32"), steps=4)
    return make_source("implicit_prm", context, micro_batch_size=2, lr=1e-3)


def test_the_prms_micro_batched_gradient_is_the_dpo_losss_own(prm):
    """The update back-propagates each sequence's summed logprob times dL/d(sum), two
    sequences at a time; that must equal back-propagating the DPO loss over the group whole."""
    from toolgym.training.update.batch import build_batch, token_logprobs

    group = hand_made_group(prm.model.config.vocab_size, [1.0, 0.0, 1.0, 0.0, 0.0])
    flat = group.trajectories
    batch = build_batch(flat, [np.zeros(2)] * len(flat), pad_id=0)
    pairs = preference_pairs([1, 0, 1, 0, 0], [True] * 5)
    prm_totals, old_totals = prm.score(batch, flat)
    prm.model.zero_grad()
    loss = prm.backward(batch, prm_totals, old_totals, pairs)
    split = {n: p.grad.clone() for n, p in prm.model.named_parameters()}

    prm.model.zero_grad()
    whole = (token_logprobs(prm.model, batch)[0] * batch.loss_mask).sum(-1)
    direct = dpo_loss(whole, old_totals, pairs, beta=0.05)
    direct.backward()
    assert loss == pytest.approx(direct.item(), abs=1e-6)
    for name, p in prm.model.named_parameters():
        assert torch.allclose(split[name], p.grad, atol=1e-6), name


def test_the_prm_scores_steps_before_it_learns_from_them(prm):
    """At the start the PRM is the behaviour policy, so every step's reward is beta times
    the gap between the model's logprobs and the recorded ones; after `prepare` its weights
    have moved (there were pairs) and its metrics say how many."""
    from toolgym.training.update.batch import build_batch, token_logprobs

    group = hand_made_group(prm.model.config.vocab_size, [1.0, 0.0, 0.0])
    before = {n: p.clone() for n, p in prm.model.state_dict().items()}
    batch = build_batch(group.trajectories, [np.zeros(2)] * 3, pad_id=0)
    with torch.no_grad():
        logprobs = token_logprobs(prm.model, batch)[0]
    asyncio.run(prm.prepare([group], [[1.0, 0.0, 0.0]]))
    for row, t in enumerate(group.trajectories):
        expected = [
            0.05
            * sum(logprobs[row, s.response_start - 1 + k].item() - s.logprobs[k] for k in range(3))
            for s in t.steps
        ]
        assert prm(t) == pytest.approx(expected, abs=1e-5)
    assert prm.last_metrics["pairs"] == 2 and prm.updates == 1
    assert any(not torch.equal(before[n], p) for n, p in prm.model.state_dict().items())
    other = hand_made_group(prm.model.config.vocab_size, [1.0], seed=1)
    with pytest.raises(ValueError, match="not among the step's prepared groups"):
        prm(other.trajectories[0])
    with pytest.raises(ValueError, match="scores: process"):
        asyncio.run(
            prm.prepare([other], None)
        )  # as an outcome source it would have no returns to learn from


def test_the_alone_budget_reads_each_steps_anchor_state_across_its_group():
    """Two episodes from one start, a third masked (left out, as in every statistic): the
    start recurs, the later states do not, except where two episodes met again."""
    from toolgym.agents.trajectory import Step, Trajectory, TrajectoryGroup
    from toolgym.training.rewards.mc_reward import _alone

    def played(name, keys, masked=False):
        steps = [Step(0, 0, [], "a", [], 0.0, k, None) for k in keys]
        return Trajectory(id=name, steps=steps, infra_error="sandbox died" if masked else None)

    group = TrajectoryGroup("g", 0, [played("x", ["s", "a", "m"]), played("y", ["s", "b", "m"]),
                                     played("z", ["s", "a"], masked=True)])  # fmt: skip
    assert _alone([group]) == {"x": [False, True, False], "y": [False, True, False]}
