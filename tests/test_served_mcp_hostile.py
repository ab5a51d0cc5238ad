"""`toolgym serve mcp` against a hostile client, through the MCP SDK's own client and raw
frames: a sessionless request that names another client's session, a flood of sessions and
calls, abandoned sessions, calls after the episode's verdict, and stdio lines the SDK's
validator refuses. Each is answered, bounded, and kept to its own client."""

from __future__ import annotations

import contextlib
import json
import select
import subprocess
import sys
import time

import anyio
import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

from conftest import serve_app
from toolgym.envs.mcp.serve import EnvToolServer


def http_server(env_id: str, **kwargs):
    server = EnvToolServer(env_id, **kwargs)
    anyio.run(server.start)
    for url in serve_app(server.http_app("127.0.0.1")):
        yield url + "/mcp", server


@pytest.fixture(scope="module")
def math_server():
    yield from http_server("toolgym/MathCode-v0", max_sessions=3, idle_timeout_s=2.0)


@pytest.fixture(scope="module")
def sql_server():
    yield from http_server("toolgym/SQL-v0", max_sessions=4, seed=3)


def leaves(exc: BaseException) -> str:
    """The messages of an exception and, for a group, of every exception in it."""
    if isinstance(exc, BaseExceptionGroup):
        return " | ".join(leaves(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"


async def refused(opening) -> str:
    """What a client that could not open (or use) its session was told."""
    try:
        await opening()
    except Exception as exc:
        return leaves(exc)
    raise AssertionError("the server did not refuse")


async def python(client: Client, code: str) -> str:
    result = await client.call_tool("python", {"code": code})
    return result.content[0].text


def test_a_session_id_opens_no_other_clients_session(math_server):
    url, server = math_server
    seen: list[str] = []

    async def grab(response):
        if "mcp-session-id" in response.headers:
            seen.append(response.headers["mcp-session-id"])

    async def main():
        spy = httpx2.AsyncClient(event_hooks={"response": [grab]})
        async with Client(streamable_http_client(url, http_client=spy), mode="legacy") as owner:
            await python(owner, "secret = 41")
            assert "42" in await python(owner, "print(secret + 1)")
            stolen = httpx2.AsyncClient(headers={"mcp-session-id": seen[0]})
            async with Client(streamable_http_client(url, http_client=stolen)) as sessionless:
                assert "NameError" in await python(sessionless, "print(secret)")
            made_up = httpx2.AsyncClient(headers={"mcp-session-id": "made-up"})
            async with Client(streamable_http_client(url, http_client=made_up)) as sessionless:
                await python(sessionless, "kept = 1")
                assert "NameError" in await python(sessionless, "print(kept)")

            async def handshake_as_someone():  # a handshake client naming an unknown session
                async with Client(
                    streamable_http_client(url, http_client=made_up), mode="legacy"
                ) as c:
                    await python(c, "print(1)")

            assert "no such session" in await refused(handshake_as_someone)
        # every session closed with its client (its env closes just after the client leaves;
        # well before the 2 s idle timeout, which would also close a leaked one)
        deadline = time.monotonic() + 1.5
        while server.host.live and time.monotonic() < deadline:
            await anyio.sleep(0.05)
        assert server.host.live == 0

    anyio.run(main)


def test_sessions_and_single_calls_share_one_cap_and_one_idle_rule(math_server):
    url, server = math_server

    async def main():
        async with contextlib.AsyncExitStack() as stack:
            clients = [
                await stack.enter_async_context(Client(url, mode="legacy")) for _ in range(3)
            ]
            assert server.host.live == 3

            async def fourth():
                async with Client(url, mode="legacy") as client:
                    await client.list_tools()

            assert "capacity" in await refused(fourth)
            async with Client(url) as sessionless:  # a single call needs a slot too
                full = await sessionless.call_tool("python", {"code": "print(1)"})
                assert full.is_error and "capacity" in full.content[0].text
            await anyio.sleep(3.5)  # past the 2 s idle rule: every session closed, told why
            assert server.host.live == 0
            said = await refused(lambda: clients[0].call_tool("python", {"code": "print(1)"}))
            assert "idle" in said
        async with anyio.create_task_group() as tasks:  # a burst of sessionless calls
            results = []

            async def call():
                async with Client(url) as c:
                    results.append(await c.call_tool("python", {"code": "print(7)"}))

            for _ in range(12):
                tasks.start_soon(call)
        assert len(results) == 12 and all("7" in r.content[0].text or "capacity" in
                                          r.content[0].text for r in results)  # fmt: skip
        assert server.host.resources.opened == 1  # one sandbox pool for every client
        assert server.host.live == 0

    anyio.run(main)


def test_an_ended_episode_gives_no_second_verdict(sql_server):
    url, _ = sql_server

    async def main():
        async with Client(url, mode="legacy") as client:
            first = await client.call_tool("run_sql", {"query": "SELECT 1"})
            assert first.meta["toolgym"]["turn"] == 1
            wrong = await client.call_tool("submit", {"query": "SELECT 0 WHERE 0"})
            assert wrong.meta["toolgym"]["terminated"] and wrong.meta["toolgym"]["reward"] == 0
            for name, args in (
                ("submit", {"query": "SELECT 1"}),
                ("run_sql", {"query": "SELECT 2"}),
            ):
                again = await client.call_tool(name, args)
                assert again.is_error and "episode is over" in again.content[0].text
                assert "reward" not in again.meta["toolgym"]

    anyio.run(main)


def test_stdio_answers_every_line():
    process = subprocess.Popen(
        [sys.executable, "-m", "toolgym", "serve", "mcp", "toolgym/Arithmetic-v0",
         "--env-arg", "max_turns=2"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip

    def send(line: str) -> None:
        process.stdin.write(line.encode() + b"\n")
        process.stdin.flush()

    def reply() -> dict:
        ready, _, _ = select.select([process.stdout], [], [], 60)
        assert ready, "no answer within 60 s"
        return json.loads(process.stdout.readline())

    def call(number: int, arguments: str) -> str:
        return (f'{{"jsonrpc": "2.0", "id": {number}, "method": "tools/call", '
                f'"params": {{"name": "calculator", "arguments": {arguments}}}}}')  # fmt: skip

    try:
        send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "probe", "version": "1"}}}))  # fmt: skip
        assert "result" in reply()
        send('{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        send(call(2, '{"expression": ' + "[" * 200 + "]" * 200 + "}"))
        deep = reply()
        assert deep["id"] == 2 and "nests" in deep["error"]["message"]
        send(call(3, '{"expression": "1 + \\ud800"}'))
        assert "lone surrogate" in reply()["error"]["message"]
        send("{not json")
        assert reply()["error"]["code"] == -32700
        for number in (4, 5):  # two turns: the episode's limit
            send(call(number, '{"expression": "1 + 1"}'))
            answered = reply()
        assert answered["result"]["_meta"]["toolgym"]["truncated"]
        send(call(6, '{"expression": "1 + 1"}'))
        assert "episode is over" in reply()["result"]["content"][0]["text"]
    finally:
        process.kill()
        process.wait()
