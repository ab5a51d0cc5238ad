"""Generated arithmetic word problems whose numbers are too big to work out in one's head, so
that running code pays: each is a question, the Python expression that answers it, and the
integer answer. Deterministic from a seed."""

from __future__ import annotations

import random
from typing import Any

NAMES = ("Ann", "Bob", "Cai", "Dee", "Eli", "Fay", "Gus", "Hal", "Ivy", "Jo")
TEMPLATES = (
    ("{n} has {a} boxes of {b} pens and {c} loose pens. How many pens in all?", "{a} * {b} + {c}"),
    ("A farm has {a} rows of {b} trees. {c} trees are cut down. How many trees are left?", "{a} * {b} - {c}"),
    ("{n} reads {a} pages a day for {b} days. How many pages is that?", "{a} * {b}"),
    ("{n} saves {a} coins, then {b} coins, then spends {c}. How many coins are left?", "{a} + {b} - {c}"),
    ("{t} cards are shared equally by {a} players. How many cards does each player get?", "{t} // {a}"),
    ("What is {a} * {b} + {c}?", "{a} * {b} + {c}"),
)  # fmt: skip


def generate_problem(seed: int) -> dict[str, Any]:
    """A problem: {"question", "expression", "answer", "seed"}."""
    rng = random.Random(seed)
    question, expression = TEMPLATES[rng.randrange(len(TEMPLATES))]
    a, b = rng.randint(12, 99), rng.randint(12, 99)
    c = rng.randint(2, (a + b - 1) if "{a} + {b}" in expression else 999)  # never below 0
    values = {"n": rng.choice(NAMES), "a": a, "b": b, "c": c, "t": a * b}
    expression = expression.format(**values)
    return {
        "question": question.format(**values),
        "expression": expression,
        "answer": int(eval(expression, {"__builtins__": {}})),  # our own template, not input
        "seed": seed,
    }
