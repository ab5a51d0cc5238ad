"""Text writers: what the simulated search engine (tools) writes its documents with, handed to
it by injection (the runtime's "writer" provider, `toolgym serve search --simulator`).

Two kinds: over an in-process generation engine (`EngineWriter`, the model's own chat
template), and over any OpenAI-compatible chat endpoint (`ChatWriter`: vLLM serving a 3B-7B
simulator on a GPU, or `toolgym serve model`), which applies its own template."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toolgym.agents.engines.base import Engine, EngineError, SamplingParams
from toolgym.agents.render import ChatRenderer


class EngineWriter:
    """Renders the chat with the model's template and returns the completion's text.

    Args:
        owns_engine: close the engine with the writer (a model loaded for it alone); False
            when the engine is the policy (SSRL self-search) or shared otherwise.
        context_tokens: the model's context (prompt and written tokens together), so a
            prompt too long for it is refused before any writing (`prompt_problem`); None
            when unknown.
    """

    def __init__(
        self,
        engine: Engine,
        renderer: ChatRenderer,
        owns_engine: bool = False,
        context_tokens: int | None = None,
    ) -> None:
        self.engine, self.renderer, self.owns_engine = engine, renderer, owns_engine
        self.context_tokens = context_tokens
        self._frame: dict[tuple[str, ...], int] = {}

    @classmethod
    def load(cls, model_dir: str | Path, kind: str = "hf") -> EngineWriter:
        """A writer over the model in `model_dir`, on the engine `kind` loads it with (hf,
        or vllm): rendered with the engine's tokenizer, or the model's own where the engine
        holds none."""
        from toolgym.agents.engines import make_engine
        from toolgym.agents.models.loading import load_tokenizer

        engine = make_engine(kind, model=str(model_dir))
        tokenizer = engine.tokenizer if engine.capabilities.tokenizer else load_tokenizer(model_dir)
        return cls(
            engine,
            ChatRenderer(tokenizer),
            owns_engine=True,
            context_tokens=engine.max_length,
        )

    def prompt_problem(self, messages: list[dict[str, str]], max_tokens: int) -> str | None:
        """Why `max_tokens` cannot be written from this chat (it would not fit the model's
        context), or None. A byte-level tokenizer writes at most one token per byte, so most
        chats are cleared by their size in bytes without being tokenized."""
        if self.context_tokens is None:
            return None
        roles = tuple(m["role"] for m in messages)
        if roles not in self._frame:  # the template's own tokens around empty messages
            empty = [{"role": r, "content": ""} for r in roles]
            self._frame[roles] = len(self.renderer.prompt_ids(empty))
        room = self.context_tokens - max_tokens
        if self._frame[roles] + sum(len(m["content"].encode()) for m in messages) <= room:
            return None
        tokens = len(self.renderer.prompt_ids(messages))
        if tokens <= room:
            return None
        return (
            f"{tokens} prompt tokens with the writer's instruction and {max_tokens} to write: "
            f"more than the writer's context of {self.context_tokens} tokens; shorten the query"
        )

    async def write(
        self, messages: list[dict[str, str]], max_tokens: int, temperature: float, seed: int
    ) -> str:
        sampling = SamplingParams(max_tokens=max_tokens, temperature=temperature, seed=seed)
        completion = await self.engine.generate(self.renderer.prompt_ids(messages), sampling)
        return completion.text

    async def aclose(self) -> None:
        if self.owns_engine:
            await self.engine.aclose()


class ChatWriter:
    """Writes through `POST {base_url}/chat/completions` with the request's seed, so a server
    that honours seeds (vLLM does) writes the same text for the same seed. Retries as the
    `openai` engine does; an answer with no text is an EngineError."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None) -> None:
        from toolgym.agents.engines.openai_http import OpenAIEngine

        self.http = OpenAIEngine(base_url, model, api_key=api_key)

    async def write(
        self, messages: list[dict[str, str]], max_tokens: int, temperature: float, seed: int
    ) -> str:
        payload: dict[str, Any] = {
            "model": self.http.model, "messages": messages, "max_tokens": max_tokens,
            "temperature": temperature, "seed": seed,
        }  # fmt: skip
        data = await self.http.post("/chat/completions", payload)
        try:
            text = data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            text = None
        if not isinstance(text, str):
            raise EngineError(f"{self.http.base_url} answered without a message: {str(data)[:200]}")
        return text

    async def aclose(self) -> None:
        await self.http.aclose()
