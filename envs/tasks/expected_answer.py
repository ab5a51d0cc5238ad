"""What a task expected, as text, to read an episode by afterwards (`Trajectory.expected`):
stored once the episode is over, never shown to the policy or its agent.

An env declares it with `ExposesAnswer.expected_answer()`, read from the task it was last
reset with (an arithmetic question's number, a search task's accepted answers, a SQL task's
gold query); otherwise the episode's task's own "answer" field is it (one value or a list of
accepted ones: the field the answer checks read), and a task with neither has none.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class ExposesAnswer(Protocol):
    def expected_answer(self) -> str | None:
        """What the current episode's task expects, in words (None: nothing a reader could
        compare with)."""
        ...


def expected_answer(env: object, task: Mapping[str, Any] | None) -> str | None:
    """What `env`'s current episode (reset with `task`) expected."""
    if isinstance(env, ExposesAnswer):
        return env.expected_answer()
    answer = (task or {}).get("answer")
    if answer is None:
        return None
    return " | ".join(str(a) for a in answer) if isinstance(answer, list) else str(answer)
