"""The user's agent as the harness that plays it: a function, a command run once per episode,
or a command as long-lived workers (harness.py, worker.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from toolgym.agents.gateway.harness import CallableHarness, CommandHarness, Harness
from toolgym.agents.gateway.worker import WorkerHarness
from toolgym.errors import ConfigError


def make_harness(
    agent: str | None, command: Sequence[str] | None, pass_env: Sequence[str] = (),
    isolate: bool = True, workers: int = 0, hidden: Sequence[str | Path] = (),
) -> Harness:  # fmt: skip
    """The user's agent: a function ("path/to/file.py:function" or "package.module:function")
    or a command line, exactly one; a command with `workers` is that many long-lived workers
    (worker.py's line protocol), else it runs once per episode. An isolated command sees an
    empty folder at each `hidden` one."""
    if (agent is None) == (command is None):
        raise ConfigError(
            "give the agent as a function (package.module:function) or a command, one"
        )
    if agent is not None:
        if workers:
            raise ConfigError("workers serve a command's episodes; a function already stays")
        return CallableHarness.named(agent)
    if workers:
        return WorkerHarness(command or [], pass_env, isolate, workers, hidden)
    return CommandHarness(command or [], pass_env, isolate, hidden)
