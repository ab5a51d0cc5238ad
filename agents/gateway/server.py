"""The gateway: an OpenAI-compatible chat endpoint in front of the policy being trained, which
records the exact tokens of every call into its session (session.py).

A call names its session in the URL (`/s/SESSION/v1/chat/completions`: the base_url a
harness is handed), in an `X-Session-Id` header or in the request's `user` field, and
carries that session's key as its bearer token. A call naming no session, an unknown or
ended one, or another session's key is refused in words (400, 404, 401). The chat is the
model server's (serving/chat_reply.py: tools, tool_choice, log-probabilities, stream), with these
differences: the reply is sampled as the session says (the run's temperature, whatever the
harness asks), one choice per call, a stream sends the reply whole once it is sampled (the
chunk shapes the openai client reads), and `model` is echoed, not checked. A call the
session's budget refuses is a 400 that ends the episode by the policy's doing; an engine
that fails marks the episode masked, whatever the harness makes of the error. An agent may
also report a reward for its episode (`POST .../v1/reward`): its `agent` score, bounded and
refused in words once the session has ended. A client of the Responses API
(`POST .../v1/responses`: the OpenAI Agents SDK's default) is answered from the same chat,
and recorded alike (serving/responses.py).

It listens on 127.0.0.1 unless told otherwise; every call needs its session's key anyway.
A call is hostile until bounded: its key is checked before its body is read (a keyless
sender costs no parsing), its body must arrive within BODY_TIMEOUT_S, the connections are
capped (admission.py), a call whose client left is cancelled and a call still sampling when
its session ends is dropped, neither recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import time
import uuid
from dataclasses import dataclass
from typing import Any, NamedTuple

from aiohttp import ClientPayloadError, web
from pydantic import BaseModel, ConfigDict, Field

from toolgym.agents.engines.base import Completion, Engine, SamplingParams
from toolgym.agents.gateway.admission import Admission
from toolgym.agents.gateway.conversation import reply_key
from toolgym.agents.gateway.result_check import AGENT
from toolgym.agents.gateway.session import BudgetSpent, Prompt, Session, SessionSettings
from toolgym.agents.gateway.teacher import Teacher
from toolgym.agents.policy_gate import PolicyGate
from toolgym.agents.render import ChatRenderer
from toolgym.agents.serving.chat_reply import ChatReplies
from toolgym.agents.serving.chat_request import template_messages, template_tools, tool_choice
from toolgym.agents.serving.protocol import (
    ApiError,
    ChatRequest,
    api_errors,
    cut_at_stop,
    parse_body,
)
from toolgym.agents.serving.responses import ResponsesRequest, response_events, response_object
from toolgym.agents.serving.stream import send_events
from toolgym.agents.trajectory import Trajectory
from toolgym.errors import ConfigError, one_line

REPORTED_LIMIT = 1000.0
"""The largest reward, either side of 0, an agent may report."""


class RewardReport(BaseModel):
    """What an agent reports to `POST .../v1/reward`."""

    model_config = ConfigDict(extra="forbid")
    reward: float = Field(allow_inf_nan=False, ge=-REPORTED_LIMIT, le=REPORTED_LIMIT)
    call: int | None = Field(default=None, ge=-1, lt=1 << 30)
    """The model call it rewards: its index in the session (0 the first), -1 the latest;
    None: the whole episode."""


MODEL_NAME = "policy"
NO_LIMIT = 1 << 30
BODY_TIMEOUT_S = 30.0
"""How long a call's body may take to arrive once its head has."""


