"""`toolgym eval`: play N episodes of an env with a policy engine and report how it did."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rich.table import Table

from toolgym.cli.progress import Ticker
from toolgym.cli.show import console


def eval_command(
    env_id: str,
    engine_name: str,
    model: str,
    base_url: str | None,
    tokenizer: str | None,
    episodes: int,
    seed: int,
    max_tokens: int,
    temperature: float,
    max_turns: int | None,
    max_context: int,
    concurrency: int,
    out: Path | None,
    env_args: list[str],
    tool_schemas: bool | None = True,
    split: str = "eval",
) -> int:
    from toolgym.agents.collector import (
        RolloutCollector,
        requests_for,
        require_unmasked,
        summarize,
    )
    from toolgym.agents.engines import SamplingParams, make_engine
    from toolgym.agents.engines.base import HoldsTokenizer, ReadsImages
    from toolgym.agents.render_vision import make_renderer
    from toolgym.agents.rollout import RolloutConfig
    from toolgym.agents.runtime import Runtime
    from toolgym.agents.trajectory import write_jsonl
    from toolgym.cli.train import env_kwargs
    from toolgym.envs import EnvRef, spec
    from toolgym.envs.saved_settings import merge_env_kwargs, read_env_settings
    from toolgym.errors import ConfigError

    spec(env_id)  # unknown ids and bad env arguments fail here, before any model loads
    out = out or Path("runs") / f"eval-{env_id.replace('/', '_').replace(':', '_')}.jsonl"
    check_writable(out)  # before the evaluation that would fill it
    kwargs = env_kwargs(env_args)
    saved = read_env_settings(tokenizer or model, env_id)
    if saved is not None:  # as the model was fine-tuned, unless told otherwise
        merged = merge_env_kwargs(dict(saved.get("env_kwargs") or {}), kwargs)
        for line in merged.notes(tokenizer or model):
            console.print(line, markup=False)
        kwargs = merged.kwargs
        tool_schemas = saved["tool_schemas"] if tool_schemas is None else tool_schemas
    tool_schemas = True if tool_schemas is None else tool_schemas
    with Runtime() as runtime:
        pool = runtime.pool_for(EnvRef(env_id, env_id, kwargs))  # a bad argument stops here
        env: Any = runtime.run(pool.acquire())
        tasks = env.unwrapped.task_source()
        pool.release(env)  # and serves the first episode
        draws = tasks.head(split, episodes)
        if not draws:
            raise ConfigError(f"{env_id} has no {split} tasks to evaluate on")
        if len(draws) < episodes:
            console.print(
                f"the {split} split of {env_id} holds {len(draws)} tasks: playing those "
                f"{len(draws)}, not {episodes}"
            )
        engine_args: dict[str, Any] = {"model": model}
        if engine_name == "openai":
            if not base_url:
                raise ConfigError(
                    "--engine openai needs --base-url (e.g. http://127.0.0.1:8000/v1)"
                )
            engine_args["base_url"] = base_url
        given = load_tokenizer(tokenizer, engine_name) if tokenizer else None  # before any model
        engine = make_engine(engine_name, **engine_args)
        held = engine.tokenizer if isinstance(engine, HoldsTokenizer) else None
        tok = given or held or load_tokenizer(model, engine_name)
        config = RolloutConfig(
            SamplingParams(max_tokens=max_tokens, temperature=temperature, seed=seed),
            max_turns=max_turns,
            max_context_tokens=max_context,
        )
        collector = RolloutCollector(
            engine,
            make_renderer(
                tok,
                engine.images if isinstance(engine, ReadsImages) else None,
                tool_schemas=tool_schemas,
            ),
            config,
            runtime.pool_for,
            concurrency=concurrency,
        )
        requests = requests_for(pool.ref, draws)

        async def run() -> list[Any]:
            try:
                return await collector.collect(requests)
            finally:
                await engine.aclose()

        start = time.perf_counter()
        with Ticker(f"evaluating {env_id}", len(draws)) as ticker:
            ended: list[Any] = []

            def figures() -> str:  # over every ended episode: only when drawn
                s = summarize(ended, time.perf_counter() - start)
                return (
                    f"success {s.success_rate:.1%}  valid calls {s.valid_action_rate:.1%}  "
                    f"{s.tokens_per_s:,.0f} tok/s"
                )

            def on_episode(trajectory: Any) -> None:
                ended.append(trajectory)
                ticker.advance(len(ended), figures)

            collector.on_episode = on_episode
            trajectories = [t for g in runtime.run(run()) for t in g.trajectories]
    stats = summarize(trajectories, time.perf_counter() - start)
    path = write_jsonl(trajectories, out)
    table = Table(title=f"{env_id} · {engine_name} · {model}")
    for column in (
        "episodes",
        "distinct items",
        "success",
        "95% interval",
        "mean turns",
        "valid tool calls",
        "tokens / episode",
        "masked",
        "tokens/s",
    ):
        table.add_column(column)
    low, high = stats.success_interval
    table.add_row(
        str(stats.episodes),
        str(stats.items),
        f"{stats.success_rate:.1%}",
        f"{low:.1%} to {high:.1%}",
        f"{stats.mean_turns:.2f}",
        f"{stats.valid_action_rate:.1%}",
        f"{stats.generated_tokens / max(stats.episodes, 1):.1f}",
        str(stats.masked),
        f"{stats.tokens_per_s:,.0f}",
    )
    console.print(table)
    console.print(f"trajectories: {path}")
    if stats.tool_exception_rate:
        console.print(
            f"[red]{stats.tool_exception_rate:.1%} of tool calls raised[/] (a bug in the env's "
            "tools, not the policy's mistake); the trajectories' `error` fields say where"
        )
    require_unmasked(trajectories, f"evaluating {env_id}")
    return 0


def load_tokenizer(source: str, engine: str) -> Any:
    """The tokenizer prompts are rendered with: a local directory, or a name already in the
    local cache. Never a download: a served model's name is not a tokenizer."""
    from toolgym.agents.loading import load_tokenizer as load
    from toolgym.errors import ConfigError

    try:
        return load(source)
    except ConfigError:
        hint = (
            "pass --tokenizer DIR, the directory of the served model's tokenizer (the engine "
            "renders prompts itself, so it needs one)"
            if engine == "openai"
            else "pass a model directory"
        )
        raise ConfigError(f"no tokenizer found at '{source}'; {hint}") from None


def check_writable(path: Path) -> None:
    """Raise ConfigError now if `path` cannot be written as a file."""
    from toolgym.errors import ConfigError

    if path.is_dir():
        raise ConfigError(f"--out {path} is a directory; give a file path (e.g. {path}/eval.jsonl)")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a"):
            pass
    except OSError as exc:
        raise ConfigError(f"--out {path} cannot be written: {exc.strerror}") from None
