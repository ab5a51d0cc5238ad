"""Weights & Biases: the metrics at each step, and each step's kept rollouts as a table.

Offline unless WANDB_MODE says otherwise (`wandb sync RUN_DIR/wandb/offline-run-*` uploads
a run later), its files under RUN_DIR/wandb, its project WANDB_PROJECT or "toolgym". The
run's id is kept in RUN_DIR/wandb_id, so a resumed run goes on as the same W&B run."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

from toolgym.agents.trajectory import Trajectory
from toolgym.errors import ConfigError
from toolgym.training.loggers.base import run_settings, sample_rows, scalars

ID_FILE = "wandb_id"


class WandbSink:
    def __init__(self, run_dir: Path, name: str, start_step: int) -> None:
        try:
            import wandb
        except ImportError:
            raise ConfigError(
                "loggers: [wandb] needs the wandb package: pip install wandb"
            ) from None
        self.wandb = wandb
        saved = run_dir / ID_FILE
        run_id = (
            saved.read_text().strip() if start_step and saved.is_file() else uuid.uuid4().hex[:12]
        )
        saved.write_text(run_id)
        mode: Any = os.environ.get("WANDB_MODE", "offline")  # wandb checks the value itself
        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", "toolgym"), name=name, id=run_id,
            dir=str(run_dir), mode=mode, resume="allow", config=run_settings(run_dir),
        )  # fmt: skip

    def write(self, record: dict[str, Any]) -> None:
        self.run.log(scalars(record), step=record["step"])

    def samples(self, step: int, trajectories: list[Trajectory]) -> None:
        rows = sample_rows(step, trajectories)
        if rows:
            table = self.wandb.Table(columns=list(rows[0]), data=[list(r.values()) for r in rows])
            self.run.log({"rollouts": table}, step=step)

    def close(self) -> None:
        self.run.finish()
