"""Task sources: a JSONL file, or any Python iterable of dicts, picked by seed so that the
same seed always gives the same task (a group of N rollouts starts identically)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from toolgym.errors import ConfigError


class TaskList:
    """An indexed, immutable list of tasks (dicts)."""

    def __init__(self, tasks: Iterable[Mapping[str, Any]]) -> None:
        self.tasks = [dict(t) for t in tasks]
        if not self.tasks:
            raise ConfigError("the task list is empty")
        for i, t in enumerate(self.tasks):
            if not isinstance(t, dict):
                raise ConfigError(f"task {i} is a {type(t).__name__}, not a JSON object")

    @classmethod
    def load(cls, source: str | Path | Iterable[Mapping[str, Any]]) -> TaskList:
        """From a JSONL path (one JSON object a line) or an iterable of dicts."""
        if isinstance(source, (str, Path)):
            return cls(_read_jsonl(Path(source)))
        return cls(source)

    def __len__(self) -> int:
        return len(self.tasks)

    def pick(self, seed: int) -> dict[str, Any]:
        """The task for `seed` (seed modulo the number of tasks), as a fresh copy."""
        return dict(self.tasks[seed % len(self.tasks)])


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise ConfigError(f"task file {path} does not exist")
    tasks = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            tasks.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"{path}:{number}: not valid JSON ({exc.msg}, column {exc.colno})"
            ) from None
    return tasks
