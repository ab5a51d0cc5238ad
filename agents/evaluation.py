"""Evaluating a policy outside training: N episodes of an env's held-out split played by any
engine, with the env settings saved beside the model applied as `toolgym eval` applies them;
or played by your own agent (a function or a command) against the policy behind the
gateway, scored as a harness run scores it. The command only prints what this returns; a
Python caller gets the same episodes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from toolgym.agents.collector import GroupRequest, RolloutCollector, requests_for, summarize
from toolgym.agents.engines import SamplingParams, engine_class, make_engine
from toolgym.agents.engines.base import Capabilities, Engine, HoldsTokenizer, ReadsImages
from toolgym.agents.gateway.choose_harness import make_harness
from toolgym.agents.gateway.collector import HarnessCollector, HarnessLimits
from toolgym.agents.gateway.harness import Harness
from toolgym.agents.gateway.result_check import ResultCheck, result_check
from toolgym.agents.gateway.server import Gateway
from toolgym.agents.gateway.session import SessionSettings
from toolgym.agents.models.loading import load_tokenizer
from toolgym.agents.render import ChatRenderer
from toolgym.agents.render_vision import make_renderer
from toolgym.agents.rollout import RolloutConfig
from toolgym.agents.runtime import Runtime
from toolgym.agents.trajectory import Trajectory, TrajectoryGroup
from toolgym.envs import EnvRef, spec
from toolgym.envs.saved_settings import MergedSettings, merge_env_kwargs, read_env_settings
from toolgym.errors import ConfigError


@dataclass(frozen=True, kw_only=True)
class EvalPlan:
    env_id: str
    model: str
    """A model directory, or the served model's name for engine openai."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """The env's arguments, on top of those saved with the model for the same env."""
    engine: str = "hf"
    base_url: str | None = None
    """The server for engine openai."""
    tokenizer: str | None = None
    """Where the prompts' tokenizer is, when the model is not a directory (a served model)."""
    episodes: int = 32
    """Tasks: the first this many of the split."""
    split: str = "eval"
    seed: int = 0
    max_tokens: int = 256
    temperature: float = 0.0
    max_turns: int | None = None
    max_context_tokens: int = 4096
    concurrency: int = 32
    tool_schemas: bool | None = None
    """Whether prompts list the tools' schemas; None: as saved with the model, else yes."""
    plays: int = 1
    """Episodes of each task (sampled evaluation): success is then an item's share of its
    plays, and the rate's interval stays one over items."""
    agent: str | None = None
    """Your agent plays instead of the env's loop: "path/to/file.py:function" or
    "package.module:function", called as agent(task, base_url, api_key)."""
    command: tuple[str, ...] | None = None
    """Or a command line run once per episode (it reads OPENAI_BASE_URL, OPENAI_API_KEY and
    TOOLGYM_TASK and prints its result), isolated with bubblewrap."""
    worker: bool = False
    """The command as long-lived workers (one per episode slot, agents/gateway/worker.py's
    line protocol) instead of once per episode."""
    answer_check: str = "env"
    """How an agent's result is checked: env (the env's `answer_tool`), exact, contains,
    number, or "package.module:function"."""
    answer_tool: str = "answer"

    @property
    def by_agent(self) -> bool:
        return self.agent is not None or self.command is not None


@dataclass(frozen=True)
class Setting:
    """The env as the evaluation plays it, decided before any model loads."""

    env_kwargs: dict[str, Any]
    tool_schemas: bool
    merged: MergedSettings | None
    """The saved settings merged in (None: the model saved none for this env)."""


def setting(plan: EvalPlan) -> Setting:
    """The env settings saved with the model for this env, under the plan's own; an unknown
    env id fails here, before any model loads."""
    spec(plan.env_id)
    saved = read_env_settings(plan.tokenizer or plan.model, plan.env_id)
    if saved is None:
        tool_schemas = True if plan.tool_schemas is None else plan.tool_schemas
        return Setting(dict(plan.env_kwargs), tool_schemas, None)
    merged = merge_env_kwargs(saved.env_kwargs, dict(plan.env_kwargs))
    tool_schemas = saved.tool_schemas if plan.tool_schemas is None else plan.tool_schemas
    return Setting(merged.kwargs, tool_schemas, merged)


def prompt_tokenizer(source: str, served: bool) -> Any:
    """The tokenizer prompts are rendered with: a local directory, or a name already in the
    local cache. Never a download: a served model's name is not a tokenizer (`served`: the
    engine holds no tokenizer of its own)."""
    try:
        return load_tokenizer(source)
    except ConfigError:
        hint = (
            "pass --tokenizer DIR, the directory of the served model's tokenizer (the engine "
            "renders prompts itself, so it needs one)"
            if served
            else "pass a model directory"
        )
        raise ConfigError(f"no tokenizer found at '{source}'; {hint}") from None


