"""Generated arithmetic word problems whose numbers are too big to work out in one's head, so
that running code pays: each is a question, the Python expression that answers it, and the
integer answer. Deterministic from a seed. Each template has a name, so that a run can train
on some shapes and be evaluated on one it never trained on."""

from __future__ import annotations

import random
from typing import Any

from toolgym.errors import chosen_names

NAMES = ("Ann", "Bob", "Cai", "Dee", "Eli", "Fay", "Gus", "Hal", "Ivy", "Jo")
TEMPLATES = {
    "pens": ("{n} has {a} boxes of {b} pens and {c} loose pens. How many pens in all?", "{a} * {b} + {c}"),
    "trees": ("A farm has {a} rows of {b} trees. {c} trees are cut down. How many trees are left?", "{a} * {b} - {c}"),
    "pages": ("{n} reads {a} pages a day for {b} days. How many pages is that?", "{a} * {b}"),
    "coins": ("{n} saves {a} coins, then {b} coins, then spends {c}. How many coins are left?", "{a} + {b} - {c}"),
    "cards": ("{t} cards are shared equally by {a} players. How many cards does each player get?", "{t} // {a}"),
    "bare": ("What is {a} * {b} + {c}?", "{a} * {b} + {c}"),
}  # fmt: skip


def check_templates(names: list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    """The chosen template names in the order TEMPLATES has them (None: all of them)."""
    chosen = chosen_names(TEMPLATES, names, "problem template")
    return tuple(n for n in TEMPLATES if n in chosen)


def generate_problem(seed: int, templates: tuple[str, ...] | None = None) -> dict[str, Any]:
    """A problem of one of `templates` (default: all): {"question", "expression", "answer",
    "seed"}."""
    rng = random.Random(seed)
    names = templates or tuple(TEMPLATES)
    question, expression = TEMPLATES[names[rng.randrange(len(names))]]
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
