"""Self-play domains by name: what the proposer plays, how its tasks are checked, and how a
task becomes the solver env's reset task (builder.py's SelfPlayDomain)."""

from toolgym.training.selfplay.domains.code import CodeDomain
from toolgym.training.selfplay.domains.search import SearchDomain
from toolgym.training.selfplay.domains.sql import SQLDomain
from toolgym.training.selfplay.domains.textworld import TextWorldDomain

DOMAINS = {
    "code": CodeDomain,
    "search": SearchDomain,
    "sql": SQLDomain,
    "textworld": TextWorldDomain,
}

__all__ = ["DOMAINS", "CodeDomain", "SQLDomain", "SearchDomain", "TextWorldDomain"]
