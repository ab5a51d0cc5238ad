"""Runs meeting the faults of long jobs: killed writes, damaged checkpoints, non-finite
losses, reused run directories and values that cannot work. Each either resumes exactly or
stops with one line naming the cause and a non-zero exit; nothing trains on garbage."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from toolgym.training.run import checkpoint
from toolgym.training.run.files import METRICS, read_metrics

SMALL = [
    "env.kwargs={size: 2, max_turns: 3}", "rollout.tasks_per_step=2", "rollout.rollouts_per_task=2",
    "rollout.max_tokens=8", "optim.micro_batch_size=4", "eval.episodes=2", "tensorboard=false",
]  # fmt: skip


def one_line_error(result, *fragments: str) -> None:
    assert result.returncode != 0, result.stdout
    assert "Traceback" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr
    for fragment in fragments:
        assert fragment in errors[0], errors[0]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, tiny_model_dir):
    from conftest import run_cli

    run = tmp_path_factory.mktemp("run") / "run"
    result = run_cli("train", f"model={tiny_model_dir}", f"run_dir={run}", "steps=2", *SMALL)
    assert result.returncode == 0, result.stderr
    return run


def damaged_copy(finished_run, tmp_path, damage) -> str:
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    damage(run)
    return str(run)


def overwrite_4kb(run) -> None:
    path = run / checkpoint.FILE
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 4096] = bytes(b ^ 0xFF for b in data[middle : middle + 4096])
    path.write_bytes(bytes(data))


def rewrite_state(change):
    def damage(run) -> None:
        state = checkpoint.read(run / checkpoint.FILE)
        change(state)
        model, optimizer = torch.nn.Linear(1, 1), torch.optim.SGD([torch.zeros(1)], lr=1)
        checkpoint.save(run, step=0, model=model, optimizer=optimizer)  # a valid file ...
        path = run / checkpoint.FILE
        import hashlib
        import io

        buffer = io.BytesIO()
        torch.save(state, buffer)  # ... holding the changed state, with a matching checksum
        payload = buffer.getvalue()
        path.write_bytes(payload + checkpoint.MARKER + hashlib.sha256(payload).digest())

    return damage


CORRUPTIONS = {
    "4 KB overwritten": (overwrite_4kb, ["checkpoint.pt", "checksum does not match"]),
    "truncated": (lambda run: (run / checkpoint.FILE).write_bytes((run / checkpoint.FILE).read_bytes()[:1000]), ["checkpoint.pt", "no checksum"]),
    "empty": (lambda run: (run / checkpoint.FILE).write_bytes(b""), ["checkpoint.pt", "no checksum"]),
    "missing keys": (rewrite_state(lambda s: s.pop("optimizer")), ["checkpoint.pt", "incomplete"]),
    "step -5": (rewrite_state(lambda s: s.update(step=-5)), ["checkpoint.pt", "step -5 is outside this run's 0..2"]),
    "step 100": (rewrite_state(lambda s: s.update(step=100)), ["checkpoint.pt", "step 100 is outside"]),
    "bad config.json": (lambda run: (run / "config.json").write_text("{not json"), ["config.json", "not a valid run config"]),
    "no checkpoint": (lambda run: (run / checkpoint.FILE).unlink(), ["no checkpoint in"]),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CORRUPTIONS))
def test_a_damaged_run_stops_its_resume_naming_the_file(cli, finished_run, tmp_path, case):
    damage, fragments = CORRUPTIONS[case]
    run = damaged_copy(finished_run, tmp_path, damage)
    one_line_error(cli("train", "--resume", run), *fragments)


def test_a_torn_last_metrics_line_is_dropped_and_the_run_resumes(cli, finished_run, tmp_path):
    def tear(run) -> None:
        (run / "config.json").write_text(
            (run / "config.json").read_text().replace('"steps": 2', '"steps": 3')
        )
        with (run / METRICS).open("a") as f:
            f.write('{"step": 3, "rollout/succ')

    run = damaged_copy(finished_run, tmp_path, tear)
    assert [r["step"] for r in read_metrics(run)] == [1, 2]  # plot and resume can read it
    result = cli("train", "--resume", run)
    assert result.returncode == 0, result.stderr
    assert [r["step"] for r in read_metrics(run)] == [1, 2, 3]
    log = (Path(run) / "train.log").read_text()  # the resumed process appends to the run's log
    assert log.index("training ") < log.index("resuming after step 2") < log.index("step 3/3")
    assert json.loads((Path(run) / "summary.json").read_text())["steps"] == 3


def test_a_damaged_metrics_line_before_the_last_is_named(finished_run, tmp_path):
    from toolgym.errors import ConfigError

    run = damaged_copy(
        finished_run, tmp_path, lambda r: (r / METRICS).write_text("garbage\n" + (r / METRICS).read_text())
    )  # fmt: skip
    with pytest.raises(ConfigError, match=r"metrics.jsonl:1: not a metrics record"):
        read_metrics(run)


def test_a_new_run_refuses_a_directory_holding_one(cli, finished_run, tmp_path, tiny_model_dir):
    run = damaged_copy(finished_run, tmp_path, lambda r: None)
    before = (tmp_path / "run" / METRICS).read_text()
    result = cli("train", f"model={tiny_model_dir}", f"run_dir={run}", "steps=1", *SMALL)
    one_line_error(result, "already holds a run", "--resume", "--overwrite")
    assert (tmp_path / "run" / METRICS).read_text() == before  # nothing touched
    again = cli(
        "train", f"model={tiny_model_dir}", f"run_dir={run}", "steps=1", *SMALL, "--overwrite"
    )
    assert again.returncode == 0, again.stderr
    assert [r["step"] for r in read_metrics(run)] == [1]


@pytest.fixture(scope="module")
def nan_model_dir(tiny_model_dir, tmp_path_factory):
    """The tiny model with one NaN in its final norm: every forward pass gives NaN."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path_factory.mktemp("nan-model")
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    with torch.no_grad():
        model.model.norm.weight[0] = float("nan")
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(out)
    return out


