"""The example agent written with pydantic-ai: an `Agent` on its OpenAI chat model with the
calculator as a tool. pydantic-ai needs the openai client's next major version, so it runs as
a command from a virtual environment of its own (`make frameworks` makes it):

    toolgym train --config configs/harness_arithmetic.yaml harness.agent=null \\
        'harness.command=[build/frameworks/bin/python,examples/agents/arithmetic_pydantic_ai.py]'

It reads the session's URL and key from OPENAI_BASE_URL and OPENAI_API_KEY and the task from
TOOLGYM_TASK; it prints its answer. A run past `--max-calls` model calls raises pydantic-ai's
UsageLimitExceeded, which scores the episode 0.
"""

from __future__ import annotations

import argparse
import json
import os

from arithmetic_tools import SYSTEM
from arithmetic_tools import calculator as evaluate
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.usage import UsageLimits


def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression with + - * and parentheses."""
    return evaluate(expression)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-calls", type=int, default=4)
    calls = parser.parse_args().max_calls
    task = json.loads(os.environ["TOOLGYM_TASK"])
    provider = OpenAIProvider(base_url=os.environ["OPENAI_BASE_URL"],
                              api_key=os.environ["OPENAI_API_KEY"])  # fmt: skip
    model = OpenAIChatModel("policy", provider=provider)
    agent = Agent(model, system_prompt=SYSTEM, tools=[calculator],
                  model_settings={"max_tokens": 48})  # fmt: skip
    result = agent.run_sync(task["prompt"], usage_limits=UsageLimits(request_limit=calls))
    print(result.output)


if __name__ == "__main__":
    main()
