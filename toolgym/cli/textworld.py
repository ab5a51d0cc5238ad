"""`toolgym textworld generate`: a folder of compiled games and a tasks.jsonl the env reads,
from game specs (one JSON object a line; each refused one says why) or from generation
settings (a family, its knobs and a run of seeds)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from toolgym.cli.show import console
from toolgym.errors import ConfigError, one_line

if TYPE_CHECKING:
    from toolgym.envs.textworld.settings import GameSettings
    from toolgym.tools.tool_source import Shared

BUILD_TIMEOUT_S = 60.0
"""The most one spec may take to plan and compile (the planner stops itself sooner)."""

TEXTWORLD_MAX_JOBS = 64
"""Game workers `textworld generate` runs at most: each is a forked game process of ~70 MB."""


def generate_command(
    out: Path,
    specs: Path | None,
    game: str | None,
    count: int,
    first_seed: int,
    eval_count: int,
    workers: int = 1,
) -> int:
    if (specs is None) == (game is None):
        raise ConfigError("give --from SPECS.jsonl or --game SETTINGS (one of them)")
    out.mkdir(parents=True, exist_ok=True)
    if specs is not None:
        if not specs.is_file():
            raise ConfigError(f"spec file {specs} does not exist")
        text = specs.read_text()
        rows = asyncio.run(_hosted(lambda shared: _from_specs(text, out, shared)))
    else:
        if count < 1 or not 0 <= eval_count < count:
            raise ConfigError("--count must be 1 or more and --eval below it")
        rows = asyncio.run(
            _hosted(
                lambda shared: _from_settings(game or "{}", count, first_seed, out, workers, shared)
            )
        )
        for row in rows[count - eval_count :]:
            row["split"] = "eval"
    (out / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    console.print(f"{len(rows)} games in {out}; tasks: {out / 'tasks.jsonl'}")
    return 0 if rows else 1


async def _hosted(
    make: Callable[[Shared], Awaitable[list[dict[str, Any]]]],
) -> list[dict[str, Any]]:
    """`make(shared)`, its game workers forked from one game host that the command owns and
    stops when it is done."""
    from toolgym.envs.resources import Resources

    resources = Resources()
    try:
        return await make(resources.get)
    finally:
        await resources.aclose()


async def _from_specs(text: str, out: Path, shared: Shared) -> list[dict[str, Any]]:
    from toolgym.envs.textworld.process import GameError, GameProcess
    from toolgym.envs.textworld.specs import parse_spec, read_specs
    from toolgym.tools.tool import InfraError

    rows, refused = [], 0
    worker = GameProcess(shared)
    try:
        for number, raw in read_specs(text):
            try:
                if isinstance(raw, ConfigError):
                    raise raw
                spec = parse_spec(raw)
                made = await worker.request(
                    {"op": "build", "spec": raw, "path": str(out / f"{spec.file_stem()}.z8")},
                    BUILD_TIMEOUT_S,
                )
            except (ConfigError, GameError, InfraError) as exc:
                refused += 1
                name = raw.get("name") if isinstance(raw, dict) else None
                label = f" ({one_line(name, 40)})" if name else ""
                console.print(escape(f"refused  line {number}{label}: {one_line(exc)}"))
                continue
            rows.append({"game": Path(made["path"]).name})
            steps = len(made["walkthrough"])
            console.print(
                f"built    line {number} ({spec.name}): {steps} step{'s' if steps != 1 else ''} to win"
            )
    finally:
        await worker.close()
    console.print(f"{len(rows)} built, {refused} refused")
    return rows


async def _from_settings(
    game: str, count: int, first_seed: int, out: Path, jobs: int, shared: Shared
) -> list[dict[str, Any]]:
    """Games `first_seed` .. + count of the settings, `jobs` game workers at once (making a
    game is mostly Inform 7 compiling it, one core each); rows in seed order."""
    from toolgym.envs.textworld.settings import GameSettings

    try:
        raw = json.loads(game)
    except ValueError as exc:
        raise ConfigError(
            f'--game is JSON settings, e.g. \'{{"family": "cooking"}}\': {exc}'
        ) from None
    settings = GameSettings.parse(raw, "--game")
    seeds = list(range(first_seed, first_seed + count))
    shares = [seeds[k::jobs] for k in range(min(jobs, count))]
    made = await asyncio.gather(*(_make_games(settings, share, out, shared) for share in shares))
    names = {seed: name for share in made for seed, name in share.items()}
    return [{"game": names[seed]} for seed in seeds if seed in names]


async def _make_games(
    settings: GameSettings, seeds: list[int], out: Path, shared: Shared
) -> dict[int, str]:
    """The game of each seed, made by one worker and copied into `out`: seed -> file name
    (a seed TextWorld's generator fails on is skipped, and says so)."""
    from toolgym.envs.textworld.env import default_cache_dir
    from toolgym.envs.textworld.generate import copy_game
    from toolgym.envs.textworld.process import GameError, GameProcess

    names = {}
    worker = GameProcess(shared)
    try:
        for seed in seeds:
            one = settings.with_seed(seed)
            try:
                made = await worker.request(
                    {
                        "op": "generate",
                        "settings": one.model_dump(),
                        "cache": str(default_cache_dir()),
                    },
                    BUILD_TIMEOUT_S * 5,
                )
            except GameError as exc:
                console.print(escape(f"skipped  seed {seed}: {one_line(exc)}"))
                continue
            names[seed] = f"{one.family}-{seed}.z8"
            copy_game(Path(made["path"]), out / names[seed])
    finally:
        await worker.close()
    return names


def textworld_generate(
    out: Annotated[Path, typer.Option(help="Folder for the games (.z8, .json) and tasks.jsonl.")],
    specs: Annotated[
        Path | None,
        typer.Option("--from", help="Game specs, one JSON object a line (docs: text games)."),
    ] = None,
    game: Annotated[
        str | None,
        typer.Option(help='Generation settings as JSON, e.g. \'{"family": "cooking", "go": 6}\'.'),
    ] = None,
    count: Annotated[int, typer.Option(help="With --game: how many games (seeds).")] = 10,
    first_seed: Annotated[int, typer.Option(help="With --game: the first seed.")] = 0,
    eval_count: Annotated[
        int, typer.Option("--eval", help="With --game: the last N games form the eval split.")
    ] = 0,
    jobs: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=TEXTWORLD_MAX_JOBS,
            help=f"With --game: games made at once (default: the CPUs, at most {TEXTWORLD_MAX_JOBS}).",
        ),
    ] = None,
) -> None:
    """Compile games into a folder with a tasks.jsonl for the env's tasks= setting."""

    workers = jobs or min(os.cpu_count() or 1, TEXTWORLD_MAX_JOBS)
    raise typer.Exit(
        generate_command(
            out=out,
            specs=specs,
            game=game,
            count=count,
            first_seed=first_seed,
            eval_count=eval_count,
            workers=workers,
        )
    )
