"""A run on a Ray cluster whose driver is killed mid-step resumes from its checkpoint: new env
and engine actors are placed, the lost step is played again, and every step is trained once.
The cluster is started by the test (`ray start`, 2 CPUs) and outlives the killed driver."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from tests.conftest import ROOT
from toolgym.training.run import checkpoint

pytest.importorskip("ray", reason="Ray is the dist extra; `make install` installs it")

RECIPE = ROOT / "configs" / "maze_gigpo.yaml"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


TOKEN = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16)}
"""The cluster's token, which every driver that joins it presents (Ray's token auth)."""


@pytest.fixture
def head():
    """The address of a Ray head started on this machine, stopped afterwards."""
    port = free_port()
    folder = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: it holds Unix sockets
    ray = [sys.executable, "-m", "ray.scripts.scripts"]
    started = subprocess.run(
        [*ray, "start", "--head", f"--port={port}", "--num-cpus=2", "--include-dashboard=false",
         "--disable-usage-stats", f"--temp-dir={folder}"],
        capture_output=True, text=True, timeout=120, env={**os.environ, **TOKEN},
    )  # fmt: skip
    assert started.returncode == 0, started.stdout[-2000:] + started.stderr[-2000:]
    yield f"127.0.0.1:{port}"
    subprocess.run([*ray, "stop", "--force"], capture_output=True, timeout=120)
    shutil.rmtree(folder, ignore_errors=True)


def saved_step(run_dir) -> int:
    try:
        return int(checkpoint.read(run_dir / checkpoint.FILE)["step"])
    except (OSError, checkpoint.CheckpointError):
        return 0


@pytest.mark.timeout(900)
def test_a_run_whose_driver_is_killed_resumes_on_the_cluster_and_trains_each_step_once(
    head, quickstart_run, tmp_path
):
    run_dir = tmp_path / "run"
    toolgym = [sys.executable, "-m", "toolgym", "train"]
    settings = [
        f"model={quickstart_run[0] / 'sft'}", f"run_dir={run_dir}", "steps=3",
        "ray.env_actors=1", "ray.engine_actors=1", "ray.engine_cpus=0.5",
        "rollout.tasks_per_step=8", "optim.micro_batch_size=8", "eval.every_steps=3",
        "eval.episodes=8", "eval.plays=1", "eval.at_start=false", "tensorboard=false",
    ]  # fmt: skip
    env = {**os.environ, **TOKEN, "OMP_NUM_THREADS": "1"}
    driver = subprocess.Popen(
        [*toolgym, "--config", str(RECIPE), "--ray-address", head, *settings],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
    )  # fmt: skip
    deadline = time.monotonic() + 600
    while saved_step(run_dir) < 1:  # step 0 is checkpointed: step 1 is being played
        assert driver.poll() is None, driver.stdout.read().decode()[-3000:]  # type: ignore[union-attr]
        assert time.monotonic() < deadline, "step 0 did not finish"
        time.sleep(0.1)
    driver.send_signal(signal.SIGKILL)
    driver.wait(timeout=60)

    resumed = subprocess.run(
        [*toolgym, "--resume", str(run_dir)], capture_output=True, text=True, env=env,
        cwd=ROOT, timeout=600,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]  # the lost step once, nothing twice
    assert all(r["rollout/masked"] == 0 and "train/loss" in r for r in rows)
    assert rows[1]["ray/engine/0/tokens_per_s"] > 0  # new actors played the resumed steps
    assert saved_step(run_dir) == 3 and rows[-1]["eval/success"] > 0
    assert json.loads((run_dir / "config.json").read_text())["ray"]["address"] == head
