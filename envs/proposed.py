"""The typed task a proposer's episode hands back, and where it came from.

A proposer env ends its episode with the task as its step's `result` (plain JSON); the
self-play builder reads it with `Trajectory.results_as(ProposedTask)` and adds the
provenance it knows (the proposer's trajectory, the policy version, the tasks it was shown).
Sizes are bounded here, so a 1 MB question is a rejection with its reason, never a task.
"""

from __future__ import annotations

import re
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


def example_instructions(examples: Any, k: int, chars: int) -> list[str]:
    """The instructions of at most `k` example tasks a proposer is shown (a reset task's
    "examples": pool tasks as JSON), each cut to `chars`; anything malformed is skipped."""
    if not isinstance(examples, list):
        return []
    return [e["instruction"][:chars] for e in examples[:k]
            if isinstance(e, dict) and isinstance(e.get("instruction"), str)]  # fmt: skip
