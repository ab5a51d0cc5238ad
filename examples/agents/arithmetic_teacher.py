"""A teacher for the example agents' warm start (`toolgym warm-start --teacher`): a scripted
solver written for the agents' own calculator. Asked a question, it calls the calculator
with the question's expression; given the calculator's answer, it replies with that number.
Any OpenAI-compatible endpoint can teach instead (`--teacher http://host:port/v1`).

    toolgym warm-start --config configs/harness_arithmetic.yaml model=runs/base \\
        --teacher examples/agents/arithmetic_teacher.py:reply --out runs/harness-sft/policy
"""

from __future__ import annotations

import re
from typing import Any


def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any] | str:
    """The next assistant turn: the calculator's answer once there is one, else its call."""
    last = messages[-1]
    if last["role"] == "tool":
        return str(last["content"])
    asked = re.findall(r"What is (.+?)\?", str(last["content"]))
    if not asked:
        return "I cannot tell what to compute."
    call = {"name": "calculator", "arguments": {"expression": asked[-1]}}
    return {"content": "", "tool_calls": [call]}
