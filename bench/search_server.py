"""`toolgym serve search` under load, next to direct calls to the same library in the same run.

Corpus: the synthetic world ("large": about 102,000 documents). Queries: entity names and
questions drawn from it. Paths:

- direct, one query a call:   the library called in-process, one query at a time
- direct, 64 queries a call:  the same, 64 queries a call (the best batching can do)
- server, 64 clients:         `toolgym serve search` in its own process, 64 concurrent
                              clients each sending one-query requests over keep-alive HTTP

bm25 calls bm25s (tokenize + retrieve + document lookup); dense calls the encoder and faiss
(flat) over the same corpus (or its first `--dense-docs` documents). Indexes are built first, by
`toolgym index build` in a child process on every core (encoding 100k passages takes minutes);
`--index-dir DIR` keeps them there for the next run. The figure of merit is the server's throughput against the faster of the
two direct paths (its overhead: JSON, HTTP, batching) and against one-query calls (what
batching buys); p50 and p99 are per request, seen by the clients. On a machine with two or
more cores the engine side (index building, direct calls, the server) runs on one core with
one thread per pool and the load generator on the others, so the clients' own HTTP work is
not counted against the server; on one core they share it. The three paths alternate for
`--rounds` rounds; the overhead is the median of the rounds' ratios (neighbours are noisy).

    python bench/search_server.py [--kinds bm25,dense] [--queries 2048] [--rounds 3]
                                  [--dense-docs N] [--index-dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp

from toolgym.envs.search.world import World
from toolgym.tools.search.corpus import Document, write_corpus
from toolgym.tools.search.engines.base import SearchEngine
from toolgym.tools.search.index import load_engine


def queries_for(world: World, n: int) -> list[str]:
    rng = random.Random(0)
    names = [e.name for e in world.entities.values()]
    questions = [q.question for q in world.questions(n // 2, hops=2)]
    return [rng.choice(names) for _ in range(n - len(questions))] + questions


def direct(engine: SearchEngine, queries: list[str], batch: int, topk: int) -> float:
    """Queries per second through the engine's own synchronous search."""
    search = engine.search_sync  # type: ignore[attr-defined]
    start = time.perf_counter()
    for i in range(0, len(queries), batch):
        search(queries[i : i + batch], topk)
    return len(queries) / (time.perf_counter() - start)


async def load(url: str, queries: list[str], clients: int, topk: int) -> tuple[float, list[float]]:
    """64 clients, each sending its share of the queries one request at a time."""
    latencies: list[float] = []
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def client(mine: list[str]) -> None:
            for q in mine:
                t = time.perf_counter()
                body = {"queries": [q], "topk": topk, "return_scores": True}
                async with session.post(f"{url}/retrieve", json=body) as response:
                    assert response.status == 200, await response.text()
                    await response.read()
                latencies.append(time.perf_counter() - t)

        start = time.perf_counter()
        await asyncio.gather(*(client(queries[i::clients]) for i in range(clients)))
        return len(queries) / (time.perf_counter() - start), latencies


def serve(index: Path, port: int) -> subprocess.Popen[bytes]:
    return serve_search(["--index", str(index)], port)


def serve_search(args: list[str], port: int) -> subprocess.Popen[bytes]:
    """`toolgym serve search ARGS` on `port`, once its /health answers."""
    process = subprocess.Popen(
        [sys.executable, "-m", "toolgym", "serve", "search", *args, "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1):
                return process
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise RuntimeError(f"the search server {args} did not start")


def split_cores() -> tuple[set[int], set[int]]:
    """One core for the engine (direct calls and the server), the rest for the clients."""
    cores = sorted(os.sched_getaffinity(0))
    return {cores[0]}, set(cores[1:]) or {cores[0]}


def pin_to(engine_cores: set[int]) -> None:
    """Before any thread pool starts: pool threads keep the affinity they were born with, so
    pinning later would leave torch's and faiss's workers on every core."""
    import faiss
    import torch

    os.sched_setaffinity(0, engine_cores)
    torch.set_num_threads(len(engine_cores))
    faiss.omp_set_num_threads(len(engine_cores))


def build(kind: str, docs: list[Document], work: Path) -> Path:
    """The index for `docs`, built by the CLI in a child process that may use every core (this
    process must not start thread pools before it pins itself); reused when `work` has it."""
    index = work / f"{kind}-{len(docs)}"
    if not (index / "meta.json").is_file():
        corpus = write_corpus(work / f"corpus-{len(docs)}.jsonl", docs)
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "toolgym", "index", "build", "--corpus", str(corpus),
             "--kind", kind, "--out", str(index), "--force"],
            check=True,
        )  # fmt: skip
        print(
            f"{kind}: index over {len(docs)} documents built in {time.perf_counter() - start:.0f} s"
        )
    sizes = {
        p.name: sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
        for p in index.iterdir()
        if p.is_dir()
    }
    documents = (index / "documents.jsonl").stat().st_size + (index / "offsets.npy").stat().st_size
    print(
        f"{kind}: on disk: documents {documents / 2**20:.1f} MiB, "
        + ", ".join(f"{k} {v / 2**20:.1f} MiB" for k, v in sizes.items())
    )
    return index


