"""What an env step costs through the interop adapters: steps per second of the same turn (a
calculator call on toolgym's arithmetic) played natively (toolgym/Arithmetic-v0 in-process),
through toolgym/OpenEnv-v0 (openenv-core's client, a WebSocket session per episode, to
`toolgym serve env toolgym/Arithmetic-v0 --protocol openenv`), and through
toolgym/Verifiers-v0 (its demo taskset, the calculator a verifiers Toolset called over MCP
HTTP); 1 and `--concurrency` episodes at once.

Each path steps `--steps` turns, `--repeats` times; the median is shown, with the ratio
native / path (how many adapter steps cost one native step's time).

    python bench/interop_steps.py [--steps 300] [--concurrency 16] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time

import toolgym
from toolgym.envs.resources import Resources
from toolgym.envs.server_process import ServerProcess
from toolgym.tools import ToolCall
from toolgym.tools.parsers import make_parser

FOREVER = 10**9
HERMES = make_parser("hermes")
SERVE = [sys.executable, "-m", "toolgym", "serve", "env", "toolgym/Arithmetic-v0",
         "--protocol", "openenv", "--port", "{port}", "--max-sessions", "64",
         "--env-arg", f"max_turns={FOREVER}"]  # fmt: skip


async def rate(make, steps: int, concurrency: int) -> float:
    resources = Resources()
    envs = [make().unwrapped for _ in range(concurrency)]
    for env in envs:
        env.use_resources(resources)
    try:
        await asyncio.gather(*(env.areset(seed=i) for i, env in enumerate(envs)))
        texts = [  # the same turn everywhere: OpenEnv-v0 sends it whole to the served env
            HERMES.render([ToolCall("calculator", {"expression": f"{i} * 7 + 3"})])
            for i in range(steps)
        ]

        async def worker(env, share):
            for text in share:
                obs, _, terminated, truncated, info = await env.astep(text)
                assert info["valid_action"] and not (terminated or truncated), obs

        start = time.perf_counter()
        await asyncio.gather(*(worker(e, texts[i::concurrency]) for i, e in enumerate(envs)))
        return steps / (time.perf_counter() - start)
    finally:
        for env in envs:
            await env.aclose()
        await resources.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    server = ServerProcess("the OpenEnv server", SERVE, "/health", lambda r: r.status_code == 200)
    asyncio.run(server.start())
    paths = {
        "native": lambda: toolgym.make("toolgym/Arithmetic-v0", max_turns=FOREVER),
        "OpenEnv": lambda: toolgym.make(
            "toolgym/OpenEnv-v0", url=server.url, text_field="message", max_turns=FOREVER
        ),
        "verifiers": lambda: toolgym.make("toolgym/Verifiers-v0", max_turns=FOREVER),
    }
    rows = []
    try:
        for name, make in paths.items():
            for concurrency in (1, args.concurrency):
                runs = [
                    asyncio.run(rate(make, args.steps, concurrency)) for _ in range(args.repeats)
                ]
                rows.append((name, concurrency, statistics.median(runs)))
    finally:
        server.stop()
    native = {c: r for name, c, r in rows if name == "native"}
    print(f"{'path':<10} {'episodes':>8} {'steps/s':>10} {'native / path':>14}")
    for name, concurrency, value in rows:
        print(f"{name:<10} {concurrency:>8} {value:>10.0f} {native[concurrency] / value:>14.1f}")


if __name__ == "__main__":
    main()
