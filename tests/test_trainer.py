"""The trainer loop end to end on a tiny model: phases, metrics, config checks, and a run
killed mid-training that resumes with no duplicated or lost steps."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from transformers import AutoModelForCausalLM

import toolgym
from conftest import FIXTURES, ROOT
from toolgym.agents.collector import GroupRequest
from toolgym.config import load_config, validate
from toolgym.envs import SeedTasks
from toolgym.errors import ConfigError
from toolgym.training.builders import build_parts, build_reward_stage
from toolgym.training.config import TrainConfig
from toolgym.training.rewards import SOURCES
from toolgym.training.run import checkpoint
from toolgym.training.run.files import read_metrics
from toolgym.training.run.metrics import env_steps_spent
from toolgym.training.trainer import Trainer

SMALL = [
    "env.kwargs={size: 3, max_turns: 4}",  # 3x3: its eval split holds a dozen mazes
    "rollout.tasks_per_step=2",
    "rollout.rollouts_per_task=3",
    "rollout.max_tokens=16",
    "optim.micro_batch_size=3",
    "eval.episodes=4",
]


def test_a_short_run_logs_every_phase(tool_calling_model_dir, tmp_path):
    config = load_config(
        TrainConfig,
        None,
        [
            f"model={tool_calling_model_dir}",
            f"run_dir={tmp_path}",
            "steps=2",
            "eval.every_steps=2",
            "checkpoint.every_steps=2",
            *SMALL,
        ],
    )
    played = []
    checkpointed = []  # at each step's record, before its checkpoint is due

    def step(record):
        checkpointed.append(checkpoint.exists(tmp_path))

    metrics = Trainer(config).run(on_step=step, on_episode=played.append)
    assert checkpointed == [False, False]  # step 1 wrote none (checkpoint.every_steps=2)
    assert [m["step"] for m in metrics] == [1, 2]
    assert len(played) == 2 * 2 * 3 + 4  # each step's 2 tasks x 3 rollouts, the eval's 4
    for key in (
        "rollout/success",
        "adv/std",
        "adv/anchor_coverage",
        "adv/anchor_coverage_after_first",
        "train/loss",
        "train/clip_fraction",
        "train/entropy",
        "time/rollout_s",
        "time/update_s",
        "time/sync_s",
    ):
        assert key in metrics[0], key
    assert "eval/success" in metrics[1] and "eval/success" not in metrics[0]
    assert metrics[0]["env_steps"] > 0 and metrics[0]["train/ratio_mean"] == pytest.approx(
        1.0, abs=1e-3
    )
    assert checkpoint.read(tmp_path / checkpoint.FILE)["step"] == 2
    saved = json.loads((tmp_path / "policy" / "toolgym_env.json").read_text())  # as trained
    assert saved == {"env_id": config.env.id, "env_kwargs": dict(config.env.kwargs),
                     "tool_schemas": config.rollout.tool_schemas_in_prompt}  # fmt: skip
    assert tensorboard_scalars(tmp_path, "rollout/success") == [
        (m["step"], m["rollout/success"]) for m in metrics
    ]


def tensorboard_scalars(run_dir, tag):
    """The scalars TensorBoard itself would show for `tag` (its reader drops purged steps)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    return [(e.step, pytest.approx(e.value)) for e in events.Scalars(tag)]


def one_update(model_dir, run_dir, *extra):
    """A short run whose updates move the weights whatever the rewards (entropy bonus)."""
    config = load_config(
        TrainConfig, None,
        [f"model={model_dir}", f"run_dir={run_dir}", "steps=1", "eval.every_steps=10",
         "optim.lr=1e-2", "loss.entropy_coef=0.1", "tensorboard=false", *SMALL, *extra],
    )  # fmt: skip
    trainer = Trainer(config)
    return trainer, trainer.run()


def checkpointing(model):
    if hasattr(model, "is_activation_checkpointing"):  # transformers 5
        return model.is_activation_checkpointing
    return model.is_gradient_checkpointing


class Counted:
    """An engine handed in by the caller: it forwards to another and counts the turns."""

    def __init__(self, engine):
        self.engine, self.turns, self.capabilities = engine, 0, engine.capabilities

    async def generate(self, prompt_ids, sampling, adapter=None, **options):
        self.turns += 1
        return await self.engine.generate(prompt_ids, sampling, adapter, **options)

    def end_episode(self, episode):  # it declares the engine's capabilities, so backs them
        self.engine.end_episode(episode)

    async def aclose(self):
        await self.engine.aclose()