class Gateway:
    def __init__(
        self, engine: Engine | Teacher, renderer: ChatRenderer, tokenizer: Any,
        gate: PolicyGate | None = None, concurrency: int = 64, max_body_bytes: int = 16 << 20,
    ) -> None:  # fmt: skip
        """`engine`: the policy, or a teacher whose replies are recorded in the policy's
        tokens (teacher.py); `gate`: the run's policy clock, which stamps each call with the
        version that sampled it; `concurrency`: generations at once, over all sessions."""
        self.engine, self.renderer, self.gate = engine, renderer, gate
        self.replies = ChatReplies(renderer, tokenizer)
        self.limit = asyncio.Semaphore(concurrency)
        self.max_body_bytes = max_body_bytes
        self.sessions: dict[str, Session] = {}
        self.by_key: dict[str, Session] = {}
        self.admission = Admission()
        self.base_url = ""
        self._runner: web.AppRunner | None = None
        self._server: asyncio.Server | None = None
        self.created = int(time.time())

    # ----- sessions -----------------------------------------------------------------------------
    def open(self, settings: SessionSettings, trajectory: Trajectory) -> Session:
        """A new session whose calls fill `trajectory`."""
        session = Session(uuid.uuid4().hex, secrets.token_urlsafe(24), settings, self.renderer,
                          trajectory)  # fmt: skip
        self.sessions[session.id] = session
        self.by_key[session.key] = session
        return session

    def url_of(self, session: Session) -> str:
        """The base_url an OpenAI client of this session is given."""
        return f"{self.base_url}/s/{session.id}/v1"

    def close(self, session: Session) -> None:
        """End the session: later calls are refused, and its trajectory is the caller's."""
        session.closed = True
        self.sessions.pop(session.id, None)
        self.by_key.pop(session.key, None)

    # ----- serving ------------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application(
            middlewares=[self._admitted, api_errors], client_max_size=self.max_body_bytes
        )
        app.router.add_get("/health", self.health)
        for prefix in ("", "/s/{session}"):
            app.router.add_get(f"{prefix}/v1/models", self.models)
            app.router.add_post(f"{prefix}/v1/chat/completions", self.chat)
            app.router.add_post(f"{prefix}/v1/responses", self.responses)
            app.router.add_post(f"{prefix}/v1/reward", self.reward)
        return app

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        """Listen on `host`:`port` (0: a free port) on this loop; returns the base URL."""
        runner = web.AppRunner(self.app(), access_log=None, handler_cancellation=True,
                               keepalive_timeout=self.admission.request_s)  # fmt: skip
        await runner.setup()
        assert runner.server is not None
        loop = asyncio.get_running_loop()
        try:
            server = await loop.create_server(
                self.admission.factory(runner.server), host, port, backlog=128
            )
        except OSError as exc:
            await runner.cleanup()
            raise ConfigError(
                f"the gateway cannot listen on {host}:{port}: {exc.strerror}"
            ) from None
        bound = server.sockets[0].getsockname()
        self._runner, self._server = runner, server
        self.base_url = f"http://{_host(host)}:{bound[1]}"
        return self.base_url

    async def aclose(self) -> None:
        for session in list(self.sessions.values()):
            self.close(session)
        if self._server is not None:
            self._server.close()
            self._server = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def models(self, request: web.Request) -> web.Response:
        entry = {"id": MODEL_NAME, "object": "model", "created": self.created,
                 "owned_by": "toolgym"}  # fmt: skip
        return web.json_response({"object": "list", "data": [entry]})

    @web.middleware
    async def _admitted(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """A request without a body is read whole once its handler starts; every answer
        gives its connection a fresh deadline for the next request."""
        if not request.body_exists:
            self.admission.mark_read(request.transport)
        try:
            return await handler(request)
        finally:
            self.admission.mark_answered(request.transport)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        keyed = self._keyed(request)  # before the body: a keyless call costs no parsing
        body: ChatRequest = await self._body(request, ChatRequest)
        self.admission.mark_read(request.transport)
        reply = self._envelope(body, await self._reply(request, body, keyed))
        if body.stream:
            return await send_events(request, _chat_chunks(reply, body.include_usage), done=True)
        return web.json_response(reply)

    async def responses(self, request: web.Request) -> web.StreamResponse:
        """The Responses API: the same call as a chat (serving/responses.py), recorded alike."""
        keyed = self._keyed(request)
        body: ResponsesRequest = await self._body(request, ResponsesRequest)
        self.admission.mark_read(request.transport)
        answer = await self._reply(request, body.chat(), keyed)
        reply = response_object(body, answer.message, answer.finish, answer.prompt_tokens,
                                answer.completion_tokens)  # fmt: skip
        if body.stream:
            events = [(event["type"], event) for event in response_events(reply)]
            return await send_events(request, events, done=False)
        return web.json_response(reply)

    async def _reply(self, request: web.Request, body: ChatRequest, keyed: Session) -> _Answer:
        """The call answered in its session and recorded there."""
        session = self._session(request, body, keyed)
        try:
            call = self._read(body, session)
        except RecursionError:
            raise ApiError(400, "the messages are nested too deeply", param="messages") from None
        session.in_flight += 1  # a session being answered is not idle
        try:
            async with session.lock:
                answer = await self._answer(session, call)
        finally:
            session.in_flight -= 1
        return answer

    async def reward(self, request: web.Request) -> web.Response:
        """The agent reports a reward for its episode, or for one of its model calls (its
        `agent` score; a second report of the same replaces the first). Refused in words:
        another session's key, an ended session, a value that is not a finite number within
        REPORTED_LIMIT, a call the session has not made."""
        keyed = self._keyed(request)
        named = request.match_info.get("session") or request.headers.get("X-Session-Id")
        if named and self.sessions.get(named) is not keyed:
            raise ApiError(401, "the call's API key is not its session's", "AuthenticationError")
        report: RewardReport = await self._body(request, RewardReport)
        self.admission.mark_read(request.transport)
        if keyed.closed:
            raise ApiError(404, f"session {keyed.id} has ended", param="session")
        call = report.call
        if call is not None:
            if call >= keyed.calls or keyed.calls == 0:
                raise ApiError(
                    400, f"call {call}: this session has made {keyed.calls} model calls",
                    param="call",
                )  # fmt: skip
            call = call % keyed.calls
        keyed.trajectory.record(AGENT, report.reward, step=call)
        return web.json_response({"session": keyed.id, "reward": report.reward, "call": call})

    def _read(self, body: ChatRequest, session: Session) -> _Call:
        """The call's request, checked (a 400 in words for anything it cannot honour)."""
        if body.n != 1:
            raise ApiError(400, "the gateway samples one choice per call (n=1)", param="n")
        messages = template_messages(body.messages)
        tools = template_tools(body.tools)
        readable = json.dumps([messages, tools], default=str)
        self.replies.check_text_size(len(readable), session.settings.max_context_tokens, "messages")
        choice = tool_choice(body.tool_choice, tools)
        forced_text = self.replies.forced_opening(choice, tools)
        asked = body.sampling(0, body.max_completion_tokens or body.max_tokens or NO_LIMIT,
                              body.top_logprobs if body.logprobs else 0)  # fmt: skip
        forced = self.renderer.encode(forced_text) if forced_text else []
        return _Call(messages, tools, choice.mode != "none", forced_text, forced, asked,
                     body.logprobs)  # fmt: skip

    async def _body(self, request: web.Request, model: type[BaseModel]) -> Any:
        """The call's body as `model`, read within BODY_TIMEOUT_S; a client that leaves
        mid-body gets nothing (there is no one to answer) and logs no failure."""
        try:
            async with asyncio.timeout(BODY_TIMEOUT_S):
                body = await parse_body(request, model)
        except TimeoutError:
            raise ApiError(408, f"the request body took over {BODY_TIMEOUT_S:g} s") from None
        except (ConnectionError, ClientPayloadError):
            raise web.HTTPBadRequest(reason="the client left before its body arrived") from None
        return body

    async def _answer(self, session: Session, call: _Call) -> _Answer:
        """Sample the reply on the session's tokens and record it (the session's lock held)."""
        if session.closed:
            raise ApiError(404, f"session {session.id} has ended", param="session")
        try:
            session.check_budget()
            prompt = await asyncio.to_thread(session.prompt, call.messages, call.tools)
            sampling = session.sampling(prompt, call.forced, call.asked)
        except BudgetSpent as exc:
            raise ApiError(400, f"{exc}: the episode is over", "BudgetSpent") from None
        completion, version, seconds = await self._generate(session, prompt, call, sampling)
        if session.closed:  # the episode ended while this call was sampled: it is not its turn
            raise ApiError(404, f"session {session.id} has ended", param="session")
        text = call.forced_text + cut_at_stop(completion.text, sampling.stop)
        message, finish = self.replies.assistant_message(text, completion.finish_reason,
                                                         call.use_tools)  # fmt: skip
        calls = [_tool_call(c) for c in message["tool_calls"]]
        session.call_names |= {c["id"]: c["function"]["name"] for c in message["tool_calls"]}
        valid = not (call.use_tools and self.replies.parser.open_tag in text and not calls)
        reply = reply_key(message["content"], [(c["name"], c["arguments"]) for c in calls])
        session.record(prompt, call.forced, completion, text, reply, calls, valid, version, seconds)
        if not message["tool_calls"]:
            del message["tool_calls"]
        logprobs = self.replies.chat_logprobs(completion) if call.logprobs else None
        return _Answer(message, finish, logprobs, len(prompt.ids) + len(call.forced),
                       len(completion.token_ids))  # fmt: skip

    async def _generate(
        self, session: Session, prompt: Prompt, call: _Call, sampling: SamplingParams
    ) -> tuple[Completion, int, float]:
        gate = self.gate if session.settings.hold_calls else None
        async with self.limit:
            t0 = time.perf_counter()
            try:
                async with gate.hold() if gate else contextlib.nullcontext():
                    if isinstance(self.engine, Teacher):
                        completion = await self.engine.write(
                            call.messages, call.tools, call.forced_text, sampling
                        )
                    else:
                        completion = await self.engine.generate(
                            prompt.ids + call.forced, sampling, session.settings.adapter
                        )
                    version = self.gate.version if self.gate else 0
            except Exception as exc:
                session.failed = f"the engine failed a call: {one_line(exc, 300)}"
                raise ApiError(502, session.failed, "EngineError") from None
        return completion, version, time.perf_counter() - t0

    def _keyed(self, request: web.Request) -> Session:
        """The open session whose key the call carries, or a 401 (its body unread)."""
        given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        session = self.by_key.get(given)
        if session is not None:
            return session
        named = request.match_info.get("session") or request.headers.get("X-Session-Id")
        if named and named not in self.sessions:
            raise ApiError(404, f"no open session {named[:64]!r}", param="session")
        whose = "not its session's" if named else "no open session's"
        raise ApiError(401, f"the call's API key is {whose}", "AuthenticationError")

    def _session(self, request: web.Request, body: ChatRequest, keyed: Session) -> Session:
        named = (
            request.match_info.get("session") or request.headers.get("X-Session-Id") or body.user
        )
        if not named:
            raise ApiError(
                400, "the call names no session: the gateway records each call into its "
                "episode, so use the base_url you were given (/s/SESSION/v1), an X-Session-Id "
                "header or the `user` field", param="session",
            )  # fmt: skip
        session = self.sessions.get(named)
        if session is None:
            raise ApiError(404, f"no open session {named[:64]!r}", param="session")
        if session is not keyed:
            raise ApiError(401, "the call's API key is not its session's", "AuthenticationError")
        return session

    def _envelope(self, body: ChatRequest, answer: _Answer) -> dict[str, Any]:
        choice = {"index": 0, "message": answer.message, "finish_reason": answer.finish,
                  "logprobs": answer.logprobs}  # fmt: skip
        prompt, written = answer.prompt_tokens, answer.completion_tokens
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion",
            "created": int(time.time()), "model": body.model, "choices": [choice],
            "usage": {"prompt_tokens": prompt, "completion_tokens": written,
                      "total_tokens": prompt + written},
        }  # fmt: skip


