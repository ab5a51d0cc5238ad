"""MCPTools against real MCP servers: the MCP project's reference time server (its own
package, in its own environment, as MCP servers are deployed), and a server made with the
MCP SDK whose tools misbehave on request, over stdio and streamable HTTP."""

from __future__ import annotations

import asyncio
import functools
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT, free_port
from toolgym.envs.resources import Resources
from toolgym.envs.tool_env import ToolEnv
from toolgym.errors import ConfigError
from toolgym.tools import InfraError, ToolCall
from toolgym.tools.mcp import MCPServerSpec, MCPTools

SERVER = str(FIXTURES / "mcp" / "server.py")
TIME_SERVER = "mcp-server-time==2026.10.19"


def in_loop(test):
    """Run an async test on a fresh event loop."""

    @functools.wraps(test)
    def run(*args, **kwargs):
        return asyncio.run(test(*args, **kwargs))

    return run


class Ask(ToolEnv):
    async def start(self, seed, options):
        return [{"role": "user", "content": "Use the tools."}]


@pytest.fixture(scope="session")
def time_server() -> list[str]:
    """The reference time server, installed once in a virtual environment of its own (it
    needs its own `mcp` release; an MCP server is a separate program, as with `uvx`)."""
    venv = ROOT / "build" / "mcp-servers"
    program = venv / "bin" / "mcp-server-time"
    if not program.exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", TIME_SERVER],
            check=True, timeout=600,
        )  # fmt: skip
    return [str(program), "--local-timezone", "UTC"]


async def call(env: ToolEnv, name: str, **arguments):
    obs, _, _, _, info = await env.astep(env.parser.render([ToolCall(name, arguments)]))
    return obs, info


@in_loop
async def test_reference_time_server_as_tools(time_server):
    env = Ask(tool_sources=[MCPTools(time_server)])
    try:
        obs, info = await env.areset(seed=0)
        schemas = {s["function"]["name"]: s["function"] for s in info["tools"]}
        assert set(schemas) == {"get_current_time", "convert_time"}
        assert "timezone" in schemas["get_current_time"]["parameters"]["required"]
        assert "get_current_time" in obs[0]["content"]  # listed in the system prompt

        obs, info = await call(env, "get_current_time", timezone="Asia/Tokyo")
        assert info["valid_action"] and '"timezone": "Asia/Tokyo"' in obs[0]["content"]
        obs, info = await call(
            env, "convert_time", source_timezone="UTC", time="12:00", target_timezone="Asia/Tokyo"
        )
        assert "21:00" in obs[0]["content"]

        obs, info = await call(env, "get_current_time", timezone="Mars/Olympus")
        assert info["tool_calls"][0]["error"] == "invalid_arguments"
        assert "Mars/Olympus" in obs[0]["content"]  # the server's own words
        obs, info = await call(env, "get_current_time")  # checked against the schema here
        assert "'timezone' is a required property" in obs[0]["content"]
        assert not info["valid_action"] and info["infra_error"] is None
    finally:
        await env.aclose()


@in_loop
async def test_results_errors_and_images_from_an_sdk_server():
    env = Ask(tool_sources=[MCPTools([sys.executable, SERVER], max_output_chars=1000)])
    try:
        await env.areset(seed=0)
        obs, info = await call(env, "add", a=2, b=40)
        assert obs[0]["content"] == "42" and info["valid_action"]
        obs, info = await call(env, "add", a="two", b=40)
        assert info["tool_calls"][0]["error"] == "invalid_arguments"
        obs, info = await call(env, "fail", message="no such file")
        assert info["tool_calls"][0]["error"] == "invalid_arguments"
        assert "no such file" in obs[0]["content"]

        obs, info = await call(env, "picture")
        assert obs[0]["content"] == "a pixel\n[image: shown below]"
        parts = obs[1]["content"]
        assert obs[1]["role"] == "user" and "picture (call_4_0)" in parts[0]["text"]
        assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,iVBOR")

        obs, info = await call(env, "big", n=50_000)
        assert len(obs[0]["content"]) < 1100 and "truncated" in obs[0]["content"]
        obs, info = await call(env, "garbage")  # lines that are not JSON-RPC are skipped
        assert obs[0]["content"] == "still here"
    finally:
        await env.aclose()


