"""Game files a user brings: compiled TextWorld games, a `.z8` (or another Z-machine
version) with the `.json` TextWorld writes beside it, which is how it tracks the game's state,
its admissible commands and its winning policy."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from toolgym.errors import ConfigError

_ZMACHINE = re.compile(r"\.z[1-8]$")


def game_path(name: Any, base: Path) -> Path:
    """The game file a task names (relative to `base`), checked to be playable here."""
    if not isinstance(name, str) or not name:
        raise ConfigError(f"a task's game is a file path, not {name!r}")
    path = Path(name) if Path(name).is_absolute() else base / name
    if path.suffix == ".ulx":
        raise ConfigError(
            f"{name}: Glulx games (.ulx) cannot be played with TextWorld 1.7, which runs "
            "Z-machine games (.z8); compile the game to .z8"
        )
    if path.name.endswith(".tw-pddl"):
        raise ConfigError(
            f"{name}: PDDL games (ALFWorld's .tw-pddl) are not played by this env; the text "
            "games guide says what it would take"
        )
    if not _ZMACHINE.search(path.name):
        raise ConfigError(f"{name}: a game is a compiled Z-machine file (.z8)")
    if not path.is_file():
        raise ConfigError(f"{name}: no such game file")
    if not path.with_suffix(".json").is_file():
        raise ConfigError(
            f"{name}: no {path.with_suffix('.json').name} beside it; TextWorld-made games come "
            "with one, and the env reads the game's state from it"
        )
    return path


def game_files(folder: Path) -> list[str]:
    """Every playable game in `folder` (recursively), sorted, named relative to the folder
    (so a game's identity does not depend on where the folder lies, or on the directory a
    command runs from); a clear error when none is."""
    if not folder.is_dir():
        raise ConfigError(f"games folder {folder} does not exist")
    found = sorted(p for p in folder.rglob("*") if _ZMACHINE.search(p.name) or p.suffix == ".ulx")
    if not found:
        raise ConfigError(f"no games (.z8) in {folder}")
    names = [p.relative_to(folder).as_posix() for p in found]
    for name in names:
        game_path(name, folder)
    return names
