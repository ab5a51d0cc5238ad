"""Self-play domains by name: what the proposer plays, how its tasks are checked, and how a
task becomes the solver env's reset task (builder.py's SelfPlayDomain)."""

from collections.abc import Callable
from typing import Any

from toolgym.envs.ref import EnvRef
from toolgym.training.selfplay.builder import SelfPlayDomain
from toolgym.training.selfplay.domains.code import CodeDomain
from toolgym.training.selfplay.domains.maze import MazeDomain
from toolgym.training.selfplay.domains.search import SearchDomain
from toolgym.training.selfplay.domains.sql import SQLDomain
from toolgym.training.selfplay.domains.sql_edit import SQLEditDomain
from toolgym.training.selfplay.domains.textworld import TextWorldDomain

DOMAINS: dict[str, Callable[[EnvRef, dict[str, Any] | None], SelfPlayDomain]] = {
    "code": CodeDomain,
    "maze": MazeDomain,
    "search": SearchDomain,
    "sql": SQLDomain,
    "sql_edit": SQLEditDomain,
    "textworld": TextWorldDomain,
}

__all__ = [
    "DOMAINS",
    "CodeDomain",
    "MazeDomain",
    "SQLDomain",
    "SQLEditDomain",
    "SearchDomain",
    "TextWorldDomain",
]
