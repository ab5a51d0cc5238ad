"""What a generated game is made from: a family, its knobs and a seed. Plain data, checked
here (not in TextWorld's generator), so a wrong knob is a clear error before any work, and
the cache key names exactly the settings that shape the game."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from toolgym.errors import ConfigError

Family = Literal["custom", "coin_collector", "treasure_hunter", "cooking"]

MAX_ROOMS = 100
"""TextWorld 1.7 compiles to the Z-machine only, whose games hold at most 100 rooms."""

FAMILY_FIELDS: dict[str, tuple[str, ...]] = {
    "custom": ("world_size", "nb_objects", "quest_length", "quest_breadth"),
    "coin_collector": ("level",),
    "treasure_hunter": ("level",),
    "cooking": ("recipe", "take", "go", "open", "cook", "cut", "drop"),
}


class GameSettings(BaseModel):
    """One generated game. `custom` is TextWorld's own generator (rooms, objects, a quest of
    `quest_length` actions, `quest_breadth` side quests); the others are its challenge
    families: coin_collector (level 1-100: a chain of rooms to the coin), treasure_hunter
    (level 1-30: find an object; doors, containers and keys from level 11), cooking (gather
    `take` of a recipe's `recipe` ingredients across `go` rooms, optionally opening, cooking,
    cutting, or with a limited inventory)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    family: Family = "custom"
    seed: int = Field(0, ge=0, lt=2**31)
    world_size: int = Field(3, ge=1, le=MAX_ROOMS)
    nb_objects: int = Field(4, ge=0, le=200)
    quest_length: int = Field(2, ge=1, le=30)
    quest_breadth: int = Field(1, ge=1, le=5)
    level: int = Field(1, ge=1, le=100)
    recipe: int = Field(1, ge=1, le=5)
    take: int = Field(1, ge=1, le=5)
    go: Literal[1, 6, 9, 12] = 1
    open: bool = False
    cook: bool = False
    cut: bool = False
    drop: bool = False

    @model_validator(mode="after")
    def _family_limits(self) -> GameSettings:
        if self.family == "treasure_hunter" and self.level > 30:
            raise ValueError(f"treasure_hunter levels are 1 to 30, not {self.level}")
        if self.family == "custom" and self.quest_breadth > self.quest_length:
            raise ValueError(
                f"quest_breadth ({self.quest_breadth}) cannot exceed quest_length ({self.quest_length})"
            )
        if self.family == "cooking" and self.take > self.recipe:
            raise ValueError(f"take ({self.take}) cannot exceed recipe ({self.recipe})")
        return self

    @classmethod
    def parse(cls, raw: Any, where: str = "game settings") -> GameSettings:
        """From a mapping; a ConfigError naming each wrong field otherwise."""
        if isinstance(raw, GameSettings):
            return raw
        if not isinstance(raw, dict):
            raise ConfigError(f"{where} must be a mapping, not {type(raw).__name__}")
        try:
            return cls.model_validate(raw)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'settings'}: {e['msg']}"
                for e in exc.errors()[:8]
            )
            raise ConfigError(f"{where}: {problems}") from None

    def knobs(self) -> dict[str, Any]:
        """The fields that shape this family's games (the others are ignored)."""
        return {name: getattr(self, name) for name in FAMILY_FIELDS[self.family]}

    def key(self, generator_version: str) -> str:
        """The cache key: family, its knobs, the seed and TextWorld's version."""
        payload = {
            "family": self.family,
            "seed": self.seed,
            **self.knobs(),
            "textworld": generator_version,
        }
        digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
        return f"{self.family}-{digest[:20]}"

    def with_seed(self, seed: int) -> GameSettings:
        return self.model_copy(update={"seed": seed})
