"""toolgym/MCP-v0 (an env from an MCP server, a task list and a reward, with no Python),
which trains, and `toolgym serve mcp` (an env's tools as an MCP server) answering the MCP
SDK's own client over stdio and streamable HTTP, one env per client session."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import anyio
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

import toolgym
from conftest import FIXTURES, free_port, run_ok
from toolgym.errors import ConfigError
from toolgym.tools import ToolCall

SERVER = [sys.executable, str(FIXTURES / "mcp" / "server.py")]
ADD = {"command": SERVER, "tools": ["add"]}


def add_tasks(n: int) -> list[dict]:
    return [
        {"question": f"What is {a} + {b}?", "answer": a + b,
         "calls": [{"name": "add", "arguments": {"a": a, "b": b}}]}
        for a, b in ((i * 7 % 50, i * 13 % 40) for i in range(n))
    ]  # fmt: skip


def play(env, name, **arguments):
    return env.step(env.parser.render([ToolCall(name, arguments)]))


def test_the_default_calculator_serves_every_episode_alike():
    """The default server is one process shared by every episode: each episode's calls are
    answered, however many episodes came before (a shared served episode ran out of turns
    and refused every call from the fifth on)."""
    env = toolgym.make("toolgym/MCP-v0")
    try:
        for seed in range(6):
            env.reset(seed=seed)
            for _ in range(2):
                obs, reward, terminated, _, info = play(env, "calculator", expression="6 * 7")
                assert obs[0]["content"].startswith("42"), obs
                assert info["valid_action"] and not terminated and info["infra_error"] is None
    finally:
        env.close()


def test_an_env_from_a_server_tasks_and_a_reward(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in add_tasks(20)))
    env = toolgym.make("toolgym/MCP-v0", server=ADD, tasks=str(path), reward="number")
    try:
        obs, info = env.reset(seed=0)
        assert [s["function"]["name"] for s in info["tools"]] == ["answer", "add"]
        question = obs[-1]["content"]
        a, b = (int(x) for x in question.removeprefix("What is ").rstrip("?").split(" + "))
        obs, reward, terminated, _, _ = play(env, "add", a=a, b=b)
        assert obs[0]["content"] == str(a + b) and (reward, terminated) == (0.0, False)
        _, reward, terminated, _, _ = play(env, "answer", text=f"It is {a + b}.")
        assert (reward, terminated) == (1.0, True)
        env.reset(seed=1)
        assert play(env, "answer", text="no idea")[1] == 0.0
        assert env.unwrapped.task_source().size("eval") == 2  # held out by content
    finally:
        env.close()


def test_rewards_by_name_and_a_users_function_that_misbehaves():
    tasks = [{"question": "Capital of France?", "answer": ["Paris", "paris, france"]}] * 2
    tasks.append({"question": "Say hi", "answer": "hi"})
    for reward, text, expected in [("exact", " PARIS. ", 1.0), ("exact", "Paris!", 0.0),
                                   ("contains", "It is Paris.", 1.0),
                                   ("contains", "Parisian", 0.0),  # whole words only
                                   # every candidate listed is not an answer
                                   ("contains", ", ".join(["London", "Rome", "Paris", "Berlin", "Oslo",
                                    "Bern", "Madrid", "Vienna", "Prague", "Athens", "Dublin"]), 0.0)]:  # fmt: skip
        env = toolgym.make("toolgym/MCP-v0", server=ADD, tasks=tasks, reward=reward)
        env.reset(options={"task": tasks[0]})
        assert play(env, "answer", text=text)[1] == expected, (reward, text)
        env.close()
    env = toolgym.make(
        "toolgym/MCP-v0", server=ADD, tasks=tasks, reward="fixture_rewards:nan_answer_reward"
    )
    env.reset(options={"task": tasks[0]})
    with pytest.raises(
        ConfigError, match="fixture_rewards:nan_answer_reward returned nan, not a finite"
    ):
        play(env, "answer", text="Paris")
    env.close()
    with pytest.raises(ConfigError, match="unknown reward 'exactly'"):
        toolgym.make("toolgym/MCP-v0", server=ADD, tasks=tasks, reward="exactly")


@pytest.mark.timeout(1500)  # the shared base, when this test is the first to need it
def test_sft_then_two_training_steps_on_an_sdk_server_over_stdio_and_http(
    pretrained_base, tmp_path
):
    """The shared tiny base learns the server's `add` from the tasks' reference calls, and
    trains on it through either transport."""
    port = free_port()
    log = (tmp_path / "server.log").open("w")
    http = subprocess.Popen([*SERVER, "http", str(port)], stdout=log, stderr=log)
    try:
        tasks = tmp_path / "tasks.jsonl"
        tasks.write_text("".join(json.dumps(t) + "\n" for t in add_tasks(40)))
        stdio = f"server={{command: [{SERVER[0]}, {SERVER[1]}], tools: [add]}}"
        run_ok("sft", "toolgym/MCP-v0", "--model", str(pretrained_base), "--out",
               str(tmp_path / "sft"), "--episodes", "64", "--epochs", "8", "--lr", "3e-3",
               "--env-arg", stdio, "--env-arg", f"tasks={tasks}", "--env-arg", "reward=number",
               "--env-arg", "max_turns=3")  # fmt: skip
        for name, server in [
            ("stdio", stdio),
            ("http", f"server={{url: http://127.0.0.1:{port}/mcp, tools: [add]}}"),
        ]:
            run = tmp_path / name
            run_ok("train", f"model={tmp_path / 'sft'}", f"run_dir={run}", "steps=2",
                   "env.id=toolgym/MCP-v0", f"env.kwargs.{server}", f"env.kwargs.tasks={tasks}",
                   "env.kwargs.reward=number", "env.kwargs.max_turns=3",
                   "rollout.tasks_per_step=4", "rollout.rollouts_per_task=2",
                   "rollout.max_tokens=48",
                   "optim.micro_batch_size=4", "eval.every_steps=5", "eval.episodes=2")  # fmt: skip
            rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
            assert {r["step"] for r in rows if "train/loss" in r} == {1, 2}
            steps = [
                json.loads(line)
                for f in sorted((run / "rollouts").glob("*.jsonl"))
                for line in f.read_text().splitlines()
            ]
            called = [c["name"] for t in steps for s in t["steps"] for c in s["tool_calls"]]
            assert "add" in called, (name, called[:20])
    finally:
        http.kill()
        log.close()


async def sdk_calls(client: Client) -> dict:
    listed = await client.list_tools()
    names = [t.name for t in listed.tools]
    described = await client.call_tool("describe_table", {"table": "no_such_table"})
    unknown = await client.call_tool("no_such_tool", {})
    return {"names": names, "described": described, "unknown": unknown}


def test_serve_mcp_over_stdio_answers_the_sdk_client():
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "toolgym", "serve", "mcp", "toolgym/SQL-v0"]
    )

    async def main():
        async with Client(stdio_client(params)) as client:
            found = await sdk_calls(client)
            assert found["names"] == ["run_sql", "describe_table", "submit"]
            assert found["described"].is_error
            assert found["described"].meta["toolgym"]["error"] == "invalid_arguments"
            assert found["unknown"].is_error and "unknown tool" in found["unknown"].content[0].text
            rows = await client.call_tool("run_sql", {"query": "SELECT 1 + 1"})
            assert not rows.is_error and "2" in rows.content[0].text
            bad = await client.call_tool("run_sql", {"query": 7})
            assert bad.is_error and "query" in bad.content[0].text
            return client.instructions

    instructions = anyio.run(main)
    assert "run_sql" in instructions  # the env's system prompt and task


def test_serve_mcp_refuses_an_env_without_tools(cli):
    result = cli("serve", "mcp", "fixture_envs:fixture/WrongArity-v0")
    assert result.returncode != 0 and "is not a tool env" in result.stderr + result.stdout
    assert "Traceback" not in result.stderr


def test_serve_mcp_over_http_keeps_one_env_per_session(tmp_path):
    """A handshake-era client's session keeps its Python variables; another session does not
    see them; a sessionless (2026-07-28) client gets a fresh episode per call."""
    port = free_port()
    log = (tmp_path / "serve.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "toolgym", "serve", "mcp", "toolgym/MathCode-v0",
         "--transport", "http", "--port", str(port)],
        stdout=log, stderr=log,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/mcp"

    async def python(client, code):
        result = await client.call_tool("python", {"code": code})
        return result.content[0].text

    async def main():
        deadline = time.monotonic() + 60
        while True:
            try:
                async with Client(url, mode="legacy") as probe:
                    await probe.list_tools()
                break
            except Exception:
                assert time.monotonic() < deadline and server.poll() is None, "no server"
                await anyio.sleep(0.3)
        async with Client(url, mode="legacy") as first, Client(url, mode="legacy") as second:
            assert [t.name for t in (await first.list_tools()).tools] == ["python", "answer"]
            await python(first, "x = 41")
            assert "42" in await python(first, "print(x + 1)")
            assert "NameError" in await python(second, "print(x)")
        async with Client(url) as modern:
            assert "4" in await python(modern, "print(2 + 2)")
            await python(modern, "y = 1")
            assert "NameError" in await python(modern, "print(y)")

    try:
        anyio.run(main)
    finally:
        server.terminate()
        server.wait(20)
        log.close()
