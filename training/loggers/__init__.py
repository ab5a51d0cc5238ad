"""Where a run's metrics go beside metrics.jsonl, one sink per file, picked by name:
TensorBoard (`tensorboard: true`, the default) and, when `loggers` names them, Weights &
Biases and MLflow, each with a table of the step's kept rollouts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from toolgym.training.loggers.base import MetricSink, sample_rows
from toolgym.training.loggers.mlflow_sink import MLflowSink
from toolgym.training.loggers.tensorboard_sink import TensorBoardSink
from toolgym.training.loggers.wandb_sink import WandbSink

SINKS: dict[str, Callable[[Path, str, int], MetricSink]] = {
    "tensorboard": TensorBoardSink,
    "wandb": WandbSink,
    "mlflow": MLflowSink,
}
"""Each sink's class, made with (run directory, run name, the step the run resumes after)."""

__all__ = ["SINKS", "MetricSink", "sample_rows"]