@in_loop
async def test_a_server_that_hangs_dies_or_floods_is_bounded():
    spec = {"command": [sys.executable, SERVER], "max_frame_bytes": 1 << 20}
    # 10 s: a call after the server died waits, within its own limit, for the old server to
    # be stopped and a new one to start, which took over 5 s after the flood on a loaded
    # 2-core machine
    tools = MCPTools(spec, timeout_s=10)
    env = Ask(tool_sources=[tools])
    try:
        await env.areset(seed=0)
        connection = await env.shared(("mcp-server", tools.spec), lambda: None)
        start = time.monotonic()
        obs, info = await call(env, "hang")
        assert info["tool_calls"][0]["error"] == "timeout" and time.monotonic() - start < 20

        obs, info = await call(env, "die")
        assert info["tool_calls"][0]["error"] == "infra"
        assert "dying on request" in info["infra_error"]  # the server's last stderr
        obs, info = await call(env, "add", a=1, b=1)  # started again
        assert obs[0]["content"] == "2" and connection.starts == 2

        obs, info = await call(env, "huge", megabytes=2)  # an answer over the frame limit:
        assert info["tool_calls"][0]["error"] == "invalid_arguments"  # the tool's outcome,
        assert "over 1 MiB" in obs[0]["content"] and not info["infra_error"]  # never a mask
        obs, info = await call(env, "add", a=2, b=2)  # the same server goes on
        assert obs[0]["content"] == "4" and connection.starts == 2

        start = time.monotonic()
        obs, info = await call(env, "flood")  # a line with no end on the protocol channel
        assert info["tool_calls"][0]["error"] == "infra"
        assert "with no end of line" in info["infra_error"]
        assert time.monotonic() - start < 20
        obs, info = await call(env, "add", a=1, b=2)
        assert obs[0]["content"] == "3" and connection.starts == 3
    finally:
        await env.aclose()


@in_loop
async def test_a_server_that_cannot_start_fails_the_reset_as_infrastructure(tmp_path):
    crash = tmp_path / "crash.py"
    crash.write_text("import sys\nsys.stderr.write('missing API key\\n')\nsys.exit(1)\n")
    for server, expected in [
        ([sys.executable, str(crash)], "missing API key"),
        (["/nonexistent/mcp-server"], "could not be started"),
        ({"command": ["sleep", "60"], "start_timeout_s": 1}, "did not answer within 1 s"),
        (f"http://127.0.0.1:{free_port()}/mcp", "could not be reached"),
    ]:
        env = Ask(tool_sources=[MCPTools(server)])
        start = time.monotonic()
        with pytest.raises(InfraError, match=expected):
            await env.areset(seed=0)
        assert time.monotonic() - start < 10
        await env.aclose()


@in_loop
async def test_envs_share_one_server_per_runtime():
    resources = Resources()
    envs = [Ask(tool_sources=[MCPTools([sys.executable, SERVER])]) for _ in range(4)]
    for env in envs:
        env.use_resources(resources)
    try:
        await asyncio.gather(*(env.areset(seed=i) for i, env in enumerate(envs)))
        results = await asyncio.gather(*(call(env, "add", a=i, b=1) for i, env in enumerate(envs)))
        assert [obs[0]["content"] for obs, _ in results] == ["1", "2", "3", "4"]
        assert resources.opened == 1
    finally:
        await resources.aclose()


def test_streamable_http_server(tmp_path):
    port = free_port()
    log = (tmp_path / "server.log").open("w")
    server = subprocess.Popen([sys.executable, SERVER, "http", str(port)], stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}/mcp"
    env = Ask(tool_sources=[MCPTools({"url": url, "tools": ["add", "picture"]})])
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                obs, info = env.reset(seed=0)
                break
            except InfraError:
                assert time.monotonic() < deadline and server.poll() is None
                time.sleep(0.3)
        assert [s["function"]["name"] for s in info["tools"]] == ["add", "picture"]
        obs, _, _, _, info = env.step(env.parser.render([ToolCall("add", {"a": 5, "b": 6})]))
        assert obs[0]["content"] == "11"
        server.terminate()
        server.wait(10)
        obs, _, _, _, info = env.step(env.parser.render([ToolCall("add", {"a": 1, "b": 1})]))
        assert info["tool_calls"][0]["error"] == "infra" and info["infra_error"]
    finally:
        env.close()
        server.kill()
        log.close()


def test_server_settings_are_checked():
    assert MCPServerSpec.parse("http://h:1/mcp").url == "http://h:1/mcp"
    assert MCPServerSpec.parse(["uvx", "mcp-server-time"]).command == ("uvx", "mcp-server-time")
    for bad, words in [
        ("mcp-server-time", "give a command as a list"),
        ({"command": ["x"], "url": "http://h/mcp"}, "one of them"),
        ({"command": ["x"], "timeout": 3}, "unknown MCP server setting"),
        ({"command": ["x"], "env": {"A": 1}}, "mapping of names to strings"),
        ({"url": "ftp://h"}, "starts with http"),
    ]:
        with pytest.raises(ConfigError, match=words):
            MCPServerSpec.parse(bad)
    with pytest.raises(ConfigError, match="has no tool"):
        env = Ask(tool_sources=[MCPTools({"command": [sys.executable, SERVER], "tools": ["sub"]})])
        try:
            env.reset(seed=0)
        finally:
            env.close()


def test_a_tool_source_must_be_one():
    with pytest.raises(ConfigError, match="not a tool source"):
        Ask(tool_sources=[Path("server.py")])


def test_without_the_extra_the_import_says_what_to_install():
    code = "import sys; sys.modules['mcp'] = None\nfrom toolgym.tools.mcp import MCPTools"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 1
    assert "pip install 'toolgym[mcp]'" in result.stderr.splitlines()[-1]
