"""`toolgym eval`: play N episodes of an env with a policy engine and report how it did."""

from __future__ import annotations

import time
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from toolgym.cli.options import (
    AgentCommand,
    AgentPath,
    AgentWorker,
    AnswerCheck,
    AnswerTool,
    EnvArgs,
    Plays,
    ToolSchemas,
)
from toolgym.cli.progress import Ticker
from toolgym.cli.show import console
from toolgym.cli.tables import print_table

if TYPE_CHECKING:
    from toolgym.agents.evaluation import EvalPlan


def eval_command(plan: EvalPlan, out: Path | None) -> int:
    """Play the plan's episodes, print how the policy did, keep them in `out`."""
    from toolgym.agents.collector import require_unmasked, summarize
    from toolgym.agents.evaluation import evaluate, setting
    from toolgym.agents.trajectory import write_jsonl

    chosen = setting(plan)  # unknown ids and bad env arguments fail here, before any model
    out = out or Path("runs") / f"eval-{plan.env_id.replace('/', '_').replace(':', '_')}.jsonl"
    check_writable(out)  # before the evaluation that would fill it
    for line in chosen.merged.notes(plan.tokenizer or plan.model) if chosen.merged else []:
        console.print(line, markup=False)
    start = time.perf_counter()
    with ExitStack() as stack:
        progress = EvalProgress(plan, stack)
        trajectories = evaluate(plan, chosen, progress.draws, progress.episode)
    stats = summarize(trajectories, time.perf_counter() - start)
    path = write_jsonl(trajectories, out)
    played = f" · {plan.agent or ' '.join(plan.command or ())}" if plan.by_agent else ""
    print_table(
        results_table(f"{plan.env_id} · {plan.engine} · {plan.model}{played}", stats), console
    )
    console.print(f"trajectories: {path}")
    if stats.tool_exception_rate:
        console.print(
            f"[red]{stats.tool_exception_rate:.1%} of tool calls raised[/] (a bug in the env's "
            "tools, not the policy's mistake); the trajectories' `error` fields say where"
        )
    require_unmasked(trajectories, f"evaluating {plan.env_id}")
    return 0


class EvalProgress:
    """What a user sees while the evaluation plays: how many tasks the split holds when it
    is fewer than asked, then a bar (a line off a terminal) with the running figures."""

    def __init__(self, plan: Any, stack: ExitStack) -> None:
        self.plan, self.stack = plan, stack
        self.ended: list[Any] = []
        self.started = time.perf_counter()
        self.ticker: Ticker | None = None

    def draws(self, played: int) -> None:
        plan = self.plan
        if played < plan.episodes:
            console.print(
                f"the {plan.split} split of {plan.env_id} holds {played} tasks: playing those "
                f"{played}, not {plan.episodes}"
            )
        episodes = played * plan.plays
        self.ticker = self.stack.enter_context(Ticker(f"evaluating {plan.env_id}", episodes))

    def episode(self, trajectory: Any) -> None:
        self.ended.append(trajectory)
        if self.ticker is not None:
            self.ticker.advance(len(self.ended), self.figures)

    def figures(self) -> str:  # over every ended episode: only when drawn
        from toolgym.agents.collector import summarize

        s = summarize(self.ended, time.perf_counter() - self.started)
        return (
            f"success {s.success_rate:.1%}  valid calls {s.valid_action_rate:.1%}  "
            f"{s.tokens_per_s:,.0f} tok/s"
        )


def results_table(title: str, stats: Any) -> Table:
    table = Table(title=title)
    for column in ("episodes", "distinct items", "success", "95% interval", "mean turns",
                   "valid tool calls", "tokens / episode", "masked", "tokens/s"):  # fmt: skip
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
    return table


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


def evaluate(
    env_id: Annotated[str, typer.Argument(help="Env id, e.g. toolgym/Maze-v0")],
    model: Annotated[str, typer.Option(help="Model directory (hf) or served model name (openai).")],
    engine: Annotated[str, typer.Option(help="hf, openai or vllm.")] = "hf",
    base_url: Annotated[str | None, typer.Option(help="Server URL for --engine openai.")] = None,
    tokenizer: Annotated[
        str | None, typer.Option(help="Tokenizer to render prompts with (default: --model).")
    ] = None,
    n: Annotated[int, typer.Option("-n", min=1, help="Tasks: the first n tasks of --split.")] = 50,
    plays: Plays = 1,
    seed: Annotated[int, typer.Option(min=0, help="Seeds the sampling.")] = 0,
    split: Annotated[
        str, typer.Option(help="Task split to play: eval (held out from training), train, test.")
    ] = "eval",
    max_tokens: Annotated[int, typer.Option(min=1, help="Tokens per model turn.")] = 256,
    temperature: Annotated[
        float,
        typer.Option(
            min=0.0,
            help="Sampling temperature: 0 is greedy, as the evaluation inside a training run "
            "(eval.temperature); 1 samples as training rollouts do.",
        ),
    ] = 0.0,
    max_turns: Annotated[
        int | None, typer.Option(min=1, help="Turn limit (default: the env's).")
    ] = None,
    max_context: Annotated[int, typer.Option(min=16, help="Token budget per episode.")] = 4096,
    concurrency: Annotated[int, typer.Option(min=1, help="Episodes at once.")] = 32,
    out: Annotated[
        Path | None, typer.Option(help="Trajectories JSONL (default runs/eval-ENV.jsonl).")
    ] = None,
    env_arg: EnvArgs = None,
    tool_schemas: ToolSchemas = None,
    agent: AgentPath = None,
    command: AgentCommand = None,
    worker: AgentWorker = False,
    answer_check: AnswerCheck = "env",
    answer_tool: AnswerTool = "answer",
) -> None:
    """Evaluate a policy on an env, or your agent with the policy behind it: success, turns,
    tool-call validity, tokens."""
    import shlex

    from toolgym.agents.evaluation import EvalPlan
    from toolgym.cli.train import env_kwargs

    plan = EvalPlan(
        env_id=env_id, model=model, env_kwargs=env_kwargs(env_arg or []), engine=engine,
        base_url=base_url, tokenizer=tokenizer, episodes=n, split=split, seed=seed,
        max_tokens=max_tokens, temperature=temperature, max_turns=max_turns,
        max_context_tokens=max_context, concurrency=concurrency, tool_schemas=tool_schemas,
        plays=plays, agent=agent, command=None if command is None else tuple(shlex.split(command)),
        worker=worker, answer_check=answer_check, answer_tool=answer_tool,
    )  # fmt: skip
    raise typer.Exit(eval_command(plan, out))
