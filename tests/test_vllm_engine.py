"""The in-process vLLM engine on the real vLLM (its CPU build here, `make vllm`): every path
a rollout or a trainer takes, checked against transformers running the same weights."""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
import torch
from test_gateway import Recorded
from transformers import AutoModelForCausalLM, AutoTokenizer

import fixture_envs
import toolgym
from conftest import ROOT, LoopThread
from toolgym.agents.engines import EngineError, SamplingParams, make_engine
from toolgym.agents.policy_gate import PolicyGate
from toolgym.agents.render import ChatRenderer
from toolgym.agents.rollout import EpisodeRequest, RolloutConfig, run_episode
from toolgym.agents.trajectory import EpisodeEnd

PROMPT = list(range(40, 120))
"""Long enough to fill two of vLLM's 32-token cache blocks (only whole blocks are cached)."""
FLOAT32_GAP = 1e-4
"""The largest gap allowed between vLLM's and transformers' log-probability of a token, both
in float32 (measured: under 1e-6)."""


@pytest.fixture(scope="module")
def loop():
    thread = LoopThread()
    yield thread
    thread.close()


@pytest.fixture(scope="module")
def engine(mini_model_dir, loop):
    engine = loop.call(start(mini_model_dir), timeout=300)
    yield engine
    loop.call(engine.aclose())


async def start(model_dir, **kwargs):
    return make_engine("vllm", model=str(model_dir), dtype="float32", **kwargs)


def learner_logprobs(model, prompt: list[int], ids: list[int]) -> list[float]:
    """transformers' log-probabilities of `ids` after `prompt` (as the trainer computes them)."""
    with torch.no_grad():
        logits = model(torch.tensor([prompt + ids])).logits[0].float()
    logprobs = torch.log_softmax(logits, -1)
    return [logprobs[len(prompt) - 1 + i, t].item() for i, t in enumerate(ids)]


def largest_gap(a: list[float], b: list[float]) -> float:
    assert len(a) == len(b) > 0
    return max(abs(x - y) for x, y in zip(a, b, strict=True))


