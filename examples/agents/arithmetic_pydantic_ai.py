"""The example agent written with pydantic-ai: an `Agent` on its OpenAI chat model with the
calculator as a tool. pydantic-ai needs the openai client's next major version, so it runs as
a command from a virtual environment of its own (`make frameworks` makes it):

    toolgym train --config configs/harness_arithmetic.yaml harness.agent=null \\
        'harness.command=[build/frameworks/bin/python,examples/agents/arithmetic_pydantic_ai.py]'

Run once per episode, it reads the session's URL and key from OPENAI_BASE_URL and
OPENAI_API_KEY and the task from TOOLGYM_TASK; it prints its answer. With `harness.worker:
true` it serves episode after episode by the line protocol instead (docs/existing-agents.md),
pydantic-ai imported once. A run past `--max-calls` model calls raises pydantic-ai's
UsageLimitExceeded, which scores the episode 0.
"""

from __future__ import annotations

import argparse
import asyncio

from arithmetic_tools import SYSTEM, serve
from arithmetic_tools import calculator as evaluate
from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.usage import UsageLimits


def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression with + - * and parentheses."""
    return evaluate(expression)


async def play(prompt: str, base_url: str, api_key: str, calls: int) -> str:
    # closed after the episode: a worker plays thousands, a client each, and the gateway
    # refuses connections past 512 open at once
    async with AsyncOpenAI(base_url=base_url, api_key=api_key) as client:
        model = OpenAIChatModel("policy", provider=OpenAIProvider(openai_client=client))
        agent = Agent(model, system_prompt=SYSTEM, tools=[calculator],
                      model_settings={"max_tokens": 48})  # fmt: skip
        result = await agent.run(prompt, usage_limits=UsageLimits(request_limit=calls))
    return result.output


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-calls", type=int, default=4)
    calls = parser.parse_args().max_calls

    def episode(task: dict, base_url: str, api_key: str) -> str:
        return asyncio.run(play(task["prompt"], base_url, api_key, calls))

    serve(episode)


if __name__ == "__main__":
    main()
