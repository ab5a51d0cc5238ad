"""The openai engine over real HTTP: exact ids and logprobs from `toolgym serve model`,
retries with backoff against a flaky server, and `toolgym eval` end to end."""

from __future__ import annotations

import asyncio
import json

import pytest
import torch
from aiohttp import web

from conftest import free_port
from toolgym.agents.engines import EngineError, SamplingParams
from toolgym.agents.engines.openai_http import OpenAIEngine
from toolgym.agents.trajectory import read_jsonl
from toolgym.envs.maze import MazeEnv


def test_token_ids_and_logprobs_over_http_match_a_local_forward_pass(
    model_server, tool_calling_model_dir
):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tool_calling_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tool_calling_model_dir)
    prompt = tokenizer.encode("You moved north. Position:", add_special_tokens=False)

    async def main():
        engine = OpenAIEngine(model_server, "tiny")
        try:
            return await engine.generate(prompt, SamplingParams(max_tokens=12, seed=5))
        finally:
            await engine.aclose()

    completion = asyncio.run(main())
    assert len(completion.token_ids) == len(completion.logprobs) > 0
    with torch.no_grad():
        logits = model(torch.tensor([prompt + completion.token_ids])).logits[0].float()
    fresh = (
        torch.log_softmax(logits, -1)[len(prompt) - 1 : -1]
        .gather(-1, torch.tensor(completion.token_ids).unsqueeze(-1))
        .squeeze(-1)
    )
    assert torch.allclose(fresh, torch.tensor(completion.logprobs), atol=1e-4)


def serve(app: web.Application, port: int):
    runner = web.AppRunner(app)

    async def start():
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()

    return runner, start


def test_retries_with_backoff_then_succeeds_and_4xx_fails_at_once():
    calls = {"n": 0}

    async def flaky(request):
        calls["n"] += 1
        if calls["n"] <= 2:
            return web.json_response({"error": {"message": "overloaded"}}, status=503)
        body = await request.json()
        return web.json_response(
            {
                "choices": [
                    {
                        "text": "ok",
                        "token_ids": [7, 8],
                        "logprobs": {"token_logprobs": [-0.5, -0.25]},
                        "finish_reason": "length",
                    }
                ],
                "echo": body,
            }
        )

    async def refuse(request):
        return web.json_response({"error": {"message": "prompt too long"}}, status=400)

    async def old_server(request):
        return web.json_response({"choices": [{"text": "ok", "finish_reason": "stop"}]})

    app = web.Application()
    app.router.add_post("/v1/completions", flaky)
    app.router.add_post("/bad/v1/completions", refuse)
    app.router.add_post("/old/v1/completions", old_server)
    port = free_port()

    async def main():
        runner, start = serve(app, port)
        await start()
        try:
            engine = OpenAIEngine(f"http://127.0.0.1:{port}", "m", backoff_s=0.01)
            completion = await engine.generate([1, 2], SamplingParams(max_tokens=2))
            with pytest.raises(EngineError, match="answered 400: prompt too long"):
                await OpenAIEngine(f"http://127.0.0.1:{port}/bad/v1", "m", backoff_s=0.01).generate(
                    [1], SamplingParams()
                )
            with pytest.raises(EngineError, match="did not return token ids"):
                await OpenAIEngine(f"http://127.0.0.1:{port}/old", "m").generate(
                    [1], SamplingParams()
                )
            await engine.aclose()
            return completion
        finally:
            await runner.cleanup()

    completion = asyncio.run(main())
    assert calls["n"] == 3
    assert (
        completion.token_ids == [7, 8]
        and completion.logprobs == [-0.5, -0.25]
        and completion.finish_reason == "length"
    )


def test_unreachable_server_fails_after_its_retries():
    async def main():
        engine = OpenAIEngine(f"http://127.0.0.1:{free_port()}", "m", max_retries=2, backoff_s=0.01)
        try:
            await engine.generate([1], SamplingParams())
        finally:
            await engine.aclose()

    with pytest.raises(EngineError, match="failed after 3 attempts: ClientConnectorError"):
        asyncio.run(main())


def test_eval_over_http_then_show_the_trajectories(
    cli, model_server, tool_calling_model_dir, tmp_path
):
    out = tmp_path / "eval.jsonl"
    result = cli(
        "eval", "toolgym/Maze-v0", "--engine", "openai", "--base-url", f"{model_server}/v1", "--model", "tiny",
        "--tokenizer", str(tool_calling_model_dir), "-n", "6", "--max-tokens", "24", "--max-turns", "2", "--out", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert (
        "success" in result.stdout
        and "valid tool calls" in result.stdout
        and str(out) in result.stdout.replace("\n", "")
    )
    trajectories = read_jsonl(out)
    assert len(trajectories) == 6 and all(not t.masked and len(t.steps) >= 1 for t in trajectories)
    # The eval split's first six tasks: generated mazes training never draws.
    eval_seeds = {d.seed for d in MazeEnv().task_source().head("eval", 6)}
    assert {t.seed for t in trajectories} == eval_seeds
    shown = cli("rollouts", "show", str(out), "--index", "2")
    assert shown.returncode == 0
    assert (
        "toolgym/Maze-v0:eval:2:0" in shown.stdout
        and "assistant" in shown.stdout
        and "tokens in all" in shown.stdout
    )
    missing = cli("rollouts", "show", str(tmp_path / "nope.jsonl"))
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    assert json.loads(out.read_text().splitlines()[0])["env_id"] == "toolgym/Maze-v0"