def test_a_trainer_runs_with_the_parts_it_is_handed(tool_calling_model_dir, tmp_path):
    config = load_config(
        TrainConfig, None,
        [f"model={tool_calling_model_dir}", f"run_dir={tmp_path}", "steps=1",
         "eval.every_steps=10", "tensorboard=false", *SMALL],
    )  # fmt: skip
    parts = build_parts(config)
    parts.engine = counted = Counted(parts.engine)
    trainer = Trainer(config, parts=parts)
    assert trainer.model is parts.model and trainer.engine is counted
    (record,) = trainer.run()
    evaluated = round(record["eval/turns"] * 4)  # eval.episodes=4, after the last step
    assert counted.turns == record["env_steps"] + evaluated and trainer.gate.version == 1


class OneTaskAStep:
    """A group builder of its own: one task a step, a new one each step, its groups named by
    it, and how many it has played remembered across a resume."""

    def __init__(self, env):
        self.env, self.played, self.seen = env, 0, []

    async def build(self, ctx):
        request = GroupRequest(self.env, SeedTasks().draw("train", 100 + self.played), size=2)
        (group,) = await ctx.collect([request])
        self.played += 1
        group.group_id = f"mine:{self.played}"
        self.seen.append((ctx.step, ctx.policy_version, ctx.groups))
        return [group]

    def state_dict(self):
        return {"played": self.played}

    def load_state_dict(self, state):
        self.played = state["played"]


def test_a_group_builder_handed_in_makes_every_steps_groups_and_resumes(
    tool_calling_model_dir, tmp_path
):
    def run(steps, resume=False):
        config = load_config(
            TrainConfig, None,
            [f"model={tool_calling_model_dir}", f"run_dir={tmp_path}", f"steps={steps}",
             "eval.every_steps=10", "tensorboard=false", *SMALL],
        )  # fmt: skip
        builder = OneTaskAStep(config.mixture[0].ref)
        return builder, Trainer(config, groups=builder).run(resume=resume)

    first, metrics = run(2)
    assert first.seen == [(0, 0, 2), (1, 1, 2)] and first.played == 2
    assert all(0 < m["env_steps"] <= 2 * 4 for m in metrics)  # one group of 2, not 2 of 3
    resumed, metrics = run(3, resume=True)
    assert resumed.seen == [(2, 2, 2)] and resumed.played == 3  # its state came back
    assert [m["step"] for m in metrics] == [1, 2, 3]


def test_gradient_checkpointing_gives_the_same_update(tool_calling_model_dir, tmp_path):
    plain, _ = one_update(tool_calling_model_dir, tmp_path / "a")
    recomputed, _ = one_update(
        tool_calling_model_dir, tmp_path / "b", "optim.gradient_checkpointing=true"
    )
    assert checkpointing(recomputed.model) and not checkpointing(plain.model)
    start = AutoModelForCausalLM.from_pretrained(tool_calling_model_dir)
    assert not torch.equal(plain.model.lm_head.weight, start.lm_head.weight)
    for (name, a), b in zip(
        plain.model.named_parameters(), recomputed.model.parameters(), strict=True
    ):
        torch.testing.assert_close(a, b, msg=name)


def test_each_minibatch_is_one_optimizer_step(tool_calling_model_dir, tmp_path):
    trainer, metrics = one_update(
        tool_calling_model_dir, tmp_path, "optim.minibatches=2", "optim.ppo_epochs=2"
    )
    assert {int(state["step"]) for state in trainer.optimizer.state.values()} == {4}
    assert metrics[0]["train/approx_kl"] > 1e-6  # the later updates meet a policy that moved
    with pytest.raises(ConfigError, match="larger than one mini-batch's 1 trajectories"):
        load_config(TrainConfig, None, ["model=x", *SMALL, "optim.minibatches=4"])


def test_a_target_kl_ends_an_update_at_the_first_minibatch_that_moved_past_it(
    tool_calling_model_dir, tmp_path
):
    """Four mini-batches: with a bound no later one can meet, the first steps alone (the
    second's forward pass finds the policy moved, and holds); with one far above, all four
    step. The held mini-batch's KL is the update's largest."""
    four = ["optim.minibatches=2", "optim.ppo_epochs=2"]
    held, held_metrics = one_update(
        tool_calling_model_dir, tmp_path / "held", *four, "optim.target_kl=1e-12"
    )
    assert {int(state["step"]) for state in held.optimizer.state.values()} == {1}
    assert held_metrics[0]["train/held"] == 1.0
    assert held_metrics[0]["train/approx_kl_max"] > 1e-12
    free, free_metrics = one_update(
        tool_calling_model_dir, tmp_path / "free", *four, "optim.target_kl=1e9"
    )
    assert {int(state["step"]) for state in free.optimizer.state.values()} == {4}
    assert free_metrics[0]["train/held"] == 0.0
    assert free_metrics[0]["train/approx_kl_max"] >= free_metrics[0]["train/approx_kl"]


