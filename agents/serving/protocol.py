"""Request bodies of the OpenAI-compatible model server, validated with pydantic (a chat
request's messages and tools against the openai package's types: serving/chat_request.py).

Fields other OpenAI clients send but that do not change the result (user,
parallel_tool_calls, ...) are ignored; features that would change it and are not implemented
(echo, penalties, log-probabilities or token ids in a stream) are refused with a 400 rather
than silently dropped. Errors have vLLM's shape: {"error": {message, type, param, code}}
with the HTTP status as the integer code.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from toolgym.agents.engines.base import SamplingParams
from toolgym.log import get_logger

log = get_logger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ApiError(Exception):
    """An error answered as OpenAI's error JSON with an HTTP status."""

    def __init__(
        self, status: int, message: str, kind: str | None = None, param: str | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.param = status, message, param
        self.kind = kind or _KINDS.get(status, "BadRequestError")

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message, "type": self.kind, "param": self.param,
                "code": self.status,
            }
        }  # fmt: skip


_KINDS = {404: "NotFoundError", 500: "InternalServerError"}


class _Sampling(BaseModel):
    model_config = ConfigDict(extra="ignore")

    model: str
    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float = Field(default=1.0, ge=0, le=2)
    top_p: float = Field(default=1.0, gt=0, le=1)
    n: int = Field(default=1, ge=1, le=16)
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    seed: int | None = Field(default=None, ge=-(2**63), lt=2**63)
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    return_token_ids: bool = False
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0

    @model_validator(mode="after")
    def _supported(self) -> _Sampling:
        if self.stream and (self.return_token_ids or self._wants_logprobs()):
            raise ValueError(
                "stream=true with logprobs or return_token_ids is not supported by this "
                "server; request the whole response for those"
            )
        if self.presence_penalty or self.frequency_penalty:
            raise ValueError("presence_penalty and frequency_penalty are not supported")
        return self

    def _wants_logprobs(self) -> bool:
        asked = getattr(self, "logprobs", None)  # completions: an int (0 counts); chat: a bool
        return asked is not None and asked is not False

    @property
    def include_usage(self) -> bool:
        return bool((self.stream_options or {}).get("include_usage"))

    def sampling(self, index: int, default_max_tokens: int, top_logprobs: int) -> SamplingParams:
        stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])
        return SamplingParams(
            max_tokens=self.max_tokens or default_max_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            stop=stop,
            stop_token_ids=list(self.stop_token_ids or []),
            seed=None if self.seed is None else (self.seed + index) % 2**63,
            top_logprobs=top_logprobs,
        )


class CompletionRequest(_Sampling):
    prompt: str | list[int] | list[str] | list[list[int]]
    logprobs: int | None = Field(default=None, ge=0, le=20)
    echo: bool = False
    return_tokens_as_token_ids: bool = False

    @model_validator(mode="after")
    def _prompt(self) -> CompletionRequest:
        if self.echo:
            raise ValueError("echo=true is not supported")
        if isinstance(self.prompt, list) and not self.prompt:
            raise ValueError("prompt must not be empty")
        return self

    def prompts(self) -> list[str | list[int]]:
        p = self.prompt
        if isinstance(p, str):
            return [p]
        if all(isinstance(x, int) for x in p):
            return [list(p)]  # type: ignore[arg-type]
        return list(p)  # type: ignore[arg-type]


class ChatRequest(_Sampling):
    messages: list[Any] = Field(min_length=1)
    """Checked message by message against the openai types (serving/chat_request.py)."""
    tools: list[Any] | None = None
    tool_choice: Any = None
    max_completion_tokens: int | None = Field(default=None, ge=1)
    logprobs: bool = False
    top_logprobs: int = Field(default=0, ge=0, le=20)
    user: str | None = Field(default=None, max_length=256)
    """Ignored by the model server; the gateway reads a session id from it."""


class LoadAdapterRequest(BaseModel):
    lora_name: str = Field(min_length=1)
    lora_path: str = Field(min_length=1)


class UnloadAdapterRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    lora_name: str = Field(min_length=1)


async def parse_body(request: web.Request, model: type[BaseModel]) -> Any:
    try:
        data = json.loads(await request.text())
    except ValueError as exc:  # invalid JSON, bad UTF-8, or an integer too long to read
        raise ApiError(
            400, f"the request body is not valid JSON: {str(exc).split(';')[0][:200]}"
        ) from None
    except RecursionError:
        raise ApiError(400, "the request body is nested too deeply") from None
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object")
    if has_lone_surrogate(data):
        raise ApiError(
            400, "the request holds a lone surrogate (\\ud800-\\udfff), which is not valid "
            "Unicode text",
        )  # fmt: skip
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or None
        raise ApiError(400, f"{where or 'request'}: {first['msg']}", param=where) from None


def has_lone_surrogate(data: Any) -> bool:
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


@web.middleware
async def api_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ApiError as exc:
        return web.json_response(exc.body(), status=exc.status)
    except asyncio.CancelledError:
        raise  # the client went away: its work stops
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        asked = f"{request.method} {request.path[:200]}"
        why = (
            f"not served here (served: {served(request.app)})" if exc.status == 404 else exc.reason
        )
        return web.json_response(ApiError(exc.status, f"{asked}: {why}").body(), status=exc.status)
    except Exception as exc:  # a bug: the client still gets JSON, the log gets the traceback
        log.exception("%s %s failed", request.method, request.path)
        error = ApiError(500, f"internal error: {type(exc).__name__}: {exc}", "InternalServerError")
        return web.json_response(error.body(), status=500)


def served(app: web.Application) -> str:
    """The routes `app` answers, as "METHOD path" (a client that called another one, the
    OpenAI Agents SDK's /v1/responses say, learns what to call instead)."""
    routes = [
        f"{route.method} {route.resource.canonical}"
        for route in app.router.routes()
        if route.method != "HEAD" and route.resource is not None
    ]
    return ", ".join(dict.fromkeys(routes))


def cut_at_stop(text: str, stops: list[str]) -> str:
    cut = min((i for s in stops if (i := text.find(s)) >= 0), default=len(text))
    return text[:cut]
