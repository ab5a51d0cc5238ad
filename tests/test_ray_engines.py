"""Generation engines as Ray actors, on a local Ray cluster of 2 CPUs started by the test:
they make what an engine in this process makes from the same weights (after a full sync and
with a LoRA adapter sent as files), a killed actor comes back with the current weights, and
the quickstart trains through engine and env actors."""

from __future__ import annotations

import asyncio
import time

import pytest
import torch

from tests.conftest import ROOT
from toolgym.agents.engines import SamplingParams
from toolgym.agents.engines.hf import HFEngine
from toolgym.config import load_config
from toolgym.errors import ConfigError
from toolgym.training.builders import check_engine
from toolgym.training.config import TrainConfig
from toolgym.training.trainer import Trainer

ray = pytest.importorskip("ray", reason="Ray is the dist extra; `make install` installs it")
from toolgym.agents.ray.engines import RayEngines  # noqa: E402

RECIPE = ROOT / "configs" / "maze_gigpo.yaml"
SAMPLING = SamplingParams(max_tokens=24, temperature=1.0, seed=5)


@pytest.fixture(scope="module")
def cluster():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


async def both(remote: RayEngines, local: HFEngine, prompt: list[int], adapter=None):
    made = await remote.generate(prompt, SAMPLING, adapter)
    expected = await local.generate(prompt, SAMPLING, adapter)
    return made, expected


def wait_until_restarted(actor, seconds: float = 120) -> None:
    """Until the actor answers as a new process: one holding the model's own weights (0).
    (Asking only whether it answers can reach the old process before the kill lands.)"""
    deadline = time.monotonic() + seconds
    while True:
        try:
            if ray.get(actor.holds.remote(), timeout=seconds) == 0:
                return
        except ray.exceptions.RayActorError:  # dying or restarting
            pass
        assert time.monotonic() < deadline, "the actor did not come back"
        time.sleep(0.2)


def same(a, b) -> bool:
    return a.token_ids == b.token_ids and a.logprobs == pytest.approx(b.logprobs, abs=1e-5)


@pytest.mark.timeout(600)
def test_engine_actors_make_what_the_synced_weights_make_and_a_killed_one_comes_back_synced(
    cluster, quickstart_run, tmp_path
):
    sft = quickstart_run[0] / "sft"
    remote = RayEngines(sft, actors=2, cpus=0.5, seed=0)
    local = HFEngine(sft)
    prompt = local.tokenizer("Find the exit of the maze.").input_ids

    async def scenario() -> None:
        made, expected = await both(remote, local, prompt)
        assert same(made, expected)  # the model files it was sent are the model

        torch.manual_seed(0)
        moved = {
            k: v + 0.05 * torch.randn_like(v) if v.is_floating_point() else v
            for k, v in local.model.state_dict().items()
        }
        await remote.update_weights(moved)
        await local.update_weights(moved)
        made, expected = await both(remote, local, prompt)
        assert same(made, expected)
        start = await local.generate(prompt, SAMPLING)
        assert start.token_ids == expected.token_ids  # (seeded: the same again)

        ray.kill(remote.hosts[0], no_restart=False)  # Ray restarts it from the first weights
        wait_until_restarted(remote.hosts[0])
        made = await asyncio.gather(*[remote.generate(prompt, SAMPLING) for _ in range(4)])
        assert all(same(m, expected) for m in made)
        assert remote.restored >= 1  # it was found behind and sent the current weights

        # a LoRA adapter travels as its files, into each actor's own folder
        from peft import LoraConfig, get_peft_model

        # on every attention projection, and large: a warm start as sure of its tokens as the
        # quickstart's (log-probabilities near -0.002) kept its greedy tokens under q_proj alone
        modules = ["q_proj", "k_proj", "v_proj", "o_proj"]
        peft = get_peft_model(
            HFEngine(sft).model, LoraConfig(r=4, lora_alpha=8, target_modules=modules)
        )
        torch.manual_seed(0)
        for name, weight in peft.named_parameters():
            if "lora_B" in name:
                torch.nn.init.normal_(weight, std=2.0)
        peft.save_pretrained(tmp_path / "adapter")
        saved = str(tmp_path / "adapter")
        await remote.load_adapter("policy-1", saved)
        await local.load_adapter("policy-1", saved)
        made, expected = await both(remote, local, prompt, "policy-1")
        assert same(made, expected) and made.token_ids != start.token_ids
        await remote.unload_adapter("policy-1")
        with pytest.raises(ValueError, match="no LoRA adapter named 'policy-1'"):
            await remote.generate(prompt, SAMPLING, "policy-1")
        metrics = remote.actor_metrics()
        assert metrics["ray/engine/restored"] >= 1
        assert metrics["ray/engine/0/tokens_per_s"] > 0 and metrics["ray/engine/1/tokens_per_s"] > 0

    try:
        asyncio.run(scenario())
    finally:
        asyncio.run(remote.aclose())
        asyncio.run(local.aclose())


def test_the_quickstart_trains_through_engine_and_env_actors(cluster, quickstart_run, tmp_path):
    config = load_config(
        TrainConfig, RECIPE,
        [f"model={quickstart_run[0] / 'sft'}", f"run_dir={tmp_path}", "steps=2",
         "ray.address=local", "ray.env_actors=1", "ray.env_cpus=0.5", "ray.engine_actors=2",
         "ray.engine_cpus=0.5", "rollout.tasks_per_step=8", "optim.micro_batch_size=8",
         "eval.episodes=8", "eval.sets=[]", "eval.at_start=false", "tensorboard=false"],
    )  # fmt: skip  # without eval sets: each is an env actor of its own, past the 2 CPUs
    metrics = Trainer(config).run()
    assert [m["step"] for m in metrics] == [1, 2]
    assert all(m["rollout/masked"] == 0 for m in metrics) and metrics[-1]["eval/success"] > 0
    for m in metrics:  # both engine actors generated each step; the env actor stepped
        assert m["ray/engine/0/tokens_per_s"] > 0 and m["ray/engine/1/tokens_per_s"] > 0
        env = f"ray/env_{config.env.ref.name}/0"
        assert m[f"{env}/steps_per_s"] > 0 and 0 <= m[f"{env}/idle"] <= 1


def test_engine_actors_are_refused_without_a_cluster_or_with_an_engine_that_cannot_load():
    no_cluster = load_config(TrainConfig, None, ["model=m", "ray.engine_actors=2"])
    with pytest.raises(ConfigError, match="ray.engine_actors needs a Ray cluster"):
        check_engine(no_cluster)
    server = load_config(
        TrainConfig, None,
        ["model=m", "ray.engine_actors=2", "ray.address=local", "engine.kind=openai",
         "engine.base_url=http://127.0.0.1:1/v1", "lora.enabled=true"],
    )  # fmt: skip
    with pytest.raises(ConfigError, match="engine.kind=openai cannot: use hf or vllm"):
        check_engine(server)