def test_an_updates_last_step_is_measured_after_it(tool_calling_model_dir, tmp_path):
    """One mini-batch: its forward pass meets the policy that played (approx KL about 0), and
    only the measure after the update sees where its one step left the weights."""
    trainer, metrics = one_update(tool_calling_model_dir, tmp_path)
    assert {int(state["step"]) for state in trainer.optimizer.state.values()} == {1}
    assert metrics[0]["train/approx_kl"] < 1e-9
    assert metrics[0]["train/approx_kl_after"] > 1e-9


@pytest.mark.parametrize("mode", ["decoupled", "truncated-is"])
def test_off_policy_loss_modes_equal_on_policy_when_the_engine_samples_the_trained_weights(
    tool_calling_model_dir, tmp_path, mode
):
    """The in-process engine samples the weights being trained: the proximal policy is the
    behaviour policy, every weight is 1, and the update is on-policy's."""
    on, on_metrics = one_update(tool_calling_model_dir, tmp_path / "on", "optim.minibatches=2")
    off, off_metrics = one_update(
        tool_calling_model_dir, tmp_path / "off", "optim.minibatches=2", f"loss.mode={mode}"
    )
    assert off_metrics[0]["train/behaviour_weight_mean"] == pytest.approx(1.0, abs=1e-4)
    assert off_metrics[0]["train/behaviour_capped"] == 0
    assert off_metrics[0]["train/loss"] == pytest.approx(on_metrics[0]["train/loss"], abs=1e-5)
    for (name, a), b in zip(on.model.named_parameters(), off.model.parameters(), strict=True):
        torch.testing.assert_close(a, b, msg=name)


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_kl_to_the_frozen_start_policy(tool_calling_model_dir, tmp_path, lora):
    lora_args = ["lora.enabled=true", "lora.r=4"] if lora else []
    trainer, _ = one_update(
        tool_calling_model_dir, tmp_path, "steps=2", "loss.kl_coef=0.5", *lora_args
    )
    first, second = read_metrics(tmp_path)
    assert first["train/kl_ref"] == pytest.approx(0.0, abs=1e-6)  # the policy is still the start
    assert second["train/kl_ref"] > 1e-4  # one update at lr 1e-2 later it is not
    if not lora:
        start = AutoModelForCausalLM.from_pretrained(tool_calling_model_dir)
        for a, b in zip(trainer.reference.parameters(), start.parameters(), strict=True):
            assert not a.requires_grad
            torch.testing.assert_close(a, b)


PRM = (
    "rewards=[{source: env}, {source: function, name: bonus, kwargs: {path: "
    "'fixture_rewards:first_member_bonus'}}, {source: implicit_prm, scores: process, kwargs: "
    "{lr: 0.001}}]"
)
"""An implicit PRM that learns every step (each group's first rollout earns an outcome
bonus, so it succeeds where the others fail): the resumed run must carry a PRM that has
changed."""


