"""The judge reward source with real engines: a tiny model taught to answer "7", judging
in-process and through `toolgym serve model` on loopback; its cache; and its failures (a
server that never answers, a reply out of range), which mask the trajectory, never score it 0."""

from __future__ import annotations

import asyncio
import socket
import threading

import pytest

from conftest import serve, teach
from toolgym.agents.models.device import resolve_precision
from toolgym.agents.trajectory import Step, Trajectory, TrajectoryGroup
from toolgym.config import load_config
from toolgym.errors import ConfigError, RunFailedError
from toolgym.training.config import TrainConfig
from toolgym.training.rewards import RunContext, make_source
from toolgym.training.trainer import Trainer

CONTEXT = RunContext("unused", resolve_precision("cpu", "float32"), steps=1)


def trajectory(name: str, actions: list[str]) -> Trajectory:
    steps = [
        Step(0, 0, [], action, [{"role": "tool", "content": f"moved to cell {k}"}], 0.0, k, k + 1)
        for k, action in enumerate(actions)
    ]
    opening = [{"role": "user", "content": "Reach the goal G of the maze."}]
    return Trajectory(id=name, messages=opening, steps=steps)


def group(*trajectories: Trajectory) -> list[TrajectoryGroup]:
    return [TrajectoryGroup("g", 0, list(trajectories))]


@pytest.fixture(scope="module")
def judge_model_dir(tiny_model_dir, tmp_path_factory):
    """The tiny model taught, on a few judge requests, to answer every one with "7"."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from toolgym.agents.render import ChatRenderer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    renderer = ChatRenderer(tokenizer)
    judge = make_source("judge", CONTEXT, base_url="http://127.0.0.1:9/v1")
    examples = [
        trajectory("a", ["move north", "move east", "pick up"]),
        trajectory("b", ["open door west", "move south"]),
    ]
    answer = renderer.encode("7") + [tokenizer.convert_tokens_to_ids("<|im_end|>")]
    requests = [renderer.prompt_ids(messages) for t in examples for _, messages in judge.prompts(t)]
    out = tmp_path_factory.mktemp("judge-model")
    return teach(model, tokenizer, [(prompt, answer) for prompt in requests], out, steps=200)


@pytest.fixture(scope="module")
def judge_server(judge_model_dir):
    yield from serve(
        ["serve", "model", str(judge_model_dir), "--served-model-name", "judge"], "judge server"
    )


@pytest.fixture(scope="module")
def silent_server():
    """A TCP server on loopback that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    listener.close()
    for connection in held:
        connection.close()


def test_an_in_process_judge_scores_every_step_and_caches_its_answers(judge_model_dir):
    judge = make_source("judge", CONTEXT, model=str(judge_model_dir))
    first = trajectory("t0", ["move north", "move west"])
    second = trajectory("t1", ["move south", "move south", "pick up"])
    asyncio.run(judge.prepare(group(first, second), [[0.0, 0.0]]))
    assert judge(first) == [0.7, 0.7] and judge(second) == [0.7, 0.7, 0.7]
    assert judge.last_metrics["requests"] == 5 and judge.last_metrics["failed"] == 0
    again = trajectory("t2", ["move north", "move west"])  # the same steps as `first`
    asyncio.run(judge.prepare(group(again), [[0.0]]))
    assert judge(again) == [0.7, 0.7]
    assert judge.last_metrics["requests"] == 0 and judge.last_metrics["cached"] == 2
    asyncio.run(judge.aclose())


def test_a_served_judge_scores_whole_trajectories(judge_server):
    judge = make_source(
        "judge", CONTEXT, base_url=f"{judge_server}/v1", served_model="judge", per="trajectory"
    )
    t = trajectory("t0", ["move north", "pick up", "move east"])
    asyncio.run(judge.prepare(group(t), None))
    assert judge(t) == [0.0, 0.0, 0.7] and not t.masked
    asyncio.run(judge.aclose())


def test_judge_failures_mask_the_trajectory_instead_of_scoring_it(judge_server, silent_server):
    silent = make_source("judge", CONTEXT, base_url=silent_server, timeout_s=1)
    t = trajectory("t0", ["move north"])
    asyncio.run(silent.prepare(group(t), [[0.0]]))
    assert t.masked and t.infra_error == "judge: no answer within 1 s"
    assert silent.last_metrics["failed"] == 1
    with pytest.raises(ValueError, match="not among the step's prepared groups"):
        silent(t)
    strict = make_source(
        "judge", CONTEXT, base_url=f"{judge_server}/v1", served_model="judge", scale=5
    )
    u = trajectory("t1", ["move north"])
    asyncio.run(strict.prepare(group(u), [[0.0]]))
    assert u.masked and u.infra_error == "judge: no score from 0 to 5 in '7'"
    with pytest.raises(ConfigError, match="one of them"):
        make_source("judge", CONTEXT)
    with pytest.raises(ConfigError, match="TOOLGYM_NO_SUCH_KEY is not set"):
        make_source("judge", CONTEXT, base_url=silent_server, api_key_env="TOOLGYM_NO_SUCH_KEY")


def test_a_step_the_judge_failed_on_entirely_stops_the_run(
    tool_calling_model_dir, silent_server, tmp_path
):
    rewards = (
        "rewards=[{source: env}, {source: judge, scores: process, "
        f"kwargs: {{base_url: '{silent_server}', timeout_s: 1}}}}]"
    )
    config = load_config(TrainConfig, None, [
        f"model={tool_calling_model_dir}", f"run_dir={tmp_path}", "steps=1", "tensorboard=false",
        "env.kwargs={size: 2, max_turns: 2}", "rollout.tasks_per_step=1",
        "rollout.rollouts_per_task=2", "rollout.max_tokens=16", "optim.micro_batch_size=2",
        rewards,
    ])  # fmt: skip
    with pytest.raises(
        RunFailedError, match="reward stage: all 2 rollouts failed .*judge: no answer"
    ):
        Trainer(config).run()
