"""The trainer loop, in named phases:

    collect   tasks_per_step tasks x rollouts_per_task rollouts with the current policy
    advantage per group (GRPO / RLOO / GiGPO), each step's value onto its response tokens
    update    PPO-clip, ppo_epochs passes; each pass takes one optimizer step per mini-batch
              (optim.minibatches), accumulating gradients over its micro-batches
    sync      the in-process engine shares the trained weights; bump the policy version
    log       metrics (rollout/, adv/, train/, time/, eval/) to metrics.jsonl
    evaluate  every eval.every_steps on held-out seeds
    checkpoint atomically, with metrics trimmed to match on resume

Departures from the papers: one policy update per batch by default (ppo_epochs = 1 and
minibatches = 1, so the clipping only acts if there are more or the engine lags); masked
rollouts (infrastructure failures) are dropped rather than scored; loss aggregation is
token-mean over each optimizer step (DAPO), not per-sequence as in the GRPO paper (a flag).
"""

from __future__ import annotations

import asyncio
import copy
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from toolgym.agents.collector import RolloutCollector, summarize
from toolgym.agents.engines import SamplingParams
from toolgym.agents.engines.hf import HFEngine
from toolgym.agents.render import ChatRenderer
from toolgym.agents.rollout import RolloutConfig
from toolgym.agents.trajectory import Trajectory, TrajectoryGroup
from toolgym.envs import make
from toolgym.training import checkpoint
from toolgym.training.advantages import GroupRewards, compute_advantages
from toolgym.training.batch import TokenBatch, build_batch, token_logprobs
from toolgym.training.config import TrainConfig
from toolgym.training.losses import PPOConfig, normalizer_for, ppo_clip_loss
from toolgym.training.metrics_log import MetricsLog, read_metrics


