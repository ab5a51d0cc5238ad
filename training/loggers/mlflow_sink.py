"""MLflow: the run's settings as parameters, the metrics at each step, and each step's kept
rollouts as a table artifact (rollouts/step_N.json).

Logged to RUN_DIR/mlruns (MLflow's file store, which needs no database or server) unless
MLFLOW_TRACKING_URI says where, under the experiment MLFLOW_EXPERIMENT_NAME or "toolgym". The run's id is kept in
RUN_DIR/mlflow_run_id, so a resumed run goes on as the same MLflow run."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from toolgym.agents.trajectory import Trajectory
from toolgym.errors import ConfigError
from toolgym.training.loggers.base import run_settings, sample_rows, scalars

ID_FILE = "mlflow_run_id"
PARAM_CHARS = 500
"""MLflow refuses longer parameter values: a longer setting is cut."""


class MLflowSink:
    def __init__(self, run_dir: Path, name: str, start_step: int) -> None:
        try:
            import mlflow
        except ImportError:
            raise ConfigError(
                "loggers: [mlflow] needs the mlflow package: pip install mlflow-skinny"
            ) from None
        self.mlflow = mlflow
        uri = os.environ.get("MLFLOW_TRACKING_URI")
        if not uri:  # MLflow's local file store: the offline mode that needs no database
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
            uri = (run_dir / "mlruns").resolve().as_uri()
        self.client = mlflow.MlflowClient(tracking_uri=uri)
        saved = run_dir / ID_FILE
        if start_step and saved.is_file():
            self.run_id = saved.read_text().strip()
            self.client.update_run(self.run_id, status="RUNNING")
        else:
            experiment = os.environ.get("MLFLOW_EXPERIMENT_NAME", "toolgym")
            found = self.client.get_experiment_by_name(experiment)
            experiment_id = (
                found.experiment_id if found else self.client.create_experiment(experiment)
            )
            self.run_id = self.client.create_run(experiment_id, run_name=name).info.run_id
            saved.write_text(self.run_id)
            for key, value in _params(run_dir).items():
                self.client.log_param(self.run_id, key, value)

    def write(self, record: dict[str, Any]) -> None:
        from mlflow.entities import Metric

        stamp = _now_ms()
        metrics = [Metric(k, v, stamp, record["step"]) for k, v in scalars(record).items()]
        self.client.log_batch(self.run_id, metrics=metrics)

    def samples(self, step: int, trajectories: list[Trajectory]) -> None:
        rows = sample_rows(step, trajectories)
        if rows:
            table = {column: [r[column] for r in rows] for column in rows[0]}
            self.client.log_table(self.run_id, table, f"rollouts/step_{step:06d}.json")

    def close(self) -> None:
        self.client.set_terminated(self.run_id)


def _now_ms() -> int:
    import time

    return int(time.time() * 1000)


def _params(run_dir: Path) -> dict[str, str]:
    """The run's settings, flattened to dotted names."""
    import json

    flat: dict[str, str] = {}

    def walk(value: Any, prefix: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, f"{prefix}.{k}" if prefix else str(k))
        else:
            flat[prefix] = json.dumps(value)[:PARAM_CHARS]

    walk(run_settings(run_dir), "")
    return flat
