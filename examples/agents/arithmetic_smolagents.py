"""The same agent as arithmetic_openai.py, written with smolagents: a ToolCallingAgent over
OpenAIServerModel, with the calculator as a tool and smolagents' own final_answer. It is
synchronous, so the harness runs it in a thread. Where smolagents sends the model's reply
back as it was given, the episode goes on as one sequence; where it rewrites the
conversation (its final-answer call has a prompt of its own), the gateway starts a segment.

    toolgym train --config configs/harness_arithmetic.yaml \\
        harness.agent=examples/agents/arithmetic_smolagents.py:solve
"""

from __future__ import annotations

from typing import Any

from arithmetic_tools import SYSTEM
from arithmetic_tools import calculator as evaluate
from smolagents import OpenAIServerModel, ToolCallingAgent, tool


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression with + - * and parentheses.

    Args:
        expression: the expression, e.g. "(3 + 4) * 5".
    """
    return evaluate(expression)


def solve(task: Any, base_url: str, api_key: str) -> str:
    """Answer `task.prompt` with the agent's final answer."""
    model = OpenAIServerModel(model_id="policy", api_base=base_url, api_key=api_key,
                              max_tokens=48, client_kwargs={"max_retries": 0})  # fmt: skip
    agent = ToolCallingAgent(tools=[calculator], model=model, max_steps=3, verbosity_level=0,
                             instructions=SYSTEM)  # fmt: skip
    return str(agent.run(task.prompt))
