"""`toolgym serve search` over real HTTP on loopback: Search-R1's request and response shapes,
limits with clear 4xx errors, micro-batching, and the retrying client."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request

import pytest
from aiohttp import web

from conftest import free_port, serve
from toolgym.envs.search.world import World
from toolgym.tools.search.client import RemoteEngine, SearchUnavailable
from toolgym.tools.search.corpus import Document
from toolgym.tools.search.engines.base import Hit, SearchEngine
from toolgym.tools.search.index import load_engine
from toolgym.tools.search.server import Limits, SearchServer


def post(url: str, body: object, raw: bytes | None = None) -> tuple[int, dict]:
    data = raw if raw is not None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def passages_to_string(retrieval_result: list[dict]) -> str:
    """What Search-R1's rollout does with one query's results (written out here)."""
    lines = []
    for idx, item in enumerate(retrieval_result):
        content = item["document"]["contents"]
        title, text = content.split("\n")[0], "\n".join(content.split("\n")[1:])
        lines.append(f"Doc {idx + 1}(Title: {title}) {text}")
    return "\n".join(lines)


def test_a_search_r1_request_gets_a_response_its_parser_reads(search_server):
    names = [q.hops[0].entity for q in World(0).questions(4, hops=2)]
    status, body = post(
        f"{search_server}/retrieve", {"queries": names, "topk": 3, "return_scores": True}
    )
    assert status == 200 and list(body) == ["result"] and len(body["result"]) == 4
    for name, results in zip(names, body["result"], strict=True):
        assert 1 <= len(results) <= 3  # only documents sharing a term with the query
        assert set(results[0]) == {"document", "score"} and set(results[0]["document"]) == {
            "id",
            "contents",
        }
        assert [r["score"] for r in results] == sorted((r["score"] for r in results), reverse=True)
        assert passages_to_string(results).startswith(f"Doc 1(Title: {name}) {name} ")


def test_without_scores_each_result_is_the_document_and_topk_defaults_to_3(search_server):
    status, body = post(f"{search_server}/retrieve", {"queries": ["born", "works for"]})
    assert status == 200
    assert all(len(row) == 3 and set(row[0]) == {"id", "contents"} for row in body["result"])
    status, body = post(
        f"{search_server}/retrieve", {"queries": ["born"], "topk": None, "return_scores": False}
    )
    assert status == 200 and len(body["result"][0]) == 3


def test_health(search_server):
    with urllib.request.urlopen(f"{search_server}/health", timeout=10) as response:
        assert json.loads(response.read()) == {"status": "ok", "engine": "bm25", "documents": 102}


BAD_REQUESTS = [
    ({"topk": 3}, "queries: Field required"),
    ({"queries": "one string"}, "queries: Input should be a valid list"),
    ({"queries": [1, 2]}, "queries.0: Input should be a valid string"),
    ({"queries": ["q" * 5000]}, "queries.0: 5000 characters; at most 4096"),
    ({"queries": ["q"], "topk": 0}, "topk: 0; it must be between 1 and 100"),
    ({"queries": ["q"], "topk": 101}, "topk: 101; it must be between 1 and 100"),
    ({"queries": ["q"], "topk": "3"}, "topk: Input should be a valid integer"),
    (
        {"queries": ["q"], "return_scores": "yes"},
        "return_scores: Input should be a valid boolean",
    ),
    (["q"], "the request body must be a JSON object"),
]
"""Requests every `/retrieve` server refuses, and what its 400 says."""


@pytest.mark.parametrize(("body", "message"), BAD_REQUESTS)
def test_bad_requests_get_a_400_that_says_what_to_change(search_server, body, message):
    status, answer = post(f"{search_server}/retrieve", body)
    assert status == 400 and message in answer["error"]


def test_malformed_json_and_unknown_routes(search_server):
    status, answer = post(f"{search_server}/retrieve", None, raw=b"{not json")
    assert status == 400 and "not valid JSON" in answer["error"]
    status, answer = post(f"{search_server}/search", {"queries": ["q"]})
    assert status == 404 and "POST /search" in answer["error"]


def test_search_r1_batches_an_empty_turn_and_a_whole_training_batch(search_server):
    """Search-R1's trainer posts one turn's searches for the whole batch (512 prompts x 5
    rollouts by default) in one request, an empty list when no rollout searched, and reads
    `resp["result"]` unchecked."""
    status, body = post(
        f"{search_server}/retrieve", {"queries": [], "topk": 3, "return_scores": True}
    )
    assert (status, body) == (200, {"result": []})
    names = [d.title for d in World(0).documents()]
    queries = [names[i % len(names)] for i in range(2560)]
    status, body = post(
        f"{search_server}/retrieve", {"queries": queries, "topk": 3, "return_scores": True}
    )
    assert status == 200 and len(body["result"]) == 2560
    for query, results in zip(queries, body["result"], strict=True):
        assert 1 <= len(results) <= 3
        assert passages_to_string(results).startswith(f"Doc 1(Title: {query}) {query} ")


def test_request_limits_are_server_options(world_bm25_index):
    args = ["serve", "search", "--index", str(world_bm25_index)]
    for url in serve([*args, "--max-queries", "8", "--max-body-mb", "1"], "search server"):
        status, answer = post(f"{url}/retrieve", {"queries": ["q"] * 9})
        assert status == 413
        assert answer["error"] == (
            "queries: 9 queries; at most 8 per request (the server's --max-queries)"
        )
        status, answer = post(f"{url}/retrieve", {"queries": ["q"] * 8})
        assert status == 200 and len(answer["result"]) == 8
        status, answer = post(f"{url}/retrieve", None, raw=b"x" * (2 * 1024 * 1024))
        assert status == 413 and "error" in answer


async def serving(server: SearchServer, body):
    """Run `server` on a loopback port for the duration of `body(url)`."""
    runner = web.AppRunner(server.app())
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        return await body(f"http://127.0.0.1:{port}")
    finally:
        await runner.cleanup()


def test_concurrent_requests_are_batched_and_each_gets_its_own_results(world_bm25_index):
    engine = load_engine(world_bm25_index)
    server = SearchServer(engine, 102)
    names = [d.title for d in World(0).documents()][:64]

    async def clients(url: str) -> list[list[Hit]]:
        client = RemoteEngine(url)
        try:
            return list(
                await asyncio.gather(*(client.search([n], 2 + i % 3) for i, n in enumerate(names)))
            )
        finally:
            await client.aclose()

    results = asyncio.run(serving(server, clients))
    direct = asyncio.run(engine.search(names, 4))
    for i, (got, want) in enumerate(zip(results, direct, strict=True)):
        assert [h.document for h in got[0]] == [h.document for h in want[: 2 + i % 3]]
    assert server.batcher.calls < len(names) / 2, server.batcher.calls


class Flaky(SearchEngine):
    """Fails its first `failures` calls, then answers: a server having a bad moment."""

    def __init__(self, failures: int) -> None:
        self.failures, self.calls = failures, 0

    async def search(self, queries: list[str], topk: int) -> list[list[Hit]]:
        self.calls += 1
        if self.calls <= self.failures:
            raise RuntimeError("index shard unavailable")
        return [[] for _ in queries]


def test_the_client_retries_server_errors_then_gives_up_as_infra():
    async def search(url: str, retries: int):
        client = RemoteEngine(url, retries=retries, backoff_s=0.01)
        try:
            return await client.search(["q"], 3)
        finally:
            await client.aclose()

    flaky = Flaky(failures=2)
    assert asyncio.run(serving(SearchServer(flaky), lambda url: search(url, 2))) == [[]]
    assert flaky.calls == 3
    with pytest.raises(
        SearchUnavailable, match=r"failed 2 times; last: HTTP 500: .*index shard unavailable"
    ):
        asyncio.run(serving(SearchServer(Flaky(failures=5)), lambda url: search(url, 1)))
    dead = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(SearchUnavailable, match="failed 3 times; last: ClientConnectorError"):
        asyncio.run(search(dead, 2))


def test_the_client_does_not_retry_a_bad_request():
    server = SearchServer(Flaky(0), limits=Limits(max_topk=5))

    async def search(url: str):
        client = RemoteEngine(url, backoff_s=0.01)
        try:
            return await client.search(["q"], 50)
        finally:
            await client.aclose()

    with pytest.raises(
        ValueError, match=r"rejected the request \(400\).*topk: 50; it must be between 1 and 5"
    ):
        asyncio.run(serving(server, search))


class Counting(SearchEngine):
    def __init__(self) -> None:
        self.sizes: list[int] = []

    async def search(self, queries: list[str], topk: int) -> list[list[Hit]]:
        self.sizes.append(len(queries))
        return [[Hit(Document(q, f"{q}\nbody"), 1.0)] for q in queries]


def test_a_request_larger_than_an_engine_call_is_split_in_order():
    engine = Counting()
    server = SearchServer(engine, limits=Limits(max_batch=100))

    async def search(url: str) -> list[list[Hit]]:
        client = RemoteEngine(url)
        try:
            return await client.search([f"q{i}" for i in range(250)], 1)
        finally:
            await client.aclose()

    rows = asyncio.run(serving(server, search))
    assert [row[0].document.id for row in rows] == [f"q{i}" for i in range(250)]
    assert sorted(engine.sizes) == [50, 100, 100]


WIKI = ['"Trelix"\nTrelix is a city on the coast.', '"Zoumar"\nZoumar is a river.']


def search_r1_server(shape: str) -> web.Application:
    """The response shapes of Search-R1's own retrieval server: its dense retriever returns
    corpus rows (wiki-18: `{"id", "contents"}` with a quoted title line); its bm25 retriever
    returns `{"title", "text", "contents"}` built from the contents, with no id."""

    def document(i: int) -> dict:
        content = WIKI[i]
        if shape == "dense":
            return {"id": str(i), "contents": content}
        lines = content.split("\n")
        return {"title": lines[0].strip('"'), "text": "\n".join(lines[1:]), "contents": content}

    async def retrieve(request: web.Request) -> web.Response:
        body = await request.json()
        result = []
        for _ in body["queries"]:
            docs = [document(i) for i in range(min(body.get("topk") or 3, len(WIKI)))]
            scores = [2.0 - i for i in range(len(docs))]
            if body.get("return_scores"):
                result.append(
                    [{"document": d, "score": s} for d, s in zip(docs, scores, strict=True)]
                )
            else:
                result.append(docs)
        return web.json_response({"result": result})

    app = web.Application()
    app.router.add_post("/retrieve", retrieve)
    return app


@pytest.mark.parametrize("shape", ["dense", "bm25"])
def test_the_client_reads_search_r1s_own_servers(shape):
    async def main() -> tuple[list[list[Hit]], list[list[Hit]], list[list[Hit]]]:
        runner = web.AppRunner(search_r1_server(shape))
        await runner.setup()
        port = free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        client = RemoteEngine(f"http://127.0.0.1:{port}")
        try:
            first = await client.search(["trelix", "river"], 2)
            again = await client.search(["zoumar"], 2)
            return first, again, await client.search([], 2)
        finally:
            await client.aclose()
            await runner.cleanup()

    first, again, empty = asyncio.run(main())
    assert empty == []
    assert len(first) == 2 and all(len(row) == 2 for row in first)
    top = first[0][0].document
    assert (top.title, top.body) == ("Trelix", "Trelix is a city on the coast.")
    assert [h.score for h in first[0]] == [2.0, 1.0]
    # the same document gets the same id on every call (the env recognises a repeat)
    assert [h.document.id for h in again[0]] == [h.document.id for h in first[0]]
    assert len({h.document.id for h in first[0]}) == 2
    if shape == "dense":
        assert top.id == "0"
