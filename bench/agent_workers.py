"""What long-lived agent workers save: the example agent as a command
(examples/agents/arithmetic_worker.py) plays the same Arithmetic tasks through the gateway
once per episode (a process each: Python and the openai client loaded every time) and as
workers (`harness.worker`: loaded once per worker), alternating, in the same run. The model
is out of the measurement: the example teacher answers each call behind the gateway, so the
figure is the harness's own cost.

    python bench/agent_workers.py [--episodes 48] [--concurrency 4] [--repeats 3]

Printed: episodes per second of each mode (min, median, max over the repeats) and the ratio
of the medians (workers over a process per episode).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from common import tiny_model

from toolgym.agents.collector import GroupRequest
from toolgym.agents.engines.base import SamplingParams
from toolgym.agents.gateway.collector import HarnessCollector, HarnessLimits
from toolgym.agents.gateway.harness import CommandHarness, Harness
from toolgym.agents.gateway.result_check import result_check
from toolgym.agents.gateway.server import Gateway
from toolgym.agents.gateway.session import SessionSettings
from toolgym.agents.gateway.teacher import FunctionReplies, Teacher
from toolgym.agents.gateway.worker import WorkerHarness
from toolgym.agents.models.loading import load_tokenizer
from toolgym.agents.render import ChatRenderer
from toolgym.agents.runtime import Runtime
from toolgym.envs.ref import EnvRef
from toolgym.imports import load_callable

ROOT = Path(__file__).resolve().parents[1]
AGENT = [sys.executable, str(ROOT / "examples" / "agents" / "arithmetic_worker.py")]
TEACHER = f"{ROOT / 'examples' / 'agents' / 'arithmetic_teacher.py'}:reply"
ARITHMETIC = EnvRef("Arithmetic-v0", "toolgym/Arithmetic-v0", {"n_operands": 2})


async def episodes_per_s(
    runtime: Runtime, gateway: Gateway, harness: Harness, episodes: int, concurrency: int
) -> float:
    pool = runtime.pool_for(ARITHMETIC)
    env = await pool.acquire()
    draws = env.unwrapped.task_source().head("train", episodes)
    pool.release(env)
    collector = HarnessCollector(
        gateway, harness, result_check("env"), SessionSettings(SamplingParams(max_tokens=64)),
        runtime.pool_for, HarnessLimits(concurrency=concurrency),
    )  # fmt: skip
    started = time.perf_counter()
    groups = await collector.collect([GroupRequest(ARITHMETIC, d, 1) for d in draws])
    seconds = time.perf_counter() - started
    played = [t for g in groups for t in g.trajectories]
    solved = sum(t.success for t in played)
    if solved != episodes:
        masked = [t.infra_error for t in played if t.masked]
        raise SystemExit(f"{solved} of {episodes} solved (masked: {masked[:2]})")
    return episodes / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=48)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--model", help="the tokenizer's model (default: a fresh tiny one)")
    args = parser.parse_args()
    tokenizer = load_tokenizer(tiny_model(args.model))
    renderer = ChatRenderer(tokenizer)
    runtime = Runtime()
    rates: dict[str, list[float]] = {"a process per episode": [], "workers": []}

    async def measure() -> None:
        teacher = Teacher(FunctionReplies(load_callable(TEACHER, "teacher"), "teacher"),
                          renderer, tokenizer)  # fmt: skip
        gateway = Gateway(teacher, renderer, tokenizer)
        await gateway.start()
        workers = WorkerHarness(AGENT, workers=args.concurrency)
        try:
            for _ in range(args.repeats):
                for name, harness in [("a process per episode", CommandHarness(AGENT)),
                                      ("workers", workers)]:  # fmt: skip
                    rate = await episodes_per_s(
                        runtime, gateway, harness, args.episodes, args.concurrency
                    )
                    rates[name].append(rate)
                    print(f"{name}: {rate:.2f} episodes/s", flush=True)
        finally:
            await workers.aclose()
            await gateway.aclose()
        print(f"workers started: {workers.started} (of {args.concurrency} slots)")

    try:
        runtime.run(measure())
    finally:
        runtime.close()
    for name, values in rates.items():
        print(f"{name:>22}: min {min(values):.2f}, median {statistics.median(values):.2f}, "
              f"max {max(values):.2f} episodes/s")  # fmt: skip
    ratio = statistics.median(rates["workers"]) / statistics.median(rates["a process per episode"])
    print(f"workers / a process per episode: {ratio:.2f}x")


if __name__ == "__main__":
    main()
