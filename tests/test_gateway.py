"""The gateway on loopback, called with the official `openai` client: each call's recorded
tokens are the engine's own, a multi-turn tool-using session is one token sequence, a
harness that edits its history gets segments, and a call without its session or key, or
past its budget, is refused in words."""

from __future__ import annotations

import asyncio
import copy

import numpy as np
import openai
import pytest

from conftest import CHAT_MESSAGES
from toolgym.agents.engines.base import Completion, SamplingParams
from toolgym.agents.engines.hf import HFEngine
from toolgym.agents.gateway.server import Gateway
from toolgym.agents.gateway.session import SessionSettings
from toolgym.agents.policy_gate import PolicyGate
from toolgym.agents.render import ChatRenderer
from toolgym.agents.trajectory import EpisodeEnd, Trajectory
from toolgym.envs.maze import MazeEnv
from toolgym.training.update.batch import build_batch

TOOLS = MazeEnv().tool_schemas()


class Recorded:
    """The real engine, with every prompt it was given and completion it made kept aside."""

    def __init__(self, engine: HFEngine) -> None:
        self.engine, self.capabilities = engine, engine.capabilities
        self.calls: list[tuple[list[int], Completion]] = []

    async def generate(self, prompt_ids, sampling, adapter=None, **extra):
        completion = await self.engine.generate(prompt_ids, sampling, adapter, **extra)
        self.calls.append((list(prompt_ids), completion))
        return completion

    async def aclose(self) -> None:
        await self.engine.aclose()


def serving(engine: Recorded, loop_thread, **admission):
    """A gateway in front of `engine` on the loop thread (its admission's settings changed
    by `admission`), closed with its engine after the module's tests."""

    async def start():
        gateway = Gateway(engine, ChatRenderer(engine.engine.tokenizer), engine.engine.tokenizer)
        for name, value in admission.items():
            setattr(gateway.admission, name, value)
        await gateway.start()
        return gateway

    gateway = loop_thread.call(start())
    yield gateway
    loop_thread.call(gateway.aclose())
    loop_thread.call(gateway.engine.aclose())


@pytest.fixture(scope="module")
def gateway(tool_calling_model_dir, loop_thread):
    yield from serving(Recorded(HFEngine(tool_calling_model_dir, max_batch_size=64)), loop_thread)


def open_session(gateway, loop_thread, **settings):
    sampling = SamplingParams(max_tokens=48, temperature=1.0, seed=7)
    settings = SessionSettings(sampling=sampling, **settings)

    async def open_():
        return gateway.open(settings, Trajectory("t:0", "t"))

    session = loop_thread.call(open_())
    client = openai.OpenAI(base_url=gateway.url_of(session), api_key=session.key, max_retries=0)
    return session, client


def play_a_tool_using_session(gateway, loop_thread) -> Trajectory:
    """Two calls of one session through the official client: a tool call, then the tool's
    answer. Each recorded step is the prompt the engine was given and its own completion."""
    session, client = open_session(gateway, loop_thread)
    gateway.engine.calls.clear()
    first = client.chat.completions.create(model="any", messages=CHAT_MESSAGES, tools=TOOLS)
    reply = first.choices[0].message
    assert reply.tool_calls and reply.tool_calls[0].function.name == "move"
    # what the openai client itself sends back for the assistant turn, then a tool's answer
    history = [*CHAT_MESSAGES, reply.model_dump(exclude_none=True),
               {"role": "tool", "tool_call_id": reply.tool_calls[0].id, "content": "A wall."}]  # fmt: skip
    client.chat.completions.create(model="any", messages=history, tools=TOOLS)
    traj = session.trajectory
    assert len(traj.steps) == 2 and traj.segment_starts == []
    for step, (prompt, completion) in zip(traj.steps, gateway.engine.calls, strict=True):
        assert traj.token_ids[: step.response_start] == prompt  # the prompt it was given
        assert traj.token_ids[step.response_start : step.response_end] == completion.token_ids
        assert step.logprobs == completion.logprobs
    return traj