def test_a_killed_run_resumes_without_duplicated_or_lost_steps(tool_calling_model_dir, tmp_path):
    """Policy and implicit PRM both: the PRM has seen exactly as many steps as the policy in
    every checkpoint, before the kill and after the resume."""
    run = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(FIXTURES)}
    args = [
        sys.executable,
        "-m",
        "toolgym",
        "train",
        f"model={tool_calling_model_dir}",
        f"run_dir={run}",
        "steps=4",
        "eval.every_steps=10",
        *SMALL,
        PRM,
    ]
    process = subprocess.Popen(
        args, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 300
    while not (checkpoint.exists(run) and checkpoint.read(run / checkpoint.FILE)["step"] >= 1):
        assert process.poll() is None and time.monotonic() < deadline, (
            "the run ended or stalled before its first checkpoint"
        )
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)  # mid-training: somewhere in step 1 or later
    process.wait()
    killed = checkpoint.read(run / checkpoint.FILE)
    assert killed["step"] < 4
    assert killed["extra"]["rewards"]["implicit_prm"]["updates"] == killed["step"]
    resumed = subprocess.run(
        [sys.executable, "-m", "toolgym", "train", "--resume", str(run)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert [m["step"] for m in read_metrics(run)] == [1, 2, 3, 4]
    assert [step for step, _ in tensorboard_scalars(run, "train/loss")] == [1, 2, 3, 4]
    final = checkpoint.read(run / checkpoint.FILE)
    assert final["step"] == 4
    assert final["extra"]["rewards"]["implicit_prm"]["updates"] == 4
    assert json.loads((run / "config.json").read_text())["steps"] == 4
    metrics = read_metrics(run)
    assert sum(m.get("implicit_prm/pairs", 0) for m in metrics) > 0
    start = AutoModelForCausalLM.from_pretrained(tool_calling_model_dir).state_dict()
    prm = final["extra"]["rewards"]["implicit_prm"]["model"]
    assert any(not torch.equal(prm[k], start[k]) for k in start), "the PRM never learned"


def test_plot_draws_runs_side_by_side(cli, tmp_path):
    for name, success in (("gigpo", [0.1, 0.4, 0.7]), ("grpo", [0.1, 0.2, 0.4])):
        run = tmp_path / name
        run.mkdir()
        lines = [
            json.dumps({"step": i, "env_steps": 50, "rollout/success": s, "rollout/reward": s})
            for i, s in enumerate(success)
        ]
        (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    out = tmp_path / "curves.png"
    result = cli(
        "plot",
        str(tmp_path / "gigpo"),
        str(tmp_path / "grpo"),
        "--out",
        str(out),
        "--metric",
        "rollout/success",
        "--metric",
        "rollout/reward",
    )
    assert result.returncode == 0, result.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 5000


def test_training_through_the_openai_engine_with_lora_adapters(
    model_server, tool_calling_model_dir, tmp_path
):
    import urllib.request

    overrides = [
        f"model={tool_calling_model_dir}", f"run_dir={tmp_path}", "steps=2", "eval.every_steps=10",
        "engine.kind=openai", f"engine.base_url={model_server}/v1", "engine.served_model=tiny",
        "lora.enabled=true", "lora.r=4", *SMALL,
    ]  # fmt: skip
    metrics = Trainer(load_config(TrainConfig, None, overrides)).run()
    assert [m["step"] for m in metrics] == [1, 2]
    # Behaviour logprobs came from the server, recomputed ones from the trainer: same weights.
    assert metrics[1]["train/ratio_mean"] == pytest.approx(1.0, abs=1e-3)
    with urllib.request.urlopen(f"{model_server}/v1/models") as response:
        served = {m["id"] for m in json.loads(response.read())["data"]}
    assert served == {"tiny", "policy-2"}  # the latest adapter is live, the previous one unloaded
    unload = urllib.request.Request(
        f"{model_server}/v1/unload_lora_adapter",
        data=json.dumps({"lora_name": "policy-2"}).encode(),
        headers={"Content-Type": "application/json"},
    )
    urllib.request.urlopen(unload).close()  # the server is shared: leave it as it was found
    assert (tmp_path / "adapters" / "policy-2" / "adapter_config.json").is_file()
    for missing, message in (
        ([f"engine.base_url={model_server}/v1"], "engine.kind=openai takes new weights as LoRA"),
        (["lora.enabled=true"], "engine.kind=openai needs engine.base_url"),
    ):
        config = load_config(
            TrainConfig, None,
            ["model=x", "engine.kind=openai", "optim.micro_batch_size=1", *missing],
        )  # fmt: skip
        with pytest.raises(ConfigError, match=message):
            Trainer(config)  # refused before any model loads (there is no model x)


@pytest.mark.parametrize("recipe", sorted((ROOT / "configs").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_recipe_loads(recipe):
    config = load_config(TrainConfig, recipe, ["model=some/model"])
    env = toolgym.make(config.env.id, **config.env.kwargs)  # the env takes the recipe's arguments
    obs, info = env.reset(seed=0)
    assert obs and info["state_key"] is not None
    env.close()
    for entry in config.rewards:  # sources that check their arguments when built, checked now
        settings = SOURCES[entry.source].settings
        if settings is not None:
            validate(settings, entry.kwargs)


def test_the_shipped_recipe_is_the_quickstarts():
    from toolgym.training.quickstart_recipe import ENV_ARGS, ENV_ID, RECIPE

    shipped = load_config(TrainConfig, ROOT / "configs" / "maze_gigpo.yaml", ["model=m"])
    quickstart = load_config(
        TrainConfig,
        None,
        ["model=m", "steps=40", f"env.id={ENV_ID}", f"env.kwargs={ENV_ARGS}", *RECIPE],
    )
    assert shipped.model_dump(exclude={"run_dir"}) == quickstart.model_dump(exclude={"run_dir"})


def test_a_mixture_trains_both_envs_with_unique_groups_and_per_env_metrics(
    tool_calling_model_dir, tmp_path
):
    config = load_config(
        TrainConfig, None,
        [f"model={tool_calling_model_dir}", f"run_dir={tmp_path}", "steps=2", "eval.every_steps=2",
         "envs=[{id: toolgym/Maze-v0, kwargs: {size: 2, max_turns: 3}, weight: 3},"
         " {id: toolgym/Arithmetic-v0, kwargs: {max_turns: 2}, weight: 1, role: solver}]",
         "rollout.tasks_per_step=8", "rollout.rollouts_per_task=2", "rollout.max_tokens=16",
         "optim.micro_batch_size=4", "eval.episodes=3", "tensorboard=false"],
    )  # fmt: skip
    trainer = Trainer(config)
    groups = trainer.player.collect(
        trainer.groups.requests(0, trainer.config.rollout.tasks_per_step),
        temperature=1.0,
        sampling_seed=0,
    )
    by_env = {
        name: [g for g in groups if g.env_name == name] for name in ("Maze-v0", "Arithmetic-v0")
    }
    assert [len(v) for v in by_env.values()] == [6, 2]  # 3:1 of 8 tasks
    assert len({g.group_id for g in groups}) == 8
    ids = [t.id for g in groups for t in g.trajectories]
    assert len(set(ids)) == 16
    assert {t.env_id for t in by_env["Arithmetic-v0"][0].trajectories} == {"toolgym/Arithmetic-v0"}
    assert {t.role for g in by_env["Arithmetic-v0"] for t in g.trajectories} == {"solver"}
    trajectories, advantages = trainer.runtime.run(trainer.advantages(groups))
    assert {t.env_name for t in trajectories} == {"Maze-v0", "Arithmetic-v0"}  # one batch
    metrics = trainer.run()
    for name in ("Maze-v0", "Arithmetic-v0"):
        assert f"rollout/{name}/success" in metrics[0] and f"eval/{name}/success" in metrics[1]
    seen = sum(1 for m in metrics for k in m if k.startswith("rollout/Arithmetic-v0/"))
    assert seen > 0
    with pytest.raises(ConfigError, match="both called 'Maze-v0'"):
        load_config(
            TrainConfig, None, ["model=x", "envs=[{id: toolgym/Maze-v0}, {id: toolgym/Maze-v0}]"]
        )


def test_a_process_reward_joins_the_advantages_as_a_step_term(tool_calling_model_dir, tmp_path):
    """Added, a process reward pays on its own: the env pays nothing, so GRPO's episode term
    is 0 and every advantage is the step term, the one step with process reward 1 above the
    group's mean and every other below. Redistributed (the default), it has no outcome credit
    to move, and every advantage is 0."""
    rewards = (
        "rewards=[{source: env}, {source: function, name: hint, scores: process, "
        "kwargs: {path: 'fixture_rewards:first_step_bonus'}}]"
    )
    base = [f"model={tool_calling_model_dir}", "steps=1", "tensorboard=false",
            "advantage.estimator=grpo", rewards, *SMALL]  # fmt: skip

    def first_step(run, *extra):
        config = load_config(TrainConfig, None, [*base, f"run_dir={tmp_path / run}", *extra])
        trainer = Trainer(config)
        groups = trainer.player.collect(
            trainer.groups.requests(0, trainer.config.rollout.tasks_per_step),
            temperature=1.0,
            sampling_seed=0,
        )
        out = trainer.runtime.run(trainer.advantages(groups))
        trainer.close()
        return out

    trajectories, advantages = first_step("process", "advantage.step_combine=add")
    for t, a in zip(trajectories, advantages, strict=True):
        assert all(s.rewards["env"] == 0.0 for s in t.steps)
        for step, value in enumerate(a):
            hinted = t.id.endswith(":0") and step == 0
            assert value > 0 if hinted else value < 0, (t.id, step, a)
    for run, setting in (("off", ["advantage.step_combine=add", "advantage.step_alpha=0"]),
                         ("moved", [])):  # fmt: skip
        _, none = first_step(run, *setting)
        assert all((a == 0).all() for a in none), run


def test_monte_carlo_values_branch_every_step_and_average_the_continuations(
    tool_calling_model_dir, tmp_path
):
    """The outcome depends on the first action only, which every continuation after a later
    step shares: each step's value must be its trajectory's own outcome."""
    rewards = (
        "rewards=[{source: function, name: even, kwargs: {path: 'fixture_rewards:first_action_even'}}, "
        "{source: mc_values, scores: process, kwargs: {continuations: 2}}]"
    )
    config = load_config(TrainConfig, None, [
        f"model={tool_calling_model_dir}", f"run_dir={tmp_path}", "steps=1", "tensorboard=false",
        rewards, *SMALL,
    ])  # fmt: skip
    trainer = Trainer(config)
    groups = trainer.player.collect(
        trainer.groups.requests(0, trainer.config.rollout.tasks_per_step),
        temperature=1.0,
        sampling_seed=0,
    )
    trajectories, _ = trainer.runtime.run(trainer.advantages(groups))
    metrics = trainer.rewards.metrics(trajectories)
    trainer.close()
    outcomes = {t.steps[-1].rewards["even"] for t in trajectories}
    assert outcomes == {0.0, 1.0}, "the test needs both outcomes"
    for t in trajectories:
        assert [s.rewards["mc_values"] for s in t.steps] == [t.steps[-1].rewards["even"]] * len(
            t.steps
        )
    branches = sum(len(t.steps) - 1 for t in trajectories)
    assert metrics["mc_values/branches"] == branches > 0
    assert metrics["mc_values/continuations"] == 2 * branches
    assert metrics["mc_values/masked"] == 0


def test_an_env_step_budget_counts_branches_ends_with_an_evaluation_and_survives_resume(
    tool_calling_model_dir, tmp_path
):
    """`max_env_steps` ends the run after the step that spends it, Monte-Carlo branches
    counted; the run still ends evaluated and saved, and a resumed run counts what the
    steps before it spent."""
    mc = "rewards=[{source: env}, {source: mc_values, scores: process, kwargs: {continuations: 1}}]"
    base = [f"model={tool_calling_model_dir}", "tensorboard=false", "eval.every_steps=100", *SMALL]
    config = load_config(
        TrainConfig, None, [*base, f"run_dir={tmp_path / 'mc'}", "steps=20", "max_env_steps=1", mc]
    )
    (only,) = Trainer(config).run()
    assert only["step"] == 1 and "eval/success" in only
    assert env_steps_spent(only) > only["env_steps"] > 0  # its branches were counted
    assert (tmp_path / "mc" / "policy").is_dir()

    run = [*base, f"run_dir={tmp_path / 'resumed'}"]
    first = Trainer(load_config(TrainConfig, None, [*run, "steps=2"])).run()
    spent = sum(env_steps_spent(r) for r in first if r["step"] >= 1)
    more = [*run, "steps=20", f"max_env_steps={int(spent) + 1}"]
    metrics = Trainer(load_config(TrainConfig, None, more)).run(resume=True)
    assert [r["step"] for r in metrics if "env_steps" in r and r["step"] >= 1] == [1, 2, 3]


def test_a_reward_source_from_the_config_reaches_the_advantages(tool_calling_model_dir, tmp_path):
    base = [
        f"model={tool_calling_model_dir}",
        "steps=1",
        "tensorboard=false",
        "advantage.estimator=grpo",
        *SMALL,
    ]

    def first_step(run, *extra):
        trainer = Trainer(
            load_config(TrainConfig, None, [*base, f"run_dir={tmp_path / run}", *extra])
        )
        groups = trainer.player.collect(
            trainer.groups.requests(0, trainer.config.rollout.tasks_per_step),
            temperature=1.0,
            sampling_seed=0,
        )
        trajectories, advantages = trainer.runtime.run(trainer.advantages(groups))
        trainer.close()
        return trajectories, advantages, trainer

    trajectories, plain, _ = first_step("plain")
    assert all(t.total_reward == 0 for t in trajectories)  # the env pays nothing here
    assert all((a == 0).all() for a in plain)
    bonus = "rewards=[{source: env}, {source: function, name: bonus, weight: 2, kwargs: {path: 'fixture_rewards:first_member_bonus'}}]"
    trajectories, shaped, trainer = first_step("bonus", bonus)
    for t, a in zip(trajectories, shaped, strict=True):
        first = t.id.endswith(":0")
        assert (a > 0).all() if first else (a < 0).all(), (t.id, a)
        assert t.steps[-1].rewards == {"env": 0.0, "bonus": 1.0 if first else 0.0}
    assert trainer.rewards.metrics(trajectories)["reward/bonus"] == pytest.approx(1 / 3)
    with pytest.raises(ConfigError, match="rewards.0.source: .*'oracle' is not one of"):
        load_config(TrainConfig, None, [*base, "rewards=[{source: oracle}]"])  # before a model
    broken = "rewards=[{source: function, kwargs: {path: 'fixture_rewards:too_short'}}]"
    trainer = Trainer(load_config(TrainConfig, None, [*base, f"run_dir={tmp_path / 'y'}", broken]))
    groups = trainer.player.collect(
        trainer.groups.requests(0, trainer.config.rollout.tasks_per_step),
        temperature=1.0,
        sampling_seed=0,
    )
    steps = len(groups[0].trajectories[0].steps)
    with pytest.raises(
        ValueError,
        match=f"reward 'function' gave {steps + 1} values for a trajectory of {steps} steps",
    ):
        trainer.runtime.run(trainer.advantages(groups))
    trainer.rewards = build_reward_stage(
        load_config(
            TrainConfig, None,
            ["model=x", "rewards=[{source: function, kwargs: {path: 'fixture_rewards:raises'}}]"],
        )
    )  # fmt: skip
    with pytest.raises(ValueError, match="reward 'function' raised KeyError: 'no such field'"):
        trainer.runtime.run(trainer.advantages(groups))
    trainer.rewards = build_reward_stage(load_config(TrainConfig, None, ["model=x"]))
    with pytest.raises(ValueError, match="trajectory ids must be unique in a step; twice: "):
        trainer.runtime.run(
            trainer.advantages([groups[0], groups[0]])
        )  # sources key what they prepare by id
    trainer.close()


def test_device_and_dtype_selection_on_cpu():
    from toolgym.agents.models.device import resolve_precision

    if not torch.cuda.is_available():
        assert resolve_precision() == resolve_precision("auto", "auto")
        assert resolve_precision().describe() == "cpu float32"
        with pytest.raises(ConfigError, match="torch sees no CUDA GPU here"):
            resolve_precision("cuda")
    assert resolve_precision("cpu", "bfloat16").dtype == torch.bfloat16
    with pytest.raises(ConfigError, match="float16 needs a GPU"):
        resolve_precision("cpu", "float16")
    with pytest.raises(ConfigError, match="use auto, cpu, cuda or cuda:N"):
        resolve_precision("tpu")


def test_bfloat16_compute_keeps_float32_weights_and_matching_logprobs(
    tool_calling_model_dir, tmp_path
):
    """Generation and the update both run under bf16 autocast: the behaviour log-probabilities
    and the trainer's recomputation agree, the master weights and AdamW states stay float32."""
    trainer, metrics = one_update(tool_calling_model_dir, tmp_path, "device=cpu", "dtype=bfloat16")
    assert trainer.precision.describe() == "cpu bfloat16"
    assert metrics[0]["train/ratio_mean"] == pytest.approx(1.0, abs=0.02)
    assert {p.dtype for p in trainer.model.parameters()} == {torch.float32}
    assert {s["exp_avg"].dtype for s in trainer.optimizer.state.values()} == {torch.float32}
    assert metrics[0]["perf/peak_memory_gb"] > 0 and metrics[0]["perf/update_tokens_per_s"] > 0


def test_the_learning_rate_warms_up_then_decays():
    from toolgym.training.schedule import lr_factor

    assert [lr_factor(s, 10, "constant", 3, 0.0) for s in range(5)] == [0.25, 0.5, 0.75, 1.0, 1.0]
    cosine = [lr_factor(s, 10, "cosine", 2, 0.1) for s in range(10)]
    assert cosine[2] == pytest.approx(1.0) and cosine[-1] == pytest.approx(0.1)
    assert all(a >= b for a, b in itertools.pairwise(cosine[2:]))
    assert lr_factor(5, 11, "linear", 0, 0.0) == pytest.approx(0.5)


def test_each_step_shares_its_tasks_by_weight():
    from toolgym.training.groups.allotment import allot

    assert all(sorted(allot([3, 1], k, 8)) == [0] * 6 + [1] * 2 for k in range(50))
    counts = [allot([0.3, 0.7], k, 8).count(0) for k in range(1000)]
    assert set(counts) == {2, 3} and sum(counts) / 8000 == pytest.approx(0.3, abs=0.002)
    assert allot([1], 7, 4) == [0, 0, 0, 0]


def test_evaluation_before_the_first_update_is_logged_as_step_0(tool_calling_model_dir, tmp_path):
    _, metrics = one_update(tool_calling_model_dir, tmp_path, "eval.at_start=true")
    assert [m["step"] for m in metrics] == [0, 1]
    assert "eval/success" in metrics[0] and "train/loss" not in metrics[0]
    assert metrics[0]["env_steps"] == 0 and "train/loss" in metrics[1]


def test_keep_best_keeps_the_policy_of_the_best_evaluation(tool_calling_model_dir, tmp_path):
    """eval.keep_best: RUN_DIR/best_policy is the policy as it was at the best evaluation so
    far (the start's included; a tie keeps the earlier), beside the last one in policy/."""
    from safetensors.torch import load_file

    trainer, metrics = one_update(tool_calling_model_dir, tmp_path, "steps=3",
                                  "eval.every_steps=1", "eval.at_start=true", "eval.keep_best=true")  # fmt: skip
    evaluated = [(m["step"], m["eval/success"]) for m in metrics if "eval/success" in m]
    assert [step for step, _ in evaluated] == [0, 1, 2, 3]
    best = max(success for _, success in evaluated)
    chosen = next(step for step, success in evaluated if success == best)
    record = tmp_path / "best_policy" / "toolgym_best.json"
    assert json.loads(record.read_text()) == {"step": chosen, "eval/success": best}

    def weights(folder: str) -> dict:
        return load_file(tmp_path / folder / "model.safetensors")

    with torch.no_grad():  # a policy unlike any the run saved
        next(trainer.model.parameters()).add_(1.0)
    trainer.run_files.keep_if_best(
        {"step": 7, "eval/success": best}, trainer.policy
    )  # a tie: the earlier stays
    assert json.loads(record.read_text())["step"] == chosen
    trainer.run_files.keep_if_best({"step": 8, "eval/success": best + 0.25}, trainer.policy)
    assert json.loads(record.read_text()) == {"step": 8, "eval/success": best + 0.25}
    moved = trainer.model.state_dict()
    kept, last = weights("best_policy"), weights("policy")
    assert all(torch.equal(kept[k], moved[k]) for k in kept)
    assert not all(torch.equal(kept[k], last[k]) for k in kept)


def test_transfer_sets_are_evaluated_beside_the_held_out_split(tool_calling_model_dir, tmp_path):
    """eval.sets: a larger maze than training's, played at each evaluation and logged apart,
    so the held-out figure stays the training settings' own."""
    played = []
    sums = "[{question: 2 + 3, answer: 5}, {question: 4 * 6, answer: 24}]"  # held-out rows only
    sets = (
        "eval.sets=[{name: larger, id: toolgym/Maze-v0, kwargs: {size: 5, max_turns: 2}}, "
        f"{{name: sums, id: toolgym/Arithmetic-v0, kwargs: {{tasks: {{eval: {sums}}}}}}}]"
    )
    config = load_config(
        TrainConfig, None,
        [f"model={tool_calling_model_dir}", f"run_dir={tmp_path}", "steps=1", "tensorboard=false",
         "eval.at_start=true", *SMALL, sets],
    )  # fmt: skip
    metrics = Trainer(config).run(on_episode=played.append)
    for record in metrics:
        assert record["eval/items"] <= 4 and record["eval/larger/items"] == 4
        assert 0 <= record["eval/larger/success_low"] <= record["eval/larger/success_high"] <= 1
        assert record["eval/sums/items"] == 2  # a set needs no training tasks of its own
    larger = [t for t in played if t.env_name == "larger"]
    assert len(larger) == 8 and all("#" * 11 in t.messages[1]["content"] for t in larger)
    with pytest.raises(ConfigError, match="eval.sets: the set of toolgym/Maze-v0 needs a `name`"):
        load_config(TrainConfig, None, ["model=x", "eval.sets=[{id: toolgym/Maze-v0}]"])


def test_a_set_on_the_test_split_plays_mazes_neither_training_nor_the_eval_split_draws(
    tool_calling_model_dir, tmp_path
):
    """`split: test`: the run's own env on its other held-out split, logged apart, so a small
    space holds out more items; its mazes are the test split's, by content."""
    from toolgym.envs.maze import MazeEnv

    played = []
    config = load_config(
        TrainConfig, None,
        [f"model={tool_calling_model_dir}", f"run_dir={tmp_path}", "steps=1", "tensorboard=false",
         *SMALL, "eval.sets=[{name: test, id: toolgym/Maze-v0, kwargs: {size: 3, max_turns: 4}, "
         "split: test, episodes: 6}]"],
    )  # fmt: skip
    metrics = Trainer(config).run(on_episode=played.append)
    assert metrics[-1]["eval/items"] == 4 and metrics[-1]["eval/test/items"] == 6
    source = MazeEnv(size=3).task_source()
    test_seeds = {d.seed for d in source.head("test", 6)}
    assert {t.seed for t in played if t.env_name == "test"} == test_seeds
    eval_seeds = {d.seed for d in source.head("eval", 4)}
    assert eval_seeds <= {t.seed for t in played if t.env_name == "Maze-v0"}
    held = {source.item_of(s) for s in test_seeds}
    assert not held & {source.item_of(s) for s in eval_seeds}
    assert not held & {source.item_of(d.seed) for d in source.head("train", 200)}
    with pytest.raises(ConfigError, match="split"):
        load_config(TrainConfig, None, ["model=x", "eval.sets=[{name: t, split: train}]"])


def test_a_fine_tuned_models_env_settings_fill_what_the_config_leaves_unset(tmp_path):
    from toolgym.envs.saved_settings import write_env_settings
    from toolgym.training.run.setup import with_model_env_settings

    write_env_settings(tmp_path, "toolgym/Maze-v0", {"size": 3, "hints": False}, False)
    filled, _ = with_model_env_settings(load_config(TrainConfig, None, [f"model={tmp_path}"]))
    assert filled.env.kwargs == {"size": 3, "hints": False}
    assert filled.rollout.tool_schemas_in_prompt is False
    overrides = [f"model={tmp_path}", "env.kwargs={size: 5}", "rollout.tool_schemas_in_prompt=true"]
    explicit, merged = with_model_env_settings(load_config(TrainConfig, None, overrides))
    # one setting given keeps the others saved (it used to drop them all), and says so
    assert explicit.env.kwargs == {"size": 5, "hints": False}
    assert explicit.rollout.tool_schemas_in_prompt is True
    assert merged is not None and merged.overridden == {"size": (3, 5)}
    assert "given --env-arg overrides size (3 -> 5)" in merged.notes(tmp_path)
    other_env, nothing = with_model_env_settings(
        load_config(TrainConfig, None, [f"model={tmp_path}", "env.id=toolgym/Arithmetic-v0"])
    )
    assert other_env.env.kwargs == {} and other_env.rollout.tool_schemas_in_prompt is True
    assert nothing is None
