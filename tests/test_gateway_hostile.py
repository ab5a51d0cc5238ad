"""The gateway against hostile connections on loopback, each attack on one property: keyless
senders of half-sent bodies cost no parsing and do not slow a real session; connections are
capped and a silent one is closed; a call whose client leaves, or whose session ends while
it is sampled, is not recorded; a history nested thousands deep is a 400."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time

import httpx
import openai
import pytest
from test_gateway import Recorded, open_session, serving

from conftest import CHAT_MESSAGES
from toolgym.agents.engines.hf import HFEngine
from toolgym.training.rewards.recorded_reward import AgentScore


class Slow(Recorded):
    """The real engine, each generation held `delay` seconds first (a call in flight)."""

    delay = 0.0

    async def generate(self, prompt_ids, sampling, adapter=None, **extra):
        await asyncio.sleep(self.delay)
        return await super().generate(prompt_ids, sampling, adapter, **extra)


@contextlib.contextmanager
def calls_held(gateway, seconds: float = 1.0):
    """While inside, every generation waits `seconds` first."""
    gateway.engine.delay = seconds
    try:
        yield
    finally:
        gateway.engine.delay = 0.0


@pytest.fixture(scope="module")
def gateway(tool_calling_model_dir, loop_thread):
    engine = Slow(HFEngine(tool_calling_model_dir, max_batch_size=16))
    yield from serving(engine, loop_thread, limit=40, request_s=1.0)


def port_of(gateway) -> int:
    return int(gateway.base_url.rsplit(":", 1)[1])


def half_sent(gateway, path: str, key: str = "", length: int = 15 << 20) -> socket.socket:
    """A connection that sends a request head announcing `length` bytes, then a few."""
    sock = socket.create_connection(("127.0.0.1", port_of(gateway)), timeout=5)
    auth = f"Authorization: Bearer {key}\r\n" if key else ""
    sock.sendall(
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{auth}"
        f'Content-Length: {length}\r\n\r\n{{"messages": ['.encode()
    )
    return sock


def answer_of(sock: socket.socket) -> bytes:
    try:
        return sock.recv(4096)
    except (TimeoutError, ConnectionError):
        return b""


def test_a_keyless_half_sent_body_is_refused_before_it_is_read(gateway, loop_thread):
    session, client = open_session(gateway, loop_thread)
    senders = [half_sent(gateway, f"/s/{session.id}/v1/chat/completions") for _ in range(20)]
    try:
        answers = [answer_of(s) for s in senders]
        assert all(a.startswith(b"HTTP/1.1 401") for a in answers), answers[:2]
        started = time.monotonic()
        client.chat.completions.create(model="m", messages=CHAT_MESSAGES)
        assert time.monotonic() - started < 5
        assert len(session.trajectory.steps) == 1
    finally:
        for s in senders:
            s.close()


def test_a_keyed_body_that_never_arrives_is_cut_off(gateway, loop_thread):
    session, _ = open_session(gateway, loop_thread)
    sock = half_sent(gateway, f"/s/{session.id}/v1/chat/completions", key=session.key)
    sock.settimeout(40)
    try:
        started = time.monotonic()
        answer = answer_of(sock)
        assert answer == b"" or answer.startswith(b"HTTP/1.1 408"), answer
        assert time.monotonic() - started < 35
    finally:
        sock.close()
    assert session.trajectory.steps == []


def test_connections_are_capped_and_a_silent_one_is_closed(gateway, loop_thread):
    session, client = open_session(gateway, loop_thread)
    idle = [socket.create_connection(("127.0.0.1", port_of(gateway))) for _ in range(60)]
    try:
        for sock in idle:
            sock.settimeout(5)
        # past the cap: closed at once; under it: closed after the 1 s allowed for a request
        closed = [answer_of(s) == b"" for s in idle]
        assert all(closed)
        assert gateway.admission.refused >= 20
        deadline = time.monotonic() + 5
        while gateway.admission.live and time.monotonic() < deadline:
            time.sleep(0.1)
        client.chat.completions.create(model="m", messages=CHAT_MESSAGES)
        assert len(session.trajectory.steps) == 1
    finally:
        for sock in idle:
            sock.close()


def test_a_call_whose_session_ends_while_it_is_sampled_is_not_recorded(gateway, loop_thread):
    session, _ = open_session(gateway, loop_thread)
    with calls_held(gateway):

        async def scenario():
            client = openai.AsyncOpenAI(base_url=gateway.url_of(session), api_key=session.key,
                                        max_retries=0)  # fmt: skip
            call = asyncio.ensure_future(
                client.chat.completions.create(model="m", messages=CHAT_MESSAGES)
            )
            await asyncio.sleep(0.3)
            gateway.close(session)
            with pytest.raises(openai.NotFoundError, match="has ended"):
                await call

        loop_thread.call(scenario())
    assert session.trajectory.steps == []


def test_a_call_whose_client_left_is_cancelled_and_not_recorded(gateway, loop_thread):
    session, _ = open_session(gateway, loop_thread)
    with calls_held(gateway):
        body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
        sock = socket.create_connection(("127.0.0.1", port_of(gateway)))
        sock.sendall(
            f"POST /s/{session.id}/v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Bearer {session.key}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        time.sleep(0.3)
        sock.close()  # the client leaves while its call waits for the engine
        time.sleep(1.5)
    assert session.trajectory.steps == []


def test_a_history_nested_thousands_deep_is_a_400(gateway, loop_thread):
    session, client = open_session(gateway, loop_thread)
    deep = '{"a": ' * 5000 + '"x"' + "}" * 5000
    url = f"{gateway.url_of(session)}/chat/completions"
    headers = {"Authorization": f"Bearer {session.key}", "Content-Type": "application/json"}
    as_text = json.dumps({"model": "m", "messages": [*CHAT_MESSAGES, {
        "role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function",
        "function": {"name": "move", "arguments": deep}}]}, {"role": "tool", "content": "ok"}]})  # fmt: skip
    as_json = '{"model": "m", "messages": [{"role": "user", "content": ' + deep + "}]}"
    for body in (as_text, as_json):
        answer = httpx.post(url, content=body.encode(), headers=headers, timeout=30)
        assert answer.status_code == 400, answer.text[:300]
        assert "nested too deeply" in answer.json()["error"]["message"]
    client.chat.completions.create(model="m", messages=CHAT_MESSAGES)
    assert len(session.trajectory.steps) == 1


def test_a_route_the_gateway_does_not_serve_is_a_404_naming_those_it_does(gateway, loop_thread):
    """A client that calls a route of another API learns what to call instead."""
    session, client = open_session(gateway, loop_thread)
    with pytest.raises(openai.NotFoundError) as raised:
        client.embeddings.create(model="m", input="hi")
    message = raised.value.body["message"]
    assert message.startswith("POST /") and "/v1/embeddings: not served here (served: " in message
    for route in ("POST /v1/chat/completions", "POST /v1/responses", "GET /v1/models"):
        assert route in message
    assert session.trajectory.steps == []


def test_an_agent_reports_its_reward_and_hostile_reports_are_refused_in_words(gateway, loop_thread):
    """POST .../v1/reward records the episode's `agent` score (the last report counts), or a
    model call's; NaN, a huge value, an unknown field, a call not made, another session's key
    and an ended session are refused, and none of them is recorded."""
    session, client = open_session(gateway, loop_thread)
    other, _ = open_session(gateway, loop_thread)
    url = f"{gateway.url_of(session)}/reward"

    def report(body: str, key: str = session.key, where: str = url) -> httpx.Response:
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        return httpx.post(where, content=body.encode(), headers=headers, timeout=30)

    assert report('{"reward": 0.25}').status_code == 200
    assert report('{"reward": 0.5}').json() == {"session": session.id, "reward": 0.5, "call": None}
    # a reward for one model call: only for a call the session has made
    assert (
        "has made 0 model calls" in report('{"reward": 1, "call": -1}').json()["error"]["message"]
    )
    client.chat.completions.create(model="m", messages=CHAT_MESSAGES)
    client.chat.completions.create(model="m", messages=CHAT_MESSAGES)
    assert report('{"reward": 0.75, "call": 0}').json()["call"] == 0
    assert report('{"reward": -0.5, "call": -1}').json()["call"] == 1  # the latest
    refused = {
        '{"reward": 1, "call": 2}': "has made 2 model calls",
        '{"reward": 1, "call": -2}': "greater than or equal to -1",
        '{"reward": 1, "call": 1.5}': "call",
        '{"reward": NaN}': "reward",
        '{"reward": 1e9}': "less than or equal to 1000",
        '{"reward": "high"}': "reward",
        '{"reward": 1, "final": true}': "final",
        "[1]": "must be a JSON object",
    }
    for body, why in refused.items():
        answer = report(body)
        assert answer.status_code == 400 and why in answer.json()["error"]["message"], body
    assert report('{"reward": 9}', key=other.key).status_code == 401  # not its session's key
    assert session.trajectory.scores == {"agent": 0.5} and other.trajectory.scores == {}
    assert [step.scores for step in session.trajectory.steps] == [{"agent": 0.75}, {"agent": -0.5}]
    assert AgentScore()(session.trajectory) == [0.75, 0.0]  # the episode's on the last turn
    assert session.trajectory.total_reward == 0.75

    async def close():
        gateway.close(session)

    loop_thread.call(close())
    ended = report('{"reward": 1}')
    assert ended.status_code in (401, 404) and "session" in ended.json()["error"]["message"]
    assert session.trajectory.scores == {"agent": 0.5}
