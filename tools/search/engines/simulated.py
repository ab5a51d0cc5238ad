"""LLM-simulated search: a language model writes the result documents, so a search agent trains
with no index and no search API.

ZeroSearch-style: each document is written as "useful" (relevant to the query) or "noisy"
(plausible but unhelpful); a document is noisy with probability p_i at training step i of m,
    p_i = p_s + (b^(i/m) - 1) / (b - 1) * (p_e - p_s),
a curriculum that starts clean (p_s) and grows noisier towards p_e, faster near the end when
b > 1 (b = 4 by default). The trainer supplies i and m through `set_training_step`.

A request may instead name its noisy share outright (`Controls.noise`: a trainer that runs
its own curriculum sends its p_i) or the step to read the schedule at (`Controls.step`).

SSRL-style self-search (`SimulatedEngine.self_search(writer)`): the policy being trained
writes its own results from what it already knows, with no noise.

A document's id is a digest of its query, rank, kind and text: one id never carries two
texts, and the same document written again (a seeded request, below) gets the same id, so
repeated searches land in the same state for GiGPO. One engine is meant to be
shared by every episode of a process (the search env asks for it as a shared resource): its
generator runs on, so each episode draws its own useful/noisy pattern. A request with a seed
(`Controls.seed`) is instead a function of (query, seed, noise): each rank's kind and its
sampling seed are drawn from them alone, and such documents are cached, so asking again
costs nothing.

The model reaches this module through the `Writer` protocol, by injection: tools sit below
the generation engines (agents), which provide a writer over any engine (hf, openai, vllm).
"""

from __future__ import annotations

import asyncio
import hashlib
import random
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from toolgym.errors import ConfigError
from toolgym.tools.search.corpus import Document
from toolgym.tools.search.engines.base import (
    NO_CONTROLS,
    Controls,
    Hit,
    RequestRefused,
    SearchEngine,
)

USEFUL = (
    "You are a search engine. Write one short encyclopedia passage (about 40 words) that "
    "answers or helps answer the query. First line: a title; then the passage."
)
NOISY = (
    "You are a search engine. Write one short encyclopedia passage (about 40 words) that "
    "mentions words of the query but does not help answer it. First line: a title; then the "
    "passage."
)
SELF = (
    "Write one short passage (about 40 words) with what you know that helps answer the query. "
    "First line: a title; then the passage."
)


INSTRUCTIONS = {"useful": USEFUL, "noisy": NOISY, "self": SELF}


def prompt(kind: str, query: str) -> list[dict[str, str]]:
    """The chat a document of `kind` is written from (and a simulator is fine-tuned on)."""
    return [
        {"role": "system", "content": INSTRUCTIONS[kind]},
        {"role": "user", "content": f"Query: {query}"},
    ]


MAX_BODY_CHARS = 4000
"""A document's text is cut here whatever the writer returns (max_tokens bounds a model, not
a misbehaving server)."""


@dataclass(frozen=True)
class NoiseSchedule:
    start: float = 0.0
    """p_s: the chance a document is noisy at step 0."""
    end: float = 0.5
    """p_e: the chance at the last step."""
    base: float = 4.0
    """b: > 1 keeps documents clean longer, then adds noise faster."""

    def __post_init__(self) -> None:
        if not (0 <= self.start <= 1 and 0 <= self.end <= 1):
            raise ConfigError(
                f"noise probabilities must be in [0, 1], got {self.start} and {self.end}"
            )
        if self.base <= 0:
            raise ConfigError(f"the schedule's base b must be positive, got {self.base}")

    def at(self, step: int, total: int) -> float:
        """p_i for training step `step` of `total`."""
        frac = min(max(step / total, 0.0), 1.0) if total > 0 else 0.0
        growth = frac if self.base == 1 else (self.base**frac - 1) / (self.base - 1)
        return self.start + growth * (self.end - self.start)


@runtime_checkable
class Writer(Protocol):
    """Anything that completes a chat: the instruction and query in, the passage text out."""

    async def write(
        self, messages: list[dict[str, str]], max_tokens: int, temperature: float, seed: int
    ) -> str: ...


@runtime_checkable
class BoundedWriter(Writer, Protocol):
    """A writer that knows its context, so a prompt too long for it is refused before any
    writing starts (a 400 from a server, not a failed generation)."""

    def prompt_problem(self, messages: list[dict[str, str]], max_tokens: int) -> str | None:
        """Why the writer cannot write `max_tokens` from this chat, or None if it can."""
        ...


