"""What a metric sink is, and the rows of a step's rollouts table that sinks share."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

from toolgym.agents.trajectory import Trajectory

ACTIONS_CHARS = 2000
"""A row's actions, joined, are cut to this many characters."""


class MetricSink(Protocol):
    def write(self, record: dict[str, Any]) -> None:
        """One step's record (numbers are the metrics; other values are skipped)."""
        ...

    def samples(self, step: int, trajectories: list[Trajectory]) -> None:
        """The step's kept rollouts, as a table where the sink has one."""
        ...

    def close(self) -> None: ...


def scalars(record: dict[str, Any]) -> dict[str, float]:
    """The record's metrics: its numbers but the step (bools and dicts are not metrics)."""
    return {
        k: float(v)
        for k, v in record.items()
        if k != "step" and isinstance(v, int | float) and not isinstance(v, bool)
    }


def sample_rows(step: int, trajectories: list[Trajectory]) -> list[dict[str, Any]]:
    return [
        {
            "step": step,
            "id": t.id,
            "env": t.env_name,
            "role": t.role,
            "return": t.total_reward,
            "success": t.success,
            "turns": len(t.steps),
            "masked": t.infra_error or "",
            "actions": " | ".join(s.action for s in t.steps)[:ACTIONS_CHARS],
        }
        for t in trajectories
    ]


def run_settings(run_dir: Path) -> dict[str, Any]:
    """The settings the run was started with (its config.json; none if unreadable)."""
    try:
        data = json.loads((run_dir / "config.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
