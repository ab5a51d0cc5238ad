"""`toolgym serve env --protocol openenv` against a hostile client, on real servers over
loopback: tasks that point the server at its own files, loopback services or code; stateless
requests that would build envs outside the cap; sessions left idle; frames that are not
messages. Each is refused in words, nothing is read or run, and the session goes on."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request

import pytest
from openenv.core.generic_client import GenericEnvClient
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from conftest import serve_app, static_site
from toolgym.envs.openenv.serve import openenv_app

SECRET = "loopback-only-secret-7731"


@pytest.fixture(scope="module")
def secret_service(tmp_path_factory):
    """A loopback-only service with a page no client of the env server may read."""
    root = tmp_path_factory.mktemp("secret")
    (root / "index.html").write_text(f"<p>{SECRET}</p>")
    yield from static_site(root, "index.html")


@pytest.fixture(scope="module")
def web_server():
    app = openenv_app("toolgym/Web-v0", max_sessions=2)
    for url in serve_app(app):
        yield url, app.state.host


@pytest.fixture(scope="module")
def open_web_server():
    app = openenv_app("toolgym/Web-v0", max_sessions=2, allow_client_tasks=True)
    for url in serve_app(app):
        yield url, app.state.host


@pytest.fixture(scope="module")
def arithmetic_server():
    app = openenv_app("toolgym/Arithmetic-v0", max_sessions=2, idle_timeout_s=1.0,
                      allow_client_tasks=True)  # fmt: skip
    for url in serve_app(app):
        yield url, app.state.host


async def exchange(url: str, *frames: str) -> list[dict]:
    """Send each frame on one session and read each reply."""
    async with connect(url.replace("http", "ws") + "/ws", max_size=None) as ws:
        replies = []
        for frame in frames:
            await ws.send(frame)
            replies.append(json.loads(await ws.recv()))
        return replies


def reset(**data) -> str:
    return json.dumps({"type": "reset", "data": data})


def post(url: str, body: dict) -> tuple[int, str]:
    request = urllib.request.Request(url, json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_a_client_task_cannot_read_files_loopback_pages_or_name_code(
    web_server, open_web_server, secret_service
):
    url, host = web_server
    hostile = [
        {"url": "file:///etc/passwd", "instruction": "read", "check_js": "false"},
        {"url": secret_service, "instruction": "read", "check_js": "false"},
        {"url": "http://example.com/", "instruction": "x", "check": "builtins:print"},
    ]
    replies = asyncio.run(exchange(url, *(reset(task=t) for t in hostile)))
    for reply in replies:  # by default the server plays only its env's own tasks
        assert reply["type"] == "error" and "--allow-client-tasks" in reply["data"]["message"]
    for path in ("/reset", "/step"):  # no session at all: not served, and nothing is built
        status, body = post(url + path, {"task": hostile[0], "action": {"message": "hi"}})
        assert status == 400 and "WebSocket" in body and "root:" not in body
    assert host.live == 0

    url, host = open_web_server  # the operator allows client tasks: still never these
    replies = asyncio.run(exchange(url, *(reset(task=t) for t in hostile)))
    said = [r["data"]["message"] for r in replies]
    assert all(r["type"] == "error" for r in replies), said
    assert "no file:" in said[0] and "loopback" in said[1] and "'check'" in said[2]
    assert not any("root:" in m or SECRET in m for m in said)
    loopback_by_other_names = ["http://127.1:9/", "http://[::ffff:127.0.0.1]/", "http://localhost/",
                               "http://2130706433/", "http://10.0.0.1/", "javascript:alert(1)"]  # fmt: skip
    tasks = [{"url": u, "instruction": "x", "check_js": "false"} for u in loopback_by_other_names]
    replies = asyncio.run(exchange(url, *(reset(task=t) for t in tasks)))
    assert all(r["type"] == "error" for r in replies), replies
    assert host.live == 0  # every session it opened has closed


def test_stateless_requests_build_nothing_and_sessions_share_the_cap(web_server):
    url, host = web_server

    async def main():
        ws = url.replace("http", "ws") + "/ws"
        async with connect(ws) as one, connect(ws) as two:
            await one.send(json.dumps({"type": "state"}))
            await two.send(json.dumps({"type": "state"}))
            assert json.loads(await one.recv())["type"] == "state"
            assert json.loads(await two.recv())["type"] == "state"
            for _ in range(6):  # a burst of stateless resets: answered, none built
                assert post(url + "/reset", {})[0] == 400
            assert host.live == 2
            async with connect(ws) as three:
                refused = json.loads(await three.recv())
                assert refused["data"]["code"] == "CAPACITY_REACHED"

    asyncio.run(main())
    time.sleep(0.2)
    assert host.live == 0


def test_garbage_and_misuse_are_answered_and_the_session_goes_on(arithmetic_server):
    url, _ = arithmetic_server
    frames = [
        "[1, 2]", "7", "null", '{"type": "step", "data": {"message": "\\ud800"}}',
        '{"type": "reset", "data": {"seed": ' + "[" * 200 + "]" * 200 + "}}",
        "[" * 200 + "]" * 200, '{"type": "reset", "data": {"seed": "' + "\\ud800" + '"}}',
        json.dumps({"type": "step", "data": {"message": "hi"}}),  # before any reset
        reset(task={"question": "2 + 2?"}),  # a task missing its answer
        reset(seed=1, split="nope"), reset(seed=-5), reset(colour="red"),
        json.dumps({"type": "mcp", "data": {}}),
        reset(seed=3),
        json.dumps({"type": "step", "data": {"message": "<tool_call>{bad</tool_call>"}}),
    ]  # fmt: skip
    replies = asyncio.run(exchange(url, *frames))
    errors, (opened, stepped) = replies[:-2], replies[-2:]
    assert all(r["type"] == "error" and r["data"]["message"] for r in errors), errors
    assert "needs reset" in errors[7]["data"]["message"]
    assert "answer" in errors[8]["data"]["message"]
    assert opened["type"] == "observation" and not opened["data"]["done"]
    assert stepped["type"] == "observation" and not stepped["data"]["observation"]["valid_action"]


def test_a_client_task_is_played_when_the_server_allows_it(arithmetic_server):
    url, _ = arithmetic_server

    async def main():
        async with GenericEnvClient(base_url=url) as client:
            opened = await client.reset(task={"question": "What is 20 + 22?", "answer": 42})
            assert "20 + 22" in opened.observation["messages"][-1]["content"]
            done = await client.step(
                {"message": '<tool_call>{"name": "answer", "arguments": {"value": 42}}</tool_call>'}
            )
            assert done.done and done.reward == 1.0
            held_out = await client.reset(seed=0, split="eval")  # the env's own eval task 0
            assert held_out.observation["messages"][-1]["content"]

    asyncio.run(main())


def test_an_idle_session_is_told_and_closed_not_reopened(arithmetic_server):
    url, host = arithmetic_server

    async def main():
        async with connect(url.replace("http", "ws") + "/ws") as ws:
            await ws.send(reset(seed=1))
            assert json.loads(await ws.recv())["type"] == "observation"
            assert host.live == 1
            said = json.loads(await asyncio.wait_for(ws.recv(), 10))  # idle over 1 s
            assert said["type"] == "error" and "idle" in said["data"]["message"]
            with pytest.raises(ConnectionClosed):
                await ws.send(json.dumps({"type": "step", "data": {"message": "hi"}}))
                await ws.recv()
        assert host.live == 0

    asyncio.run(main())
