"""Weights & Biases and MLflow as metric and rollout-table sinks, in their offline modes, read
back with their own packages: every step's metrics as metrics.jsonl has them, each step's
kept rollouts as a table, and a resumed run going on as the same run."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from mlflow import MlflowClient
from wandb.proto import wandb_internal_pb2

from conftest import run_cli
from toolgym.agents.trajectory import read_jsonl
from toolgym.config import load_config
from toolgym.training.config import TrainConfig
from toolgym.training.run.files import read_metrics
from toolgym.training.trainer import Trainer

pytestmark = pytest.mark.timeout(600)


def settings(model, run_dir, steps):
    return load_config(TrainConfig, None, [
        f"model={model}", f"run_dir={run_dir}", f"steps={steps}", "tensorboard=false",
        "env.kwargs={size: 3, max_turns: 3}", "rollout.tasks_per_step=2",
        "rollout.rollouts_per_task=2", "rollout.max_tokens=16", "optim.micro_batch_size=2",
        "eval.episodes=2", "loggers=[wandb, mlflow]",
    ])  # fmt: skip


def wandb_records(path: Path):
    """The records of an offline W&B run file (W&B's own log format: a 7-byte header, then
    32 KiB blocks of checksummed chunks), as wandb's own protobuf messages."""
    data = path.read_bytes()
    assert data[:4] == b":W&B"
    position, pending = 7, b""
    while position + 7 <= len(data):
        if 32768 - position % 32768 < 7:  # a block's tail too short for a header is padding
            position += 32768 - position % 32768
            continue
        _, length, kind = struct.unpack("<IHB", data[position : position + 7])
        pending += data[position + 7 : position + 7 + length]
        position += 7 + length
        if kind in (1, 4):  # a whole record, or the last chunk of one
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            pending = b""
            yield record


def wandb_history(run_dir: Path) -> dict[int, dict[str, str]]:
    rows = {}
    for path in sorted(run_dir.glob("wandb/offline-run-*/run-*.wandb")):
        for record in wandb_records(path):
            if record.WhichOneof("record_type") == "history":
                items = {i.key or "/".join(i.nested_key): i.value_json for i in record.history.item}
                rows[int(items["_step"])] = items
    return rows


def test_a_run_logs_its_metrics_and_rollouts_to_wandb_and_mlflow_and_resumes_there(
    tool_calling_model_dir, tmp_path, monkeypatch
):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    Trainer(settings(tool_calling_model_dir, tmp_path, 2)).run()
    Trainer(settings(tool_calling_model_dir, tmp_path, 3)).run(resume=True)
    records = [r for r in read_metrics(tmp_path) if r["step"] > 0]
    kept = {n: [t.id for t in read_jsonl(tmp_path / "rollouts" / f"step_{n:06d}.jsonl")]
            for n in (1, 2, 3)}  # fmt: skip

    history = wandb_history(tmp_path)  # offline: nothing left the machine
    assert sorted(history) == [1, 2, 3]
    for r in records:
        assert json.loads(history[r["step"]]["rollout/success"]) == r["rollout/success"]
        assert json.loads(history[r["step"]]["train/loss"]) == pytest.approx(r["train/loss"])
    run_id = (tmp_path / "wandb_id").read_text()
    assert {p.name.rsplit("-", 1)[1] for p in tmp_path.glob("wandb/offline-run-*")} == {run_id}
    for n, ids in kept.items():  # each step's row names its table file
        (table,) = tmp_path.glob(
            f"wandb/offline-run-*/files/{json.loads(history[n]['rollouts/path'])}"
        )
        rows = json.loads(table.read_text())
        column = rows["columns"].index("id")
        assert [row[column] for row in rows["data"]] == ids

    client = MlflowClient(tracking_uri=(tmp_path / "mlruns").resolve().as_uri())
    (run,) = client.search_runs(client.get_experiment_by_name("toolgym").experiment_id)
    assert run.info.run_id == (tmp_path / "mlflow_run_id").read_text()
    assert run.info.status == "FINISHED" and run.data.params["steps"] == "2"
    metric = client.get_metric_history(run.info.run_id, "rollout/success")
    assert [(m.step, m.value) for m in metric] == [
        (r["step"], r["rollout/success"]) for r in records
    ]
    for n, ids in kept.items():
        table = json.loads(Path(client.download_artifacts(
            run.info.run_id, f"rollouts/step_{n:06d}.json", str(tmp_path / "down")
        )).read_text())  # fmt: skip
        assert [row[table["columns"].index("id")] for row in table["data"]] == ids


def test_a_sink_that_cannot_start_is_one_line(tool_calling_model_dir, tmp_path):
    result = run_cli(
        "train", f"model={tool_calling_model_dir}", f"run_dir={tmp_path}", "steps=1",
        "loggers=[mlflow]", env={"MLFLOW_TRACKING_URI": "nosuchscheme://x"},
    )  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "loggers: mlflow could not start:" in result.stderr
    wrong = run_cli("train", f"model={tool_calling_model_dir}", f"run_dir={tmp_path / 'b'}",
                    "loggers=[neptune]")  # fmt: skip
    assert wrong.returncode == 2 and "loggers" in wrong.stderr and "Traceback" not in wrong.stderr
