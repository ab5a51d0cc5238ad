"""A loop you drive (training/driven.py): your code plays sessions of the policy's gateway with
the official `openai` client, scores the episodes itself, and hands the groups over for one
update each, on the trainer's own run directory: its steps logged, its rollouts kept with
your scores, its evaluation played by the config's agent, its policy saved. A play that fails
before the model answered masks its episode; after, it counts as the policy's failure; an
unscored episode is refused in words."""

from __future__ import annotations

import json

import openai
import pytest

from conftest import ROOT
from toolgym.agents.trajectory import read_jsonl
from toolgym.config import load_config
from toolgym.errors import ConfigError
from toolgym.training.config import TrainConfig
from toolgym.training.driven import DrivenRun, DrivenSession

AGENT = f"{ROOT / 'examples' / 'agents' / 'arithmetic_openai.py'}:solve"


def config(model, run_dir) -> TrainConfig:
    return load_config(TrainConfig, ROOT / "configs" / "harness_arithmetic.yaml", [
        f"model={model}", f"run_dir={run_dir}", f"harness.agent={AGENT}", "steps=2",
        "rollout.max_tokens=8", "eval.episodes=4", "eval.every_steps=2", "eval.at_start=false",
        "optim.minibatches=1", "optim.micro_batch_size=8",
    ])  # fmt: skip


def asking(question: str, calls: int = 1):
    """A play that asks the policy `question` `calls` times and scores itself by whether the
    reply is longer than four characters (a score of your own, no env involved)."""

    async def play(session: DrivenSession) -> None:
        client = openai.AsyncOpenAI(base_url=session.base_url, api_key=session.api_key,
                                    max_retries=0)  # fmt: skip
        try:
            for _ in range(calls):
                reply = await client.chat.completions.create(
                    model="policy", messages=[{"role": "user", "content": question}]
                )
            session.score(float(len(reply.choices[0].message.content or "") > 4))
        finally:
            await client.close()

    return play


async def fails_first(session: DrivenSession) -> None:
    raise RuntimeError("my own bug, before any call")


async def fails_after(session: DrivenSession) -> None:
    client = openai.AsyncOpenAI(base_url=session.base_url, api_key=session.api_key, max_retries=0)
    await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    await client.close()
    raise ValueError("my framework's turn limit")


def test_your_loop_gathers_scores_and_trains_on_the_trainers_run(tiny_model_dir, tmp_path):
    run_dir = tmp_path / "run"
    with DrivenRun(config(tiny_model_dir, run_dir)) as run:
        for step in range(2):
            groups = run.gather([[asking(f"q{step}-{g}")] * 4 for g in range(2)]
                                + [[fails_first, fails_after, asking("x", 2), asking("y")]])  # fmt: skip
            episodes = [t for g in groups for t in g.trajectories]
            assert not any(t.masked for t in episodes[:8])
            first, after = groups[2].trajectories[:2]
            assert first.masked and "my own bug" in first.infra_error
            assert not after.masked and after.scores == {"result": 0.0}
            assert "turn limit" in after.steps[-1].error
            assert len(groups[2].trajectories[2].steps) == 2  # two calls, one episode
            for t in groups[0].trajectories:  # a relative judge of your own, after gathering
                t.record("result", float(t.id.endswith(":0")))
            record = run.train(groups)
            assert record["step"] == run.step == step + 1 and "train/loss" in record
    metrics = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2] and "eval/success" in metrics[-1]
    kept = read_jsonl(run_dir / "rollouts" / "step_000001.jsonl")
    assert sorted(t.scores.get("result", -1) for t in kept if t.group_id == "driven:1:0") == [
        0.0, 0.0, 0.0, 1.0,
    ]  # fmt: skip
    assert any(t.steps and t.steps[0].advantage for t in kept)  # your scores were the signal
    assert (run_dir / "policy" / "config.json").exists()


def test_an_unscored_episode_is_refused_in_words(tiny_model_dir, tmp_path):
    async def silent(session: DrivenSession) -> None:
        client = openai.AsyncOpenAI(base_url=session.base_url, api_key=session.api_key,
                                    max_retries=0)  # fmt: skip
        await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "a"}])
        await client.close()

    with DrivenRun(config(tiny_model_dir, tmp_path / "run")) as run:
        groups = run.gather([[silent, silent]])
        with pytest.raises(ConfigError, match="2 episodes have no score"):
            run.train(groups)
