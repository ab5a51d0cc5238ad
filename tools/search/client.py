"""An async client for any Search-R1 `/retrieve` server (ours or the original), usable as a
SearchEngine. Connection failures, timeouts and 5xx answers are retried with backoff; when the
retries run out it raises SearchUnavailable, an InfraError, so the env masks that step instead
of scoring the policy 0. A 4xx answer is the request's fault and raises ValueError at once.

The trainer's step (`set_training_step`) travels with each request as "step" and
"total_steps", so a simulated server reads its noise schedule where training is; a server
without a schedule (Search-R1's own, or a real index) ignores them."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from toolgym.tools.search.corpus import Document
from toolgym.tools.search.engines.base import Hit, SearchEngine
from toolgym.tools.tool import InfraError


class SearchUnavailable(InfraError):
    """The search server could not be reached or kept failing."""


class RemoteEngine(SearchEngine):
    name = "remote"

    def __init__(
        self, url: str, timeout_s: float = 30.0, retries: int = 3, backoff_s: float = 0.2
    ) -> None:
        base = url.rstrip("/")
        self.url = base if base.endswith("/retrieve") else base + "/retrieve"
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        self.retries, self.backoff_s = retries, backoff_s
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.training_step: tuple[int, int] | None = None

    def set_training_step(self, step: int, total: int) -> None:
        self.training_step = (max(step, 0), max(total, 1))

    async def search(self, queries: list[str], topk: int) -> list[list[Hit]]:
        if not queries:
            return []
        payload: dict[str, Any] = {"queries": queries, "topk": topk, "return_scores": True}
        if self.training_step is not None:
            payload["step"], payload["total_steps"] = self.training_step
        data = await self._post(payload)
        try:
            rows = data["result"]
            if len(rows) != len(queries):
                raise ValueError(f"{len(rows)} result lists for {len(queries)} queries")
            return [[_hit(h) for h in row] for row in rows]
        except (KeyError, TypeError, ValueError) as exc:
            raise SearchUnavailable(
                f"{self.url} answered in an unexpected shape ({exc!r})"
            ) from None

    async def _post(self, payload: dict[str, Any]) -> Any:
        problem = ""
        for attempt in range(self.retries + 1):
            if attempt:
                await asyncio.sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                async with self._client().post(self.url, json=payload) as response:
                    if response.status < 400:
                        return await response.json()
                    text = await response.text()
                    if response.status < 500 and response.status != 429:
                        raise ValueError(
                            f"{self.url} rejected the request ({response.status}): {text}"
                        )
                    problem = f"HTTP {response.status}: {text[:200]}"
            except (aiohttp.ClientError, TimeoutError) as exc:
                problem = f"{type(exc).__name__}: {exc}"
        raise SearchUnavailable(f"{self.url} failed {self.retries + 1} times; last: {problem}")

    def _client(self) -> aiohttp.ClientSession:
        """One session per event loop (a session cannot outlive or change its loop)."""
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._loop is not loop:
            self._session = aiohttp.ClientSession(timeout=self.timeout)
            self._loop = loop
        return self._session

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None


def _hit(item: Any) -> Hit:
    """One result: `{"document", "score"}` (scores asked for), or a bare document from a
    server that ignores `return_scores` (then the rank order is all there is)."""
    if isinstance(item, dict) and isinstance(item.get("document"), dict):
        return Hit(Document.from_served(item["document"]), float(item.get("score", 0.0)))
    return Hit(Document.from_served(item), 0.0)
