"""PPO-clip and its aggregation on hand cases; micro-batching invariance; batch alignment."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from toolgym.agents.trajectory import Step, Trajectory
from toolgym.training.config import LossSection
from toolgym.training.losses.aggregate import aggregate, normalizer_for
from toolgym.training.losses.ppo_clip import ppo_clip_loss
from toolgym.training.update.batch import build_batch, token_logprobs


def loss_of(new, old, adv, mask=None, config=None, **kw):
    config = config or LossSection()
    new = torch.tensor([new], dtype=torch.float64, requires_grad=True)
    old, adv = torch.tensor([old], dtype=torch.float64), torch.tensor([adv], dtype=torch.float64)
    mask = torch.tensor([mask or [1] * new.shape[1]], dtype=torch.float64)
    loss, metrics = ppo_clip_loss(new, old, adv, mask, normalizer_for(mask), config, **kw)
    loss.backward()
    return loss.item(), new.grad[0].tolist(), metrics


def test_on_policy_loss_is_minus_mean_advantage_and_its_gradient():
    loss, grad, metrics = loss_of([-1.0, -2.0, -0.5], [-1.0, -2.0, -0.5], [1.0, -2.0, 4.0])
    assert loss == pytest.approx(-(1 - 2 + 4) / 3)
    assert grad == pytest.approx([-1 / 3, 2 / 3, -4 / 3])  # d/dlogp of -r*A at r = 1
    assert metrics["clip_fraction"] == 0 and metrics["approx_kl"] == 0


def test_asymmetric_clipping():
    # A > 0, ratio 1.5 > 1 + 0.28: clipped at 1.28, no gradient
    loss, grad, metrics = loss_of([math.log(1.5)], [0.0], [1.0])
    assert loss == pytest.approx(-1.28) and grad == [0.0] and metrics["clip_fraction"] == 1
    # A > 0, ratio 1.25 < 1.28: not clipped (it would be with symmetric 0.2)
    loss, grad, _ = loss_of([math.log(1.25)], [0.0], [1.0])
    assert loss == pytest.approx(-1.25) and grad == [pytest.approx(-1.25)]
    # A < 0, ratio 0.7 < 1 - 0.2: clipped at 0.8 -> loss = -min(-0.7, -0.8) = 0.8
    loss, grad, _ = loss_of([math.log(0.7)], [0.0], [-1.0])
    assert loss == pytest.approx(0.8) and grad == [0.0]


def test_dual_clip_caps_negative_advantages_far_above_the_ratio():
    # A < 0, ratio 5 > clip_dual 3: PPO alone would give loss 5 with gradient 5; capped at 3, none
    loss, grad, metrics = loss_of([math.log(5.0)], [0.0], [-1.0])
    assert loss == pytest.approx(3.0) and grad == [0.0] and metrics["dual_clip_fraction"] == 1
    # A < 0, ratio 2 < 3: plain PPO (loss r * |A|, gradient r * |A|)
    loss, grad, metrics = loss_of([math.log(2.0)], [0.0], [-1.0])
    assert loss == pytest.approx(2.0) and grad == [pytest.approx(2.0)]
    assert metrics["dual_clip_fraction"] == 0
    # A > 0 is never dual-clipped: ratio 5 is held at 1 + clip_high by the ordinary clip
    loss, _, metrics = loss_of([math.log(5.0)], [0.0], [1.0])
    assert loss == pytest.approx(-1.28) and metrics["dual_clip_fraction"] == 0


def test_kl_k3_and_entropy_terms():
    same, _, m = loss_of(
        [-1.0],
        [-1.0],
        [0.0],
        config=LossSection(kl_coef=0.5),
        ref_logprobs=torch.tensor([[-1.0]], dtype=torch.float64),
    )
    assert same == 0 and m["kl_ref"] == 0
    # delta = ref - new = -0.5 -> k3 = e^-0.5 + 0.5 - 1 = 0.106531
    kl, _, m = loss_of(
        [-1.0],
        [-1.0],
        [0.0],
        config=LossSection(kl_coef=0.5),
        ref_logprobs=torch.tensor([[-1.5]], dtype=torch.float64),
    )
    assert m["kl_ref"] == pytest.approx(0.106531, abs=1e-6) and kl == pytest.approx(
        0.5 * 0.106531, abs=1e-6
    )
    ent, _, _ = loss_of(
        [-1.0],
        [-1.0],
        [0.0],
        config=LossSection(entropy_coef=0.1),
        entropy=torch.tensor([[2.0]], dtype=torch.float64),
    )
    assert ent == pytest.approx(-0.2)


DECOUPLED = LossSection(mode="decoupled", behaviour_cap=5.0)
TRUNCATED = LossSection(mode="truncated-is", behaviour_cap=5.0)


@pytest.mark.parametrize("config", [DECOUPLED, TRUNCATED])
def test_off_policy_modes_equal_on_policy_where_all_three_policies_agree(config):
    logp, adv = [-1.0, -2.0, -0.5], [1.0, -2.0, 4.0]
    prox = torch.tensor([logp], dtype=torch.float64)
    loss, grad, _ = loss_of(logp, logp, adv, config=config, proximal_logprobs=prox)
    on_loss, on_grad, _ = loss_of(logp, logp, adv)
    assert loss == pytest.approx(on_loss) and grad == pytest.approx(on_grad)


def test_off_policy_modes_weight_by_proximal_over_behaviour_and_cap_at_their_ends():
    # Behaviour probabilities 0.5 and 0.125, proximal 1 for both: weights 2 and 8. The policy
    # being updated equals the proximal one (ratio 1), advantages +1: each token's pg is -w.
    behaviour, proximal = [math.log(0.5), math.log(0.125)], torch.zeros((1, 2), dtype=torch.float64)
    loss, grad, metrics = loss_of([0.0, 0.0], behaviour, [1.0, 1.0], config=DECOUPLED,
                                  proximal_logprobs=proximal)  # fmt: skip
    assert loss == pytest.approx((-2 + 0) / 2)  # weight 8 > cap 5: the token is left out
    assert grad == pytest.approx([-2 / 2, 0.0])
    assert metrics["behaviour_weight_mean"] == pytest.approx(5.0)
    assert metrics["behaviour_weight_max"] == pytest.approx(8.0)
    assert metrics["behaviour_capped"] == pytest.approx(0.5)
    loss, grad, _ = loss_of([0.0, 0.0], behaviour, [1.0, 1.0], config=TRUNCATED,
                            proximal_logprobs=proximal)  # fmt: skip
    assert loss == pytest.approx((-2 - 5) / 2)  # weight 8 cut to the cap, the token kept
    assert grad == pytest.approx([-2 / 2, -5 / 2])


def test_off_policy_modes_clip_the_ratio_against_the_proximal_policy():
    # The behaviour policy is far off (weight 2), the update moved 1.5x from the proximal
    # policy: clipped at 1 + 0.28 around the proximal policy, then weighted, no gradient.
    proximal = torch.tensor([[math.log(0.5)]], dtype=torch.float64)
    loss, grad, metrics = loss_of([math.log(0.75)], [math.log(0.25)], [1.0], config=DECOUPLED,
                                  proximal_logprobs=proximal)  # fmt: skip
    assert loss == pytest.approx(-2 * 1.28) and grad == [0.0]
    assert metrics["clip_fraction"] == 1 and metrics["ratio_mean"] == pytest.approx(1.5)
    with pytest.raises(ValueError, match="needs the proximal log-probabilities"):
        loss_of([0.0], [0.0], [1.0], config=DECOUPLED)


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum"])
def test_micro_batches_with_accumulation_equal_the_full_batch(mode):
    torch.manual_seed(0)
    per_token = torch.randn(6, 9, requires_grad=True)
    mask = (torch.rand(6, 9) > 0.4).float()
    mask[2] = 0  # a sequence with no loss tokens
    normalizer = normalizer_for(mask, max_tokens=9)
    full = aggregate(per_token, mask, mode, normalizer)
    (full_grad,) = torch.autograd.grad(full, per_token)
    parts = [
        aggregate(per_token[i : i + 2], mask[i : i + 2], mode, normalizer) for i in range(0, 6, 2)
    ]
    (accumulated,) = torch.autograd.grad(sum(parts), per_token)
    assert sum(parts).item() == pytest.approx(full.item(), abs=1e-6)
    assert torch.allclose(accumulated, full_grad)


def make_trajectory(tid, token_ids, spans, rewards, masked=False):
    steps = [
        Step(s, e, [-0.1 * k] * (e - s), "", [], r, "x", "x")
        for k, ((s, e), r) in enumerate(zip(spans, rewards, strict=True))
    ]
    return Trajectory(
        tid,
        token_ids=token_ids,
        prompt_length=spans[0][0],
        steps=steps,
        infra_error="down" if masked else None,
    )


def test_batch_puts_each_steps_advantage_on_its_own_response_tokens():
    # prompt 0-2, response 3-4, env 5-6, response 7-8
    t = make_trajectory("a", list(range(10, 19)), [(3, 5), (7, 9)], [0, 1])
    short = make_trajectory("b", [1, 2, 3, 4], [(2, 4)], [1])
    gone = make_trajectory("c", [1, 2, 3], [(1, 3)], [1], masked=True)
    batch = build_batch(
        [t, short, gone], [np.array([0.5, -1.0]), np.array([2.0]), np.array([9.0])], pad_id=0
    )
    assert len(batch) == 2 and batch.input_ids.shape == (2, 9)
    # targets are tokens 1..8; model tokens 3,4,7,8 -> entries 2,3,6,7
    assert batch.loss_mask[0].tolist() == [0, 0, 1, 1, 0, 0, 1, 1]
    assert batch.advantages[0].tolist() == [0, 0, 0.5, 0.5, 0, 0, -1.0, -1.0]
    assert batch.old_logprobs[0].tolist() == pytest.approx([0, 0, 0, 0, 0, 0, -0.1, -0.1])
    assert batch.loss_mask[1].tolist() == [0, 1, 1, 0, 0, 0, 0, 0] and batch.attention_mask[
        1
    ].tolist() == [1, 1, 1, 1, 0, 0, 0, 0, 0]
    micro = list(batch.split(1))
    assert [m.input_ids.shape[1] for m in micro] == [9, 4]


def test_recomputed_logprobs_of_a_real_rollout_equal_the_behaviour_logprobs(tiny_model_dir):
    import asyncio

    import toolgym
    from toolgym.agents.engines import SamplingParams
    from toolgym.agents.engines.hf import HFEngine
    from toolgym.agents.render import ChatRenderer
    from toolgym.agents.rollout import EpisodeRequest, RolloutConfig, run_episode

    engine = HFEngine(tiny_model_dir)
    renderer = ChatRenderer(engine.tokenizer)

    async def two():
        config = RolloutConfig(SamplingParams(max_tokens=12, seed=1))
        return await asyncio.gather(
            *(
                run_episode(
                    toolgym.make("toolgym/Maze-v0", size=3, max_turns=2),
                    engine,
                    renderer,
                    config,
                    EpisodeRequest(seed=s, trajectory_id=str(s)),
                )
                for s in (0, 1)
            )
        )

    trajectories = asyncio.run(two())
    batch = build_batch(trajectories, [np.ones(len(t.steps)) for t in trajectories], engine.pad_id)
    with torch.no_grad():
        logprobs, _ = token_logprobs(engine.model, batch)
    mask = batch.loss_mask.bool()
    assert torch.allclose(
        logprobs[mask], batch.old_logprobs[mask], atol=1e-4
    )  # ratio 1 before any update


def test_scoring_only_the_loss_columns_equals_scoring_every_position(tiny_model_dir):
    """token_logprobs asks the model for the logits of the loss columns only; the numbers are
    those of the full logits, also from a model that ignores `logits_to_keep`."""
    from transformers import AutoModelForCausalLM

    from toolgym.training.update.batch import TokenBatch

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(16, model.config.vocab_size, (3, 40), generator=generator)
    attention = torch.ones_like(ids)
    attention[2, 30:] = 0
    loss_mask = torch.zeros(3, 39)
    loss_mask[0, 10:14] = loss_mask[1, 12:20] = loss_mask[2, 25:29] = 1
    zeros = torch.zeros(3, 39)
    batch = TokenBatch(ids, attention, loss_mask, zeros, zeros)
    with torch.no_grad():
        full = torch.log_softmax(model(input_ids=ids, attention_mask=attention).logits, -1)
        expected = full[:, :-1].gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1) * loss_mask
        logprobs, entropy = token_logprobs(model, batch, with_entropy=True)

        class IgnoresLogitsToKeep(torch.nn.Module):
            def forward(self, logits_to_keep=None, **inputs):
                return model(**inputs)

        ignored, _ = token_logprobs(IgnoresLogitsToKeep(), batch)
    assert torch.allclose(logprobs, expected, atol=1e-5)
    assert torch.equal(ignored, logprobs)
    assert entropy is not None and bool((entropy[loss_mask == 0] == 0).all())
    assert bool((entropy[loss_mask > 0] > 0).all())
