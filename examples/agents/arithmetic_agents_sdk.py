"""The example agent written with the OpenAI Agents SDK as it comes: a default `Agent` with
the calculator as a function tool, run by `Runner` (its default model calls the Responses
API, which the gateway serves). The SDK needs the openai client's next major version, so it
runs as a command from a virtual environment of its own (`make frameworks` makes it):

    toolgym train --config configs/harness_arithmetic.yaml harness.agent=null \\
        'harness.command=[build/frameworks/bin/python,examples/agents/arithmetic_agents_sdk.py]'

It reads the session's URL and key from OPENAI_BASE_URL and OPENAI_API_KEY, which the SDK's
default client reads too, and the task from TOOLGYM_TASK; it prints its answer. Tracing is
turned off: the SDK would upload each run's trace to OpenAI with the session's key. A run
past `--max-turns` raises the SDK's MaxTurnsExceeded, which scores the episode 0.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os

from arithmetic_tools import SYSTEM
from arithmetic_tools import calculator as evaluate

from agents import Agent, ModelSettings, Runner, function_tool, set_tracing_disabled


@function_tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression with + - * and parentheses."""
    return evaluate(expression)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-turns", type=int, default=4)
    turns = parser.parse_args().max_turns
    set_tracing_disabled(True)
    task = json.loads(os.environ["TOOLGYM_TASK"])
    agent = Agent(name="arithmetic", instructions=SYSTEM, tools=[calculator],
                  model_settings=ModelSettings(max_tokens=48))  # fmt: skip
    result = await Runner.run(agent, task["prompt"], max_turns=turns)
    print(result.final_output)


if __name__ == "__main__":
    asyncio.run(main())
