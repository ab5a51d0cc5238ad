"""Self-play domains by name: what the proposer plays, how its tasks are checked, and how a
task becomes the solver env's reset task (builder.py's SelfPlayDomain).

Each is named by its class's import path, loaded when a run builds it: a config checks
`selfplay.domain` without loading any domain's env."""

from __future__ import annotations

from typing import Any

from toolgym.errors import lookup
from toolgym.imports import load_callable

DOMAINS = {
    "code": "toolgym.training.selfplay.domains.code:CodeDomain",
    "maze": "toolgym.training.selfplay.domains.maze:MazeDomain",
    "search": "toolgym.training.selfplay.domains.search:SearchDomain",
    "sql": "toolgym.training.selfplay.domains.sql:SQLDomain",
    "sql_edit": "toolgym.training.selfplay.domains.sql_edit:SQLEditDomain",
    "textworld": "toolgym.training.selfplay.domains.textworld:TextWorldDomain",
}


def domain_class(name: str) -> Any:
    """The class of domain `name` (a ConfigError names the known ones)."""
    return load_callable(lookup(DOMAINS, name, "self-play domain"), "self-play domain")


__all__ = ["DOMAINS", "domain_class"]
