"""Env pools as Ray actors, on a local Ray cluster of 2 CPUs started by the test: the
quickstart trains through them, and an actor killed mid-run costs only its episodes in flight."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from tests.conftest import FIXTURES, ROOT
from toolgym.agents.runtime import Runtime
from toolgym.config import load_config
from toolgym.envs.ref import EnvRef
from toolgym.training.config import TrainConfig
from toolgym.training.quickstart_recipe import ENV_ARGS
from toolgym.training.trainer import Trainer

ray = pytest.importorskip("ray", reason="Ray is the dist extra; `make install` installs it")
from toolgym.agents.ray.envs import RayEnvPool, RayRuntime  # noqa: E402

RECIPE = ROOT / "configs" / "maze_gigpo.yaml"
MAZE = ENV_ARGS  # the quickstart's mazes, which its SFT policy plays
SETTINGS = ["rollout.tasks_per_step=8", "optim.minibatches=2", "optim.micro_batch_size=8",
            "eval.episodes=8", "eval.sets=[]", "eval.at_start=false",
            "tensorboard=false"]  # fmt: skip
"""The recipe without its eval sets (each set is a pool of actors of its own, and the test's
2-CPU cluster holds the run's own pool and no more) or its evaluation at the start."""


@pytest.fixture(scope="module")
def cluster():
    """A local Ray instance whose workers import the fixture envs."""
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(FIXTURES), os.environ.get("PYTHONPATH")) if p
    )
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def steps_of(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_the_run_clock_reaches_the_envs_in_this_process_and_on_actors(cluster):
    """The runtime moves the run's clock before a step plays; an env reads it at reset from
    its shared resources, in this process and on a Ray actor (sent with the reset)."""
    ref = EnvRef("clock", "fixture_envs:fixture/ClockCoin-v0", {})

    async def opening(pool) -> str:
        env = await pool.acquire()
        obs, _ = await env.areset(seed=0)
        pool.release(env)
        return obs[-1]["content"]

    for runtime in (Runtime(), RayRuntime("local", env_actors=1, env_cpus=0.5)):
        pool = runtime.pool_for(ref)
        assert runtime.run(opening(pool)).endswith("(step 0 of None)")  # no run moved it
        runtime.at_step(3, 7)
        assert runtime.run(opening(pool)).endswith("(step 3 of 7)")
        runtime.close()


def test_the_quickstart_trains_through_ray_env_actors(cluster, quickstart_run, tmp_path):
    config = load_config(
        TrainConfig, RECIPE,
        [f"model={quickstart_run[0] / 'sft'}", f"run_dir={tmp_path}", "steps=2",
         "ray.address=local", "ray.env_actors=2", *SETTINGS],
    )  # fmt: skip
    runtime = RayRuntime("local", env_actors=2, env_cpus=0.5)
    pool = runtime.pool_for(config.env.ref)
    assert isinstance(pool, RayEnvPool) and len(pool.hosts) == 2
    metrics = Trainer(config, runtime=runtime).run()
    assert [m["step"] for m in metrics] == [1, 2]
    assert all(m["rollout/masked"] == 0 for m in metrics) and metrics[-1]["eval/success"] > 0
    assert pool.lent >= 2 * 32 + 8  # every training and eval episode ran on an actor
    assert pool.usage.in_flight == [0, 0]  # each instance came back


@pytest.mark.timeout(600)
def test_an_env_actor_killed_mid_run_costs_its_episodes_in_flight_and_the_run_goes_on(
    cluster, quickstart_run, tmp_path
):
    slow = {**MAZE, "tool_s": 0.3}
    config = load_config(
        TrainConfig, RECIPE,
        [f"model={quickstart_run[0] / 'sft'}", f"run_dir={tmp_path}", "steps=3",
         "env.id=fixture_envs:fixture/SlowMaze-v0", f"env.kwargs={slow}", *SETTINGS],
    )  # fmt: skip
    runtime = RayRuntime("local", env_actors=2, env_cpus=0.5)
    pool = runtime.pool_for(config.env.ref)
    trainer = Trainer(config, runtime=runtime)
    done: list[object] = []
    thread = threading.Thread(target=lambda: done.append(trainer.run()))
    thread.start()
    deadline = time.monotonic() + 300
    metrics = tmp_path / "metrics.jsonl"
    # once step 0 is logged, wait for step 1's episodes to be in flight on actor 0
    while not (metrics.exists() and metrics.read_text().strip() and pool.usage.in_flight[0] > 2):
        assert time.monotonic() < deadline and thread.is_alive()
        time.sleep(0.05)
    time.sleep(0.5)  # past their acquire (which would move to actor 1), into their steps
    ray.kill(pool.hosts[0], no_restart=False)  # Ray restarts it
    thread.join(timeout=300)
    assert not thread.is_alive() and done, "the run did not finish"
    rows = steps_of(tmp_path)
    assert [r["step"] for r in rows] == [1, 2, 3]
    masked = [r["rollout/masked"] for r in rows]
    # a step's 32 episodes start together and are dealt to the least-loaded actor, 16 each:
    # only the killed actor's can fail
    assert masked[0] == 0 and 1 <= masked[1] <= 16
    assert all("train/loss" in r for r in rows)  # the step with masked episodes still trained
    assert masked[2] == 0 and rows[2]["rollout/success"] > 0  # the restarted actor serves
