"""The example agent written with the OpenAI Agents SDK as it comes: a default `Agent` with
the calculator as a function tool, run by `Runner` (its default model calls the Responses
API, which the gateway serves). The SDK needs the openai client's next major version, so it
runs as a command from a virtual environment of its own (`make frameworks` makes it):

    toolgym train --config configs/harness_arithmetic.yaml harness.agent=null \\
        'harness.command=[build/frameworks/bin/python,examples/agents/arithmetic_agents_sdk.py]'

Run once per episode, it reads the session's URL and key from OPENAI_BASE_URL and
OPENAI_API_KEY, which the SDK's default client reads too, and the task from TOOLGYM_TASK; it
prints its answer. With `harness.worker: true` it serves episode after episode by the line
protocol instead (docs/existing-agents.md), the SDK imported once. Tracing is
turned off: the SDK would upload each run's trace to OpenAI with the session's key. A run
past `--max-turns` raises the SDK's MaxTurnsExceeded, which scores the episode 0.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys

from arithmetic_tools import SYSTEM
from arithmetic_tools import calculator as evaluate
from openai import AsyncOpenAI

from agents import (
    Agent,
    ModelSettings,
    Runner,
    function_tool,
    set_default_openai_client,
    set_tracing_disabled,
)


@function_tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression with + - * and parentheses."""
    return evaluate(expression)


async def play(prompt: str, turns: int) -> str:
    agent = Agent(name="arithmetic", instructions=SYSTEM, tools=[calculator],
                  model_settings=ModelSettings(max_tokens=48))  # fmt: skip
    result = await Runner.run(agent, prompt, max_turns=turns)
    return str(result.final_output)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-turns", type=int, default=4)
    turns = parser.parse_args().max_turns
    set_tracing_disabled(True)
    if "TOOLGYM_TASK" in os.environ:  # one episode, its session in the environment
        print(asyncio.run(play(json.loads(os.environ["TOOLGYM_TASK"])["prompt"], turns)))
        return
    for line in sys.stdin:  # a long-lived worker (harness.worker): one episode a line
        request = json.loads(line)
        set_default_openai_client(
            AsyncOpenAI(base_url=request["base_url"], api_key=request["api_key"])
        )
        try:
            answer = {"result": asyncio.run(play(request["task"]["prompt"], turns))}
        except Exception as exc:  # reported, and judged as a failed command would be
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
