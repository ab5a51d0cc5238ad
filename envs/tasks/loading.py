"""An env's `tasks` argument, whatever its form: a task list (JSONL path, list of dicts,
{split: ...}) or a generated source named by a spec (`reasoning_gym:<dataset>`); and the
grade a source gives an answer when the source knows best (reasoning-gym's scorers)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from toolgym.envs.tasks import ListTasks, Task, TaskSource


@runtime_checkable
class GradesAnswers(Protocol):
    """A task source whose tasks come with their own grader."""

    def score(self, answer: str | None, task: Task) -> float:
        """The answer's grade, 0 to 1."""
        ...


def load_tasks(
    spec: Any, check: Callable[[Mapping[str, Any]], None] | None = None, seed: int = 0
) -> TaskSource:
    """A `ReasoningGymTasks` for a reasoning-gym spec, else `ListTasks.load(spec, check)`."""
    from toolgym.envs.reasoning_gym.tasks import ReasoningGymTasks, is_reasoning_gym

    if is_reasoning_gym(spec):
        return ReasoningGymTasks(spec, seed=seed)
    return ListTasks.load(spec, check=check)


def source_grade(tasks: TaskSource | None, task: Task, answer: str | None) -> float | None:
    """The source's grade of `answer` when `task` is one of its graded tasks; None when the
    env grades it itself."""
    if isinstance(tasks, GradesAnswers) and "dataset" in task and "index" in task:
        return tasks.score(answer, task)
    return None
