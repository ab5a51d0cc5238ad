"""The simulated search server (`toolgym serve search --simulator`) under 64 clients, next to
the real bm25 server over the same world in the same run.

Both servers run as their own processes on loopback; 64 clients each send one-query requests
(Search-R1's shape, top 3) over keep-alive HTTP, and the paths alternate for `--rounds`
rounds. The simulator writes `--doc-tokens` tokens a document with the model at `--model`
(default: a fresh tiny model; its size and the tokens written are what the cost scales with).
Printed: queries per second, p50 and p99 per request, the simulated server's throughput as a
ratio of bm25's, and its seconds of server time per 1,000 queries.

    python bench/simulated_search.py [--model DIR] [--queries 256] [--doc-tokens 32]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from common import tiny_model
from search_server import load, queries_for, serve_search

from toolgym.envs.search.world import World
from toolgym.tools.search.corpus import write_corpus


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default=None, help="simulator model (default: fresh tiny)")
    parser.add_argument("--queries", type=int, default=256)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--topk", type=int, default=3)
    parser.add_argument("--doc-tokens", type=int, default=32)
    args = parser.parse_args()
    world = World(0, "small")
    queries = queries_for(world, args.queries)
    with tempfile.TemporaryDirectory(prefix="toolgym-bench-sim-") as tmp:
        corpus = write_corpus(Path(tmp) / "corpus.jsonl", world.documents())
        index = Path(tmp) / "bm25"
        subprocess.run([sys.executable, "-m", "toolgym", "index", "build", "--corpus",
                        str(corpus), "--kind", "bm25", "--out", str(index)],
                       check=True, stdout=subprocess.DEVNULL)  # fmt: skip
        model = tiny_model(args.model)
        servers = {
            "bm25": serve_search(["--index", str(index)], 18101),
            "simulated": serve_search(
                ["--simulator", str(model), "--doc-tokens", str(args.doc_tokens)], 18102
            ),
        }
        ports = {"bm25": 18101, "simulated": 18102}
        qps: dict[str, list[float]] = {k: [] for k in servers}
        latencies: dict[str, list[float]] = {k: [] for k in servers}
        try:
            for kind in servers:  # warm-up
                asyncio.run(load(f"http://127.0.0.1:{ports[kind]}", queries[:64], args.clients,
                                 args.topk))  # fmt: skip
            for _ in range(args.rounds):
                for kind in servers:
                    rate, seen = asyncio.run(load(f"http://127.0.0.1:{ports[kind]}", queries,
                                                  args.clients, args.topk))  # fmt: skip
                    qps[kind].append(rate)
                    latencies[kind] += seen
        finally:
            for p in servers.values():
                p.terminate()
                p.wait()
    print(f"{len(queries)} one-query requests from {args.clients} clients, top {args.topk}, "
          f"{args.rounds} rounds; simulator writes {args.doc_tokens} tokens a document")  # fmt: skip
    for kind in servers:
        cuts = statistics.quantiles(latencies[kind], n=100)
        rate = statistics.median(qps[kind])
        print(f"  {kind:10s} {rate:8.1f} queries/s   p50 {cuts[49] * 1e3:7.0f} ms   "
              f"p99 {cuts[98] * 1e3:7.0f} ms   {1000 / rate:7.1f} s per 1,000 queries")  # fmt: skip
    ratios = [s / b for s, b in zip(qps["simulated"], qps["bm25"], strict=True)]
    print(f"  simulated / bm25 throughput: {statistics.median(ratios):.3f}x "
          f"(rounds: {', '.join(f'{r:.3f}' for r in ratios)})")  # fmt: skip


if __name__ == "__main__":
    main()
