"""The warm start from your own agent: the agent plays through the gateway with a teacher
behind it (a function written for its tools, or a real OpenAI-compatible server on loopback),
each reply recorded in the policy's tokens as its chat template writes it, so the recorded
ids parse back to the very call the teacher made; `toolgym warm-start` fine-tunes on the
solved episodes and saves a model a harness run can start from."""

from __future__ import annotations

import json

import openai
import pytest

from conftest import ROOT, run_cli, run_ok
from toolgym.agents.collector import GroupRequest
from toolgym.agents.engines.base import SamplingParams
from toolgym.agents.gateway.collector import HarnessCollector
from toolgym.agents.gateway.harness import CallableHarness
from toolgym.agents.gateway.result_check import result_check
from toolgym.agents.gateway.server import Gateway
from toolgym.agents.gateway.session import SessionSettings
from toolgym.agents.gateway.teacher import EndpointReplies, FunctionReplies, Teacher
from toolgym.agents.models.loading import load_tokenizer
from toolgym.agents.render import ChatRenderer
from toolgym.agents.runtime import Runtime
from toolgym.agents.serving.chat_reply import ChatReplies
from toolgym.envs.ref import EnvRef
from toolgym.imports import load_callable

EXAMPLES = ROOT / "examples" / "agents"
AGENT = f"{EXAMPLES / 'arithmetic_openai.py'}:solve"
TEACHER = f"{EXAMPLES / 'arithmetic_teacher.py'}:reply"
ARITHMETIC = EnvRef("Arithmetic-v0", "toolgym/Arithmetic-v0", {"n_operands": 2})


def taught(model_dir, replies, tasks: int = 3):
    """The example agent's episodes on the first `tasks` train tasks, `replies` teaching."""
    tokenizer = load_tokenizer(model_dir)
    renderer = ChatRenderer(tokenizer)
    runtime = Runtime()

    async def play():
        gateway = Gateway(Teacher(replies, renderer, tokenizer), renderer, tokenizer)
        await gateway.start()
        pool = runtime.pool_for(ARITHMETIC)
        env = await pool.acquire()
        draws = env.unwrapped.task_source().head("train", tasks)
        pool.release(env)
        collector = HarnessCollector(
            gateway, CallableHarness(load_callable(AGENT, "agent")), result_check("env"),
            SessionSettings(SamplingParams(max_tokens=64), max_calls=4), runtime.pool_for,
        )  # fmt: skip
        try:
            groups = await collector.collect([GroupRequest(ARITHMETIC, d, 1) for d in draws])
        finally:
            await gateway.aclose()
            await replies.aclose()
        return [t for g in groups for t in g.trajectories]

    try:
        return runtime.run(play()), ChatReplies(renderer, tokenizer), tokenizer
    finally:
        runtime.close()


def recorded_reply(traj, step, replies, tokenizer):
    """The assistant message the recorded ids of `step` are, read as the gateway reads a
    sampled reply."""
    ids = traj.token_ids[step.response_start : step.response_end]
    text = tokenizer.decode(ids, skip_special_tokens=True)
    message, _ = replies.assistant_message(text, "stop", use_tools=True)
    return message


def test_a_function_teacher_s_episodes_are_token_exact_solved_demonstrations(tiny_model_dir):
    episodes, replies, tokenizer = taught(
        tiny_model_dir, FunctionReplies(load_callable(TEACHER, "teacher"), "arithmetic")
    )
    assert len(episodes) == 3
    for traj in episodes:
        assert not traj.masked and traj.success, (traj.infra_error, traj.verdict)
        first, last = traj.steps[0], traj.steps[-1]
        question = traj.messages[-1]["content"]
        [call] = recorded_reply(traj, first, replies, tokenizer)["tool_calls"]
        expression = json.loads(call["function"]["arguments"])["expression"]
        assert call["function"]["name"] == "calculator" and expression in question
        assert first.tool_calls == [{"name": "calculator", "arguments": {"expression": expression}}]
        answer = recorded_reply(traj, last, replies, tokenizer)["content"]
        assert answer == traj.answer == first.observation[-1]["content"] == traj.expected
        for step in traj.steps:  # nobody sampled them: no log-probabilities to trust
            assert step.logprobs == [0.0] * (step.response_end - step.response_start)


def test_an_endpoint_teacher_s_replies_are_recorded_as_it_gave_them(
    model_server, tool_calling_model_dir
):
    """`toolgym serve model` as the teacher: the first recorded reply is the one the server
    gives the same messages directly (greedy)."""
    episodes, replies, tokenizer = taught(
        tool_calling_model_dir, EndpointReplies(f"{model_server}/v1", "tiny"), tasks=1
    )
    [traj] = episodes
    assert not traj.masked, traj.infra_error
    import arithmetic_openai  # loaded by the agent's path above

    client = openai.OpenAI(base_url=f"{model_server}/v1", api_key="unused", max_retries=0)
    direct = (
        client.chat.completions.create(
            model="tiny", messages=traj.messages, tools=arithmetic_openai.TOOLS, temperature=0
        )
        .choices[0]
        .message
    )
    calls = [{"name": c.function.name, "arguments": json.loads(c.function.arguments)}
             for c in direct.tool_calls or []]  # fmt: skip
    expected = replies.written(direct.content or "", calls)
    first = traj.steps[0]
    ids = traj.token_ids[first.response_start : first.response_end]
    recorded = tokenizer.decode(ids, skip_special_tokens=True)
    # the same reply, in the policy's tokens; cut where the agent's max_tokens cut it
    assert recorded and expected.startswith(recorded)
    assert recorded == expected or first.finish_reason == "length"


def test_toolgym_warm_start_fine_tunes_on_the_solved_episodes(tiny_model_dir, tmp_path):
    out = tmp_path / "sft"
    printed = run_ok(
        "warm-start", "--config", str(ROOT / "configs" / "harness_arithmetic.yaml"),
        f"model={tiny_model_dir}", f"harness.agent={AGENT}", "--teacher", TEACHER,
        "--episodes", "6", "--epochs", "1", "--out", str(out),
    )  # fmt: skip
    assert "6 episodes (6 solved)" in printed and "solved kept" in printed
    assert (out / "config.json").exists() and (out / "toolgym_env.json").exists()
    # a teacher that solves nothing leaves nothing to imitate: said in one line
    refused = run_cli(
        "warm-start", "--config", str(ROOT / "configs" / "harness_arithmetic.yaml"),
        f"model={tiny_model_dir}", f"harness.agent={AGENT}", "--teacher",
        f"{EXAMPLES / 'arithmetic_tools.py'}:calculator", "--episodes", "2",
        "--out", str(tmp_path / "none"),
    )  # fmt: skip
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "gave no episode to imitate" in refused.stderr, refused.stderr[-2000:]
    assert not (tmp_path / "none").exists()


@pytest.mark.parametrize("spec", ["no-colon-here", "ftp://host/v1"])
def test_a_teacher_that_names_nothing_is_refused_in_one_line(spec, tiny_model_dir, tmp_path):
    result = run_cli(
        "warm-start", "--config", str(ROOT / "configs" / "harness_arithmetic.yaml"),
        f"model={tiny_model_dir}", "--teacher", spec, "--out", str(tmp_path / "x"),
    )  # fmt: skip
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "--teacher" in result.stderr
