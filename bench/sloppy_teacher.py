"""A sloppy teacher for bench/harness_learns.py's RL measurement: the example teacher
(examples/agents/arithmetic_teacher.py), except that in half the questions (by their text) it
copies the first operand wrongly. Imitated whole (`--keep all`), it leaves a warm start that
is right about half the time, so RL through the gateway has something to correct; the
example teacher's own warm start is right almost always, and leaves RL next to nothing."""

from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "agents"))
from arithmetic_teacher import reply as exact_reply


def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any] | str:
    given = exact_reply(messages, tools)
    question = str(messages[-1]["content"])
    digest = hashlib.sha256(question.encode()).digest()
    if isinstance(given, str) or digest[0] % 2:
        return given
    [call] = given["tool_calls"]
    expression = call["arguments"]["expression"]
    first = re.findall(r"\d+", expression)[0]
    wrong = str(int(first) + [-10, -1, 1, 10][digest[1] % 4])
    call = {**call, "arguments": {"expression": expression.replace(first, wrong, 1)}}
    return {"content": "", "tool_calls": [call]}