def run(
    kind: str, index: Path, queries: list[str], args: argparse.Namespace, client_cores: set[int]
) -> None:
    engine = load_engine(index)
    direct(engine, queries[:64], 64, args.topk)  # warm the page cache and the encoder
    port = 18000 + len(kind)
    process = serve(index, port)  # inherits the engine's core
    url = f"http://127.0.0.1:{port}"
    one: list[float] = []
    batched: list[float] = []
    served: list[float] = []
    latencies: list[float] = []
    try:
        on_clients(client_cores, load(url, queries[:256], args.clients, args.topk))
        for _ in range(args.rounds):  # alternate, so a noisy neighbour hits every path alike
            one.append(direct(engine, queries, 1, args.topk))
            batched.append(direct(engine, queries, 64, args.topk))
            qps, seen = on_clients(client_cores, load(url, queries, args.clients, args.topk))
            served.append(qps)
            latencies += seen
    finally:
        process.terminate()
        process.wait()
    cuts = statistics.quantiles(latencies, n=100)
    # against the faster direct path of the same round (batching does not always win)
    ratios = [s / max(o, b) for s, o, b in zip(served, one, batched, strict=True)]
    median = statistics.median
    ratio = median(ratios)
    print(f"  direct, one query a call    {median(one):8.0f} queries/s")
    print(f"  direct, 64 queries a call   {median(batched):8.0f} queries/s")
    print(
        f"  server, {args.clients} clients          {median(served):8.0f} queries/s   "
        f"p50 {cuts[49] * 1e3:.1f} ms   p99 {cuts[98] * 1e3:.1f} ms"
    )
    print(
        f"  server / faster direct path: {ratio:.2f}x throughput (overhead {max(0.0, 1 - ratio):.0%}; "
        f"rounds: {', '.join(f'{r:.2f}' for r in ratios)});  "
        f"server / direct one-by-one: {median(served) / median(one):.2f}x"
    )


def on_clients(client_cores: set[int], work: Any) -> Any:
    """Run the load generator on the client cores (this thread only), then come back."""
    engine_cores = os.sched_getaffinity(0)
    os.sched_setaffinity(0, client_cores)
    try:
        return asyncio.run(work)
    finally:
        os.sched_setaffinity(0, engine_cores)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kinds", default="bm25,dense")
    parser.add_argument("--queries", type=int, default=2048)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--topk", type=int, default=3)
    parser.add_argument("--size", default="large")
    parser.add_argument("--dense-docs", type=int, default=None, help="default: every document")
    parser.add_argument(
        "--index-dir", help="build indexes here and reuse them (default: a temp dir)"
    )
    args = parser.parse_args()
    world = World(0, args.size)
    documents = world.documents()
    queries = queries_for(world, args.queries)
    kinds = args.kinds.split(",")
    with tempfile.TemporaryDirectory(prefix="toolgym-bench-search-") as tmp:
        work = Path(args.index_dir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        indexes = {
            kind: build(kind, documents if kind == "bm25" else documents[: args.dense_docs], work)
            for kind in kinds
        }
        engine_cores, client_cores = split_cores()
        pin_to(engine_cores)
        for kind in kinds:
            print(
                f"\n{kind}: {len(queries)} queries, top {args.topk}; "
                f"engine on core {sorted(engine_cores)}, clients on {sorted(client_cores)}"
            )
            run(kind, indexes[kind], queries, args, client_cores)


if __name__ == "__main__":
    main()