def test_a_tool_using_session_is_one_sequence_of_the_engine_s_own_tokens(gateway, loop_thread):
    traj = play_a_tool_using_session(gateway, loop_thread)
    assert traj.steps[0].tool_calls == [{"name": "move", "arguments": {"direction": "north"}}]
    assert traj.steps[0].observation[0]["content"] == "A wall."
    assert traj.steps[0].observation[0]["name"] == "move"  # named from its call's id
    assert traj.steps[1].state_key == traj.steps[0].next_state_key != traj.steps[0].state_key


def test_a_harness_that_edits_its_history_gets_a_new_segment(gateway, loop_thread):
    session, client = open_session(gateway, loop_thread)
    first = client.chat.completions.create(model="any", messages=CHAT_MESSAGES, tools=TOOLS)
    edited = copy.deepcopy(CHAT_MESSAGES)
    edited[0]["content"] = "A summary of what happened so far."
    reply = first.choices[0].message.model_dump(exclude_none=True)
    client.chat.completions.create(
        model="any", messages=[*edited, reply, {"role": "tool", "content": "ok"}], tools=TOOLS
    )
    traj = session.trajectory
    assert len(traj.segment_starts) == 1 and len(traj.segments()) == 2
    start = traj.segment_starts[0]
    assert traj.steps[0].response_end <= start < traj.steps[1].response_start
    # each segment is trained as a row of its own, on its own reply's tokens alone
    batch = build_batch([traj], [np.array([1.0, -1.0])], pad_id=0)
    assert len(batch) == 2
    for row, ((begin, end), step, value) in enumerate(
        zip(traj.segments(), traj.steps, [1.0, -1.0], strict=True)
    ):
        assert batch.input_ids[row, : end - begin].tolist() == traj.token_ids[begin:end]
        trained = batch.loss_mask[row].nonzero().squeeze(-1) + 1 + begin  # target positions
        assert trained.tolist() == list(range(step.response_start, step.response_end))
        assert set(batch.advantages[row][batch.loss_mask[row] > 0].tolist()) == {value}


def test_calls_without_their_session_or_key_are_refused_in_words(gateway, loop_thread):
    session, _ = open_session(gateway, loop_thread)
    bare = openai.OpenAI(base_url=f"{gateway.base_url}/v1", api_key=session.key, max_retries=0)
    with pytest.raises(openai.BadRequestError, match="names no session"):
        bare.chat.completions.create(model="m", messages=CHAT_MESSAGES)
    stranger = openai.OpenAI(base_url=gateway.url_of(session), api_key="nope", max_retries=0)
    with pytest.raises(openai.AuthenticationError, match="not its session's"):
        stranger.chat.completions.create(model="m", messages=CHAT_MESSAGES)
    # the header and the `user` field name a session too
    reply = bare.chat.completions.create(model="m", messages=CHAT_MESSAGES, user=session.id)
    assert reply.choices[0].message is not None
    assert len(session.trajectory.steps) == 1


def test_a_spent_budget_ends_the_episode(gateway, loop_thread):
    session, client = open_session(gateway, loop_thread, max_calls=1)
    client.chat.completions.create(model="m", messages=CHAT_MESSAGES)
    with pytest.raises(openai.BadRequestError, match="model calls are spent"):
        client.chat.completions.create(model="m", messages=CHAT_MESSAGES)
    assert session.ended is not None and session.ended.end is EpisodeEnd.MAX_TURNS


def test_a_stream_is_the_same_reply(gateway, loop_thread):
    session, client = open_session(gateway, loop_thread)
    chunks = list(client.chat.completions.create(
        model="m", messages=CHAT_MESSAGES, tools=TOOLS, stream=True,
        stream_options={"include_usage": True},
    ))  # fmt: skip
    calls = [c for chunk in chunks for ch in chunk.choices for c in ch.delta.tool_calls or []]
    assert calls and calls[0].function.name == "move"
    assert chunks[-1].usage.completion_tokens == len(session.trajectory.steps[0].logprobs)


