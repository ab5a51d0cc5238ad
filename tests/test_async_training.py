"""Asynchronous training on a tiny model: with eta = 0 it trains on exactly what sync mode
does; staleness never passes eta on any sample; partial rollouts carry episodes across
syncs; a run that dies resumes with no group lost or trained twice."""

from __future__ import annotations

import pytest
import torch
from test_trainer import SMALL

from toolgym.config import load_config
from toolgym.errors import ConfigError
from toolgym.training.config import TrainConfig
from toolgym.training.run import checkpoint
from toolgym.training.trainer import Trainer


class Recording(Trainer):
    """The trainer as it is, remembering what each step trained on."""

    def __init__(self, *args, fail_at: int | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.trained: list[dict] = []
        self.fail_at = fail_at

    async def learn(self, groups, rollout_s):
        if self.step == self.fail_at:
            raise Died(f"died at step {self.step}")
        self.trained.append({
            "step": self.step,
            "groups": [g.group_id for g in groups],
            "tokens": {t.id: list(t.token_ids) for g in groups for t in g.trajectories},
            "lags": [self.step - min(s.policy_version for s in t.steps)
                     for g in groups for t in g.trajectories if t.steps],
            "fresh_tokens": sum(
                s.response_end - s.response_start for g in groups for t in g.trajectories
                if not t.masked for s in t.steps
                if s.policy_version >= self.step - self.config.async_training.max_staleness
            ),
        })  # fmt: skip
        return await super().learn(groups, rollout_s)


class Died(Exception):
    pass


ETA_1 = ("mode=async", "async_training.max_staleness=1")


def config(model, run_dir, *extra):
    return load_config(
        TrainConfig, None,
        [f"model={model}", f"run_dir={run_dir}", "eval.every_steps=10", "tensorboard=false",
         *SMALL, *extra],
    )  # fmt: skip


def test_with_eta_0_async_trains_on_exactly_what_sync_does(tool_calling_model_dir, tmp_path):
    """One episode at a time (concurrency 1): a batched decode pads its rows by whichever
    episodes share the batch, which the two modes' timing decides, and a different padding
    can flip a sampled token; a batch of one row computes the same numbers in both."""
    one_at_a_time = "rollout.concurrency=1"
    sync = Recording(config(tool_calling_model_dir, tmp_path / "sync", "steps=3", one_at_a_time))
    sync_metrics = sync.run()
    eager = Recording(
        config(tool_calling_model_dir, tmp_path / "async", "steps=3", "mode=async",
               "async_training.max_staleness=0", one_at_a_time)
    )  # fmt: skip
    async_metrics = eager.run()
    assert eager.engine.model is not eager.model  # it samples from its own copy
    for s, a in zip(sync.trained, eager.trained, strict=True):
        assert a["groups"] == s["groups"]
        assert a["tokens"] == s["tokens"]
        assert set(a["lags"]) == {0}
    for s, a in zip(sync_metrics, async_metrics, strict=True):
        assert a["train/loss"] == pytest.approx(s["train/loss"], rel=1e-5, abs=1e-7)
        assert a["env_steps"] == s["env_steps"]
        assert a["async/staleness_0"] == 1.0
        assert not any(k.startswith("async/") for k in s)  # no staleness chart of zeros


def test_staleness_never_passes_eta_and_the_next_step_plays_meanwhile(
    tool_calling_model_dir, tmp_path
):
    trainer = Recording(config(tool_calling_model_dir, tmp_path, "steps=4", *ETA_1))
    metrics = trainer.run()
    lags = [lag for step in trainer.trained for lag in step["lags"]]
    assert lags and max(lags) <= 1  # every sample of the run
    # step 1's groups started under version 0, while step 0 trained: one version behind
    assert set(trainer.trained[1]["lags"]) == {1}
    assert all(
        m["async/staleness_0"] + m["async/staleness_1"] == pytest.approx(1.0) for m in metrics
    )
    assert all(0 <= m["async/trainer_idle"] <= 1 and 0 <= m["async/generator_idle"] <= 1
               for m in metrics)  # fmt: skip
    ids = [g for step in trainer.trained for g in step["groups"]]
    assert len(ids) == len(set(ids)) == 4 * 2  # no group twice, G groups a step


def test_partial_rollouts_carry_episodes_across_syncs(tool_calling_model_dir, tmp_path):
    trainer = Recording(
        config(
            tool_calling_model_dir, tmp_path, "steps=4", *ETA_1,
            "async_training.partial_rollouts=true", "async_training.extra_groups=2",
            "loss.mode=decoupled",
        )
    )  # fmt: skip
    metrics = trainer.run()
    ids = [g for step in trainer.trained for g in step["groups"]]
    assert len(ids) == len(set(ids)) == 4 * 2  # the first G to finish, each once
    assert all("async/partial_share" in m and "train/behaviour_weight_mean" in m for m in metrics)
    for step, m in zip(trainer.trained, metrics, strict=True):  # reported: the loss corrects them
        lags = step["lags"]
        assert m["async/staleness_over"] == pytest.approx(sum(g > 1 for g in lags) / len(lags))


def test_partial_rollouts_need_a_loss_that_corrects_older_turns(tool_calling_model_dir, tmp_path):
    with pytest.raises(ConfigError, match="decoupled or truncated-is"):
        config(
            tool_calling_model_dir, tmp_path, "mode=async", "async_training.partial_rollouts=true"
        )


def test_a_run_that_dies_resumes_with_no_group_lost_or_trained_twice(
    tool_calling_model_dir, tmp_path
):
    args = ("steps=4", *ETA_1)
    first = Recording(config(tool_calling_model_dir, tmp_path, *args), fail_at=2)
    with pytest.raises(Died):
        first.run()
    saved = checkpoint.read(tmp_path / checkpoint.FILE)
    assert saved["step"] == 2
    untrained = saved["extra"]["stream"]["untrained"]
    assert untrained  # step 2's groups were started (eta = 1) and never trained
    second = Recording(config(tool_calling_model_dir, tmp_path, *args))
    second.run(resume=True)
    before = [g for step in first.trained for g in step["groups"]]
    after = [g for step in second.trained for g in step["groups"]]
    assert not set(before) & set(after) and len(after) == len(set(after))
    # the groups started before the death and never trained are trained after the resume
    per_step = 2  # rollout.tasks_per_step in SMALL
    requests = second.groups.requests
    pending = {requests(i // per_step, per_step)[i % per_step].group_id for i in untrained}
    assert pending <= set(after)
    assert [step["step"] for step in second.trained] == [2, 3]
    assert len(before) + len(after) == 4 * per_step


def test_async_needs_an_engine_that_can_take_weights(tool_calling_model_dir, tmp_path):
    with pytest.raises(ConfigError, match="for mode: async"):
        config(tool_calling_model_dir, tmp_path, "async_training.partial_rollouts=true")


def test_reward_sources_play_and_learn_on_the_loop_while_groups_stream(
    tool_calling_model_dir, tmp_path
):
    """Monte-Carlo continuations are played on the run's loop beside the streamed groups,
    and the implicit PRM learns in a thread: neither re-enters the loop."""
    from test_trainer import PRM

    rewards = (
        "rewards=[{source: env}, {source: mc_values, scores: process, kwargs: {continuations: 2}}]"
    )
    trainer = Recording(config(tool_calling_model_dir, tmp_path, "steps=2", "mode=async", rewards))
    metrics = trainer.run()
    assert all(m["mc_values/continuations"] > 0 for m in metrics)
    prm = Recording(config(tool_calling_model_dir, tmp_path / "prm", "steps=2", "mode=async", PRM))
    metrics = prm.run()
    saved = checkpoint.read(tmp_path / "prm" / checkpoint.FILE)
    assert saved["extra"]["rewards"]["implicit_prm"]["updates"] == 2


def test_async_lora_trains_its_adapter_while_the_engine_samples_its_own_copy(
    tool_calling_model_dir, tmp_path
):
    trainer = Recording(
        config(tool_calling_model_dir, tmp_path, "steps=2", "mode=async", "lora.enabled=true",
               "lora.r=4", "lora.alpha=8")
    )  # fmt: skip
    trainer.run()
    assert trainer.engine.model is not trainer.model and trainer.sync_way == "full"
    assert trainer.gate.version == 2
    with torch.no_grad():  # an update the sync must carry into the engine's copy
        for name, weight in trainer.model.named_parameters():
            if "lora_B" in name:
                weight.add_(0.5)
    trainer.runtime.run(trainer.gate.swap(trainer.send_weights))
    trained = dict(trainer.model.named_parameters())
    copied = dict(trainer.engine.model.named_parameters())
    assert all(torch.equal(copied[n], w) for n, w in trained.items())
    assert any("lora_B" in n and float(w.abs().min()) > 0 for n, w in copied.items())


def test_masked_stale_turns_stay_in_the_sequence_but_out_of_the_loss(
    tool_calling_model_dir, tmp_path
):
    import numpy as np

    from toolgym.agents.trajectory import Step, Trajectory
    from toolgym.training.update.batch import build_batch

    def step(start, end, version):
        return Step(start, end, [-0.5] * (end - start), "a", [], 0.0, 0, 1, policy_version=version)

    t = Trajectory("t", token_ids=list(range(10)), steps=[step(2, 4, 3), step(6, 9, 5)])
    batch = build_batch([t], [np.array([1.0, 1.0])], 0, min_version=4)
    assert batch.loss_mask[0].tolist() == [0, 0, 0, 0, 0, 1, 1, 1, 0]  # the version-3 turn is out
    assert batch.input_ids[0].tolist() == list(range(10))
    whole = build_batch([t], [np.array([1.0, 1.0])], 0)
    assert whole.loss_mask[0].tolist() == [0, 1, 1, 0, 0, 1, 1, 1, 0]
    trainer = Recording(
        config(tool_calling_model_dir, tmp_path, "steps=3", "mode=async",
               "async_training.partial_rollouts=true", "async_training.stale_turns=mask",
               "async_training.extra_groups=2")
    )  # fmt: skip
    metrics = trainer.run()  # on-policy loss: the masked turns need no correction
    for step, m in zip(trainer.trained, metrics, strict=True):
        assert m["train/tokens"] == step["fresh_tokens"]
    assert sum(step["fresh_tokens"] for step in trainer.trained) > 0
