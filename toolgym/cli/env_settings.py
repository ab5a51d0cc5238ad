"""How a command merges the env settings saved with a model (envs/saved_settings.py) with
what its user gives: only for the same env id, and only where it was given nothing of its
own; explicit arguments always win, and the command says which saved ones they override.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def merge_env_kwargs(
    saved: dict[str, Any], given: dict[str, Any], source: str | Path
) -> dict[str, Any]:
    """The saved settings with the given ones on top, saying which of the saved ones the
    given override (so a policy is never played in another format than it learned without
    the user seeing it)."""
    from toolgym.cli.show import console

    merged = {**saved, **given}
    if saved:
        console.print(
            f"env settings saved with {source}: "
            + ", ".join(f"{k}={v!r}" for k, v in saved.items()),
            markup=False,
        )
    changed = [k for k in given if k in saved and given[k] != saved[k]]
    if changed:
        console.print(
            "given --env-arg overrides "
            + ", ".join(f"{k} ({saved[k]!r} -> {given[k]!r})" for k in changed),
            markup=False,
        )
    return merged
