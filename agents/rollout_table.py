"""Stored episodes as a table, a row per episode, written as Parquet for analysis (pandas,
DuckDB, or a Hugging Face dataset: `load_dataset("parquet", data_files=...)`).

Scalar columns say what is asked of an episode most (its step, env, return, success,
turns); list columns hold its turns' actions, rewards, advantages and validity; `trajectory`
holds the whole stored line (the rollout schema's JSON), so nothing is lost."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toolgym.agents.trajectory import Trajectory
from toolgym.errors import ConfigError


def rows(step: int | None, trajectories: Sequence[Trajectory]) -> list[dict[str, Any]]:
    out = []
    for t in trajectories:
        record = t.to_dict()
        out.append({
            "step": step, "id": t.id, "group_id": t.group_id, "env_id": t.env_id,
            "env_name": t.env_name, "role": t.role, "seed": t.seed, "item": t.item,
            "end": record["end"], "masked": t.masked, "infra_error": t.infra_error,
            "return": t.total_reward, "success": t.success,
            "turns": len(t.steps), "generated_tokens": t.generated_tokens,
            "actions": [s.action for s in t.steps],
            "rewards": [float(s.reward) for s in t.steps],
            "advantages": [s.advantage for s in t.steps],
            "valid_actions": [s.valid_action for s in t.steps],
            "policy_versions": [s.policy_version for s in t.steps],
            "task": None if t.task is None else json.dumps(t.task, default=str),
            "messages": json.dumps(t.messages, ensure_ascii=False, default=str),
            "trajectory": json.dumps(record, ensure_ascii=False, default=str),
        })  # fmt: skip
    return out


def write_parquet(batches: Sequence[tuple[int | None, Sequence[Trajectory]]], out: Path) -> int:
    """`batches`: (training step or None, its episodes). Returns the rows written."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError(
            "exporting to Parquet needs pyarrow: pip install 'toolgym[export]'"
        ) from None
    table = pa.Table.from_pylist(
        [r for step, ts in batches for r in rows(step, ts)], table_schema(pa)
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, out)
    return table.num_rows


def table_schema(pa: Any) -> Any:
    """The table's columns and types (`pa`: pyarrow, imported by the caller)."""
    text, number = pa.string(), pa.float64()
    return pa.schema([
        ("step", pa.int64()), ("id", text), ("group_id", text), ("env_id", text),
        ("env_name", text), ("role", text), ("seed", pa.int64()), ("item", text), ("end", text),
        ("masked", pa.bool_()), ("infra_error", text), ("return", number),
        ("success", pa.bool_()), ("turns", pa.int64()), ("generated_tokens", pa.int64()),
        ("actions", pa.list_(text)), ("rewards", pa.list_(number)),
        ("advantages", pa.list_(number)), ("valid_actions", pa.list_(pa.bool_())),
        ("policy_versions", pa.list_(pa.int64())), ("task", text), ("messages", text),
        ("trajectory", text),
    ])  # fmt: skip