class SimulatedEngine(SearchEngine):
    """`writer` writes the documents. The engine does not close it: its maker does (the
    policy under SSRL, the runtime's shared resources otherwise).

    Args:
        cache_size: seeded documents kept (least recently used go first); 0 keeps none.
        max_documents: documents one request may ask for (queries x topk): each is a
            generation, so a request's work is bounded before it starts.
    """

    name = "simulated"

    def __init__(
        self,
        writer: Writer,
        schedule: NoiseSchedule | None = NoiseSchedule(),
        max_tokens: int = 96,
        temperature: float = 1.0,
        seed: int = 0,
        cache_size: int = 4096,
        max_documents: int = 8192,
    ) -> None:
        self.writer, self.schedule = writer, schedule
        self.max_tokens, self.temperature = max_tokens, temperature
        self.rng = random.Random(seed)
        self.step, self.total_steps = 0, 1
        self.written = {"useful": 0, "noisy": 0, "self": 0}
        """Documents served so far, by kind (to log the noise actually served)."""
        self.cache: OrderedDict[tuple[str, int, int, str], Document] = OrderedDict()
        self.cache_size, self.cache_hits = cache_size, 0
        self.max_documents = max_documents

    @classmethod
    def self_search(cls, policy: Writer, **kwargs: Any) -> SimulatedEngine:
        """SSRL: the policy writes its own search results (no noise)."""
        return cls(policy, schedule=None, **kwargs)

    def set_training_step(self, step: int, total: int) -> None:
        self.step, self.total_steps = step, total

    @property
    def noise(self) -> float:
        return self.noise_for(NO_CONTROLS)

    def noise_for(self, controls: Controls) -> float:
        """The noisy share a request gets: its own, else the schedule at its step, else at the
        engine's step."""
        if self.schedule is None:
            return 0.0
        if controls.noise is not None:
            return controls.noise
        step, total = controls.step or (self.step, self.total_steps)
        return self.schedule.at(step, self.total_steps if total is None else total)

    def stats(self) -> dict[str, object]:
        return {"written": dict(self.written), "noise": self.noise,
                "cache": {"documents": len(self.cache), "hits": self.cache_hits}}  # fmt: skip

    def check_request(self, queries: list[str], topk: int) -> None:
        documents = len(queries) * topk
        if documents > self.max_documents:
            raise RequestRefused(
                f"{len(queries)} queries x topk {topk} = {documents} documents to write; at most "
                f"{self.max_documents} per request (the server's --max-documents)"
            )
        if not isinstance(self.writer, BoundedWriter):
            return
        kinds = ["self"] if self.schedule is None else ["useful", "noisy"]
        first: dict[str, int] = {}
        for index, query in enumerate(queries):
            first.setdefault(query, index)
        for query, index in first.items():
            for kind in kinds:
                problem = self.writer.prompt_problem(prompt(kind, query), self.max_tokens)
                if problem is not None:
                    raise RequestRefused(f"queries.{index}: {problem}")

    async def search(self, queries: list[str], topk: int) -> list[list[Hit]]:
        return await self.search_with(queries, topk, [NO_CONTROLS] * len(queries))

    async def search_with(
        self, queries: list[str], topk: int, controls: list[Controls]
    ) -> list[list[Hit]]:
        jobs = [
            self._document(query, rank, c) for query, c in zip(queries, controls, strict=True)
            for rank in range(topk)
        ]  # fmt: skip
        docs = await asyncio.gather(*jobs)
        return [
            [Hit(docs[i * topk + r], 1.0 / (1 + r)) for r in range(topk)]
            for i in range(len(queries))
        ]

    async def _document(self, query: str, rank: int, controls: Controls) -> Document:
        if controls.seed is None:
            rng = self.rng
        else:  # drawn from the request alone, so the same request gets the same documents
            rng = random.Random(f"{controls.seed}\0{rank}\0{query}")
        if self.schedule is None:
            kind = "self"
        else:
            kind = "noisy" if rng.random() < self.noise_for(controls) else "useful"
        seed = rng.randrange(2**31)
        if controls.seed is None or self.cache_size <= 0:
            document = await self._write(query, rank, kind, seed)
        elif (key := (query, rank, controls.seed, kind)) in self.cache:
            self.cache_hits += 1
            self.cache.move_to_end(key)
            document = self.cache[key]
        else:
            document = self.cache[key] = await self._write(query, rank, kind, seed)
            while len(self.cache) > self.cache_size:
                self.cache.popitem(last=False)
        self.written[kind] += 1  # served: a request cancelled meanwhile never gets here
        return document

    async def _write(self, query: str, rank: int, kind: str, seed: int) -> Document:
        messages = prompt(kind, query)
        text = (await self.writer.write(messages, self.max_tokens, self.temperature, seed)).strip()
        text = text or query
        title, _, body = text.partition("\n")
        body = body.strip()[:MAX_BODY_CHARS]
        contents = f"{title.strip()[:120]}\n{body}"
        # The kind is part of the id's hash, never readable in it: the agent must not be told.
        key = f"{kind}\0{rank}\0{query}\0{contents}"
        return Document(f"sim-{hashlib.sha1(key.encode()).hexdigest()[:12]}", contents)
