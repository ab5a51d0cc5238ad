"""The one interface every search engine has: a batch of queries in, ranked hits out.

Batched because the expensive engines are batched underneath (one encoder pass, one faiss
search for many queries), and the server gathers concurrent requests into one call.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from dataclasses import dataclass

from toolgym.errors import ToolgymError
from toolgym.tools.search.corpus import Document


class RequestRefused(ToolgymError, ValueError):
    """A request that would cost more than the engine allows; the message says what to
    change (a server answers it with a 400 before any work starts)."""


@dataclass(frozen=True)
class Controls:
    """What one request may ask of an engine besides its queries. Engines without the matching
    knob ignore it, as a real index has no noise: so a trainer that sends its curriculum works
    against either kind of server."""

    noise: float | None = None
    """The share of noisy documents to write (a simulated engine's curriculum value)."""
    step: tuple[int, int | None] | None = None
    """(training step, total steps or None): the engine's own noise schedule at that step."""
    seed: int | None = None
    """Make the results a function of (query, seed): the same request, the same documents."""


NO_CONTROLS = Controls()


@dataclass(frozen=True)
class Hit:
    document: Document
    score: float

    def to_json(self) -> dict[str, object]:
        """The Search-R1 shape of one result."""
        return {"document": self.document.to_json(), "score": self.score}


class SearchEngine(ABC):
    name: str = "engine"

    @abstractmethod
    async def search(self, queries: list[str], topk: int) -> list[list[Hit]]:
        """For each query, at most `topk` hits, best first."""

    def check_request(self, queries: list[str], topk: int) -> None:  # noqa: B027
        """Raise RequestRefused if one request of `queries` at `topk` is more work than this
        engine takes; called before any search (off the event loop: it may tokenize).
        An index takes any request the server's own limits allow."""

    async def search_with(
        self, queries: list[str], topk: int, controls: list[Controls]
    ) -> list[list[Hit]]:
        """`search` with each query's request controls; engines that have none ignore them."""
        return await self.search(queries, topk)

    def stats(self) -> dict[str, object]:
        """What the server's /health reports of the engine's work so far."""
        return {}

    def set_training_step(self, step: int, total: int) -> None:  # noqa: B027  (optional hook)
        """Where training is (step of total); engines with a curriculum use it."""

    async def aclose(self) -> None:  # noqa: B027  (optional hook: in-process engines hold nothing)
        """Release connections."""


class IndexEngine(SearchEngine):
    """An engine whose work is synchronous CPU work (bm25s, faiss): run off the event loop."""

    async def search(self, queries: list[str], topk: int) -> list[list[Hit]]:
        return await asyncio.to_thread(self.search_sync, queries, topk)

    @abstractmethod
    def search_sync(self, queries: list[str], topk: int) -> list[list[Hit]]:
        """The search itself, called from a worker thread."""
