"""A run's metrics: metrics.jsonl (what `toolgym plot` reads and resume trims) and the same
records to the run's sinks (loggers/: TensorBoard, and W&B or MLflow where asked for).

Steps count from 1 (the evaluation before the first, `eval.at_start`, is step 0): step N's
record, its kept rollouts (rollouts/step_00000N.jsonl) and the console's "step N/T" are the
same step. A step is logged before its checkpoint is written, so a run killed in between
logs that step again on resume: opening at `start_step` (the steps the checkpoint holds)
drops records past it from both outputs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolgym.errors import ConfigError, one_line
from toolgym.training.run.files import METRICS, read_metrics

if TYPE_CHECKING:
    from toolgym.agents.trajectory import Trajectory
    from toolgym.training.loggers import MetricSink


class MetricsLog:
    def __init__(self, run_dir: Path, start_step: int = 0, sinks: Sequence[str] = ()) -> None:
        """`sinks`: where the records go beside metrics.jsonl, by name (loggers/)."""
        from toolgym.training.loggers import SINKS

        self.path = run_dir / METRICS
        kept = [r for r in read_metrics(run_dir) if r["step"] <= start_step]
        self.path.write_text("".join(json.dumps(r) + "\n" for r in kept))
        self.sinks: list[MetricSink] = []
        for name in sinks:
            try:
                self.sinks.append(SINKS[name](run_dir, run_dir.name, start_step))
            except BaseException as exc:
                self.close()
                if isinstance(exc, ConfigError) or not isinstance(exc, Exception):
                    raise
                raise ConfigError(f"loggers: {name} could not start: {one_line(exc)}") from exc

    def write(self, record: dict[str, Any]) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")
        for sink in self.sinks:
            sink.write(record)

    def samples(self, step: int, trajectories: list[Trajectory]) -> None:
        """The step's kept rollouts, to the sinks that keep tables."""
        for sink in self.sinks:
            sink.samples(step, trajectories)

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()


def env_steps_spent(record: dict[str, Any]) -> float:
    """The env steps a training step's record says it spent: its episodes' turns, and the
    turns of any Monte-Carlo branches (`mc_values/env_steps`), which cost the env as much."""
    return record["env_steps"] + record.get("mc_values/env_steps", 0.0)