def evaluate(
    plan: EvalPlan,
    chosen: Setting,
    on_draws: Callable[[int], None] | None = None,
    on_episode: Callable[[Trajectory], None] | None = None,
) -> list[Trajectory]:
    """The plan's episodes, played with `chosen` env settings: the first `episodes` tasks
    of the split (all it holds if fewer: `on_draws` hears how many before any is played),
    each played `plays` times."""
    declared: Capabilities = engine_class(plan.engine).capabilities
    served = "base_url" in declared.requires
    if served and not plan.base_url:
        raise ConfigError(
            f"--engine {plan.engine} needs --base-url (e.g. http://127.0.0.1:8000/v1)"
        )
    with Runtime() as runtime:
        pool = runtime.pool_for(EnvRef(plan.env_id, plan.env_id, chosen.env_kwargs))
        env = runtime.run(pool.acquire())  # a bad argument stops here
        tasks = env.unwrapped.task_source()
        pool.release(env)  # and serves the first episode
        draws = tasks.head(plan.split, plan.episodes)
        if not draws:
            raise ConfigError(f"{plan.env_id} has no {plan.split} tasks to evaluate on")
        if on_draws is not None:
            on_draws(len(draws))
        # the agent and its check are found before any model loads
        workers = plan.concurrency if plan.worker else 0
        harness = make_harness(plan.agent, plan.command, workers=workers) if plan.by_agent else None
        check = result_check(plan.answer_check, plan.answer_tool) if harness else None
        engine_args: dict[str, Any] = {"model": plan.model}
        if served:
            engine_args["base_url"] = plan.base_url
        tokenless = not declared.tokenizer  # behind a server: prompts need a tokenizer here
        given = prompt_tokenizer(plan.tokenizer, tokenless) if plan.tokenizer else None
        engine = make_engine(plan.engine, **engine_args)
        held = cast(HoldsTokenizer, engine).tokenizer if declared.tokenizer else None
        tokenizer = given or held or prompt_tokenizer(plan.model, tokenless)
        images = cast(ReadsImages, engine).images if declared.images else None
        renderer = make_renderer(tokenizer, images, tool_schemas=chosen.tool_schemas)
        sampling = SamplingParams(
            max_tokens=plan.max_tokens, temperature=plan.temperature, seed=plan.seed
        )
        requests = requests_for(pool.ref, draws, plan.plays)

        async def run() -> list[Any]:
            try:
                if harness is not None and check is not None:
                    played = AgentPlay(harness, check, engine, renderer, sampling)
                    return await played.collect(plan, runtime, requests, on_episode)
                config = RolloutConfig(
                    sampling, max_turns=plan.max_turns, max_context_tokens=plan.max_context_tokens
                )
                collector = RolloutCollector(engine, renderer, config, runtime.pool_for,
                                             concurrency=plan.concurrency, on_episode=on_episode)  # fmt: skip
                return await collector.collect(requests)
            finally:
                await engine.aclose()

        return [t for g in runtime.run(run()) for t in g.trajectories]


@dataclass(frozen=True)
class AgentPlay:
    """The user's agent against the policy behind a gateway, each result checked as a
    harness run checks it."""

    harness: Harness
    check: ResultCheck
    engine: Engine
    renderer: ChatRenderer
    sampling: SamplingParams

    async def collect(
        self, plan: EvalPlan, runtime: Runtime, requests: list[GroupRequest],
        on_episode: Callable[[Trajectory], None] | None,
    ) -> list[TrajectoryGroup]:  # fmt: skip
        gateway = Gateway(
            self.engine, self.renderer, self.renderer.tokenizer, concurrency=plan.concurrency
        )
        await gateway.start()
        await runtime.resources.get("harness", lambda: self.harness)  # its workers closed with it
        try:
            settings = SessionSettings(
                sampling=self.sampling, max_calls=plan.max_turns or SessionSettings.max_calls,
                max_context_tokens=plan.max_context_tokens, hold_calls=False,
            )  # fmt: skip
            collector = HarnessCollector(
                gateway, self.harness, self.check, settings, runtime.pool_for,
                HarnessLimits(concurrency=plan.concurrency), on_episode,
            )  # fmt: skip
            return await collector.collect(requests)
        finally:
            await gateway.aclose()


__all__ = ["EvalPlan", "Setting", "evaluate", "prompt_tokenizer", "setting", "summarize"]
