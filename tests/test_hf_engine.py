"""The hf engine on a real tiny model: logprobs equal a fresh forward pass, batching does not
change seeded results, stops and limits hold, bad requests are refused."""

from __future__ import annotations

import asyncio

import pytest
import torch

from toolgym.agents.engines import SamplingParams
from toolgym.agents.engines.hf import BadRequestError, HFEngine


@pytest.fixture(scope="module")
def engine(tiny_model_dir):
    return HFEngine(tiny_model_dir, seed=0)


def prompt(engine, text):
    return engine.tokenizer.encode(text, add_special_tokens=False)


def assert_logprobs_match_a_fresh_forward_pass(engine, prompt_ids, completion):
    sequence = torch.tensor([prompt_ids + completion.token_ids])
    with torch.no_grad():
        logits = engine.model(sequence).logits[0].float()
    targets = torch.tensor(completion.token_ids).unsqueeze(-1)
    fresh = torch.log_softmax(logits, -1)[len(prompt_ids) - 1 : -1].gather(-1, targets).squeeze(-1)
    assert torch.allclose(fresh, torch.tensor(completion.logprobs), atol=1e-4), (
        (fresh - torch.tensor(completion.logprobs)).abs().max()
    )


def test_logprobs_match_a_fresh_forward_pass(engine):
    prompts = [
        prompt(engine, t)
        for t in ("Map:\n#@.#", "What is 3 + 4?", "You moved north. Position: row 1")
    ]

    async def main():
        return await asyncio.gather(
            *(
                engine.generate(p, SamplingParams(max_tokens=24, seed=i))
                for i, p in enumerate(prompts)
            )
        )

    completions = asyncio.run(main())
    for p, c in zip(prompts, completions, strict=True):
        assert len(c.token_ids) == len(c.logprobs) == 24 and c.finish_reason == "length"
        sequence = torch.tensor([p + c.token_ids])
        with torch.no_grad():
            logits = engine.model(sequence).logits[0].float()
        fresh = (
            torch.log_softmax(logits, -1)[len(p) - 1 : -1]
            .gather(-1, torch.tensor(c.token_ids).unsqueeze(-1))
            .squeeze(-1)
        )
        assert torch.allclose(fresh, torch.tensor(c.logprobs), atol=1e-4), (
            (fresh - torch.tensor(c.logprobs)).abs().max()
        )


def test_seeded_results_do_not_depend_on_batch_mates(engine):
    p = prompt(engine, "Find the goal.")
    others = [prompt(engine, "x" * k) for k in range(1, 9)]

    async def alone():
        return await engine.generate(
            p, SamplingParams(max_tokens=16, seed=7, temperature=0.9, top_p=0.9)
        )

    async def crowded():
        results = await asyncio.gather(
            engine.generate(p, SamplingParams(max_tokens=16, seed=7, temperature=0.9, top_p=0.9)),
            *(
                engine.generate(o, SamplingParams(max_tokens=16, seed=k))
                for k, o in enumerate(others)
            ),
        )
        return results[0]

    solo, batched = asyncio.run(alone()), asyncio.run(crowded())
    assert solo.token_ids == batched.token_ids
    assert solo.logprobs == pytest.approx(batched.logprobs, abs=1e-4)


def test_concurrent_requests_share_the_batch_and_short_ones_return_first(engine):
    order = []

    async def ask(i, max_tokens):
        sampling = SamplingParams(max_tokens=max_tokens, temperature=0)
        c = await engine.generate(prompt(engine, f"task {i}"), sampling)
        order.append(max_tokens)
        return c

    async def main():
        return await asyncio.gather(*(ask(i, 2 if i % 2 else 40) for i in range(20)))

    results = asyncio.run(main())
    assert all(len(c.token_ids) == 2 for c in results[1::2])
    assert all(len(c.token_ids) > 2 for c in results[::2])
    assert engine.peak_batch_size > 1
    assert order[:10] == [2] * 10  # short answers come back while long ones still decode


def test_requests_join_a_running_batch(engine):
    long_prompt, short_prompt = (
        prompt(engine, "a long answer"),
        prompt(engine, "a short answer, please"),
    )

    async def main():
        long = asyncio.ensure_future(
            engine.generate(long_prompt, SamplingParams(max_tokens=200, seed=1))
        )
        await asyncio.sleep(0.05)  # the long request is decoding now
        short = await engine.generate(short_prompt, SamplingParams(max_tokens=3, seed=2))
        return short, long.done(), await long

    short, long_done_when_short_returned, long = asyncio.run(main())
    assert (
        len(short.token_ids) == 3 and not long_done_when_short_returned and len(long.token_ids) > 3
    )
    # Merging the newcomer's cache into the running batch changed nobody's numbers.
    assert_logprobs_match_a_fresh_forward_pass(engine, short_prompt, short)
    assert_logprobs_match_a_fresh_forward_pass(engine, long_prompt, long)


