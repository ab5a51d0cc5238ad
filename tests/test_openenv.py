"""OpenEnv both ways, each against openenv-core's own code: the env its `openenv init`
generates, served by its own server, played through toolgym/OpenEnv-v0; and a toolgym env
served with `toolgym serve env --protocol openenv`, played by openenv-core's own client for a
whole episode, and by anything that sends garbage."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from openenv.core.generic_client import GenericEnvClient
from websockets.asyncio.client import connect

import toolgym
from conftest import free_port, wait_until_answers
from toolgym.envs.arithmetic.calculator import evaluate
from toolgym.errors import ConfigError
from toolgym.tools import ToolCall
from toolgym.tools.tool import InfraError


def start(command: list[str], cwd: Path | None = None) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{command[command.index('--port') + 1]}"
    wait_until_answers(f"{url}/health", process)
    return process, url


def echo_env_server(root: Path) -> tuple[subprocess.Popen, str]:
    """openenv-core's own template env, made by its CLI and served by its own server (with
    four sessions, as the generated app's comment invites)."""
    # its CLI through the interpreter running the tests (not `openenv` by name, which an
    # unactivated venv does not have on PATH)
    subprocess.run([sys.executable, "-m", "openenv.cli", "init", "echo_env"], cwd=root,
                   check=True, capture_output=True)  # fmt: skip
    app = root / "echo_env" / "server" / "app.py"
    app.write_text(app.read_text().replace("max_concurrent_envs=1", "max_concurrent_envs=4"))
    command = [sys.executable, "-m", "uvicorn", "server.app:app", "--port", str(free_port())]
    return start(command, cwd=root / "echo_env")


@pytest.fixture(scope="module")
def echo_server(tmp_path_factory):
    process, url = echo_env_server(tmp_path_factory.mktemp("openenv"))
    yield url
    process.terminate()
    process.wait(10)


@pytest.fixture(scope="module")
def served_arithmetic():
    port = str(free_port())
    command = [sys.executable, "-m", "toolgym", "serve", "env", "toolgym/Arithmetic-v0",
               "--protocol", "openenv", "--port", port, "--max-sessions", "2"]  # fmt: skip
    process, url = start(command)
    yield url
    process.terminate()
    process.wait(10)


def act(env, **arguments):
    return env.step(env.parser.render([ToolCall("act", arguments)]))


def test_the_openenv_init_env_plays_through_openenv_v0(echo_server):
    env = toolgym.make("toolgym/OpenEnv-v0", url=echo_server, max_turns=3)
    obs, info = env.reset(seed=0)
    assert "environment ready" in obs[-1]["content"]
    (schema,) = info["tools"]
    assert schema["function"]["name"] == "act"
    assert list(schema["function"]["parameters"]["properties"]) == ["message"]  # no metadata

    obs, reward, terminated, truncated, info = act(env, message="hello")
    assert reward == pytest.approx(0.5)  # the echo env's own reward: 0.1 per character
    assert json.loads(obs[0]["content"])["echoed_message"] == "hello"
    assert info["valid_action"] and not terminated

    obs, reward, *_, info = act(env, text="hello")  # refused here, by the server's own schema
    assert not info["valid_action"] and reward == 0
    assert "message" in obs[0]["content"]
    *_, truncated, info = act(env, message="again")
    assert truncated
    env.close()

    as_text = toolgym.make("toolgym/OpenEnv-v0", url=echo_server, text_field="message")
    obs, info = as_text.reset(seed=1)
    assert info["tools"] == [] and "whole reply" in obs[0]["content"]
    obs, reward, *_ = as_text.step("hi there")
    assert reward == pytest.approx(0.8)
    as_text.close()


def test_a_server_that_dies_is_an_infrastructure_error(tmp_path):
    process, url = echo_env_server(tmp_path)
    env = toolgym.make("toolgym/OpenEnv-v0", url=url, step_timeout_s=5)
    env.reset(seed=0)
    process.kill()
    process.wait()
    obs, reward, terminated, truncated, info = act(env, message="hello")
    assert info["infra_error"] and "OpenEnv server failed the step" in info["infra_error"]
    with pytest.raises(InfraError, match="could not start an episode"):
        env.reset(seed=1)
    env.close()
    with pytest.raises(ConfigError, match="not both"):
        toolgym.make("toolgym/OpenEnv-v0", url=url, serve="toolgym/Arithmetic-v0")
    for bad in ["http://127.0.0.1:1/\x00", "ftp://host", 7]:
        with pytest.raises(ConfigError, match="url"):
            toolgym.make("toolgym/OpenEnv-v0", url=bad)


