"""A run directory's files: their names, where a step's kept rollouts are, and the readers of
its metrics and summary. What reads a run (the viewer, `toolgym rollouts`) needs this module
alone, which loads neither torch nor the trainer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from toolgym.errors import ConfigError

METRICS = "metrics.jsonl"
"""One record a step (and step 0: the evaluation at the start)."""
RUN_LOG = "train.log"
"""The run in words, a line a step, its warnings and its summary."""
SUMMARY = "summary.json"
"""The run's figures, written when it ends, however it ends."""
ROLLOUTS = "rollouts"
"""RUN_DIR/rollouts/step_N.jsonl: a sample of each step's trajectories."""
EVALUATIONS = "evaluations"
"""RUN_DIR/evaluations/step_N.jsonl: the evaluation after step N, whole (eval.kept)."""


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """The records of RUN_DIR/metrics.jsonl. A last line cut short (the run was killed while
    writing it) is dropped; a damaged line before it is an error naming the file and line."""
    path = Path(run_dir) / METRICS
    if not path.is_file():
        return []
    lines = [line for line in path.read_text(encoding="utf-8", errors="replace").splitlines()]
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):
                break  # a torn last write
            raise ConfigError(
                f"{path}:{number}: not a metrics record (the file is damaged)"
            ) from None
        if not isinstance(record, dict) or not isinstance(record.get("step"), int):
            raise ConfigError(f"{path}:{number}: a metrics record needs an integer 'step'")
        records.append(record)
    return records


def read_summary(run_dir: Path) -> dict[str, Any] | None:
    """The summary an earlier process of this run wrote (None: none, or unreadable)."""
    try:
        data = json.loads((run_dir / SUMMARY).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def rollouts_path(run_dir: str | Path, step: int) -> Path:
    """Where step `step`'s kept rollouts are (RUN_DIR/rollouts/step_00000N.jsonl)."""
    return Path(run_dir) / ROLLOUTS / f"step_{step:06d}.jsonl"


def eval_rollouts_path(run_dir: str | Path, step: int) -> Path:
    """Where the evaluation after `step` steps keeps its episodes
    (RUN_DIR/evaluations/step_00000N.jsonl)."""
    return Path(run_dir) / EVALUATIONS / f"step_{step:06d}.jsonl"


def kept_steps(run_dir: str | Path) -> dict[int, Path]:
    """The steps whose rollouts a run kept, in step order, and their files."""
    found = {step_of(p): p for p in (Path(run_dir) / ROLLOUTS).glob("step_*.jsonl")}
    return {n: found[n] for n in sorted(n for n in found if n is not None)}


def step_of(path: Path) -> int | None:
    """The step a kept rollouts file holds, by its name (None: a file of another kind)."""
    number = path.stem.removeprefix("step_")
    return int(number) if path.stem.startswith("step_") and number.isdigit() else None
