"""A step's own figures in words, from its record: how many episodes it played and masked,
its success with the 95% interval, its valid calls and how many of its groups carried a
signal. `rollouts show` and the viewer's step page print them beside the few episodes the
step kept, so that 4 failures kept are not read as the step's 0.61."""

from __future__ import annotations

from typing import Any


def step_figures(record: dict[str, Any] | None) -> str | None:
    """The figures of a step's record (None: no record, as for a file outside a run)."""
    if not record or not isinstance(record.get("rollout/success"), int | float):
        return None
    parts = []
    played, masked = record.get("rollout/episodes"), record.get("rollout/masked")
    masked = masked if isinstance(masked, int | float) else 0  # a record is a file: any shape
    if isinstance(played, int | float):
        parts.append(f"{played:g} episodes played" + (f" ({masked:g} masked)" if masked else ""))
    elif masked:
        parts.append(f"{masked:g} episodes masked")
    success = f"success {record['rollout/success']:.3f}"
    low, high = record.get("rollout/success_low"), record.get("rollout/success_high")
    if isinstance(low, int | float) and isinstance(high, int | float):
        success += f" (95% {low:.2f} to {high:.2f})"
    parts.append(success)
    if isinstance(record.get("rollout/valid_actions"), int | float):
        parts.append(f"valid calls {record['rollout/valid_actions']:.1%}")
    groups, equal = record.get("signal/groups"), record.get("signal/equal_groups")
    if isinstance(groups, int | float) and isinstance(equal, int | float) and groups:
        parts.append(f"{groups - equal:g} of {groups:g} groups carried a signal")
    return " · ".join(parts)
