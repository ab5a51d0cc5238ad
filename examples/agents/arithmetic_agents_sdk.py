"""The example agent written with the OpenAI Agents SDK as it comes: a default `Agent` with
the calculator as a function tool, run by `Runner` (its default model calls the Responses
API, which the gateway serves). The SDK needs the openai client's next major version, so it
runs as a command from a virtual environment of its own (`make frameworks` makes it):

    toolgym train --config configs/harness_arithmetic.yaml harness.agent=null \\
        'harness.command=[build/frameworks/bin/python,examples/agents/arithmetic_agents_sdk.py]'

Run once per episode, it reads the session's URL and key from OPENAI_BASE_URL and
OPENAI_API_KEY and the task from TOOLGYM_TASK; it prints its answer. With `harness.worker:
true` it serves episode after episode by the line protocol instead (docs/existing-agents.md),
the SDK imported once. `--api chat` makes the SDK call chat completions instead of the
Responses API. Tracing is turned off: the SDK would upload each run's trace to OpenAI with the
session's key. A run past `--max-turns` raises the SDK's MaxTurnsExceeded, which scores the
episode 0.
"""

from __future__ import annotations

import argparse
import asyncio

from arithmetic_tools import SYSTEM, serve
from arithmetic_tools import calculator as evaluate
from openai import AsyncOpenAI

from agents import (
    Agent,
    ModelSettings,
    Runner,
    function_tool,
    set_default_openai_api,
    set_default_openai_client,
    set_tracing_disabled,
)


@function_tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression with + - * and parentheses."""
    return evaluate(expression)


async def play(prompt: str, base_url: str, api_key: str, turns: int) -> str:
    agent = Agent(name="arithmetic", instructions=SYSTEM, tools=[calculator],
                  model_settings=ModelSettings(max_tokens=48))  # fmt: skip
    # closed after the episode: a worker plays thousands, a client each, and the gateway
    # refuses connections past 512 open at once
    async with AsyncOpenAI(base_url=base_url, api_key=api_key) as client:
        set_default_openai_client(client)
        result = await Runner.run(agent, prompt, max_turns=turns)
    return str(result.final_output)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-turns", type=int, default=4)
    parser.add_argument("--api", choices=["responses", "chat"], default="responses")
    args = parser.parse_args()
    set_tracing_disabled(True)
    set_default_openai_api("chat_completions" if args.api == "chat" else "responses")

    def episode(task: dict, base_url: str, api_key: str) -> str:
        return asyncio.run(play(task["prompt"], base_url, api_key, args.max_turns))

    serve(episode)


if __name__ == "__main__":
    main()
