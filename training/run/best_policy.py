"""The policy at a run's best evaluation so far, kept in RUN_DIR/best_policy when
`eval.keep_best` is set. RL on a tiny policy can collapse after it peaks (docs/code.md: one
seed of the code recipe fell from 99% held-out at step 20 to 0% at step 40); the last policy
alone would lose what the run reached. The choice is made on the eval split, so the kept
policy's honest figure is on the test split, which the choice never saw."""

from __future__ import annotations

import json
from pathlib import Path

BEST_POLICY = "best_policy"
RECORD = "toolgym_best.json"
"""Written into the kept policy: the step whose evaluation chose it and its eval success."""


def beats_best(run_dir: Path, success: float) -> bool:
    """Whether an evaluation's success beats the kept policy's (a tie keeps the earlier; with
    none kept yet, any does)."""
    record = run_dir / BEST_POLICY / RECORD
    return not record.is_file() or success > json.loads(record.read_text())["eval/success"]


def mark_best(policy: Path, step: int, success: float) -> None:
    (policy / RECORD).write_text(json.dumps({"step": step, "eval/success": success}) + "\n")