class Trainer:
    def __init__(self, config: TrainConfig) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.config = config
        self.run_dir = Path(config.run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        torch.manual_seed(config.seed)
        self.tokenizer = AutoTokenizer.from_pretrained(config.model)
        self.model: Any = AutoModelForCausalLM.from_pretrained(config.model, dtype=torch.float32)
        if config.lora.enabled:
            from peft import LoraConfig, get_peft_model

            lora = LoraConfig(
                r=config.lora.r,
                lora_alpha=config.lora.alpha,
                target_modules=config.lora.target_modules,
            )
            self.model = get_peft_model(self.model, lora)
        if config.optim.gradient_checkpointing:
            enable_activation_checkpointing(self.model)
        self.reference: Any = None
        """Frozen start policy for the KL term (LoRA needs none: its base is the reference)."""
        if config.loss.kl_coef > 0 and not config.lora.enabled:
            self.reference = copy.deepcopy(self.model).eval().requires_grad_(False)
        self.pad_id = (
            self.tokenizer.pad_token_id
            if self.tokenizer.pad_token_id is not None
            else self.tokenizer.eos_token_id
        )
        self.engine: Any = self._build_engine()
        self.adapter: str | None = None
        """The adapter name the server generates with (openai engine); None in-process."""
        self.renderer = ChatRenderer(
            self.tokenizer, tool_schemas=config.rollout.tool_schemas_in_prompt
        )
        trainable = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            trainable, lr=config.optim.lr, weight_decay=config.optim.weight_decay
        )
        self.ppo = PPOConfig(**config.loss.model_dump())
        self.step = 0

    # ----- the loop -----------------------------------------------------------------------
    def run(self, resume: bool = False) -> list[dict[str, Any]]:
        if resume:
            self._resume()
        else:
            (self.run_dir / "config.json").write_text(self.config.model_dump_json(indent=2))
        self.metrics = MetricsLog(self.run_dir, self.step, self.config.tensorboard)
        try:
            while self.step < self.config.steps:
                record = self.train_step()
                if (
                    self.step + 1
                ) % self.config.eval.every_steps == 0 or self.step + 1 == self.config.steps:
                    record |= self.evaluate()
                self.metrics.write(record)
                self.step += 1
                checkpoint.save(
                    self.run_dir, step=self.step, model=self.model, optimizer=self.optimizer
                )
            self.save_policy()
        finally:
            self.metrics.close()
            self.close()
        return read_metrics(self.run_dir)

    def close(self) -> None:
        """Stop the engine's workers (an in-process engine restarts on its next request)."""
        asyncio.run(self.engine.aclose())

    def train_step(self) -> dict[str, Any]:
        t0 = time.perf_counter()
        groups = self.collect(
            self.task_seeds(self.step),
            temperature=self.config.rollout.temperature,
            sampling_seed=self.config.seed * 100_003 + self.step,
            options={"training_step": (self.step, self.config.steps)},
        )
        t1 = time.perf_counter()
        trajectories, advantages = self.advantages(groups)
        t2 = time.perf_counter()
        train_metrics = self.update(trajectories, advantages) if trajectories else {}
        t3 = time.perf_counter()
        self.sync()
        stats = summarize([t for g in groups for t in g.trajectories], t1 - t0)
        flat = np.concatenate(advantages) if advantages else np.zeros(1)
        return {
            "step": self.step,
            "env_steps": sum(len(t.steps) for g in groups for t in g.trajectories),
            "rollout/success": stats.success_rate,
            "rollout/reward": stats.mean_reward,
            "rollout/turns": stats.mean_turns,
            "rollout/valid_actions": stats.valid_action_rate,
            "rollout/masked": stats.masked,
            "rollout/tokens_per_s": stats.tokens_per_s,
            "adv/mean": float(flat.mean()),
            "adv/std": float(flat.std()),
            "adv/nonzero": float((np.abs(flat) > 1e-8).mean()),
            **{f"train/{k}": v for k, v in train_metrics.items()},
            "time/rollout_s": t1 - t0,
            "time/advantage_s": t2 - t1,
            "time/update_s": t3 - t2,
        }

    # ----- phases ------------------------------------------------------------------------------
    def _build_engine(self) -> Any:
        e = self.config.engine
        if e.kind == "hf":
            return HFEngine(self.model, self.tokenizer, seed=self.config.seed)  # shares the weights
        from toolgym.agents.engines.openai_http import OpenAIEngine

        assert e.base_url is not None  # checked by the config
        return OpenAIEngine(e.base_url, e.served_model or self.config.model)

    def sync(self) -> None:
        """Hand the updated weights to the engine. In-process they are the same tensors; a
        server gets the new LoRA adapter under a fresh name and drops the previous one."""
        self.engine.policy_version += 1
        if self.config.engine.kind == "hf":
            return
        name = f"policy-{self.engine.policy_version}"
        path = self.run_dir / "adapters" / name
        self.model.save_pretrained(path)

        async def swap(previous: str | None) -> None:
            await self.engine.load_adapter(name, str(path.resolve()))
            if previous is not None:
                await self.engine.unload_adapter(previous)

        asyncio.run(swap(self.adapter))
        self.adapter = name

    def task_seeds(self, step: int) -> list[int]:
        """The data position: step k always trains on the same tasks (what resume relies on)."""
        n = self.config.rollout.tasks_per_step
        return [self.config.seed * 10_007 + step * n + k for k in range(n)]

    def collect(
        self,
        seeds: list[int],
        temperature: float,
        sampling_seed: int | None,
        group_size: int | None = None,
        options: dict[str, Any] | None = None,
    ) -> list[TrajectoryGroup]:
        r = self.config.rollout
        sampling = SamplingParams(
            max_tokens=r.max_tokens, temperature=temperature, seed=sampling_seed
        )
        rollout = RolloutConfig(
            sampling,
            max_turns=r.max_turns,
            max_context_tokens=r.max_context_tokens,
            episode_timeout_s=r.episode_timeout_s,
        )
        env_id, kwargs = self.config.env.id, self.config.env.kwargs
        collector = RolloutCollector(
            lambda: make(env_id, **kwargs), self.engine, self.renderer, rollout,
            group_size=group_size or r.rollouts_per_task, concurrency=r.concurrency, env_id=env_id,
        )  # fmt: skip
        self.model.eval()
        return asyncio.run(collector.collect(seeds, adapter=self.adapter, options=options))

    def advantages(
        self, groups: list[TrajectoryGroup]
    ) -> tuple[list[Trajectory], list[np.ndarray]]:
        trajectories, advantages = [], []
        options = self.config.advantage.options()
        for g in groups:
            values = compute_advantages(
                self.config.advantage.estimator,
                GroupRewards.from_trajectories(g.trajectories),
                **options,
            )
            for t, a in zip(g.trajectories, values, strict=True):
                if not t.masked and t.steps:
                    trajectories.append(t)
                    advantages.append(a)
        return trajectories, advantages

    def update(
        self, trajectories: list[Trajectory], advantages: list[np.ndarray]
    ) -> dict[str, float]:
        batch = build_batch(trajectories, advantages, self.pad_id)
        optim = self.config.optim
        minibatch_size = -(-len(batch) // optim.minibatches)
        self.model.train()
        steps = [
            self.optimizer_step(minibatch)
            for _ in range(optim.ppo_epochs)
            for minibatch in batch.split(minibatch_size)
        ]
        self.model.eval()
        out = {k: float(np.mean([s[k] for s in steps])) for k in steps[0]}
        out["tokens"] = float(batch.loss_mask.sum())
        return out

    def optimizer_step(self, minibatch: TokenBatch) -> dict[str, float]:
        """One optimizer step on `minibatch`, its gradient accumulated over micro-batches.
        Returns its loss, gradient norm and the micro-batches' mean loss metrics."""
        normalizer = normalizer_for(minibatch.loss_mask, max_tokens=self.config.rollout.max_tokens)
        self.optimizer.zero_grad()
        sums: dict[str, float] = {}
        loss_sum, count = 0.0, 0
        for micro in minibatch.split(self.config.optim.micro_batch_size):
            logprobs, entropy = token_logprobs(self.model, micro, with_entropy=True)
            loss, metrics = ppo_clip_loss(
                logprobs,
                micro.old_logprobs,
                micro.advantages,
                micro.loss_mask,
                normalizer,
                self.ppo,
                ref_logprobs=self.reference_logprobs(micro),
                entropy=entropy,
            )
            loss.backward()
            loss_sum += loss.item()
            for k, v in metrics.items():
                sums[k] = sums.get(k, 0.0) + v
            count += 1
        out = {k: v / count for k, v in sums.items()}
        out["loss"] = loss_sum
        out["grad_norm"] = float(
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.optim.grad_clip)
        )
        self.optimizer.step()
        return out

    @torch.no_grad()
    def reference_logprobs(self, micro: Any) -> torch.Tensor | None:
        if self.config.loss.kl_coef == 0:
            return None
        if self.reference is not None:
            return token_logprobs(self.reference, micro)[0]
        with self.model.disable_adapter():
            return token_logprobs(self.model, micro)[0]

    def evaluate(self, temperature: float | None = None) -> dict[str, Any]:
        """The policy on the held-out seeds, at eval.temperature unless told otherwise."""
        e = self.config.eval
        seeds = list(range(e.seed_offset, e.seed_offset + e.episodes))
        temperature = e.temperature if temperature is None else temperature
        groups = self.collect(seeds, temperature=temperature, sampling_seed=0, group_size=1)
        stats = summarize([t for g in groups for t in g.trajectories])
        return {
            "eval/success": stats.success_rate,
            "eval/reward": stats.mean_reward,
            "eval/turns": stats.mean_turns,
            "eval/valid_actions": stats.valid_action_rate,
        }

    # ----- bookkeeping ------------------------------------------------------------------------
    def save_policy(self) -> Path:
        """The trained policy as a model directory (`toolgym eval --model RUN_DIR/policy`);
        under LoRA, the adapter, which peft loads onto the base model."""
        path = self.run_dir / "policy"
        self.model.save_pretrained(path)
        self.tokenizer.save_pretrained(path)
        return path

    def _resume(self) -> None:
        if not checkpoint.exists(self.run_dir):
            raise FileNotFoundError(f"no checkpoint in {self.run_dir} to resume from")
        self.step = int(checkpoint.load(self.run_dir, self.model, self.optimizer)["step"])
        self.engine.policy_version = self.step
        if self.step > 0 and self.config.engine.kind != "hf":
            self.engine.policy_version -= 1
            self.sync()  # the server may have restarted: give it the resumed weights


def enable_activation_checkpointing(model: Any) -> None:
    """Non-reentrant, so LoRA's frozen inputs need no grad hooks. transformers 5 renamed it."""
    enable = getattr(model, "activation_checkpointing_enable", None)
    if enable is not None:
        enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
