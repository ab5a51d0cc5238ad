"""`toolgym serve model`: an OpenAI-compatible HTTP server over the hf engine.

It speaks the subset of the protocol rollouts and trainers use, the way vLLM speaks it:
`/v1/completions` with text or token-id prompts and `return_token_ids` (token ids of the
prompt and completion in each choice), `/v1/chat/completions` with tools in and `tool_calls`
out (Hermes `<tool_call>` blocks), `tool_choice` none, auto, required or a named function,
`stream=true` for both (serving/stream.py), `/v1/responses` answered as the chat it amounts
to (serving/responses.py: what the OpenAI Agents SDK's default model calls), `/v1/models`, `/health`, and vLLM's runtime LoRA
routes `/v1/load_lora_adapter` and `/v1/unload_lora_adapter`. Concurrent requests are batched
by the engine. Errors come back as vLLM's error JSON with a 4xx status. A chat's reply (its
tool calls, a forced call's opening, its log-probabilities) is written by serving/chat_reply.py.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from toolgym.agents.engines.base import Completion
from toolgym.agents.engines.hf import BadRequestError, HFEngine
from toolgym.agents.render_vision import make_renderer
from toolgym.agents.serving.chat_reply import ChatReplies
from toolgym.agents.serving.chat_request import template_messages, template_tools, tool_choice
from toolgym.agents.serving.protocol import (
    ApiError,
    ChatRequest,
    CompletionRequest,
    LoadAdapterRequest,
    UnloadAdapterRequest,
    api_errors,
    cut_at_stop,
    parse_body,
)
from toolgym.agents.serving.responses import ResponsesRequest, response_events, response_object
from toolgym.agents.serving.stream import ChoiceText, Job, send_events, stream
from toolgym.agents.vision import ImageError, text_only
from toolgym.http import serve

DEFAULT_MAX_TOKENS = 16


@dataclass(frozen=True)
class _ChatJobs:
    """A chat request made ready to generate."""

    jobs: list[Job]
    """Each choice's prompt and sampling."""
    adapter: str | None
    forced: str
    """The opening of a required or named tool call, which each prompt ends with."""
    use_tools: bool
    images: list[str]


@dataclass(frozen=True)
class ServerLimits:
    """What one request may ask for; checked before any expensive step."""

    max_body_bytes: int = 16 * 1024 * 1024
    max_choices: int = 256
    """Completions one request fans out to: prompts x n."""