def test_without_vllm_the_engine_says_how_to_get_it():
    code = (
        "import sys; sys.modules['vllm'] = None\n"
        "from toolgym.agents.engines import make_engine\n"
        "make_engine('vllm', model='unused')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 1
    assert "pip install 'toolgym[vllm]' on a GPU machine, `make vllm`" in done.stderr


def test_a_head_size_vllms_cpu_attention_rejects_is_refused_before_vllm_starts(tiny_model_dir):
    with pytest.raises(EngineError, match=r"heads of size 16.*--size mini"):
        make_engine("vllm", model=str(tiny_model_dir))


def test_generation_matches_transformers_and_honours_seeds_and_limits(engine, loop, mini_model_dir):
    model = AutoModelForCausalLM.from_pretrained(mini_model_dir).eval()
    sampled = loop.call(engine.generate(PROMPT, SamplingParams(max_tokens=16, seed=7)))
    assert len(sampled.token_ids) == len(sampled.logprobs) == 16
    assert sampled.finish_reason == "length" and sampled.prompt_tokens == len(PROMPT)
    assert (
        largest_gap(sampled.logprobs, learner_logprobs(model, PROMPT, sampled.token_ids))
        < FLOAT32_GAP
    )
    again = loop.call(engine.generate(PROMPT, SamplingParams(max_tokens=16, seed=7)))
    other = loop.call(engine.generate(PROMPT, SamplingParams(max_tokens=16, seed=8)))
    assert again.token_ids == sampled.token_ids and other.token_ids != sampled.token_ids
    short = loop.call(engine.generate(PROMPT, SamplingParams(max_tokens=3, seed=7)))
    assert short.token_ids == sampled.token_ids[:3] and short.finish_reason == "length"
    greedy = loop.call(engine.generate(PROMPT, SamplingParams(max_tokens=8, temperature=0)))
    reference = model.generate(torch.tensor([PROMPT]), max_new_tokens=8, do_sample=False)
    assert greedy.token_ids == reference[0, len(PROMPT) :].tolist()
    tops = loop.call(engine.generate(PROMPT, SamplingParams(max_tokens=4, seed=7, top_logprobs=3)))
    assert tops.top_logprobs is not None and all(len(t) == 3 for t in tops.top_logprobs)
    assert all(
        max(t.values()) >= lp for t, lp in zip(tops.top_logprobs, tops.logprobs, strict=True)
    )


def test_many_long_seeded_prompts_at_once_all_complete(engine, loop):
    """16 prompts of 600+ tokens at once, each with its seed, as a rollout's turns come:
    prefilled in chunks, vLLM's CPU build killed its engine on such a batch."""
    starts = [[(11 * k + 3 * i) % 900 + 20 for i in range(600 + 7 * k)] for k in range(16)]

    async def all_at_once():
        return await asyncio.gather(
            *(
                engine.generate(s, SamplingParams(max_tokens=8, seed=k))
                for k, s in enumerate(starts)
            )
        )

    assert all(len(c.token_ids) == 8 for c in loop.call(all_at_once()))


def test_stop_ids_and_stop_strings_end_the_completion_with_their_tokens(
    engine, loop, mini_model_dir
):
    tokenizer = AutoTokenizer.from_pretrained(mini_model_dir)
    free = loop.call(engine.generate(PROMPT, SamplingParams(max_tokens=16, seed=7)))
    stop_id = free.token_ids[5]
    first = free.token_ids.index(stop_id)
    by_id = loop.call(
        engine.generate(PROMPT, SamplingParams(max_tokens=16, seed=7, stop_token_ids=[stop_id]))
    )
    assert by_id.token_ids == free.token_ids[: first + 1] and by_id.finish_reason == "stop"
    stop = tokenizer.decode(free.token_ids[6:8])
    by_text = loop.call(engine.generate(PROMPT, SamplingParams(max_tokens=16, seed=7, stop=[stop])))
    assert by_text.finish_reason == "stop" and by_text.text.endswith(stop)
    assert by_text.token_ids == free.token_ids[: len(by_text.token_ids)]
    assert stop in tokenizer.decode(by_text.token_ids) and stop not in tokenizer.decode(
        by_text.token_ids[:-1]
    )


def test_bad_requests_are_refused_with_a_clear_error(engine, loop):
    for prompt, params, message in [
        ([], SamplingParams(), "the prompt is empty"),
        ([5, 10**9], SamplingParams(), "prompt token ids must be integers"),
        (PROMPT, SamplingParams(max_tokens=0), "max_tokens must be at least 1"),
        (PROMPT, SamplingParams(max_tokens=10**6), "exceeds the model's context"),
    ]:
        with pytest.raises(EngineError, match=message):
            loop.call(engine.generate(prompt, params))
    with pytest.raises(EngineError, match="no LoRA adapter named 'nope'"):
        loop.call(engine.generate(PROMPT, SamplingParams(max_tokens=2), adapter="nope"))
    assert loop.call(engine.generate(PROMPT, SamplingParams(max_tokens=2))).token_ids


def test_a_multi_turn_episode_extends_its_tokens_and_hits_the_prefix_cache(
    engine, loop, mini_model_dir
):
    renderer = ChatRenderer(AutoTokenizer.from_pretrained(mini_model_dir))
    recording = Recorded(engine)
    env = toolgym.make("toolgym/Maze-v0", size=3, max_turns=4)
    config = RolloutConfig(SamplingParams(max_tokens=24, seed=1))
    trajectory = loop.call(run_episode(env, recording, renderer, config, EpisodeRequest(seed=3)))
    assert not trajectory.masked and len(recording.calls) >= 2
    for (prompt, completion), (later, _) in itertools.pairwise(recording.calls):
        assert later[: len(prompt) + len(completion.token_ids)] == prompt + completion.token_ids
    assert trajectory.token_ids[: len(recording.calls[-1][0])] == recording.calls[-1][0]
    later_turns = [completion for _, completion in recording.calls[1:]]
    assert all(c.cached_tokens >= 32 for c in later_turns), [c.cached_tokens for c in later_turns]


def test_a_full_weight_sync_makes_generation_follow_the_new_weights(engine, loop, mini_model_dir):
    model = AutoModelForCausalLM.from_pretrained(mini_model_dir).eval()
    before = loop.call(engine.generate(PROMPT, SamplingParams(max_tokens=12, seed=3)))
    cached = loop.call(engine.generate(PROMPT, SamplingParams(max_tokens=12, seed=3)))
    assert cached.cached_tokens >= 64
    torch.manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():  # the tied embeddings and head included
            parameter.add_(torch.randn_like(parameter) * 0.05)
    try:
        loop.call(engine.update_weights(model.state_dict()))
        after = loop.call(engine.generate(PROMPT, SamplingParams(max_tokens=12, seed=3)))
        assert after.cached_tokens == 0  # the old weights' cache was dropped
        assert (
            largest_gap(after.logprobs, learner_logprobs(model, PROMPT, after.token_ids))
            < FLOAT32_GAP
        )
        assert (
            largest_gap(before.logprobs, learner_logprobs(model, PROMPT, before.token_ids)) > 1e-2
        )
    finally:
        original = AutoModelForCausalLM.from_pretrained(mini_model_dir)
        loop.call(engine.update_weights(original.state_dict()))
    restored = loop.call(engine.generate(PROMPT, SamplingParams(max_tokens=12, seed=3)))
    assert restored.token_ids == before.token_ids


def test_a_weight_sync_inside_an_episode_lands_between_its_turns(engine, loop, mini_model_dir):
    """Partial rollouts: each turn holds the policy gate, a sync waits for the turn in flight
    and the next turn samples from the new weights, stamped with their version."""
    renderer = ChatRenderer(AutoTokenizer.from_pretrained(mini_model_dir))
    recording, gate = Recorded(engine), PolicyGate()
    env = fixture_envs.SlowMaze(tool_s=0.5, size=3, max_turns=4)
    config = RolloutConfig(SamplingParams(max_tokens=24, seed=1), gate=gate, hold_turns=True)
    old = AutoModelForCausalLM.from_pretrained(mini_model_dir).eval()
    new = AutoModelForCausalLM.from_pretrained(mini_model_dir).eval()
    torch.manual_seed(1)
    with torch.no_grad():
        for parameter in new.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.05)
    episode = asyncio.run_coroutine_threadsafe(
        run_episode(env, recording, renderer, config, EpisodeRequest(seed=3)), loop.loop
    )
    deadline = time.monotonic() + 60
    while not recording.calls:  # the first turn is in
        assert time.monotonic() < deadline and not episode.done()
        time.sleep(0.01)
    try:
        loop.call(gate.swap(lambda: engine.update_weights(new.state_dict())))
        trajectory = episode.result(timeout=120)
    finally:
        loop.call(engine.update_weights(old.state_dict()))
    versions = [step.policy_version for step in trajectory.steps]
    assert not trajectory.masked and versions[0] == 0 and versions[-1] == 1, versions
    for step, (prompt, completion) in zip(trajectory.steps, recording.calls, strict=True):
        weights = new if step.policy_version else old
        assert (
            largest_gap(
                completion.logprobs, learner_logprobs(weights, prompt, completion.token_ids)
            )
            < FLOAT32_GAP
        )


