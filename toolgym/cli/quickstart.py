"""`toolgym quickstart`, the README's main job: Maze episodes played by the scripted solver
through the full tool API (parser -> tools -> observations) on an EnvPool, one transcript
shown, and a summary. The trainer will replace the scripted solver with a learned policy."""

from __future__ import annotations

import asyncio
import time

from rich.table import Table

from toolgym.cli.show import console, show_message

ENV_ID = "toolgym/Maze-v0"


def quickstart_command(episodes: int, seed: int) -> int:
    from toolgym.envs import EnvPool, scripted_policy

    async def play() -> list:
        async with EnvPool.from_id(ENV_ID, slots=min(episodes, 64), step_timeout_s=10.0) as pool:
            return await pool.run(scripted_policy, range(seed, seed + episodes))

    start = time.perf_counter()
    results = asyncio.run(play())
    elapsed = time.perf_counter() - start
    first = results[0]
    console.rule(f"{ENV_ID}, seed {first.seed}: the scripted solver's episode")
    for step in first.steps:
        show_message({"role": "assistant", "content": step.action})
        for m in step.observation:
            show_message(m)
    solved = [r for r in results if r.total_reward > 0]
    steps = sum(len(r.steps) for r in results)
    table = Table(title=f"{len(results)} episodes of {ENV_ID} through EnvPool")
    for column in ("solved", "mean turns", "invalid actions", "infra errors", "env steps/s"):
        table.add_column(column)
    invalid = sum(not s.info["valid_action"] for r in results for s in r.steps)
    table.add_row(
        f"{len(solved)}/{len(results)}",
        f"{steps / len(results):.1f}",
        str(invalid),
        str(sum(r.masked for r in results)),
        f"{steps / elapsed:,.0f}",
    )
    console.print(table)
    return 0 if len(solved) == len(results) else 1
