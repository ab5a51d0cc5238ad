"""The hf engine keeps an episode's KV cache between its turns: a turn prefills only the
tokens it adds, and nothing it returns differs from a whole prefill: the log-probabilities
still equal a fresh forward pass over the whole sequence, an evicted or stale context is
prefilled again to the same numbers, and an ended episode leaves nothing behind."""

from __future__ import annotations

import asyncio

import pytest
import torch

from toolgym.agents.engines import SamplingParams
from toolgym.agents.engines.hf import BadRequestError, HFEngine
from toolgym.agents.render import ChatRenderer
from toolgym.agents.rollout import EpisodeRequest, RolloutConfig, run_episode
from toolgym.envs.maze import MazeEnv


@pytest.fixture(scope="module")
def engine(tiny_model_dir):
    return HFEngine(tiny_model_dir, seed=0)


def fresh_logprobs(model, sequence, start, end):
    with torch.no_grad():
        logits = model(torch.tensor([sequence])).logits[0].float()
    targets = torch.tensor(sequence[start:end]).unsqueeze(-1)
    return torch.log_softmax(logits, -1)[start - 1 : end - 1].gather(-1, targets).squeeze(-1)


async def turns(engine, count, episode, tail=(5, 6, 7), first=None):
    """`count` turns of one conversation: each prompt is the last one, its answer and `tail`."""
    sequence = list(first or range(10, 60))
    spans = []
    for turn in range(count):
        sampling = SamplingParams(max_tokens=12, seed=turn, temperature=1.0)
        completion = await engine.generate(list(sequence), sampling, episode=episode)
        spans.append((len(sequence), completion))
        sequence += completion.token_ids + list(tail)
    return sequence, spans


def test_later_turns_reuse_the_cache_and_match_a_fresh_forward_pass(engine):
    before = engine.contexts.reused_tokens
    sequence, spans = asyncio.run(turns(engine, 6, episode="a"))
    # Every turn after the first reused all of the last turn's tokens but its final one.
    assert engine.contexts.reused_tokens - before == sum(start - 4 for start, _ in spans[1:])
    for start, completion in spans:
        fresh = fresh_logprobs(engine.model, sequence, start, start + len(completion.token_ids))
        assert torch.allclose(fresh, torch.tensor(completion.logprobs), atol=1e-4)
    engine.end_episode("a")
    assert len(engine.contexts) == 0 and engine.contexts.nbytes == 0


def test_an_evicted_context_is_prefilled_again_to_the_same_numbers(tiny_model_dir, engine):
    kept, _ = asyncio.run(turns(engine, 5, episode="kept"))
    engine.end_episode("kept")
    starved = HFEngine(tiny_model_dir, seed=0, context_budget_mb=0)  # keeps no context
    again, spans = asyncio.run(turns(starved, 5, episode="kept"))
    assert starved.contexts.reused_tokens == 0 and again == kept
    kept_spans = asyncio.run(turns(engine, 5, episode="kept-2"))[1]
    for (_, mine), (_, theirs) in zip(spans, kept_spans, strict=True):
        assert mine.token_ids == theirs.token_ids
        assert mine.logprobs == pytest.approx(theirs.logprobs, abs=1e-5)
    engine.end_episode("kept-2")


def test_the_least_recently_used_context_is_evicted_under_the_budget(tiny_model_dir):
    engine = HFEngine(tiny_model_dir, seed=0)

    async def main():
        await turns(engine, 1, episode="old")
        size = engine.contexts.nbytes
        engine.contexts.budget_bytes = size + size // 2  # room for one context of this size
        await turns(engine, 1, episode="new")
        return size

    size = asyncio.run(main())
    assert len(engine.contexts) == 1 and engine.contexts.evictions == 1
    assert size <= engine.contexts.nbytes <= engine.contexts.budget_bytes


def test_a_weight_update_drops_the_context(tiny_model_dir):
    engine = HFEngine(tiny_model_dir, seed=0)

    async def main():
        sequence, (span,) = await turns(engine, 1, episode="e")
        with torch.no_grad():  # an optimizer step on the shared model, with no sync
            for p in engine.model.parameters():
                p.mul_(1.05)
        reused = engine.contexts.reused_tokens
        completion = await engine.generate(
            sequence, SamplingParams(max_tokens=12, seed=9), episode="e"
        )
        return sequence, completion, reused

    sequence, completion, reused = asyncio.run(main())
    assert engine.contexts.reused_tokens == reused  # the stale cache was not used
    whole = sequence + completion.token_ids
    fresh = fresh_logprobs(engine.model, whole, len(sequence), len(whole))
    assert torch.allclose(fresh, torch.tensor(completion.logprobs), atol=1e-4)


def test_a_prompt_that_leaves_the_cached_path_reuses_only_the_common_prefix(engine):
    async def main():
        sequence, _ = await turns(engine, 1, episode="d")
        before = engine.contexts.reused_tokens
        edited = sequence[:20] + [3] + sequence[21:]  # a token changed in the middle
        completion = await engine.generate(
            edited, SamplingParams(max_tokens=12, seed=4), episode="d"
        )
        return edited, completion, engine.contexts.reused_tokens - before

    edited, completion, reused = asyncio.run(main())
    engine.end_episode("d")
    assert reused == 20
    whole = edited + completion.token_ids
    fresh = fresh_logprobs(engine.model, whole, len(edited), len(whole))
    assert torch.allclose(fresh, torch.tensor(completion.logprobs), atol=1e-4)


def test_episodes_of_different_lengths_share_the_batch_with_their_contexts(engine):
    async def main():
        return await asyncio.gather(
            *(
                turns(engine, 3 + k % 3, episode=f"m{k}", first=range(10, 20 + 37 * k))
                for k in range(6)
            )
        )

    for k, (sequence, spans) in enumerate(asyncio.run(main())):
        engine.end_episode(f"m{k}")
        for start, completion in spans:
            fresh = fresh_logprobs(engine.model, sequence, start, start + len(completion.token_ids))
            assert torch.allclose(fresh, torch.tensor(completion.logprobs), atol=1e-4)
    assert len(engine.contexts) == 0


def test_a_rollout_ends_its_episode_and_its_logprobs_match_across_turns(engine, tiny_tokenizer):
    renderer = ChatRenderer(engine.tokenizer)
    config = RolloutConfig(SamplingParams(max_tokens=16, seed=1), max_turns=6)
    reused = engine.contexts.reused_tokens
    traj = asyncio.run(
        run_episode(MazeEnv(size=3, max_turns=6), engine, renderer, config, EpisodeRequest(seed=1))
    )
    assert len(traj.steps) == 6 and engine.contexts.reused_tokens > reused
    assert len(engine.contexts) == 0  # the episode's runner ended it
    for step in traj.steps:
        fresh = fresh_logprobs(engine.model, traj.token_ids, step.response_start, step.response_end)
        assert torch.allclose(fresh, torch.tensor(step.logprobs), atol=1e-4)


def test_an_unhashable_episode_key_is_refused_and_the_batch_goes_on(engine):
    async def main():
        good = asyncio.ensure_future(
            engine.generate([5, 6, 7], SamplingParams(max_tokens=8, seed=1), episode="fine")
        )
        with pytest.raises(BadRequestError, match="hashable"):
            await engine.generate([5, 6, 7], SamplingParams(max_tokens=8), episode=["a", "list"])
        return await good

    assert len(asyncio.run(main()).token_ids) > 0
    engine.end_episode("fine")
