"""A text writer over any generation engine: what the simulated search engine (tools) writes
its documents with, handed to it by injection (the runtime's "writer" provider)."""

from __future__ import annotations

from pathlib import Path

from toolgym.agents.engines.base import Engine, SamplingParams
from toolgym.agents.render import ChatRenderer


class EngineWriter:
    """Renders the chat with the model's template and returns the completion's text.

    Args:
        owns_engine: close the engine with the writer (a model loaded for it alone); False
            when the engine is the policy (SSRL self-search) or shared otherwise.
    """

    def __init__(self, engine: Engine, renderer: ChatRenderer, owns_engine: bool = False) -> None:
        self.engine, self.renderer, self.owns_engine = engine, renderer, owns_engine

    @classmethod
    def load(cls, model_dir: str | Path) -> EngineWriter:
        """A writer over the model in `model_dir`, on the in-process engine."""
        from toolgym.agents.engines.hf import HFEngine

        engine = HFEngine(model_dir)
        return cls(engine, ChatRenderer(engine.tokenizer), owns_engine=True)

    async def write(
        self, messages: list[dict[str, str]], max_tokens: int, temperature: float, seed: int
    ) -> str:
        sampling = SamplingParams(max_tokens=max_tokens, temperature=temperature, seed=seed)
        completion = await self.engine.generate(self.renderer.prompt_ids(messages), sampling)
        return completion.text

    async def aclose(self) -> None:
        if self.owns_engine:
            await self.engine.aclose()
