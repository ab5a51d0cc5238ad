"""The metrics as TensorBoard scalars under RUN_DIR/tensorboard; a resumed run purges the
events past the step it resumes after (they were logged again)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toolgym.agents.trajectory import Trajectory
from toolgym.training.loggers.base import scalars


class TensorBoardSink:
    def __init__(self, run_dir: Path, name: str, start_step: int) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(str(run_dir / "tensorboard"), purge_step=start_step + 1)

    def write(self, record: dict[str, Any]) -> None:
        for key, value in scalars(record).items():
            self.writer.add_scalar(key, value, record["step"])
        self.writer.flush()

    def samples(self, step: int, trajectories: list[Trajectory]) -> None:
        """TensorBoard has no tables: the rollouts are in RUN_DIR/rollouts."""

    def close(self) -> None:
        self.writer.close()
