"""What a tool costs through MCP: calls per second of the same calculator as a native
`@tool` (in-process), through MCPTools to `toolgym serve mcp toolgym/Arithmetic-v0` over
stdio, and over streamable HTTP; and the concurrent rate when many episodes share one server.

Each path runs the same expressions through a ToolEnv's step (parse, validate, call, build
the messages), `--repeats` times; the median is shown, with the ratio native / path (how many
MCP calls cost one native call's time).

    python bench/mcp_tools.py [--calls 300] [--concurrency 16] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import subprocess
import sys
import time

from toolgym.envs.arithmetic.calculator import evaluate
from toolgym.envs.resources import Resources
from toolgym.envs.tool_env import ToolEnv
from toolgym.tools import InfraError, ToolCall, tool
from toolgym.tools.mcp import MCPTools

SERVE = [sys.executable, "-m", "toolgym", "serve", "mcp", "toolgym/Arithmetic-v0"]


class Native(ToolEnv):
    async def start(self, seed, options):
        return [{"role": "user", "content": "compute"}]

    @tool
    async def calculator(self, expression: str) -> str:
        """Evaluate an arithmetic expression.

        Args:
            expression: the expression.
        """
        return str(evaluate(expression))


class ThroughMCP(ToolEnv):
    async def start(self, seed, options):
        return [{"role": "user", "content": "compute"}]


async def rate(make, calls: int, concurrency: int) -> float:
    resources = Resources()
    envs = [make() for _ in range(concurrency)]
    for env in envs:
        env.use_resources(resources)
    try:
        await asyncio.gather(*(env.areset(seed=0) for env in envs))
        texts = [
            envs[0].parser.render([ToolCall("calculator", {"expression": f"{i} * 7 + 3"})])
            for i in range(calls)
        ]

        async def worker(env, share):
            for text in share:
                obs, *_ = await env.astep(text)
                assert not obs[0]["content"].startswith("Error"), obs

        start = time.perf_counter()
        await asyncio.gather(*(worker(e, texts[i::concurrency]) for i, e in enumerate(envs)))
        return calls / (time.perf_counter() - start)
    finally:
        await resources.aclose()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    port = free_port()
    server = subprocess.Popen(
        [*SERVE, "--transport", "http", "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/mcp"
    paths = {
        "native @tool": lambda: Native(max_turns=10**9),
        "MCP, stdio": lambda: ThroughMCP(
            max_turns=10**9, tool_sources=[MCPTools({"command": SERVE, "tools": ["calculator"]})]
        ),
        "MCP, HTTP": lambda: ThroughMCP(
            max_turns=10**9, tool_sources=[MCPTools({"url": url, "tools": ["calculator"]})]
        ),
    }
    try:
        for _ in range(100):  # until the HTTP server answers
            try:
                asyncio.run(rate(paths["MCP, HTTP"], 1, 1))
                break
            except InfraError:
                time.sleep(0.2)
        rows = []
        for name, make in paths.items():
            for concurrency in (1, args.concurrency):
                runs = [
                    asyncio.run(rate(make, args.calls, concurrency)) for _ in range(args.repeats)
                ]
                rows.append((name, concurrency, statistics.median(runs)))
    finally:
        server.terminate()
        server.wait(10)
    native = {c: r for name, c, r in rows if name == "native @tool"}
    print(f"{'path':<14} {'episodes':>8} {'calls/s':>10} {'native / path':>14}")
    for name, concurrency, value in rows:
        print(f"{name:<14} {concurrency:>8} {value:>10.0f} {native[concurrency] / value:>14.1f}")


if __name__ == "__main__":
    main()
