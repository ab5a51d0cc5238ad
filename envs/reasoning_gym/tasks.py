"""reasoning-gym's procedural datasets as a task source: `reasoning_gym:<dataset>` (or
several, mixed by weight), graded by each dataset's own scorer.

A dataset generates entry k from its seed and k, so a task is plain data (its dataset and
index, with the question and answer for reading) and the scorer regenerates the entry it
needs, metadata included. One stream of entries is drawn (the dataset of position p chosen
by weight, from a seed and p), and each entry goes to train, eval or test by a hash of its
dataset and question: the same question always lands in the same split, so an eval task
never equals a train task, whatever the generator repeats.

Spec, in env arguments or config:
    "reasoning_gym:leg_counting"                      one dataset, its default settings
    "reasoning_gym:leg_counting,basic_arithmetic"     mixed, equal weights
    {"reasoning_gym": {"leg_counting": {"weight": 2, "min_animals": 3},
                       "basic_arithmetic": {}}}      weights and the datasets' own settings
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping
from typing import Any

from toolgym.envs.tasks import SPLITS, Task, TaskSource, check_split
from toolgym.errors import ConfigError, did_you_mean
from toolgym.log import get_logger

log = get_logger(__name__)

INSTALL = "pip install 'toolgym[reasoning]'"
PREFIX = "reasoning_gym:"
SOURCE = "reasoning_gym"
DATASET_SIZE = 10**9
"""Datasets generate entries on demand; this only bounds the index."""
MAX_SCAN = 200_000
MAX_ANSWER_CHARS = 4000


def is_reasoning_gym(spec: Any) -> bool:
    return (isinstance(spec, str) and spec.startswith(PREFIX)) or (
        isinstance(spec, Mapping) and set(spec) == {SOURCE}
    )


def parse_spec(spec: Any) -> dict[str, dict[str, Any]]:
    """Dataset name -> its settings (a "weight" among them), from any spec form."""
    if isinstance(spec, str):
        names = [n.strip() for n in spec.removeprefix(PREFIX).split(",") if n.strip()]
        if not names:
            raise ConfigError(f"{spec!r} names no dataset: write reasoning_gym:<dataset>")
        return {name: {} for name in names}
    datasets = spec[SOURCE] if isinstance(spec, Mapping) and SOURCE in spec else spec
    if isinstance(datasets, str):
        return parse_spec(PREFIX + datasets)
    if isinstance(datasets, list):
        return {str(name): {} for name in datasets}
    if not isinstance(datasets, Mapping) or not datasets:
        raise ConfigError("reasoning_gym takes a dataset name, a list, or {name: settings}")
    out = {}
    for name, settings in datasets.items():
        if settings is not None and not isinstance(settings, Mapping):
            raise ConfigError(f"reasoning_gym dataset {name}: settings are a mapping")
        out[str(name)] = dict(settings or {})
    return out


class ReasoningGymTasks(TaskSource):
    """Tasks from reasoning-gym datasets, split by content; graded by `score`.

    Args:
        spec: see the module docstring.
        seed: the seed of the datasets and of the mixture.
        eval_fraction: the share of distinct questions held out for eval (and as much
            again for test).
    """

    def __init__(self, spec: Any, seed: int = 0, eval_fraction: float = 0.1) -> None:
        try:
            import reasoning_gym
        except ImportError:
            raise ConfigError(f"reasoning-gym task sources need reasoning-gym: {INSTALL}") from None
        if not 0 < eval_fraction < 0.5:
            raise ConfigError(f"eval_fraction must be in (0, 0.5), got {eval_fraction}")
        self.seed, self.eval_fraction = seed, eval_fraction
        self.datasets: dict[str, Any] = {}
        self.weights: list[float] = []
        known = set(reasoning_gym.factory.DATASETS)
        for name, settings in parse_spec(spec).items():
            weight = settings.pop("weight", 1.0)
            if isinstance(weight, bool) or not isinstance(weight, int | float) or weight <= 0:
                raise ConfigError(f"reasoning_gym dataset {name}: weight must be positive")
            if name not in known:
                raise ConfigError(
                    f"reasoning-gym has no dataset {name!r}.{did_you_mean(name, known)} "
                    f"It has {len(known)}, e.g. {', '.join(sorted(known)[:5])}"
                )
            try:
                self.datasets[name] = reasoning_gym.create_dataset(
                    name, size=DATASET_SIZE, seed=seed, **settings
                )
            except Exception as exc:
                raise ConfigError(
                    f"reasoning_gym dataset {name} refused its settings {settings}: "
                    f"{type(exc).__name__}: {exc}"
                ) from None
            self.weights.append(float(weight))
        self._names = list(self.datasets)
        self._drawn = dict.fromkeys(self._names, 0)
        self._position = 0
        self._splits: dict[str, list[Task]] = {split: [] for split in SPLITS}

    def size(self, split: str) -> int | None:
        check_split(split)
        return None

    def task(self, split: str, index: int) -> Task:
        check_split(split)
        if index < 0:
            raise ConfigError(f"task index {index} of split '{split}' is negative")
        tasks = self._splits[split]
        scanned = 0
        while len(tasks) <= index:
            self._next()
            scanned += 1
            if scanned > MAX_SCAN:
                raise ConfigError(
                    f"no new {split} task of {', '.join(self._names)} in {MAX_SCAN} entries: "
                    "the datasets repeat their questions too often for this split"
                )
        return dict(tasks[index])

    def _next(self) -> None:
        """Draw the stream's next entry and file it under its split."""
        chooser = random.Random(f"reasoning-gym-{self.seed}-{self._position}")
        name = chooser.choices(self._names, self.weights)[0]
        self._position += 1
        index = self._drawn[name]
        self._drawn[name] += 1
        task = self._entry_task(name, index)
        self._splits[self._split_of(name, task["question"])].append(task)

    def for_seed(self, seed: int) -> Task:
        """A training task picked by `seed` alone, without reading the stream up to it (a
        reset with a seed and no task)."""
        for attempt in range(1000):
            chooser = random.Random(f"reasoning-gym-seed-{self.seed}-{seed}-{attempt}")
            name = chooser.choices(self._names, self.weights)[0]
            task = self._entry_task(name, chooser.randrange(DATASET_SIZE))
            if self._split_of(name, task["question"]) == "train":
                return task
        raise ConfigError(f"no training task of {', '.join(self._names)} for seed {seed}")

    def _entry_task(self, name: str, index: int) -> Task:
        entry = self.datasets[name][index]
        answer = entry.get("answer")
        return {
            "question": str(entry["question"]),
            "answer": None if answer is None else str(answer),
            "source": SOURCE,
            "dataset": name,
            "index": index,
        }

    def _split_of(self, name: str, question: str) -> str:
        digest = hashlib.sha1(f"{name}\n{question}".encode()).digest()
        bucket = int.from_bytes(digest[:8], "big") / 2**64
        if bucket < self.eval_fraction:
            return "eval"
        return "test" if bucket < 2 * self.eval_fraction else "train"

    def score(self, answer: str | None, task: Task) -> float:
        """The dataset's own score (0 to 1) of `answer` for `task`; 0 for an answer the
        scorer cannot read. A task whose question is not its dataset's entry is refused."""
        name, index = task.get("dataset"), task.get("index")
        dataset = self.datasets.get(str(name))
        if dataset is None or not isinstance(index, int) or not 0 <= index < DATASET_SIZE:
            raise ConfigError(
                f"task of dataset {name!r} (index {index!r}) is not one of this source's: "
                f"{', '.join(self._names)}"
            )
        entry = dataset[index]
        if str(entry["question"]) != task.get("question"):
            raise ConfigError(f"task {name}[{index}] does not hold that entry's question")
        if answer is not None and len(answer) > MAX_ANSWER_CHARS:
            return 0.0
        try:
            value = float(dataset.score_answer(answer, entry=entry))
        except Exception as exc:  # a scorer that cannot read this answer
            log.debug("reasoning_gym %s scorer failed on an answer: %s", name, exc)
            return 0.0
        return min(max(value, 0.0), 1.0) if value == value else 0.0
