"""Task sources: the tasks of an env in named splits (train, eval, test) that never share a task.

Three kinds:
- `SeedTasks`, for envs that generate their tasks from a seed: task i of a split is
  {"seed": base + i}, each split in its own range of 10^9 seeds, so train and eval seeds are
  disjoint by construction; two seeds may still generate alike tasks where the env has few
  distinct ones, so generators that can name their item use:
- `ContentTasks` (envs/tasks/content.py), the built-in generators' (Maze, Arithmetic,
  MathCode, CodeReason): the same seed ranges, each keeping only the seeds whose item (what
  the seed generates) belongs to that split by a hash of the item.
- `ListTasks`, for a fixed list (JSONL or Python dicts): splits given explicitly (a mapping
  of split to source, or a "split" field in each task), or else a held-out share chosen by a
  hash of each task's content, so a task and its duplicates land on the same side whatever
  the order. A task whose content appears in two splits is refused.

The trainer draws train; evaluation and SFT's held-out set draw eval. A draw becomes
`reset(seed=draw.seed, options={"task": draw.task})`: the same task and seed give the same
start, so a group of rollouts begins identically.
"""

from __future__ import annotations

import hashlib
import json
import random
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolgym.errors import ConfigError, did_you_mean

SPLITS = ("train", "eval", "test")
Task = dict[str, Any]
TaskInput = str | Path | Iterable[Mapping[str, Any]]


@dataclass(frozen=True)
class TaskDraw:
    """One task drawn from a split, with the seed its episode resets with."""

    split: str
    index: int
    task: Task
    seed: int


class TaskSource(ABC):
    """Tasks in named splits; `task(split, i)` is deterministic."""

    @abstractmethod
    def size(self, split: str) -> int | None:
        """How many tasks the split holds; None when it generates as many as asked."""

    @abstractmethod
    def task(self, split: str, index: int) -> Task:
        """Task `index` of `split`, as a fresh dict."""

    def draw(self, split: str, index: int) -> TaskDraw:
        """The task and its reset seed: the task's own "seed" field if it has one (generated
        tasks), else the index."""
        task = self.task(split, index)
        seed = task.get("seed")
        return TaskDraw(split, index, task, seed if isinstance(seed, int) else index)

    def head(self, split: str, n: int) -> list[TaskDraw]:
        """The first `n` draws of a split (all of it when it holds fewer)."""
        size = self.size(split)
        return [self.draw(split, i) for i in range(n if size is None else min(n, size))]


def check_split(split: str) -> None:
    if split not in SPLITS:
        raise ConfigError(
            f"unknown split '{split}'.{did_you_mean(split, SPLITS)} Splits: {', '.join(SPLITS)}"
        )


class SeedTasks(TaskSource):
    """Generated tasks: task i of a split is the seed SPLITS.index(split) * SPAN + i."""

    SPAN = 10**9

    def size(self, split: str) -> int | None:
        check_split(split)
        return None

    def task(self, split: str, index: int) -> Task:
        check_split(split)
        if not 0 <= index < self.SPAN:
            raise ConfigError(f"task index {index} of split '{split}' is outside [0, {self.SPAN})")
        return {"seed": SPLITS.index(split) * self.SPAN + index}


class ListTasks(TaskSource):
    """A fixed list of tasks in splits. Train indices run on past the end in fresh shuffled
    passes (one permutation per pass, the same on every run); eval and test keep their order.

    Args:
        splits: split name -> its tasks.
    """

    def __init__(
        self,
        splits: Mapping[str, Sequence[Mapping[str, Any]]],
        check: Callable[[Mapping[str, Any]], None] | None = None,
    ) -> None:
        """`check`: the env's own check of one task (raises ConfigError with the reason),
        run on every task here, so a wrong row stops the env when it is made, naming the
        row, rather than the episode that draws it."""
        self.splits: dict[str, list[Task]] = {}
        owner: dict[str, str] = {}
        for split, tasks in splits.items():
            check_split(split)
            self.splits[split] = []
            for i, t in enumerate(tasks):
                if not isinstance(t, Mapping):
                    raise ConfigError(
                        f"{split} task {i} is a {type(t).__name__}, not a JSON object"
                    )
                if check is not None:
                    try:
                        check(t)
                    except ConfigError as exc:
                        raise ConfigError(f"{split} task {i} ({_short(t)}): {exc}") from None
                key = content_key(t)
                if owner.setdefault(key, split) != split:
                    raise ConfigError(
                        f"a task is in both the {owner[key]} and the {split} split: {_short(t)}"
                    )
                self.splits[split].append(dict(t))
        self._orders: dict[int, list[int]] = {}

    @classmethod
    def load(
        cls,
        source: TaskInput | Mapping[str, TaskInput],
        eval_fraction: float = 0.1,
        check: Callable[[Mapping[str, Any]], None] | None = None,
    ) -> ListTasks:
        """From a JSONL path or an iterable of dicts (split by their "split" field, else by
        holding out `eval_fraction` of the distinct tasks), or from {split: source}."""
        if isinstance(source, Mapping) and all(k in SPLITS for k in source):
            return cls({split: _read(s) for split, s in source.items()}, check)
        tasks = _read(source)  # type: ignore[arg-type]
        for row, t in enumerate(tasks, 1):
            if check is not None:
                try:
                    check(t)
                except ConfigError as exc:
                    where = (
                        f"{source} row {row}" if isinstance(source, str | Path) else f"task {row}"
                    )
                    raise ConfigError(f"{where} ({_short(t)}): {exc}") from None
        if any("split" in t for t in tasks):
            by_split: dict[str, list[Task]] = {}
            for t in tasks:
                by_split.setdefault(str(t.get("split", "train")), []).append(t)
            return cls(by_split)
        return cls(hold_out(tasks, eval_fraction))

    def size(self, split: str) -> int:
        check_split(split)
        return len(self.splits.get(split, []))

    def task(self, split: str, index: int) -> Task:
        tasks = self._tasks(split)
        if split != "train":
            if not 0 <= index < len(tasks):
                raise ConfigError(f"the {split} split holds {len(tasks)} tasks, not task {index}")
            return dict(tasks[index])
        epoch, position = divmod(index, len(tasks))
        order = self._orders.get(epoch)
        if order is None:
            order = list(range(len(tasks)))
            random.Random(f"train-pass-{epoch}").shuffle(order)
            self._orders = {epoch: order}  # passes are read in turn: keep only the current
        return dict(tasks[order[position]])

    def _tasks(self, split: str) -> list[Task]:
        check_split(split)
        tasks = self.splits.get(split)
        if not tasks:
            raise ConfigError(
                f"there are no {split} tasks; give them (a mapping {{{split}: ...}} or a "
                f'"split" field per task), or more tasks so that some can be held out'
            )
        return tasks