def test_a_non_finite_loss_stops_the_run_or_skips_by_option(cli, nan_model_dir, tmp_path):
    stopped = cli("train", f"model={nan_model_dir}", f"run_dir={tmp_path / 'a'}", "steps=2", *SMALL)
    one_line_error(stopped, "training step 1: the loss (nan)", "is not finite")
    assert not (tmp_path / "a" / "policy").exists() and not checkpoint.exists(tmp_path / "a")
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())  # said however it ends
    assert summary["status"].startswith("failed: training step 1: the loss (nan)")
    assert summary["steps"] == 0 and summary["end"] is None
    assert summary["status"] in (tmp_path / "a" / "train.log").read_text()
    skipped = cli(
        "train", f"model={nan_model_dir}", f"run_dir={tmp_path / 'b'}", "steps=1", *SMALL,
        "optim.on_nonfinite=skip",
    )  # fmt: skip
    assert skipped.returncode == 0, skipped.stderr
    assert read_metrics(tmp_path / "b")[0]["train/skipped"] == 1.0


@pytest.mark.parametrize(
    ("override", "field"),
    [("seed=-1", "seed"), ("rollout.max_turns=0", "max_turns"),
     ("rollout.episode_timeout_s=-5", "episode_timeout_s"), ("eval.temperature=-1", "temperature"),
     ("rollout.concurrency=0", "concurrency")],
)  # fmt: skip
def test_config_values_that_cannot_work_are_refused(cli, tiny_model_dir, tmp_path, override, field):
    result = cli("train", f"model={tiny_model_dir}", f"run_dir={tmp_path}", override)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert result.stderr.startswith("error: invalid TrainConfig config:") and field in result.stderr


def test_eval_arguments_are_checked_before_the_work(cli, tiny_model_dir, tmp_path):
    for args in (["--concurrency", "0"], ["-n", "0"]):
        result = cli("eval", "toolgym/Maze-v0", "--model", str(tiny_model_dir), *args)
        assert result.returncode == 2 and "Invalid value" in result.stderr, result.stderr
    (tmp_path / "dir").mkdir()
    result = cli(
        "eval", "toolgym/Maze-v0", "--model", str(tiny_model_dir), "--out", str(tmp_path / "dir")
    )
    one_line_error(result, "is a directory")
    assert json.dumps({})  # (the evaluation never ran: no trajectories file appeared)
    assert not list((tmp_path / "dir").iterdir())


def test_sft_checks_its_output_before_training(cli, tiny_model_dir, tmp_path):
    (tmp_path / "taken").write_text("a file")
    result = cli(
        "sft", "toolgym/Maze-v0", "--model", str(tiny_model_dir), "--out", str(tmp_path / "taken")
    )
    one_line_error(result, "is a file")
