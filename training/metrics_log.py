"""A run's metrics: metrics.jsonl (what `toolgym plot` reads and resume trims) and, optionally,
the same scalars as TensorBoard events under RUN_DIR/tensorboard.

Steps count from 1 (the evaluation before the first, `eval.at_start`, is step 0): step N's
record, its kept rollouts (rollouts/step_00000N.jsonl) and the console's "step N/T" are the
same step. A step is logged before its checkpoint is written, so a run killed in between
logs that step again on resume: opening at `start_step` (the steps the checkpoint holds)
drops records past it from both outputs.
"""

from __future__ import annotations

import json
import numbers
from pathlib import Path
from typing import Any

from toolgym.errors import ConfigError

METRICS = "metrics.jsonl"


class MetricsLog:
    def __init__(self, run_dir: Path, start_step: int = 0, tensorboard: bool = True) -> None:
        self.path = run_dir / METRICS
        kept = [r for r in read_metrics(run_dir) if r["step"] <= start_step]
        self.path.write_text("".join(json.dumps(r) + "\n" for r in kept))
        self.writer: Any = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(run_dir / "tensorboard"), purge_step=start_step + 1)

    def write(self, record: dict[str, Any]) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")
        if self.writer is not None:
            for key, value in record.items():
                if key != "step" and isinstance(value, numbers.Real):
                    self.writer.add_scalar(key, float(value), record["step"])
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


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


def env_steps_spent(record: dict[str, Any]) -> float:
    """The env steps a training step's record says it spent: its episodes' turns, and the
    turns of any Monte-Carlo branches (`mc_values/env_steps`), which cost the env as much."""
    return record["env_steps"] + record.get("mc_values/env_steps", 0.0)