def test_64_concurrent_sessions_complete(gateway, loop_thread):
    sessions = [open_session(gateway, loop_thread)[0] for _ in range(64)]

    async def one(session):
        client = openai.AsyncOpenAI(base_url=gateway.url_of(session), api_key=session.key)
        reply = await client.chat.completions.create(model="m", messages=CHAT_MESSAGES, tools=TOOLS)
        history = [*CHAT_MESSAGES, reply.choices[0].message.model_dump(exclude_none=True),
                   {"role": "tool", "content": "ok"}]  # fmt: skip
        await client.chat.completions.create(model="m", messages=history, tools=TOOLS)
        await client.close()

    async def all_():
        await asyncio.gather(*(one(s) for s in sessions))

    asyncio.run(all_())
    assert all(len(s.trajectory.steps) == 2 for s in sessions)
    assert sum(bool(s.trajectory.segment_starts) for s in sessions) == 0


def test_a_call_after_a_weight_sync_is_stamped_with_the_new_version(gateway, loop_thread):
    """Each call holds the run's policy gate: a sync lands between two calls of a session,
    and each call carries the version that sampled it."""
    gate = PolicyGate()

    async def start():
        stamped = Gateway(gateway.engine, gateway.renderer, gateway.replies.tokenizer, gate)
        await stamped.start()
        return stamped, stamped.open(SessionSettings(), Trajectory("v:0", "v"))

    stamped, session = loop_thread.call(start())
    client = openai.OpenAI(base_url=stamped.url_of(session), api_key=session.key, max_retries=0)
    first = client.chat.completions.create(model="m", messages=CHAT_MESSAGES, max_tokens=4)

    async def sync():
        return await gate.swap(lambda: asyncio.sleep(0))

    loop_thread.call(sync())
    history = [*CHAT_MESSAGES, first.choices[0].message.model_dump(exclude_none=True),
               {"role": "user", "content": "Go on."}]  # fmt: skip
    client.chat.completions.create(model="m", messages=history, max_tokens=4)
    assert [s.policy_version for s in session.trajectory.steps] == [0, 1]
    assert session.trajectory.segment_starts == []
    loop_thread.call(stamped.aclose())


def test_hostile_calls_get_a_clear_error_and_the_episode_keeps_what_it_had(gateway, loop_thread):
    import httpx

    session, client = open_session(gateway, loop_thread)
    client.chat.completions.create(model="m", messages=CHAT_MESSAGES, max_tokens=4)
    huge = [{"role": "user", "content": "x" * 2_000_000}]
    with pytest.raises(openai.BadRequestError, match="more than fit the model's context"):
        client.chat.completions.create(model="m", messages=huge)
    with pytest.raises(openai.BadRequestError, match="one choice per call"):
        client.chat.completions.create(model="m", messages=CHAT_MESSAGES, n=2)
    with pytest.raises(openai.BadRequestError, match="role"):
        client.chat.completions.create(model="m", messages=[{"role": "wizard", "content": "hi"}])
    url = f"{gateway.url_of(session)}/chat/completions"
    headers = {"Authorization": f"Bearer {session.key}"}
    for body in (b"{", b"[1, 2]", b'{"model": "m", "messages": []}', b"\xff\xfe"):
        reply = httpx.post(url, content=body, headers=headers)
        assert reply.status_code == 400 and reply.json()["error"]["message"]
    gone = openai.OpenAI(base_url=f"{gateway.base_url}/s/nope/v1", api_key="k", max_retries=0)
    with pytest.raises(openai.NotFoundError, match="no open session"):
        gone.chat.completions.create(model="m", messages=CHAT_MESSAGES)
    assert len(session.trajectory.steps) == 1  # what it had is kept