def needs_keys(what: str, *keys: str) -> Callable[[Mapping[str, Any]], None]:
    """A task check (`ListTasks.load(..., check=)`, and an env's `start` for a task given
    directly) that each of `keys` is there and not empty."""

    def check(task: Mapping[str, Any]) -> None:
        missing = [k for k in keys if task.get(k) is None or task.get(k) == ""]
        if missing:
            raise ConfigError(
                f"{what} needs {', '.join(repr(k) for k in keys)}; "
                f"{', '.join(repr(k) for k in missing)} missing from keys {sorted(task)}"
            )

    return check


def hold_out(tasks: Sequence[Task], eval_fraction: float) -> dict[str, list[Task]]:
    """Split by content: the distinct tasks with the smallest content hashes (a share of
    `eval_fraction`, at least one when there are two or more) go to eval."""
    if not 0 <= eval_fraction < 1:
        raise ConfigError(f"eval_fraction must be in [0, 1), got {eval_fraction}")
    keys = sorted({content_key(t) for t in tasks})
    n_eval = max(1, round(eval_fraction * len(keys))) if len(keys) >= 2 and eval_fraction else 0
    held = set(keys[:n_eval])
    return {
        "train": [t for t in tasks if content_key(t) not in held],
        "eval": [t for t in tasks if content_key(t) in held],
    }


def content_key(task: Mapping[str, Any]) -> str:
    """A digest of the task's content (its "split" field aside)."""
    body = {k: v for k, v in task.items() if k != "split"}
    text = json.dumps(body, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha1(text.encode()).hexdigest()


def _read(source: TaskInput) -> list[Task]:
    if isinstance(source, (str, Path)):
        return _read_jsonl(Path(source))
    tasks = [t for t in source]
    for i, t in enumerate(tasks):
        if not isinstance(t, Mapping):
            raise ConfigError(f"task {i} is a {type(t).__name__}, not a JSON object")
    return [dict(t) for t in tasks]


def _read_jsonl(path: Path) -> list[Task]:
    if not path.is_file():
        raise ConfigError(f"task file {path} does not exist")
    tasks = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            task = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"{path}:{number}: not valid JSON ({exc.msg}, column {exc.colno})"
            ) from None
        except ValueError as exc:  # an integer too long to read
            raise ConfigError(
                f"{path}:{number}: not readable ({str(exc).split(';')[0][:200]})"
            ) from None
        if not isinstance(task, dict):
            raise ConfigError(
                f"{path}:{number}: a task is a JSON object, got {type(task).__name__}"
            )
        tasks.append(task)
    return tasks


def _short(task: Mapping[str, Any]) -> str:
    text = json.dumps(dict(task), default=str, ensure_ascii=False)
    return text if len(text) <= 120 else text[:117] + "..."


def choose_task(
    seed: int,
    options: dict[str, Any] | None,
    tasks: TaskSource | None,
    generate: Callable[[int], Task],
) -> Task:
    """The task an episode resets to: `options["task"]` ({"seed": n} generates task n), else
    train task `seed` of `tasks`, else the generated task of `seed`."""
    given = (options or {}).get("task")
    if given is not None and set(given) == {"seed"} and isinstance(given["seed"], int):
        return generate(given["seed"])
    if given is not None:
        return dict(given)
    if tasks is not None:
        return tasks.task("train", seed)
    return generate(seed)