class ModelServer:
    def __init__(
        self, engine: HFEngine, model_name: str, limits: ServerLimits = ServerLimits()
    ) -> None:
        self.engine, self.model_name, self.limits = engine, model_name, limits
        self.renderer = make_renderer(engine.tokenizer, engine.images)
        self.replies = ChatReplies(self.renderer, engine.tokenizer)
        self.created = int(time.time())

    def app(self) -> web.Application:
        app = web.Application(middlewares=[api_errors], client_max_size=self.limits.max_body_bytes)
        app.router.add_get("/health", self.health)
        app.router.add_get("/v1/models", self.models)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_post("/v1/responses", self.responses)
        app.router.add_post("/v1/load_lora_adapter", self.load_adapter)
        app.router.add_post("/v1/unload_lora_adapter", self.unload_adapter)
        app.on_cleanup.append(lambda _: self.engine.aclose())
        return app

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def models(self, request: web.Request) -> web.Response:
        entries = [
            {
                "id": self.model_name,
                "object": "model",
                "created": self.created,
                "owned_by": "toolgym",
            }
        ]
        entries += [
            {
                "id": name,
                "object": "model",
                "created": self.created,
                "owned_by": "toolgym",
                "parent": self.model_name,
            }
            for name in self.engine.adapters
        ]
        return web.json_response({"object": "list", "data": entries})

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body = await parse_body(request, CompletionRequest)
        adapter = self._adapter_for(body.model)
        self._check_fan_out(len(body.prompts()) * body.n)
        for p in body.prompts():
            if isinstance(p, str):
                self._check_text_size(len(p), "prompt")
        prompts = await asyncio.to_thread(
            lambda: [self.renderer.encode(p) if isinstance(p, str) else p for p in body.prompts()]
        )
        jobs = [
            (ids, body.sampling(k, DEFAULT_MAX_TOKENS, body.logprobs or 0))
            for ids in prompts
            for k in range(body.n)
        ]
        if body.stream:
            return await self._stream_completions(request, body, jobs, adapter)
        results = await self._generate(jobs, adapter)
        choices = []
        for index, ((ids, sampling), c) in enumerate(zip(jobs, results, strict=True)):
            choice: dict[str, Any] = {
                "index": index,
                "text": cut_at_stop(c.text, sampling.stop),
                "finish_reason": c.finish_reason,
            }
            choice["logprobs"] = (
                self.replies.completion_logprobs(c, body.return_tokens_as_token_ids)
                if body.logprobs is not None
                else None
            )
            if body.return_token_ids:
                choice |= {"prompt_token_ids": ids, "token_ids": c.token_ids}
            choices.append(choice)
        return web.json_response(
            self._envelope("cmpl", "text_completion", body.model, choices, jobs, results)
        )

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await parse_body(request, ChatRequest)
        chat = await self._chat_jobs(body)
        if body.stream:
            return await self._stream_chat(request, body, chat)
        results = await self._generate(chat.jobs, chat.adapter, chat.images)
        choices = []
        for index, ((_, sampling), c) in enumerate(zip(chat.jobs, results, strict=True)):
            message, finish = self.replies.assistant_message(
                chat.forced + cut_at_stop(c.text, sampling.stop), c.finish_reason, chat.use_tools
            )
            choice: dict[str, Any] = {"index": index, "message": message, "finish_reason": finish}
            choice["logprobs"] = self.replies.chat_logprobs(c) if body.logprobs else None
            if body.return_token_ids:
                choice["token_ids"] = c.token_ids
            choices.append(choice)
        response = self._envelope(
            "chatcmpl", "chat.completion", body.model, choices, chat.jobs, results
        )
        if body.return_token_ids:
            response["prompt_token_ids"] = chat.jobs[0][0]
        return web.json_response(response)

    async def responses(self, request: web.Request) -> web.StreamResponse:
        """The Responses API, answered as the chat it amounts to (serving/responses.py)."""
        body = await parse_body(request, ResponsesRequest)
        chat = await self._chat_jobs(body.chat())
        [(prompt, sampling)] = chat.jobs
        [c] = await self._generate(chat.jobs, chat.adapter, chat.images)
        message, finish = self.replies.assistant_message(
            chat.forced + cut_at_stop(c.text, sampling.stop), c.finish_reason, chat.use_tools
        )
        reply = response_object(body, message, finish, len(prompt), len(c.token_ids))
        if body.stream:
            events = [(event["type"], event) for event in response_events(reply)]
            return await send_events(request, events, done=False)
        return web.json_response(reply)

    async def _chat_jobs(self, body: ChatRequest) -> _ChatJobs:
        """A chat request checked and rendered: a prompt and sampling for each choice."""
        adapter = self._adapter_for(body.model)
        self._check_fan_out(body.n)
        messages = template_messages(body.messages, images=self.engine.images is not None)
        tools = template_tools(body.tools)
        choice_of_tool = tool_choice(body.tool_choice, tools)
        readable = [text_only(messages), tools]  # images are bounded when they are read
        self._check_text_size(len(json.dumps(readable, default=str)), "messages")
        images = self.renderer.image_urls(messages)
        prompt = await self._engine_call(asyncio.to_thread(self._prompt, messages, tools, images))
        forced = self.replies.forced_opening(choice_of_tool, tools)
        prompt = prompt + self.renderer.encode(forced) if forced else prompt
        max_tokens = (
            body.max_completion_tokens or body.max_tokens or self.engine.max_length - len(prompt)
        )
        jobs = [
            (prompt, body.sampling(k, max_tokens, body.top_logprobs if body.logprobs else 0))
            for k in range(body.n)
        ]
        return _ChatJobs(jobs, adapter, forced, choice_of_tool.mode != "none", images)

    # ----- streaming ----------------------------------------------------------------------------
    async def _stream_completions(
        self, request: web.Request, body: CompletionRequest, jobs: list[Job], adapter: str | None
    ) -> web.StreamResponse:
        texts = [ChoiceText(self.engine.tokenizer, s.stop) for _, s in jobs]
        head = self._stream_head("cmpl", "text_completion", body.model)

        def chunk(index: int, text: str, finish: str | None) -> dict[str, Any]:
            choice = {"index": index, "text": text, "logprobs": None, "finish_reason": finish}
            return {**head, "choices": [choice]}

        def on_token(index: int, token: int) -> list[dict[str, Any]]:
            delta = texts[index].push(token)
            return [chunk(index, delta, None)] if delta else []

        def on_finish(index: int, c: Completion) -> list[dict[str, Any]]:
            rest = texts[index].finish(cut_at_stop(c.text, jobs[index][1].stop))
            return [chunk(index, rest, c.finish_reason)]

        return await self._stream(request, body, jobs, adapter, head, on_token, on_finish, [])

    async def _stream_chat(
        self, request: web.Request, body: ChatRequest, chat: _ChatJobs
    ) -> web.StreamResponse:
        jobs, forced, use_tools = chat.jobs, chat.forced, chat.use_tools
        marker = self.replies.parser.open_tag if use_tools else None
        texts = [ChoiceText(self.engine.tokenizer, s.stop, forced, marker) for _, s in jobs]
        head = self._stream_head("chatcmpl", "chat.completion.chunk", body.model)

        def chunk(index: int, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
            choice = {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}
            return {**head, "choices": [choice]}

        def on_token(index: int, token: int) -> list[dict[str, Any]]:
            delta = texts[index].push(token)
            return [chunk(index, {"content": delta}, None)] if delta else []

        def on_finish(index: int, c: Completion) -> list[dict[str, Any]]:
            text = forced + cut_at_stop(c.text, jobs[index][1].stop)
            message, finish = self.replies.assistant_message(text, c.finish_reason, use_tools)
            out = []
            if rest := texts[index].finish(message["content"] or ""):
                out.append(chunk(index, {"content": rest}, None))
            if message["tool_calls"]:
                calls = [{"index": k, **call} for k, call in enumerate(message["tool_calls"])]
                out.append(chunk(index, {"tool_calls": calls}, None))
            return [*out, chunk(index, {}, finish)]

        opening = [chunk(i, {"role": "assistant", "content": ""}, None) for i in range(len(jobs))]
        return await self._stream(
            request, body, jobs, chat.adapter, head, on_token, on_finish, opening, chat.images
        )

    async def _stream(
        self, request: web.Request, body: Any, jobs: list[Job], adapter: str | None,
        head: dict[str, Any], on_token: Any, on_finish: Any, opening: list[dict[str, Any]],
        images: list[str] | None = None,
    ) -> web.StreamResponse:  # fmt: skip
        for ids, sampling in jobs:  # a bad request is a 400, before the stream starts
            try:
                self.engine.check_request(ids, sampling, adapter)
            except BadRequestError as exc:
                raise ApiError(400, str(exc)) from None

        def generate(index: int, job: Job, token: Any) -> Any:
            return self.engine.generate(job[0], job[1], adapter, on_token=token, images=images)

        def usage(results: list[Completion]) -> dict[str, Any]:
            return {**head, "choices": [], "usage": _usage(jobs, results)}

        return await stream(
            request, jobs, generate, on_token, on_finish, opening,
            usage if body.include_usage else None,
        )  # fmt: skip

    def _stream_head(self, prefix: str, kind: str, model: str) -> dict[str, Any]:
        return {
            "id": f"{prefix}-{uuid.uuid4().hex}", "object": kind, "created": int(time.time()),
            "model": model,
        }  # fmt: skip

    async def load_adapter(self, request: web.Request) -> web.Response:
        body = await parse_body(request, LoadAdapterRequest)
        if body.lora_name == self.model_name:
            raise ApiError(400, f"'{body.lora_name}' is the base model's name", param="lora_name")
        await self._engine_call(self.engine.load_adapter(body.lora_name, body.lora_path))
        return web.Response(text=f"Success: LoRA adapter '{body.lora_name}' added successfully.")

    async def unload_adapter(self, request: web.Request) -> web.Response:
        body = await parse_body(request, UnloadAdapterRequest)
        if body.lora_name not in self.engine.adapters:
            raise ApiError(
                404,
                f"The lora adapter '{body.lora_name}' cannot be found.",
                param="lora_name",
            )
        await self._engine_call(self.engine.unload_adapter(body.lora_name))
        return web.Response(text=f"Success: LoRA adapter '{body.lora_name}' removed successfully.")

    # ----- helpers ------------------------------------------------------------------------------
    def _check_fan_out(self, choices: int) -> None:
        if choices > self.limits.max_choices:
            raise ApiError(
                400, f"the request asks for {choices} completions (prompts x n); this server "
                f"serves at most {self.limits.max_choices} per request", param="n",
            )  # fmt: skip

    def _check_text_size(self, chars: int, what: str) -> None:
        self.replies.check_text_size(chars, self.engine.max_length, what)

    def _adapter_for(self, model: str) -> str | None:
        if model == self.model_name:
            return None
        if model in self.engine.adapters:
            return model
        raise ApiError(404, f"The model `{model}` does not exist.", param="model")

    async def _generate(
        self,
        jobs: list[tuple[list[int], Any]],
        adapter: str | None,
        images: list[str] | None = None,
    ) -> list[Completion]:
        return await self._engine_call(
            asyncio.gather(
                *(self.engine.generate(ids, s, adapter, images=images) for ids, s in jobs)
            )
        )

    def _prompt(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], images: list[str]
    ) -> list[int]:
        """The prompt's ids, its images checked (a bad image is a 400 before any stream)."""
        try:
            prompt = self.renderer.prompt_ids(messages, tools or None)
        except ImageError as exc:
            raise BadRequestError(str(exc)) from None
        if images:
            self.engine.pixels(prompt, images)
        return prompt

    async def _engine_call(self, awaitable: Awaitable[Any]) -> Any:
        try:
            return await awaitable
        except BadRequestError as exc:
            raise ApiError(400, str(exc)) from None

    def _envelope(
        self,
        prefix: str,
        kind: str,
        model: str,
        choices: list[dict[str, Any]],
        jobs: list[Any],
        results: list[Completion],
    ) -> dict[str, Any]:
        return {
            "id": f"{prefix}-{uuid.uuid4().hex}",
            "object": kind,
            "created": int(time.time()),
            "model": model,
            "choices": choices,
            "usage": _usage(jobs, results),
        }


def _usage(jobs: list[Job], results: list[Completion]) -> dict[str, int]:
    prompt_tokens = sum(len(ids) for ids, _ in jobs)
    completion_tokens = sum(len(c.token_ids) for c in results)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def serve_model(
    model_dir: str | Path,
    host: str = "127.0.0.1",
    port: int = 8000,
    served_model_name: str | None = None,
    max_batch_size: int = 64,
    limits: ServerLimits = ServerLimits(),
) -> None:
    """Load the model and serve it until interrupted."""
    engine = HFEngine(model_dir, max_batch_size=max_batch_size)
    server = ModelServer(engine, served_model_name or str(model_dir), limits)
    serve(server.app(), host, port, announce=lambda msg: print(msg, flush=True))