def test_a_closed_engine_starts_again_with_the_weights_it_last_synced(engine, loop, mini_model_dir):
    """A trainer closes its engine when its run ends and may evaluate after: the next
    request starts vLLM again, with the trained weights, not the model directory's."""
    trained = AutoModelForCausalLM.from_pretrained(mini_model_dir).eval()
    torch.manual_seed(2)
    with torch.no_grad():
        for parameter in trained.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.05)
    loop.call(engine.update_weights(trained.state_dict()))
    loop.call(engine.aclose())
    try:
        again = loop.call(
            engine.generate(PROMPT, SamplingParams(max_tokens=12, seed=3)), timeout=300
        )
        assert (
            largest_gap(again.logprobs, learner_logprobs(trained, PROMPT, again.token_ids))
            < FLOAT32_GAP
        )
    finally:
        original = AutoModelForCausalLM.from_pretrained(mini_model_dir)
        loop.call(engine.update_weights(original.state_dict()), timeout=300)


def save_adapter(model_dir, out, seed: int):
    """A LoRA adapter with random (non-zero) weights on the attention projections, and the
    adapted model."""
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(seed)
    base = AutoModelForCausalLM.from_pretrained(model_dir)
    config = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                        init_lora_weights=False)  # fmt: skip
    adapted = get_peft_model(base, config).eval()
    adapted.save_pretrained(out)
    return adapted


