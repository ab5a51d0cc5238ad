"""The typed task a proposer's episode hands back, and where it came from.

A proposer env ends its episode with the task as its step's `result` (plain JSON); the
self-play builder reads it with `Trajectory.results_as(ProposedTask)` and adds the
provenance it knows (the proposer's trajectory, the policy version, the tasks it was shown).
Sizes are bounded here, so a 1 MB question is a rejection with its reason, never a task.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
MAX_INSTRUCTION_CHARS = 2000
MAX_ANSWER_CHARS = 1000


class Provenance(BaseModel):
    model_config = ConfigDict(frozen=True)

    proposer: str
    """The proposer's trajectory id."""
    policy_version: int
    shown: tuple[str, ...] = ()
    """The ids of the reference tasks the proposer had in context."""


class ProposedTask(BaseModel):
    """What a solver is asked (`instruction`) and how it is checked: a reference `answer`,
    or a domain's own `check` data (a gold query, held-out input/output pairs)."""

    model_config = ConfigDict(extra="forbid")

    kind: str = Field(max_length=64)
    """The domain's name for this kind of task (e.g. search, code.deduction, sql)."""
    instruction: str = Field(min_length=1, max_length=MAX_INSTRUCTION_CHARS)
    answer: str | None = Field(None, max_length=MAX_ANSWER_CHARS)
    check: dict[str, Any] = Field(default_factory=dict)
    """What the domain's checker needs beside the answer."""
    provenance: Provenance | None = None

    @field_validator("instruction", "answer")
    @classmethod
    def _plain_text(cls, value: str | None) -> str | None:
        """A solver reads these: text with no NUL or other control character (tab and
        newline aside) and no lone surrogate, which no tokenizer or terminal reads alike."""
        if value is None:
            return value
        if _CONTROL.search(value):
            raise ValueError("holds a control character (a NUL, an escape)")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("holds a lone surrogate: not valid Unicode") from None
        return value


def example_tasks(
    examples: Any, k: int, chars: int, solution: Callable[[dict[str, Any]], Any] | None = None
) -> list[tuple[str, str | None]]:
    """At most `k` example tasks a proposer is shown (a reset task's "examples": pool tasks
    as JSON): each one's instruction and, where `solution` reads one from the task, its
    solution (else None), each cut to `chars`; anything malformed is skipped. Shown with
    their solutions, examples teach what a task and its answer look like together."""
    if not isinstance(examples, list):
        return []
    shown: list[tuple[str, str | None]] = []
    for example in examples[:k]:
        if not isinstance(example, dict) or not isinstance(example.get("instruction"), str):
            continue
        try:
            solved = solution(example) if solution is not None else None
        except (KeyError, TypeError, IndexError, AttributeError):  # a malformed example
            solved = None
        shown.append(
            (example["instruction"][:chars], None if solved is None else str(solved)[:chars])
        )
    return shown


def example_lines(shown: list[tuple[str, str | None]], escape: bool = False) -> list[str]:
    """Each example as a line (`escape`: JSON-escaped, so that a newline in a proposal cannot
    start a line of the prompt's own), its solution on an indented line after it."""

    def text(part: str) -> str:
        return json.dumps(part)[1:-1] if escape else part

    return [text(i) if s is None else f"{text(i)}\n  {text(s)}" for i, s in shown]