def test_openenv_cores_client_plays_a_served_toolgym_env_to_the_end(served_arithmetic):
    async def main():
        async with GenericEnvClient(base_url=served_arithmetic) as client:
            opened = await client.reset(seed=3)
            messages = opened.observation["messages"]
            question = re.search(r"What is (.+)\?", messages[-1]["content"])[1]
            names = [t["function"]["name"] for t in opened.observation["tools"]]
            assert names == ["calculator", "answer"] and not opened.done
            call = ToolCall("calculator", {"expression": question})
            used = await client.step({"message": HERMES.render([call])})
            assert used.observation["messages"][0]["role"] == "tool" and used.reward == 0
            value = evaluate(question)
            assert str(value) in used.observation["messages"][0]["content"]
            done = await client.step(
                {"message": HERMES.render([ToolCall("answer", {"value": value})])}
            )
            assert done.done and done.reward == 1.0 and not done.observation["truncated"]
            state = await client.state()
            assert state["step_count"] == 2
            after = await client.step({"message": "more"})  # the episode is over: said so
            return after

    with pytest.raises(RuntimeError, match="needs reset"):
        asyncio.run(main())


def test_a_served_env_survives_garbage_and_keeps_sessions_apart(served_arithmetic):
    ws_url = served_arithmetic.replace("http", "ws") + "/ws"

    async def main():
        async with connect(ws_url, max_size=None) as one, connect(ws_url) as two:
            replies = []
            for frame in ["not json", json.dumps({"type": "dance"}),
                          json.dumps({"type": "step", "data": {"message": 7}}),
                          json.dumps({"type": "step", "data": {"message": "x" * ((1 << 20) + 1)}}),
                          json.dumps({"type": "step", "data": {"message": "hi", "extra": 1}})]:  # fmt: skip
                await one.send(frame)
                replies.append(json.loads(await one.recv()))
            assert all(r["type"] == "error" for r in replies)
            for ws, seed in ((one, 0), (two, 1)):
                await ws.send(json.dumps({"type": "reset", "data": {"seed": seed}}))
            first = json.loads(await one.recv())["data"]["observation"]["messages"][-1]
            second = json.loads(await two.recv())["data"]["observation"]["messages"][-1]
            assert first["content"] != second["content"]  # each session its own task
            async with connect(ws_url) as three:  # over --max-sessions 2: refused in words
                refused = json.loads(await three.recv())  # at once, then closed
                assert refused["type"] == "error" and "capacity" in json.dumps(refused).lower()

    asyncio.run(main())


def test_openenv_v0_plays_a_served_toolgym_env_turn_by_turn(served_arithmetic):
    env = toolgym.make("toolgym/OpenEnv-v0", url=served_arithmetic, text_field="message")
    obs, info = env.reset(seed=3)
    assert "calculator" in obs[-1]["content"]  # the served env's own system prompt and task
    obs, reward, terminated, truncated, info = env.step("<tool_call>{not json</tool_call>")
    assert not info["valid_action"] and not terminated  # the served env's verdict, kept
    env.close()


HERMES = toolgym.make("toolgym/Arithmetic-v0").unwrapped.parser


@pytest.mark.parametrize(
    "run",
    ["toolgym.make('toolgym/OpenEnv-v0')",
     "from toolgym.cli import main; sys.argv = ['toolgym', 'serve', 'env', 'toolgym/Maze-v0']; main()"],
)  # fmt: skip
def test_without_the_extra_the_env_and_the_command_say_what_to_install(run):
    code = f"import sys; sys.modules['openenv'] = None\nimport toolgym\n{run}"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode != 0
    assert "pip install 'toolgym[openenv]'" in result.stderr.strip().splitlines()[-1]


def test_the_server_imports_openenv_core_without_its_gradio_ui():
    """A server's start skips Gradio (about 5 s), which openenv-core imports for a web UI
    the server never mounts; the served env may still import it afterwards."""
    code = (
        "import sys, importlib.util\nfrom toolgym.cli.openenv import without_gradio\n"
        "with without_gradio():\n    import openenv.core\n"
        "print('gradio' in sys.modules, importlib.util.find_spec('gradio') is not None)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.split() == ["False", "True"], result.stderr[-2000:]
