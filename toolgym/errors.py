"""One small error hierarchy. Each class also inherits the builtin it stands for, so callers
can catch either `ToolgymError` or the usual `ValueError` / `LookupError` / `TypeError`.

A programmer's mistake raises one of these; a model's mistake becomes an observation (see
toolgym.tools); an infrastructure failure becomes a masked, counted rollout error.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import TypeVar

T = TypeVar("T")


class ToolgymError(Exception):
    """Base of every error toolgym raises on purpose."""


class ConfigError(ToolgymError, ValueError):
    """A configuration value or file is invalid."""


class UnknownEnvError(ToolgymError, LookupError):
    """An environment id is not registered."""

    def __str__(self) -> str:  # LookupError would quote the message like a dict key
        return str(self.args[0]) if self.args else ""


class RegistrationError(ToolgymError, ValueError):
    """An environment id or entry point is malformed or registered twice."""


class ToolDefinitionError(ToolgymError, TypeError):
    """A function cannot become a tool (missing type hints, bad hidden arguments...)."""


class EnvContractError(ToolgymError, TypeError):
    """An environment broke the Env contract (wrong return shape, bad info, ...)."""


class EnvBuildError(ToolgymError, RuntimeError):
    """An env could not be built: its constructor raised (a value it rejects, a missing
    file); the message names the env and the cause."""


class RunFailedError(ToolgymError, RuntimeError):
    """A run cannot produce anything worth keeping (every rollout of a step was masked)."""


class EpisodesMasked(RunFailedError):
    """Every episode of a step or an evaluation was masked: what stops the run, with how many
    were masked for each reason (the run's summary counts them)."""

    def __init__(self, message: str, reasons: dict[str, int]) -> None:
        super().__init__(message)
        self.reasons = reasons


def one_line(text: object, limit: int = 300) -> str:
    """`text` as one short line, for an error message that quotes another (an exception, a
    tool's output): whitespace collapsed, cut at `limit` characters."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def did_you_mean(name: str, choices: Iterable[str], n: int = 3) -> str:
    """Return ' Did you mean: a, b?' for the closest choices, or '' when none is close.
    Only choices nearly as close as the best one are named: ids that share a long prefix
    ("toolgym/...-v0") are all somewhat alike. An empty name is close to nothing."""
    if not name:
        return ""
    scored = sorted(
        ((difflib.SequenceMatcher(None, name, c).ratio(), c) for c in choices), reverse=True
    )
    best = scored[0][0] if scored else 0.0
    close = [c for ratio, c in scored[:n] if ratio >= 0.7 and ratio >= best - 0.1]
    if not close:
        lowered = name.lower()
        close = [c for c in choices if lowered in c.lower() or c.lower() in lowered][:n]
    return f" Did you mean: {', '.join(close)}?" if close else ""


def lookup(table: Mapping[str, T], name: str, kind: str) -> T:
    """`table[name]`, or a ConfigError naming the `kind`, a close match and the choices: how
    every registry (parsers, engines, estimators, reward sources) answers an unknown name."""
    if name not in table:
        raise ConfigError(
            f"unknown {kind} '{name}'.{did_you_mean(name, table)} Known: {', '.join(table)}"
        )
    return table[name]


def chosen_names(table: Mapping[str, object], names: object, kind: str) -> tuple[str, ...]:
    """`names` (a list of `table`'s keys, in the order given; None: every key) checked, so
    a setting that is not a list of known names is one clear error, whatever it holds."""
    if names is None:
        return tuple(table)
    if isinstance(names, str) or not isinstance(names, list | tuple) or not names:
        raise ConfigError(f"{kind}s must be a list of names among {', '.join(table)}")
    unknown = [n for n in names if not isinstance(n, str) or n not in table]
    if unknown:
        raise ConfigError(f"unknown {kind}s {unknown}; known: {', '.join(table)}")
    return tuple(names)
