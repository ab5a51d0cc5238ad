"""`toolgym serve search`: any SearchEngine behind Search-R1's retriever contract.

    POST /retrieve  {"queries": [...], "topk": 3, "return_scores": true}
                 -> {"result": [[{"document": {"id", "contents"}, "score": s}, ...], ...]}
                    (without return_scores, each result is the bare document list)
    GET  /health -> {"status": "ok", "engine": ..., "documents": N}

Requests that arrive while the engine is busy wait in a queue; the next engine call takes all
of them at once (up to `max_batch` queries), so 64 clients cost a few batched searches, not 64
single ones. A request larger than `max_batch` (Search-R1's trainer sends a whole batch's
searches at once: 512 prompts x 5 rollouts) is split into engine calls of `max_batch`; an
empty list is answered `{"result": []}`, as Search-R1's own server does. Bad requests get a
400 (or 413) with {"error": "..."} that says what to change.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from pydantic import BaseModel, ConfigDict, StrictBool, StrictInt, StrictStr, ValidationError

from toolgym.tools.search.engines.base import Hit, SearchEngine


@dataclass(frozen=True)
class Limits:
    max_topk: int = 100
    max_queries: int = 16384
    """Per request (`toolgym serve search --max-queries`)."""
    max_query_chars: int = 4096
    max_batch: int = 1024
    """Queries per engine call, summed over the requests it serves."""
    max_body_bytes: int = 64 * 1024 * 1024


class RetrieveRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    queries: list[StrictStr]
    topk: StrictInt | None = None
    return_scores: StrictBool = False


class BadRequest(Exception):
    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class _Pending:
    queries: list[str]
    topk: int
    future: asyncio.Future[list[list[Hit]]]


class Batcher:
    """Gathers concurrent requests into engine calls; one call runs at a time."""

    def __init__(self, engine: SearchEngine, max_batch: int) -> None:
        self.engine, self.max_batch = engine, max_batch
        self.pending: deque[_Pending] = deque()
        self.wakeup = asyncio.Event()
        self.worker: asyncio.Task[None] | None = None
        self.calls = 0

    async def search(self, queries: list[str], topk: int) -> list[list[Hit]]:
        if len(queries) > self.max_batch:
            step = self.max_batch
            parts = await asyncio.gather(
                *(self.search(queries[i : i + step], topk) for i in range(0, len(queries), step))
            )
            return [row for part in parts for row in part]
        if not queries:
            return []
        if self.worker is None:
            self.worker = asyncio.create_task(self._run())
        future: asyncio.Future[list[list[Hit]]] = asyncio.get_running_loop().create_future()
        self.pending.append(_Pending(queries, topk, future))
        self.wakeup.set()
        return await future

    async def close(self) -> None:
        if self.worker is not None:
            self.worker.cancel()
            await asyncio.gather(self.worker, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            await self.wakeup.wait()
            self.wakeup.clear()
            while self.pending:
                if self.pending[0].future.done():  # its client went away: no work for it
                    self.pending.popleft()
                    continue
                batch = [self.pending.popleft()]
                size = len(batch[0].queries)
                while self.pending and size + len(self.pending[0].queries) <= self.max_batch:
                    waiting = self.pending.popleft()
                    if not waiting.future.done():
                        batch.append(waiting)
                        size += len(waiting.queries)
                await self._serve(batch)

    async def _serve(self, batch: list[_Pending]) -> None:
        queries = [q for p in batch for q in p.queries]
        self.calls += 1
        try:
            hits = await self.engine.search(queries, max(p.topk for p in batch))
        except Exception as exc:  # the engine failed: every waiting request hears why
            for p in batch:
                if not p.future.done():
                    p.future.set_exception(exc)
            return
        start = 0
        for p in batch:
            if not p.future.done():  # its client may have gone away
                p.future.set_result([h[: p.topk] for h in hits[start : start + len(p.queries)]])
            start += len(p.queries)


class SearchServer:
    def __init__(
        self, engine: SearchEngine, documents: int | None = None, limits: Limits = Limits(),
        default_topk: int = 3,
    ) -> None:  # fmt: skip
        self.engine, self.documents, self.limits = engine, documents, limits
        self.default_topk = default_topk
        self.batcher = Batcher(engine, limits.max_batch)

    def app(self) -> web.Application:
        app = web.Application(middlewares=[_errors], client_max_size=self.limits.max_body_bytes)
        app.router.add_post("/retrieve", self.retrieve)
        app.router.add_get("/health", self.health)
        app.on_cleanup.append(lambda _: self.batcher.close())
        return app

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"status": "ok", "engine": self.engine.name, "documents": self.documents}
        )

    async def retrieve(self, request: web.Request) -> web.Response:
        body = self._validate(await _json(request))
        topk = body.topk if body.topk is not None else self.default_topk
        hits = await self.batcher.search(body.queries, topk)
        if body.return_scores:
            result: list[list[Any]] = [[h.to_json() for h in row] for row in hits]
        else:
            result = [[h.document.to_json() for h in row] for row in hits]
        return web.json_response({"result": result})

    def _validate(self, data: Any) -> RetrieveRequest:
        if not isinstance(data, dict):
            raise BadRequest("the request body must be a JSON object")
        try:
            body = RetrieveRequest.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise BadRequest(f"{where}: {first['msg']}") from None
        limits = self.limits
        if len(body.queries) > limits.max_queries:
            raise BadRequest(
                f"queries: {len(body.queries)} queries; at most {limits.max_queries} per request "
                "(the server's --max-queries)",
                413,
            )
        for i, q in enumerate(body.queries):
            if len(q) > limits.max_query_chars:
                raise BadRequest(
                    f"queries.{i}: {len(q)} characters; at most {limits.max_query_chars}"
                )
        if body.topk is not None and not 1 <= body.topk <= limits.max_topk:
            raise BadRequest(f"topk: {body.topk}; it must be between 1 and {limits.max_topk}")
        return body


async def _json(request: web.Request) -> Any:
    try:
        data = json.loads(await request.text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadRequest(f"the request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise BadRequest("the request body is nested too deeply") from None
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise BadRequest(
            "the request holds a lone surrogate (\\ud800-\\udfff), which is not valid Unicode"
        ) from None
    return data


@web.middleware
async def _errors(request: web.Request, handler: Any) -> web.StreamResponse:
    try:
        return await handler(request)
    except BadRequest as exc:
        return web.json_response({"error": str(exc)}, status=exc.status)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return web.json_response(
            {"error": f"{request.method} {request.path}: {exc.reason}"}, status=exc.status
        )
    except asyncio.CancelledError:
        raise  # the client went away
    except Exception as exc:  # the engine failed; the client may retry
        return web.json_response(
            {"error": f"search failed: {type(exc).__name__}: {exc}"}, status=500
        )
