"""`toolgym eval`: play N episodes of an env with a policy engine and report how it did."""

from __future__ import annotations

import time
from contextlib import ExitStack
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
    plays: int = 1,
) -> int:
    from toolgym.agents.collector import require_unmasked, summarize
    from toolgym.agents.evaluation import EvalPlan, evaluate, setting
    from toolgym.agents.trajectory import write_jsonl
    from toolgym.cli.train import env_kwargs

    plan = EvalPlan(
        env_id, model, env_kwargs(env_args), engine_name, base_url, tokenizer, episodes, split,
        seed, max_tokens, temperature, max_turns, max_context, concurrency, tool_schemas, plays,
    )  # fmt: skip
    chosen = setting(plan)  # unknown ids and bad env arguments fail here, before any model
    out = out or Path("runs") / f"eval-{env_id.replace('/', '_').replace(':', '_')}.jsonl"
    check_writable(out)  # before the evaluation that would fill it
    for line in chosen.merged.notes(tokenizer or model) if chosen.merged else []:
        console.print(line, markup=False)
    start = time.perf_counter()
    with ExitStack() as stack:
        progress = EvalProgress(plan, stack)
        trajectories = evaluate(plan, chosen, progress.draws, progress.episode)
    stats = summarize(trajectories, time.perf_counter() - start)
    path = write_jsonl(trajectories, out)
    console.print(results_table(f"{env_id} · {engine_name} · {model}", stats))
    console.print(f"trajectories: {path}")
    if stats.tool_exception_rate:
        console.print(
            f"[red]{stats.tool_exception_rate:.1%} of tool calls raised[/] (a bug in the env's "
            "tools, not the policy's mistake); the trajectories' `error` fields say where"
        )
    require_unmasked(trajectories, f"evaluating {env_id}")
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
