"""What the gateway adds to a call: the same tool-using conversations, turn by turn with the
`openai` client, against the plain model server (`toolgym serve model`'s) and against the
gateway, both over one hf engine in one process, calls alternating between the two so a
noisy machine slows both alike. Greedy decoding: the two write the same replies.

Printed for each concurrency: the median seconds of a call to each, and the gateway's overhead
(its median over the plain server's, less one; the target is under 5%).

    python bench/gateway_overhead.py [--model DIR] [--conversations 24] [--turns 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

import openai
from aiohttp import web
from common import tiny_model

from toolgym.agents.engines.base import SamplingParams
from toolgym.agents.engines.hf import HFEngine
from toolgym.agents.gateway.server import Gateway
from toolgym.agents.gateway.session import SessionSettings
from toolgym.agents.render_vision import make_renderer
from toolgym.agents.serving.server import ModelServer
from toolgym.agents.trajectory import Trajectory

TOOLS = [{"type": "function", "function": {
    "name": "calculator", "description": "Evaluate an arithmetic expression.",
    "parameters": {"type": "object", "properties": {"expression": {"type": "string"}},
                   "required": ["expression"]}}}]  # fmt: skip
MAX_TOKENS = 24


async def conversation(client: openai.AsyncOpenAI, k: int, turns: int) -> list[tuple[float, int]]:
    """One conversation's calls, each timed with its reply's tokens; a tool's answer after
    every reply."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Use the calculator, then answer with the number."},
        {"role": "user", "content": f"What is {k + 12} * {k + 7}?"},
    ]
    times = []
    for turn in range(turns):
        start = time.perf_counter()
        reply = await client.chat.completions.create(
            model="policy", messages=messages, tools=TOOLS, max_tokens=MAX_TOKENS, temperature=0
        )
        assert reply.usage is not None
        times.append((time.perf_counter() - start, reply.usage.completion_tokens))
        messages += [reply.choices[0].message.model_dump(exclude_none=True),
                     {"role": "tool", "content": str(turn * 37)}]  # fmt: skip
    return times


async def run(
    model: str, conversations: int, turns: int, concurrency: int
) -> dict[str, list[tuple[float, int]]]:
    engine = HFEngine(model, max_batch_size=64)
    server = ModelServer(engine, "policy")
    plain = web.AppRunner(server.app())
    await plain.setup()
    site = web.TCPSite(plain, "127.0.0.1", 0)
    await site.start()
    plain_url = f"http://127.0.0.1:{plain.addresses[0][1]}/v1"
    gateway = Gateway(engine, make_renderer(engine.tokenizer, None), engine.tokenizer)
    await gateway.start()
    settings = SessionSettings(SamplingParams(max_tokens=MAX_TOKENS, temperature=0.0),
                               max_calls=turns, max_context_tokens=engine.max_length)  # fmt: skip
    limit = asyncio.Semaphore(concurrency)
    timings: dict[str, list[tuple[float, int]]] = {"plain": [], "gateway": []}

    async def one(k: int, where: str) -> None:
        async with limit:
            if where == "plain":
                client = openai.AsyncOpenAI(base_url=plain_url, api_key="-", max_retries=0)
            else:
                session = gateway.open(settings, Trajectory(f"c{k}"))
                client = openai.AsyncOpenAI(base_url=gateway.url_of(session),
                                            api_key=session.key, max_retries=0)  # fmt: skip
            timings[where] += await conversation(client, k, turns)
            await client.close()

    await one(-1, "plain")  # warm both paths up
    await one(-1, "gateway")
    timings = {"plain": [], "gateway": []}
    order = [(k, w) for k in range(conversations) for w in ("plain", "gateway")]
    await asyncio.gather(*(one(k, w) for k, w in order))
    await gateway.aclose()
    await plain.cleanup()
    await engine.aclose()
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="a model directory (default: a fresh tiny model)")
    parser.add_argument("--conversations", type=int, default=24)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    args = parser.parse_args()
    model = str(tiny_model(args.model))
    for concurrency in args.concurrency:
        timings = asyncio.run(run(model, args.conversations, args.turns, concurrency))
        plain, through = (statistics.median(s for s, _ in timings[w]) for w in ("plain", "gateway"))
        tokens = {w: statistics.mean(n for _, n in timings[w]) for w in timings}
        print(f"concurrency {concurrency:>3}: plain server {1000 * plain:.1f} ms a call "
              f"({tokens['plain']:.1f} tokens), gateway {1000 * through:.1f} ms "
              f"({tokens['gateway']:.1f} tokens); gateway overhead {through / plain - 1:+.1%}",
              flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