def test_lora_adapters_load_sample_swap_and_unload(engine, loop, mini_model_dir, tmp_path):
    first = save_adapter(mini_model_dir, tmp_path / "a", seed=1)
    second = save_adapter(mini_model_dir, tmp_path / "b", seed=2)
    plain = loop.call(engine.generate(PROMPT, SamplingParams(max_tokens=10, seed=5)))
    loop.call(engine.load_adapter("policy-1", str(tmp_path / "a")))
    under_first = loop.call(
        engine.generate(PROMPT, SamplingParams(max_tokens=10, seed=5), adapter="policy-1")
    )
    assert (
        largest_gap(under_first.logprobs, learner_logprobs(first, PROMPT, under_first.token_ids))
        < FLOAT32_GAP
    )
    loop.call(engine.load_adapter("policy-2", str(tmp_path / "b")))  # a trainer's swap
    loop.call(engine.unload_adapter("policy-1"))
    under_second = loop.call(
        engine.generate(PROMPT, SamplingParams(max_tokens=10, seed=5), adapter="policy-2")
    )
    assert (
        largest_gap(under_second.logprobs, learner_logprobs(second, PROMPT, under_second.token_ids))
        < FLOAT32_GAP
    )
    assert under_second.logprobs != under_first.logprobs
    with pytest.raises(EngineError, match="no LoRA adapter named 'policy-1'"):
        loop.call(engine.generate(PROMPT, SamplingParams(max_tokens=2), adapter="policy-1"))
    loop.call(engine.unload_adapter("policy-2"))
    assert (
        loop.call(engine.generate(PROMPT, SamplingParams(max_tokens=10, seed=5))).token_ids
        == plain.token_ids
    )
    with pytest.raises(EngineError, match="no LoRA adapter named 'policy-2'"):
        loop.call(engine.unload_adapter("policy-2"))


def engine_processes() -> list[psutil.Process]:
    """The live vLLM engine cores this process started (a stopped engine's may linger as a
    zombie until reaped)."""
    cores = []
    for process in psutil.Process(os.getpid()).children(recursive=True):
        try:
            if process.status() != psutil.STATUS_ZOMBIE and "EngineCore" in process.name():
                cores.append(process)
        except psutil.Error:
            continue
    return cores


def test_an_engine_process_that_dies_mid_call_masks_its_episode(mini_model_dir, tmp_path):
    loop = LoopThread()
    running = {p.pid for p in engine_processes()}  # the module's engine
    dying = loop.call(start(mini_model_dir), timeout=300)
    try:
        renderer = ChatRenderer(AutoTokenizer.from_pretrained(mini_model_dir))
        env = toolgym.make("toolgym/Maze-v0", size=3, max_turns=50)
        config = RolloutConfig(SamplingParams(max_tokens=2000, seed=1), max_context_tokens=4096)
        episode = asyncio.run_coroutine_threadsafe(
            run_episode(env, dying, renderer, config, EpisodeRequest(seed=3)), loop.loop
        )
        deadline = time.monotonic() + 60
        while not dying.engine.output_processor.has_unfinished_requests():  # mid-call
            assert time.monotonic() < deadline and not episode.done(), "no request reached vLLM"
            time.sleep(0.05)
        (core,) = [p for p in engine_processes() if p.pid not in running]
        core.send_signal(signal.SIGKILL)
        trajectory = episode.result(timeout=60)  # it does not hang
        assert trajectory.masked and trajectory.end is EpisodeEnd.INFRA_ERROR
        assert "vLLM failed the request: EngineDeadError" in (trajectory.infra_error or "")
        with pytest.raises(EngineError, match="EngineDeadError"):
            loop.call(dying.generate(PROMPT, SamplingParams(max_tokens=2)), timeout=60)
    finally:
        loop.call(dying.aclose())
        loop.close()
