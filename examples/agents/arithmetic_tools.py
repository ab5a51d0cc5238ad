"""What the example agents share: the calculator (each wraps it as its framework's tool),
their system prompt, and how a command-line agent gets its episodes (`serve`)."""

from __future__ import annotations

import ast
import json
import operator
import os
import sys
from collections.abc import Callable

SYSTEM = "Work out the answer with the calculator, then reply with the number alone."
_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}


def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression with + - * and parentheses."""

    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        raise ValueError("only integers, + - * and parentheses")

    try:
        return str(value(ast.parse(expression, mode="eval").body))
    except (SyntaxError, ValueError, RecursionError) as exc:
        return f"error: {exc}"


def serve(play: Callable[[dict, str, str], object]) -> None:
    """Play one episode, or many: with TOOLGYM_TASK set (a command run once per episode) the
    task and the session's OPENAI_BASE_URL and OPENAI_API_KEY come from the environment and
    the result is printed; without it the agent is a long-lived worker (`harness.worker:
    true`) on toolgym's line protocol: a JSON line in (the task, the session's base_url and
    api_key), a JSON line out (the result, or the error that ended the episode), until toolgym
    closes the input. `play(task, base_url, api_key)` plays one episode."""
    if "TOOLGYM_TASK" in os.environ:
        task = json.loads(os.environ["TOOLGYM_TASK"])
        print(play(task, os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]))
        return
    for line in sys.stdin:
        request = json.loads(line)
        try:
            answer = {"result": play(request["task"], request["base_url"], request["api_key"])}
        except Exception as exc:  # reported, and judged as a failed command would be
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(answer), flush=True)