def test_stops_at_end_of_turn_tokens_and_stop_strings(engine):
    p = prompt(engine, "Hello")
    im_end = engine.tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert im_end in engine.end_ids

    async def main():
        greedy = await engine.generate(p, SamplingParams(max_tokens=8, temperature=0))
        first = greedy.token_ids[0]
        stopped = await engine.generate(
            p, SamplingParams(max_tokens=8, temperature=0, stop_token_ids=[first])
        )
        word = engine.tokenizer.decode(greedy.token_ids[:2])
        by_string = await engine.generate(
            p, SamplingParams(max_tokens=8, temperature=0, stop=[word])
        )
        return greedy, stopped, by_string

    greedy, stopped, by_string = asyncio.run(main())
    assert stopped.token_ids == greedy.token_ids[:1] and stopped.finish_reason == "stop"
    assert by_string.finish_reason == "stop" and len(by_string.token_ids) <= 2


def test_bad_requests_are_refused_in_words(engine):
    async def ask(ids, **kw):
        return await engine.generate(ids, SamplingParams(**kw))

    with pytest.raises(BadRequestError, match="the prompt is empty"):
        asyncio.run(ask([]))
    with pytest.raises(BadRequestError, match="must be integers in"):
        asyncio.run(ask([10**9]))
    with pytest.raises(BadRequestError, match="exceeds the model's context of 4096 tokens"):
        asyncio.run(ask([1] * 4000, max_tokens=200))
    with pytest.raises(BadRequestError, match="no LoRA adapter named 'nope'"):
        asyncio.run(engine.generate([1, 2], SamplingParams(), adapter="nope"))


def test_closing_the_engine_fails_waiting_requests_and_it_restarts_on_demand(tiny_model_dir):
    engine = HFEngine(tiny_model_dir)

    async def main():
        pending = asyncio.ensure_future(
            engine.generate(prompt(engine, "x"), SamplingParams(max_tokens=4000 - 10, seed=0))
        )
        await asyncio.sleep(0.1)
        await engine.aclose()
        with pytest.raises(Exception, match="the engine was closed"):
            await pending
        again = await engine.generate(prompt(engine, "y"), SamplingParams(max_tokens=2))
        await engine.aclose()
        return again

    assert len(asyncio.run(main()).token_ids) == 2


def test_update_weights_changes_the_policy_and_its_version(tiny_model_dir):
    engine = HFEngine(tiny_model_dir)
    ids = prompt(engine, "Keys held: 0.")
    ask = SamplingParams(max_tokens=4, temperature=0)

    async def before_and_after():
        first = await engine.generate(ids, ask)
        state = {k: v.clone() for k, v in engine.model.state_dict().items()}
        torch.manual_seed(1)
        state["model.norm.weight"] = (
            state["model.norm.weight"] * torch.rand_like(state["model.norm.weight"]) * 3
        )
        await engine.update_weights(state)
        second = await engine.generate(ids, ask)
        await engine.aclose()
        return first, second

    first, second = asyncio.run(before_and_after())
    assert first.logprobs != pytest.approx(second.logprobs, abs=1e-3)


def save_adapter(model_dir, path, modules):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(model_dir)
    config = LoraConfig(r=4, lora_alpha=16, target_modules=modules, init_lora_weights=False)
    get_peft_model(base, config).save_pretrained(path)
    return str(path)


def test_adapters_unloaded_to_none_and_loaded_again_keep_serving(tiny_model_dir, tmp_path):
    """A trainer swaps adapters on a shared server (load the new, unload the old); once the
    last is gone and another loads, the base model and the new adapter still answer."""
    engine = HFEngine(tiny_model_dir)
    wide = save_adapter(tiny_model_dir, tmp_path / "wide", ["q_proj", "k_proj", "v_proj", "o_proj"])
    narrow = save_adapter(tiny_model_dir, tmp_path / "narrow", ["q_proj", "v_proj"])
    ids, ask = prompt(engine, "Go north."), SamplingParams(max_tokens=4, temperature=0)

    def answer(adapter=None):
        return asyncio.wait_for(engine.generate(ids, ask, adapter), 60)

    async def main():
        base = (await answer()).logprobs
        await engine.load_adapter("policy-1", wide)
        await engine.load_adapter("policy-2", wide)
        await engine.unload_adapter("policy-1")
        assert (await answer("policy-2")).logprobs != base
        await engine.unload_adapter("policy-2")
        await engine.load_adapter("narrow", narrow)
        again, adapted = (await answer()).logprobs, (await answer("narrow")).logprobs
        await engine.aclose()
        return base, again, adapted

    base, again, adapted = asyncio.run(main())
    assert again == pytest.approx(base, abs=1e-5) and adapted != pytest.approx(base, abs=1e-3)


def test_a_failure_before_a_request_joins_the_batch_fails_it_instead_of_hanging(
    tiny_model_dir, monkeypatch
):
    engine = HFEngine(tiny_model_dir)

    def broken(joining, adapter):
        raise RuntimeError("injected")

    async def main():
        with monkeypatch.context() as patch:
            patch.setattr(engine, "_resume", broken)
            with pytest.raises(Exception, match="generation failed: RuntimeError: injected"):
                await asyncio.wait_for(engine.generate([5, 6], SamplingParams(max_tokens=2)), 60)
        served = await engine.generate([5, 6], SamplingParams(max_tokens=2))
        await engine.aclose()
        return served

    assert len(asyncio.run(main()).token_ids) == 2
