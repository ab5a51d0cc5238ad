"""`toolgym serve search`: any SearchEngine behind Search-R1's retriever contract.

    POST /retrieve  {"queries": [...], "topk": 3, "return_scores": true}
                 -> {"result": [[{"document": {"id", "contents"}, "score": s}, ...], ...]}
                    (without return_scores, each result is the bare document list)
    GET  /health -> {"status": "ok", "engine": ..., "documents": N, ...the engine's stats}

A request may also carry controls that Search-R1's own server does not know (and so a client
that sends them works against either): "noise" (the share of noisy documents, 0 to 1),
"step" and "total_steps" (read the server's noise schedule at that training step) and "seed"
(the same request, the same documents). An engine without the knob ignores it: a real index
has no noise, and its results are already a function of the query.

Requests that arrive while the engine is busy wait in a queue; the next engine call takes all
of them at once (up to `max_batch` queries), so 64 clients cost a few batched searches, not 64
single ones. A request larger than `max_batch` (Search-R1's trainer sends a whole batch's
searches at once: 512 prompts x 5 rollouts) is split into engine calls of `max_batch`; an
empty list is answered `{"result": []}`, as Search-R1's own server does. Bad requests get a
400 (or 413) with {"error": "..."} that says what to change, before any search starts: past
the server's limits, or past the engine's own (a simulated engine bounds the documents one
request may ask to be written, and each query's prompt against its writer's context).

A client that goes away drops its queued queries, and an engine call whose every client has
gone is cancelled (a simulated engine stops writing for it).
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
)

from toolgym.http import BadRequest, error_middleware, explain, read_json
from toolgym.tools.search.engines.base import (
    NO_CONTROLS,
    Controls,
    Hit,
    RequestRefused,
    SearchEngine,
)


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
    noise: StrictInt | StrictFloat | None = Field(default=None, ge=0, le=1, allow_inf_nan=False)
    step: StrictInt | None = Field(default=None, ge=0, le=2**31)
    total_steps: StrictInt | None = Field(default=None, ge=1, le=2**31)
    seed: StrictInt | None = Field(default=None, ge=0, lt=2**63)

    def controls(self) -> Controls:
        step = None if self.step is None else (self.step, self.total_steps)
        noise = None if self.noise is None else float(self.noise)
        return Controls(noise=noise, step=step, seed=self.seed)


@dataclass
class _Pending:
    queries: list[str]
    topk: int
    controls: Controls
    future: asyncio.Future[list[list[Hit]]]


class Batcher:
    """Gathers concurrent requests into engine calls; one call runs at a time."""

    def __init__(self, engine: SearchEngine, max_batch: int) -> None:
        self.engine, self.max_batch = engine, max_batch
        self.pending: deque[_Pending] = deque()
        self.wakeup = asyncio.Event()
        self.worker: asyncio.Task[None] | None = None
        self.calls = 0

    async def search(
        self, queries: list[str], topk: int, controls: Controls = NO_CONTROLS
    ) -> list[list[Hit]]:
        if len(queries) > self.max_batch:
            step = self.max_batch
            parts = await asyncio.gather(*(
                self.search(queries[i : i + step], topk, controls)
                for i in range(0, len(queries), step)
            ))  # fmt: skip
            return [row for part in parts for row in part]
        if not queries:
            return []
        if self.worker is None:
            self.worker = asyncio.create_task(self._run())
        future: asyncio.Future[list[list[Hit]]] = asyncio.get_running_loop().create_future()
        self.pending.append(_Pending(queries, topk, controls, future))
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
                # one engine call serves requests of one topk, so none is written for nothing
                batch: list[_Pending] = []
                size, rest = 0, deque[_Pending]()
                while self.pending:
                    waiting = self.pending.popleft()
                    if waiting.future.done():  # its client went away: no work for it
                        continue
                    fits = size + len(waiting.queries) <= self.max_batch
                    if not batch or (waiting.topk == batch[0].topk and fits):
                        batch.append(waiting)
                        size += len(waiting.queries)
                    else:
                        rest.append(waiting)
                self.pending = rest
                if not batch:
                    break
                await self._serve(batch)

    async def _serve(self, batch: list[_Pending]) -> None:
        queries = [q for p in batch for q in p.queries]
        controls = [p.controls for p in batch for _ in p.queries]
        self.calls += 1
        work = asyncio.ensure_future(self.engine.search_with(queries, batch[0].topk, controls))
        abandoned = asyncio.ensure_future(asyncio.wait([p.future for p in batch]))
        try:
            await asyncio.wait({work, abandoned}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            abandoned.cancel()
            if not work.done():  # every client of this call went away, or we are closing
                work.cancel()
                await asyncio.gather(work, return_exceptions=True)
        if work.cancelled():
            return
        try:
            hits = work.result()
        except Exception as exc:  # the engine failed: every waiting request hears why
            for p in batch:
                if not p.future.done():
                    p.future.set_exception(exc)
            return
        start = 0
        for p in batch:
            if not p.future.done():  # its client may have gone away
                p.future.set_result(hits[start : start + len(p.queries)])
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
        app = web.Application(
            middlewares=[error_middleware("search failed")],
            client_max_size=self.limits.max_body_bytes,
        )
        app.router.add_post("/retrieve", self.retrieve)
        app.router.add_get("/health", self.health)
        app.on_cleanup.append(lambda _: self.batcher.close())
        return app

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({
            "status": "ok", "engine": self.engine.name, "documents": self.documents,
            **self.engine.stats(),
        })  # fmt: skip

    async def retrieve(self, request: web.Request) -> web.Response:
        body = self._validate(await read_json(request))
        topk = body.topk if body.topk is not None else self.default_topk
        try:  # the engine's own bounds; it may tokenize, so off the event loop
            await asyncio.to_thread(self.engine.check_request, body.queries, topk)
        except RequestRefused as exc:
            raise BadRequest(str(exc)) from None
        hits = await self.batcher.search(body.queries, topk, body.controls())
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
            raise BadRequest(explain(exc)) from None
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
