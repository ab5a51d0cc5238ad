"""A small tool-using agent written on the plain `openai` client: it has a calculator of its
own, asks the model until the model answers without a tool call, and returns that answer.
Nothing in it knows toolgym: trained through the gateway, it is given a base_url and a key
as it would be given OpenAI's.

    toolgym train --config configs/harness_arithmetic.yaml
"""

from __future__ import annotations

import json
from typing import Any

from arithmetic_tools import SYSTEM, calculator
from openai import AsyncOpenAI

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "calculator",
            "description": calculator.__doc__,
            "parameters": {
                "type": "object",
                "properties": {"expression": {"type": "string"}},
                "required": ["expression"],
            },
        },
    }
]


async def solve(task: Any, base_url: str, api_key: str, turns: int = 4) -> str | None:
    """Answer `task.prompt`; the answer is the model's last reply without a tool call."""
    client = AsyncOpenAI(base_url=base_url, api_key=api_key, max_retries=0)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": task.prompt},
    ]
    try:
        for _ in range(turns):
            reply = await client.chat.completions.create(
                model="policy", messages=messages, tools=TOOLS, max_tokens=48
            )
            message = reply.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            if not message.tool_calls:
                return message.content
            for call in message.tool_calls:
                try:
                    expression = json.loads(call.function.arguments).get("expression", "")
                except (ValueError, AttributeError):
                    expression = ""
                answer = calculator(str(expression))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": answer})
        return None
    finally:
        await client.close()
