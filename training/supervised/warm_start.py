"""The supervised warm start end to end: demonstrations from an env's scripted solver, the
fine-tune, and the policy saved with the env settings later commands reuse. `toolgym sft`,
the quickstart and the benches all run this one function; they only print."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from toolgym.agents.demonstrations import Demonstration, demonstrations
from toolgym.agents.models.loading import check_model_dir, load_model, load_tokenizer
from toolgym.agents.render_vision import make_renderer
from toolgym.agents.vision import ImageEncoder
from toolgym.envs import make, spec
from toolgym.envs.saved_settings import write_env_settings
from toolgym.envs.tasks import TaskSource
from toolgym.errors import ConfigError
from toolgym.training.supervised.sft import SFTConfig, demonstration_nll, sft, sft_draws


@dataclass(frozen=True)
class WarmStart:
    """What to imitate and how long: `episodes` demonstrations of `env_id` (and as many of
    each of `with_envs`, under the same env arguments), `fine_tune`'s epochs over them."""

    env_id: str
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    episodes: int = 200
    fine_tune: SFTConfig = field(default_factory=SFTConfig)
    tool_schemas: bool = True
    """Whether the prompt lists the tools' schemas (the run that follows must say the same;
    the saved env settings carry it)."""
    mistake_rate: float = 0.0
    """The share of demonstrated turns that are wrong moves, kept in context but not
    imitated: a warm start that has seen recoveries."""
    with_envs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Demonstrated:
    """What the demonstrations hold, known before the fine-tune starts."""

    episodes: int
    solved: int
    imitated_turns: int
    mistakes: int


@dataclass(frozen=True)
class WarmStartResult:
    demonstrated: Demonstrated
    losses: list[float]
    """Training loss per epoch."""
    nll_before: float
    nll_after: float
    """Per-token NLL of held-out demonstrations (eval tasks) before and after: it says
    whether the policy learned to read its task, which the training loss can hide."""


def scripted_tasks(env_id: str, kwargs: dict[str, Any]) -> TaskSource:
    """The env's task source, once its scripted solver is known to act."""
    spec(env_id)
    probe = make(env_id, **kwargs)
    try:
        tasks: TaskSource = probe.unwrapped.task_source()
        probe.reset(seed=0, options={"task": tasks.draw("train", 0).task})
        if probe.unwrapped.scripted_action() is None:
            raise ConfigError(
                f"{env_id} has no scripted solver (its scripted_action() returns None), so there "
                "are no demonstrations to learn from; CONTRIBUTING.md shows how to write one"
            )
    finally:
        probe.close()
    return tasks


def warm_start(
    model: Path,
    out: Path,
    plan: WarmStart,
    on_demonstrated: Callable[[Demonstrated], None] | None = None,
    on_epoch: Callable[[int, float, float], None] | None = None,
    on_step: Callable[[int, int, float], None] | None = None,
) -> WarmStartResult:
    """Fine-tune `model` on `plan`'s demonstrations and save it (tokenizer, image processor
    and env settings beside it) to `out`. `on_epoch(epoch, loss, held_out_nll)` and
    `on_step(done, total, loss)` report progress."""
    check_model_dir(model)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file; give a directory for the model")
    kwargs = plan.env_kwargs
    seed = plan.fine_tune.seed
    sources = {name: scripted_tasks(name, kwargs) for name in [plan.env_id, *plan.with_envs]}
    tokenizer = load_tokenizer(model)
    policy = load_model(model)
    images = ImageEncoder.for_model(model, policy.config)
    renderer = make_renderer(tokenizer, images, tool_schemas=plan.tool_schemas)
    demos: list[Demonstration] = []
    held_out: list[Demonstration] = []
    for name, tasks in sources.items():
        train, held_out_draws = sft_draws(tasks, seed, plan.episodes)
        factory = partial(make, name, **kwargs)
        demos += demonstrations(
            factory, renderer, train, mistake_rate=plan.mistake_rate, env_id=name
        )
        held_out += demonstrations(factory, renderer, held_out_draws, env_id=name)
    imitated = sum(sum(d.imitate) for d in demos)
    demonstrated = Demonstrated(
        episodes=len(demos),
        solved=sum(d.trajectory.success for d in demos),
        imitated_turns=imitated,
        mistakes=sum(len(d.imitate) for d in demos) - imitated,
    )
    if on_demonstrated is not None:
        on_demonstrated(demonstrated)

    losses, before, after = fine_tune(
        policy, tokenizer, images, demos, held_out, plan.fine_tune, on_epoch, on_step
    )
    save_policy(policy, tokenizer, images, out)
    write_env_settings(out, plan.env_id, kwargs, plan.tool_schemas)
    return WarmStartResult(demonstrated, losses, before, after)


def fine_tune(
    policy: Any, tokenizer: Any, images: ImageEncoder | None, demos: list[Demonstration],
    held_out: list[Demonstration], config: SFTConfig,
    on_epoch: Callable[[int, float, float], None] | None = None,
    on_step: Callable[[int, int, float], None] | None = None,
) -> tuple[list[float], float, float]:  # fmt: skip
    """SFT on `demos`: the loss per epoch, and the held-out NLL per token before and after."""

    def held_out_nll() -> float:
        return demonstration_nll(policy, held_out, tokenizer.pad_token_id, images)

    before = held_out_nll()

    def epoch_done(epoch: int, loss: float) -> None:
        if on_epoch is not None:
            on_epoch(epoch, loss, held_out_nll())

    losses = sft(
        policy, demos, tokenizer.pad_token_id, config, on_epoch=epoch_done, images=images,
        on_step=on_step,
    )  # fmt: skip
    return losses, before, held_out_nll()


def save_policy(policy: Any, tokenizer: Any, images: ImageEncoder | None, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    policy.save_pretrained(out)
    tokenizer.save_pretrained(out)
    if images is not None:  # a vision-language model reads images through it
        images.processor.save_pretrained(out)
