"""RUN_DIR/summary.json: a run in a few figures, from its records (metrics.jsonl) and how it
ended: held-out success at the start and at the end with their 95% intervals (the eval
split pooled with the run's held-out sets, `held_out`, and each eval set's own in `sets`),
the steps and env steps done, the time each phase took, and what was masked or left out of
training and why. Written when the run ends, however it ends; the run log says it in words
(run/log.py)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from toolgym.training.run.files import SUMMARY

HELD_OUT = "held_out"
"""The prefix of the run's one held-out success where it has held-out sets besides its eval
split (TrainConfig.held_out_sets): all of them pooled, as `toolgym quickstart` reports it."""
PHASES = ("rollout", "advantage", "update", "sync", "eval")
"""The phases whose seconds a step's record holds as time/PHASE_s."""
MASKED_KEYS = ("rollout/masked_reasons", "eval/masked_reasons")


def run_summary(
    config: Any, records: list[dict[str, Any]], status: str, wall_s: float,
    lost: dict[str, int] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """`config`: the run's TrainConfig; `status`: "finished", or what stopped it; `lost`: the
    episodes masked by reason in the step or evaluation that stopped it (no record holds
    them)."""
    steps = [r for r in records if r["step"] > 0]
    evals = [r for r in records if isinstance(r.get("eval/success"), int | float)]
    first = evals[0] if evals and evals[0]["step"] == 0 else None  # the start's evaluation
    last = evals[-1] if evals and evals[-1]["step"] > 0 else None  # the last one trained
    held_out = HELD_OUT if config.held_out_sets else "eval"
    eval_sets = {"eval": "eval"} | {s.label: f"eval/{s.label}" for s in config.eval.sets}
    masked: Counter[str] = Counter(lost or {})
    for r in records:
        for key in MASKED_KEYS:
            masked.update({str(k): int(v) for k, v in (r.get(key) or {}).items()})
    return {
        "run_dir": str(config.run_dir),
        "model": str(config.model),
        "envs": [e.id for e in config.mixture],
        "status": status,
        "steps": steps[-1]["step"] if steps else 0,
        "steps_planned": config.steps,
        "env_steps": sum(r.get("env_steps", 0) for r in steps),
        "wall_s": round(wall_s, 1),
        "time_s": {p: round(sum(r.get(f"time/{p}_s", 0.0) for r in records), 1) for p in PHASES},
        "start": _success(first, held_out),
        "end": _success(last, held_out),
        "held_out": ["eval", *config.held_out_sets],
        "sets": {
            name: {"start": _success(first, prefix), "end": _success(last, prefix)}
            for name, prefix in eval_sets.items()
        },
        "rollout_success": {
            "first": steps[0].get("rollout/success") if steps else None,
            "last": steps[-1].get("rollout/success") if steps else None,
        },
        "masked": {
            "episodes": int(
                sum(r.get("rollout/masked", 0) + r.get("eval/masked", 0) for r in records)
                + sum((lost or {}).values())
            ),
            "reasons": dict(masked.most_common()),
        },
        "untrained_groups": int(sum(r.get("groups/untrained", 0) for r in steps)),
        "no_signal_steps": sum(
            0 < r.get("signal/groups", 0) == r.get("signal/equal_groups", -1) for r in steps
        ),
    }


def _success(record: dict[str, Any] | None, prefix: str) -> dict[str, Any] | None:
    """`prefix/success` of an evaluation's record, with its interval and items."""
    if record is None or not isinstance(record.get(f"{prefix}/success"), int | float):
        return None
    return {
        "step": record["step"],
        "success": record[f"{prefix}/success"],
        "low": record.get(f"{prefix}/success_low"),
        "high": record.get(f"{prefix}/success_high"),
        "items": record.get(f"{prefix}/items"),
    }


def write_summary(run_dir: Path, summary: dict[str, Any]) -> Path:
    path = run_dir / SUMMARY
    path.write_text(json.dumps(summary, indent=2) + "\n")
    return path