@dataclass(frozen=True)
class _Call:
    """One call's request, checked."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    use_tools: bool
    forced_text: str
    """The opening of a required or named tool call, which the prompt ends with."""
    forced: list[int]
    asked: SamplingParams
    """What the harness asked for: its max_tokens, stop strings and top log-probabilities."""
    logprobs: bool


class _Answer(NamedTuple):
    message: dict[str, Any]
    finish: str
    logprobs: dict[str, Any] | None
    prompt_tokens: int
    completion_tokens: int


def _tool_call(call: dict[str, Any]) -> dict[str, Any]:
    """A reply's tool call as a turn records it: its name and arguments (as objects)."""
    function = call["function"]
    return {"name": function["name"], "arguments": json.loads(function["arguments"])}


def _chat_chunks(reply: dict[str, Any], usage: bool) -> list[tuple[str | None, dict[str, Any]]]:
    """A whole chat reply as the chunks a streaming client reads: the role, the text, the tool
    calls, the finish (and the usage when asked)."""
    head = {k: reply[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    choice, message = reply["choices"][0], reply["choices"][0]["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                     "finish_reason": finish}]}  # fmt: skip

    chunks = [chunk({"role": "assistant", "content": ""})]
    if message.get("content"):
        chunks.append(chunk({"content": message["content"]}))
    if message.get("tool_calls"):
        calls = [{"index": k, **c} for k, c in enumerate(message["tool_calls"])]
        chunks.append(chunk({"tool_calls": calls}))
    chunks.append(chunk({}, choice["finish_reason"]))
    if usage:
        chunks.append({**head, "choices": [], "usage": reply["usage"]})
    return [(None, c) for c in chunks]


def _host(host: str) -> str:
    if host in ("0.0.0.0", "", "::"):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host
