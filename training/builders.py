"""Small builders that assemble a trainer's parts from its typed config: the model on its
device, the frozen reference, the engine from the engine registry, the optimizer, and the
reward stage. Each takes what it needs and returns the part; `build_parts` makes the
policy's parts, which a trainer is handed (or builds with it when it is handed none)."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch

from toolgym.agents.engines import (
    Capabilities,
    PolicyContext,
    PolicyEngine,
    engine_class,
    policy_engine,
)
from toolgym.agents.models.device import Precision, resolve_precision
from toolgym.agents.models.loading import (
    check_model_dir,
    is_vision_model,
    load_model,
    load_tokenizer,
)
from toolgym.agents.render import ChatRenderer
from toolgym.agents.render_vision import make_renderer
from toolgym.agents.runtime import Runtime
from toolgym.agents.vision import ImageEncoder
from toolgym.envs.tasks import TaskSource
from toolgym.errors import ConfigError
from toolgym.training.config import TrainConfig
from toolgym.training.distributed import Ranks, rank_device, shard
from toolgym.training.groups import GroupBuilder, TaskGroups
from toolgym.training.lora import with_lora
from toolgym.training.player import Player
from toolgym.training.rewards import (
    SOURCES,
    RewardStage,
    RunContext,
    WeightedSource,
    make_source,
)
from toolgym.training.rewards.base import Continue
from toolgym.training.selfplay.builder import SelfPlay
from toolgym.training.selfplay.domains import domain_class
from toolgym.training.selfplay.pool import TaskPool
from toolgym.training.selfplay.snapshot import SolverSnapshot
from toolgym.training.update.learner import Learner
from toolgym.training.update.optim_step import adamw
from toolgym.training.update.weight_sync import TrainedWeights


@dataclass
class PolicyParts:
    """The policy a trainer trains and what it generates, renders and steps with. Built here
    from the config, or by whoever runs the trainer otherwise (another engine, a model
    already placed on its devices), and handed in."""

    precision: Precision
    """Where and in what precision the forward passes run."""
    tokenizer: Any
    model: Any
    """The trained model (with its LoRA adapter, when there is one)."""
    reference: Any | None
    """A frozen copy for the KL term (None: no KL, or LoRA's adapter switched off)."""
    images: ImageEncoder | None
    """The image encoder of a vision-language policy, shared by renderer, engine and
    batches (a screenshot is prepared once); None for a text-only one."""
    engine: PolicyEngine
    renderer: ChatRenderer
    optimizer: torch.optim.Optimizer

    @property
    def pad_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        return int(pad if pad is not None else self.tokenizer.eos_token_id)


def model_hint(config: TrainConfig) -> str | None:
    """How to make the model a run starts from, where the default hint would mislead: a
    harness run's model must call the agent's own tools, which an env's demonstrations
    never show it."""
    if config.harness is None:
        return None
    return (
        "warm-start one from your agent: `toolgym warm-start --config YOUR.yaml "
        "model=BASE --teacher ENDPOINT_OR_FUNCTION --out DIR` (BASE from `toolgym model "
        "init` or `pretrain`; docs/existing-agents.md)"
    )


def build_parts(config: TrainConfig, ranks: Ranks | None = None) -> PolicyParts:
    """The policy's parts as the config says (the seed set first, so a run's initial
    adapter and sampling are reproducible). In a distributed run (`ranks`: the leader's), the
    engine keeps a whole copy of the weights and the trained ones are sharded."""
    check_engine(config)
    check_model_dir(config.model, hint=model_hint(config))
    torch.manual_seed(config.seed)
    precision = resolve_precision(
        rank_device(config.device) if ranks else config.device, config.dtype
    )
    tokenizer = load_tokenizer(config.model)
    model = build_model(config, precision)
    images = ImageEncoder.for_model(config.model, model.config)
    reference = build_reference(config, model, precision)
    engine = build_engine(config, model, tokenizer, precision, images, ranks is not None)
    if ranks is not None:
        shard_trained(model, reference)
    return PolicyParts(
        precision=precision,
        tokenizer=tokenizer,
        model=model,
        reference=reference,
        images=images,
        engine=engine,
        renderer=make_renderer(
            tokenizer, images, tool_schemas=config.rollout.tool_schemas_in_prompt
        ),
        optimizer=build_optimizer(config, model),
    )


def build_follower(config: TrainConfig, ranks: Ranks) -> Learner:
    """A distributed run's rank other than the leader: its shard of the trained weights (and
    of the reference), their optimizer, nothing else."""
    torch.manual_seed(config.seed)
    precision = resolve_precision(rank_device(config.device), config.dtype)
    model = build_model(config, precision)
    reference = build_reference(config, model, precision)
    shard_trained(model, reference)
    return Learner(model, reference, build_optimizer(config, model), precision, config, ranks)


def shard_trained(model: Any, reference: Any | None) -> None:
    shard(model)
    if reference is not None:
        shard(reference)


def build_runtime(config: TrainConfig) -> Runtime:
    """The run's runtime: env pools in this process, or Ray actors when ray.address is set."""
    if config.ray.address is None:
        return Runtime()
    from toolgym.agents.ray.envs import RayRuntime

    return RayRuntime(config.ray.address, config.ray.env_actors, config.ray.env_cpus)


def build_model(config: TrainConfig, precision: Precision) -> Any:
    """The policy, float32 weights on the configured device (LoRA and checkpointing as set)."""
    model: Any = load_model(config.model).to(precision.device)
    if config.lora.enabled:
        model = with_lora(model, config.lora)
    if config.optim.gradient_checkpointing:
        enable_activation_checkpointing(model)
    return model


def build_reference(config: TrainConfig, model: Any, precision: Precision) -> Any:
    """The frozen start policy for the KL term, kept in the compute dtype (it is never
    trained); None when there is no KL term, or under LoRA (the base is the reference)."""
    if config.loss.kl_coef == 0 or config.lora.enabled:
        return None
    reference = copy.deepcopy(model).eval().requires_grad_(False)
    return reference.to(precision.dtype)


def check_engine(config: TrainConfig) -> None:
    """Refuse an engine the run cannot sync, before anything loads."""
    kind = config.engine.kind
    cls = engine_class(kind)
    declared: Capabilities = cls.capabilities
    if declared.weight_sync == "lora" and not config.lora.enabled:
        raise ConfigError(
            f"engine.kind={kind} takes new weights as LoRA adapters: set lora.enabled=true"
        )
    if config.mode == "async" and declared.weight_sync == "shared" and not declared.full_weights:
        raise ConfigError(
            f"mode=async generates while the trainer updates, and engine.kind={kind} can only "
            "share the trained model: use an engine that takes weights (hf, vllm, openai)"
        )
    if config.ray.engine_actors:
        check_engine_actors(config, declared)
    snapshot = config.selfplay is not None and config.selfplay.scorer == "snapshot"
    if snapshot and (declared.weight_sync != "shared" or config.ray.engine_actors):
        raise ConfigError(
            f"selfplay.scorer: snapshot copies the policy's model in this process, and "
            f"engine.kind={kind}{' on Ray engine actors' * bool(config.ray.engine_actors)} "
            "holds none here: use engine.kind=hf"
        )
    for setting in declared.requires:
        if not config.engine.model_dump().get(setting):
            raise ConfigError(f"engine.kind={kind} needs engine.{setting}")
    if not declared.images and is_vision_model(config.model):
        raise ConfigError(
            f"{config.model} is a vision-language model and engine.kind={kind} generates from "
            "text alone: use engine.kind=hf"
        )


def check_engine_actors(config: TrainConfig, declared: Capabilities) -> None:
    """Engine actors run an engine that loads the model itself and takes full weights."""
    kind = config.engine.kind
    if config.ray.address is None:
        raise ConfigError("ray.engine_actors needs a Ray cluster: set ray.address")
    if not declared.full_weights:
        raise ConfigError(
            f"ray.engine_actors run engines that load the model and take its weights; "
            f"engine.kind={kind} cannot: use hf or vllm (a server is given by engine.base_url)"
        )
    if is_vision_model(config.model):
        raise ConfigError(
            f"{config.model} is a vision-language model: engine actors generate from text "
            "alone; set ray.engine_actors=0"
        )


def check_distributed(config: TrainConfig) -> None:
    """Refuse what a distributed run cannot do, before any rank loads a model."""
    if config.lora.enabled:
        raise ConfigError(
            "lora.enabled: a distributed run trains full weights (its ranks shard them); "
            "train a LoRA adapter in one process"
        )
    if config.selfplay is not None and config.selfplay.scorer == "snapshot":
        raise ConfigError(
            "selfplay.scorer: snapshot copies the whole model in the trainer's process, and a "
            "distributed run shards it: score with the solvers (scorer: solver)"
        )
    declared = engine_class(config.engine.kind).capabilities
    if declared.weight_sync == "shared" and not declared.full_weights:
        raise ConfigError(
            f"engine.kind={config.engine.kind} can only share the trained model, and a "
            "distributed run shards it: use an engine that takes weights (hf, vllm, openai)"
        )


def build_engine(
    config: TrainConfig, model: Any, tokenizer: Any, precision: Precision, images: Any = None,
    own_weights: bool = False,
) -> PolicyEngine:  # fmt: skip
    """The generation engine named by engine.kind, built from the registry for a trainer
    (`images`: the policy's image encoder, for an engine that reads images). It keeps weights
    of its own when it generates while the trainer updates (async), when the trained ones are
    sharded (distributed) or when it is a snapshot (`own_weights`)."""
    kind = config.engine.kind
    if config.ray.engine_actors:
        from toolgym.agents.ray.engines import RayEngines

        ray = config.ray
        return RayEngines(
            config.model, kind=kind, actors=ray.engine_actors, cpus=ray.engine_cpus,
            gpus=ray.engine_gpus, seed=config.seed, address=ray.address or "local",
            timeout_s=ray.timeout_s,
        )  # fmt: skip
    context = PolicyContext(
        config.model, model=model, tokenizer=tokenizer, seed=config.seed, precision=precision,
        images=images, base_url=config.engine.base_url, served_model=config.engine.served_model,
        own_weights=config.mode == "async" or own_weights,
    )  # fmt: skip
    return policy_engine(kind, context)


def build_snapshot(
    config: TrainConfig, parts: PolicyParts, player: Player, weights: TrainedWeights
) -> SolverSnapshot | None:
    """The frozen copy of the policy that scores self-play proposals (`selfplay.scorer:
    snapshot`), copied from `parts` before any update (check_engine refused an engine that
    holds no model here); None when the run scores with its solvers."""
    play = config.selfplay
    if play is None or play.scorer != "snapshot":
        return None
    engine = build_engine(config, parts.model, parts.tokenizer, parts.precision, parts.images,
                          own_weights=True)  # fmt: skip
    snapshot = Player(config, player.runtime, player.tasks, engine, parts.renderer, player.gate)
    return SolverSnapshot(snapshot, weights, play.snapshot_every)


def build_optimizer(config: TrainConfig, model: Any) -> torch.optim.Optimizer:
    """AdamW over the trainable (float32) parameters; its states are float32 too."""
    return adamw(model, config.optim.lr, config.optim.weight_decay)


def build_reward_stage(
    config: TrainConfig,
    precision: Precision | None = None,
    continue_from: Continue | None = None,
) -> RewardStage:
    """The configured sources. Those that need the run (`needs_context`: the implicit PRM's
    model on `precision`'s device, Monte-Carlo values played through `continue_from`, a
    judge) are refused without one."""
    context = (
        None
        if precision is None
        else RunContext(config.model, precision, config.steps, continue_from)
    )
    return RewardStage(
        [
            WeightedSource(
                r.label,
                make_source(r.source, context, **r.kwargs),
                r.weight,
                r.scores,
                proxy=not SOURCES[r.source].verified,
            )
            for r in config.rewards
        ]
    )


def enable_activation_checkpointing(model: Any) -> None:
    """Non-reentrant, so LoRA's frozen inputs need no grad hooks. transformers 5 renamed it."""
    enable = getattr(model, "activation_checkpointing_enable", None)
    if enable is not None:
        enable(activation_checkpointing_kwargs={"use_reentrant": False})
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def build_groups(
    config: TrainConfig, tasks: dict[str, TaskSource], snapshot: SolverSnapshot | None = None
) -> GroupBuilder:
    """What makes each step's groups: self-play on the run's env when `selfplay` is set
    (`snapshot`: what scores its proposals, under `selfplay.scorer: snapshot`), else tasks
    drawn from the mixture's envs (`tasks`: each env's task source)."""
    play = config.selfplay
    if play is None:
        rollout = config.rollout
        return TaskGroups(config.mixture, tasks, config.seed, rollout.rollouts_per_task,
                          rollout.tasks_per_step)  # fmt: skip
    domain = domain_class(play.domain)(config.mixture[0].ref, play.proposer)
    pool = TaskPool(domain.references(play.references), play.pool_capacity, play.pool_policy,
                    config.seed)  # fmt: skip
    if (play.scorer == "snapshot") != (snapshot is not None):
        raise ConfigError("selfplay.scorer: snapshot needs the run's snapshot (build_snapshot), "
                          "and only it takes one")  # fmt: skip
    return SelfPlay(domain, pool, play, config.rollout.rollouts_per_task, snapshot)
