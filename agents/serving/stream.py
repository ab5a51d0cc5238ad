"""`stream=true`: completions and chat answers as server-sent events, token by token, in the
chunk shapes the official `openai` client reads (`data: {...}` events, then `data: [DONE]`).

Each choice's text is decoded as its tokens arrive and released only up to a point that
cannot change: not past a stop string or the start of one, not into a half-written UTF-8
character, and, when the reply may call tools, not past the start of a `<tool_call>` tag. The
calls themselves go out as one `tool_calls` delta once the choice has finished and parsed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from toolgym.agents.engines.base import Completion, EngineError

Job = tuple[list[int], Any]
"""Prompt ids and sampling parameters of one choice."""


@dataclass
class ChoiceText:
    """One choice's released text."""

    tokenizer: Any
    stops: list[str]
    prefix: str = ""
    """Text the reply starts with that the model did not write (a forced tool-call opening)."""
    marker: str | None = None
    """Release nothing from here on (a tool call's opening tag)."""
    tokens: list[int] = field(default_factory=list)
    decoded: str = ""
    """The text of `tokens[:read]`: whole characters only."""
    context: int = 0
    read: int = 0
    sent: str = ""

    def push(self, token: int) -> str:
        self.tokens.append(token)
        self._advance()
        return self._release(self._visible(self.prefix + self.decoded))

    def _advance(self) -> None:
        """Decode only the tokens since the last whole character, with the chunk before them as
        context (a tokenizer may render a token's leading space differently at the start), so a
        long reply is not decoded again from its start at every token."""
        window = self._decode(self.tokens[self.context :])
        if window.endswith("\ufffd"):
            return  # a character split across tokens: wait for its other bytes
        known = self._decode(self.tokens[self.context : self.read])
        if window.startswith(known):
            self.decoded += window[len(known) :]
        else:
            self.decoded = self._decode(self.tokens)
        self.context, self.read = self.read, len(self.tokens)

    def _decode(self, tokens: list[int]) -> str:
        return self.tokenizer.decode(
            tokens, skip_special_tokens=True, clean_up_tokenization_spaces=False
        )

    def finish(self, final: str) -> str:
        return self._release(final)

    def _visible(self, text: str) -> str:
        """Up to the first stop or marker, less any tail that may be the start of one."""
        ends = [*self.stops, *([self.marker] if self.marker else [])]
        cut = min((i for s in ends if (i := text.find(s)) >= 0), default=len(text))
        text = text[:cut]
        held = max((k for s in ends for k in range(1, len(s)) if text.endswith(s[:k])), default=0)
        return text[: len(text) - held]

    def _release(self, text: str) -> str:
        if not text.startswith(self.sent) or len(text) == len(self.sent):
            return ""
        delta, self.sent = text[len(self.sent) :], text
        return delta


async def stream(
    request: web.Request,
    jobs: list[Job],
    generate: Callable[[int, Job, Callable[[int], None]], Awaitable[Completion]],
    on_token: Callable[[int, int], list[dict[str, Any]]],
    on_finish: Callable[[int, Completion], list[dict[str, Any]]],
    opening: list[dict[str, Any]],
    usage: Callable[[list[Completion]], dict[str, Any]] | None,
) -> web.StreamResponse:
    """Run every job, sending `opening`, then what `on_token(choice, token)` and
    `on_finish(choice, completion)` make of the engine's output as it comes, then the usage
    chunk (when asked for) and [DONE]. A client that goes away cancels its generations."""
    events: asyncio.Queue[tuple[int, int | Completion | BaseException]] = asyncio.Queue()

    async def run(index: int, job: Job) -> None:
        try:
            completion = await generate(index, job, lambda t: events.put_nowait((index, t)))
            events.put_nowait((index, completion))
        except Exception as exc:
            events.put_nowait((index, exc))

    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    tasks = [asyncio.create_task(run(i, job)) for i, job in enumerate(jobs)]
    finished: dict[int, Completion] = {}
    try:
        for chunk in opening:
            await _send(response, chunk)
        while len(finished) < len(jobs):
            index, event = await events.get()
            if isinstance(event, BaseException):
                message = str(event) if isinstance(event, EngineError) else repr(event)
                await _send(
                    response,
                    {"error": {"message": message, "type": "InternalServerError", "code": 500}},
                )
                break
            chunks = on_token(index, event) if isinstance(event, int) else on_finish(index, event)
            if not isinstance(event, int):
                finished[index] = event
            for chunk in chunks:
                await _send(response, chunk)
        else:
            if usage is not None:
                await _send(response, usage([finished[i] for i in range(len(jobs))]))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return response


async def _send(response: web.StreamResponse, chunk: dict[str, Any]) -> None:
    await response.write(f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode())


async def send_events(
    request: web.Request, events: list[tuple[str | None, dict[str, Any]]], done: bool
) -> web.StreamResponse:
    """Whole replies as server-sent events, each `data` with its `event` name where it has
    one, then the chat API's `data: [DONE]` where `done`."""
    response = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await response.prepare(request)
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        await response.write(f"{head}data: {json.dumps(data, ensure_ascii=False)}\n\n".encode())
    if done:
        await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response
