"""Generate and compile games with TextWorld's own generator, once per settings: the compiled
game (`.z8`, with the `.json` TextWorld tracks its state by) is kept in a cache folder under
its settings' key. Concurrent makers of one game wait on a file lock; a game appears in the
cache whole or not at all. Runs in the game worker (worker.py), never in the trainer."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import textworld
import textworld.challenges
from textworld import GameOptions
from textworld.generator import compile_game
from textworld.generator import make_game as make_custom_game

from toolgym.envs.textworld.settings import GameSettings

CHALLENGES = {
    "coin_collector": "tw-coin_collector",
    "treasure_hunter": "tw-treasure_hunter",
    "cooking": "tw-cooking",
}


def make_game(settings: GameSettings) -> Any:
    """The textworld.Game these settings describe (deterministic in the settings)."""
    options = GameOptions()
    options.seeds = settings.seed
    if settings.family == "custom":
        options.nb_rooms = settings.world_size
        options.nb_objects = settings.nb_objects
        options.quest_length = settings.quest_length
        options.quest_breadth = settings.quest_breadth
        return make_custom_game(options)
    challenge = textworld.challenges.CHALLENGES[CHALLENGES[settings.family]][1]
    knobs: dict[str, Any] = settings.knobs()
    if settings.family == "cooking":
        knobs |= {"recipe_seed": settings.seed, "split": ""}
    return challenge(knobs, options)


def compile_to(game: Any, path: Path) -> Path:
    """Compile `game` to `path` (a .z8) and its .json beside it, replacing nothing else."""
    options = GameOptions()
    options.path = str(path)
    options.force_recompile = True
    return Path(compile_game(game, options))


def cached_game(settings: GameSettings, cache_dir: Path) -> Path:
    """The compiled game of `settings`, generated on the first call for them."""
    key = settings.key(textworld.__version__)
    return cached(
        cache_dir / settings.family / f"{key}.z8", lambda to: compile_to(make_game(settings), to)
    )


def cached(target: Path, make: Callable[[Path], Path]) -> Path:
    """`target` (a .z8 and its .json), made by `make(scratch path)` if it is not there yet:
    one maker at a time (a file lock), and the game appears whole or not at all."""
    if target.exists():
        return target
    folder = target.parent
    folder.mkdir(parents=True, exist_ok=True)
    with _locked(folder / f"{target.stem}.lock"):
        if target.exists():  # another maker finished while this one waited
            return target
        with tempfile.TemporaryDirectory(dir=folder, prefix=".making-") as scratch:
            made = make(Path(scratch) / target.name)
            os.replace(made.with_suffix(".json"), target.with_suffix(".json"))
            os.replace(made, target)  # the .z8 last: its presence says the game is whole
    return target


def copy_game(source: Path, target: Path) -> None:
    """Copy a compiled game and its .json."""
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source.with_suffix(".json"), target.with_suffix(".json"))
    shutil.copyfile(source, target)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
