"""The `openai` engine: token ids in, token ids and logprobs out, over HTTP.

Talks to any server that speaks vLLM's extension of the OpenAI completions API: `vllm serve`,
SGLang with the same extension, or `toolgym serve model`. Each request sends the prompt as
token ids and asks for `return_token_ids` and `logprobs`, so the rollout gets back exactly
the ids that were sampled and their log-probabilities; nothing is re-tokenized.

A vLLM server for rollouts and LoRA weight sync needs (vLLM 0.10.2 or newer):

    VLLM_ALLOW_RUNTIME_LORA_UPDATING=True vllm serve MODEL \\
        --enable-lora --max-lora-rank 64 --max-loras 4 \\
        --return-tokens-as-token-ids  # optional: logprob tokens as "token_id:N"

`return_token_ids` is a per-request field (sent by this engine); runtime LoRA loading is the
environment variable plus `--enable-lora`, used through `/v1/load_lora_adapter`.

Connections are pooled; connection errors, timeouts, 429 and 5xx answers are retried with
exponential backoff; other 4xx answers fail at once with the server's message.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import aiohttp

from toolgym.agents.engines.base import (
    Capabilities,
    Completion,
    EngineError,
    PolicyContext,
    SamplingParams,
)
from toolgym.errors import ConfigError
from toolgym.log import get_logger

log = get_logger(__name__)
RETRY_STATUSES = {408, 429, 500, 502, 503, 504}


class OpenAIEngine:
    capabilities: ClassVar[Capabilities] = Capabilities(
        "lora", adapters=True, requires=("base_url",)
    )
    """A server gets trained weights as LoRA adapters it loads by path."""

    @classmethod
    def for_policy(cls, context: PolicyContext) -> OpenAIEngine:
        """The engine a trainer generates with: the server's copy of the base model."""
        if not context.base_url:
            raise ConfigError(
                "engine.kind=openai needs engine.base_url (e.g. http://127.0.0.1:8000/v1)"
            )
        return cls(context.base_url, context.served_model or context.model_path)

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 600.0,
        max_retries: int = 4,
        backoff_s: float = 0.5,
        max_connections: int = 256,
    ) -> None:
        url = base_url.rstrip("/")
        self.base_url = url if url.endswith("/v1") else f"{url}/v1"
        self.model, self.api_key = model, api_key
        self.timeout_s, self.max_retries, self.backoff_s = timeout_s, max_retries, backoff_s
        self.max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        self._session_loop: asyncio.AbstractEventLoop | None = None

    async def generate(
        self,
        prompt_ids: list[int],
        sampling: SamplingParams,
        adapter: str | None = None,
        images: list[str] | None = None,
    ) -> Completion:
        if images:
            raise EngineError(
                "images in the prompt: the completions endpoint takes token ids and no pixels; generate with the hf engine for a "
                "vision-language model"
            )
        payload: dict[str, Any] = {
            "model": adapter or self.model,
            "prompt": list(prompt_ids),
            "max_tokens": sampling.max_tokens,
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "logprobs": sampling.top_logprobs,
            "return_token_ids": True,
        }
        if sampling.stop:
            payload["stop"] = sampling.stop
        if sampling.stop_token_ids:
            payload["stop_token_ids"] = sampling.stop_token_ids
        if sampling.seed is not None:
            payload["seed"] = sampling.seed
        data = await self.post("/completions", payload)
        return _completion(data, len(prompt_ids))

    async def load_adapter(self, name: str, path: str) -> None:
        """Load a LoRA adapter on the server (vLLM's runtime LoRA route) and use it by name."""
        await self.post(
            "/load_lora_adapter", {"lora_name": name, "lora_path": path}, expect_json=False
        )

    async def unload_adapter(self, name: str) -> None:
        await self.post("/unload_lora_adapter", {"lora_name": name}, expect_json=False)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def post(self, route: str, payload: dict[str, Any], expect_json: bool = True) -> Any:
        """POST `payload` to `route` under /v1, with the retries above."""
        url = self.base_url + route
        for attempt in range(self.max_retries + 1):
            try:
                async with self._client().post(url, json=payload) as response:
                    if response.status < 400:
                        return (
                            await response.json(content_type=None)
                            if expect_json
                            else await response.text()
                        )
                    message = _error_message(await response.text())
                    if response.status not in RETRY_STATUSES:
                        raise EngineError(f"{url} answered {response.status}: {message}")
                    problem = f"{response.status}: {message}"
            except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, TimeoutError) as exc:
                problem = f"{type(exc).__name__}: {exc}"
            if attempt < self.max_retries:
                delay = min(self.backoff_s * 2**attempt, 30.0)
                log.warning("%s failed (%s); retry %d in %.1f s", url, problem, attempt + 1, delay)
                await asyncio.sleep(delay)
        raise EngineError(f"{url} failed after {self.max_retries + 1} attempts: {problem}")

    def _client(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._session_loop is not loop:
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.max_connections),
                timeout=aiohttp.ClientTimeout(total=self.timeout_s),
                headers=headers,
            )
            self._session_loop = loop
        return self._session


def _completion(data: Any, prompt_tokens: int) -> Completion:
    try:
        choice = data["choices"][0]
    except (KeyError, IndexError, TypeError):
        raise EngineError(f"the server's reply has no choices: {str(data)[:200]}") from None
    ids = choice.get("token_ids")
    if ids is None:
        raise EngineError(
            "the server did not return token ids; it must support the `return_token_ids` request field "
            "(vLLM 0.10.2 or newer, or `toolgym serve model`)"
        )
    logprobs = (choice.get("logprobs") or {}).get("token_logprobs")
    if logprobs is None or len(logprobs) != len(ids):
        raise EngineError(
            f"the server returned {len(ids)} token ids but logprobs for {len(logprobs or [])}"
        )
    return Completion(
        token_ids=list(ids),
        logprobs=[float(x) for x in logprobs],
        text=choice.get("text", ""),
        finish_reason="length" if choice.get("finish_reason") == "length" else "stop",
        prompt_tokens=prompt_tokens,
    )


def _error_message(text: str) -> str:
    import json

    try:
        return str(json.loads(text)["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return text[:300]
