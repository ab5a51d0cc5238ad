"""How a final answer is scored against a task, by name, for envs declared in config (an MCP
server's tools plus a task list): "exact", "contains", "number", or "package.module:function"
(your own, called as function(answer, task) -> float). Each pays 1 for a right answer and 0
otherwise, so an episode is solved when it pays 1 (a function of your own that gives partial
credit counts as solved only at 1).

A task's "answer" may be one value or a list of accepted values."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from toolgym.errors import ConfigError
from toolgym.imports import load_callable

AnswerCheck = Callable[[str, Mapping[str, Any]], float]
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def _normal(text: Any) -> str:
    return " ".join(str(text).casefold().split()).strip(" .")


def _accepted(task: Mapping[str, Any]) -> list[Any]:
    answer = task.get("answer")
    return list(answer) if isinstance(answer, list) else [answer]


def exact(answer: str, task: Mapping[str, Any]) -> float:
    """1 when the answer equals an accepted one, ignoring case, spacing and a final period."""
    return float(any(_normal(answer) == _normal(a) for a in _accepted(task)))


CONTAINS_EXTRA_WORDS = 6
"""How many words an answer may add around the accepted one it contains: "The capital of
France is Paris" adds five. A short list of candidates still fits, so a task with a few
options (multiple choice) wants "exact"."""


def contains(answer: str, task: Mapping[str, Any]) -> float:
    """1 when an accepted answer appears in the answer as whole words (case and spacing
    ignored) and the answer adds at most CONTAINS_EXTRA_WORDS words to it: a sentence around
    the answer is one, a list of every candidate is not."""
    given = _normal(answer).split()
    for accepted in _accepted(task):
        words = _normal(accepted).split()
        if words and len(given) <= len(words) + CONTAINS_EXTRA_WORDS and _has_run(given, words):
            return 1.0
    return 0.0


def _has_run(words: list[str], run: list[str]) -> bool:
    """Whether `run` appears in `words` as consecutive whole words (punctuation at a word's
    ends ignored)."""
    stripped = [w.strip(".,;:!?\"'()[]") for w in words]
    target = [w.strip(".,;:!?\"'()[]") for w in run]
    return any(
        stripped[i : i + len(target)] == target for i in range(len(stripped) - len(target) + 1)
    )


def number(answer: str, task: Mapping[str, Any]) -> float:
    """1 when the answer's last number equals an accepted number (within 1e-6)."""
    found = _NUMBER.findall(answer.replace(",", ""))
    if not found:
        return 0.0
    given = float(found[-1])
    for a in _accepted(task):
        try:
            if math.isclose(given, float(a), rel_tol=1e-9, abs_tol=1e-6):
                return 1.0
        except (TypeError, ValueError):
            continue
    return 0.0


CHECKS: dict[str, AnswerCheck] = {"exact": exact, "contains": contains, "number": number}


def answer_check(name: str) -> AnswerCheck:
    """The reward called `name`, or the function "package.module:function" names."""
    if name in CHECKS:
        return CHECKS[name]
    if ":" not in name:
        raise ConfigError(
            f"unknown reward {name!r}: one of {', '.join(CHECKS)}, or 'package.module:function'"
        )
    return load_callable(name, "reward function")


def checked_reward(value: Any, name: str) -> float:
    """The reward function's value as a finite float; ConfigError naming it otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"reward function {name} returned {value!r}, not a finite number")
    return float(value)
