"""Grading a program against a task's hidden tests in the sandbox.

The verdict comes from a process the submission cannot reach: one sandbox run starts the
referee (envs/code/referee.py), which runs the task's setup and tests in its own process and
the submission in a fresh interpreter beside it, calling the submission's function over a
pipe. Return values cross as plain data, so tests compare by type and value, never through
the submission's own `__eq__`; the submission has no token to print, no test text to read
and no way to write the referee's verdict line. Feedback names what kind of thing failed,
never a hidden test's text or values.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from toolgym.envs.code.sandbox_access import run_in_pool
from toolgym.envs.code.tasks import CodeTask
from toolgym.sandbox import RunResult, SandboxPool, Status

REFEREE_SOURCE = (Path(__file__).parent / "referee.py").read_text()
"""The referee program, sent as the code of the grading run."""


@dataclass(frozen=True)
class Verdict:
    passed: bool
    feedback: str
    """What went wrong, as the model may read it, or "passed"."""
    result: RunResult


def referee_input(task: CodeTask, code: str) -> str:
    """The referee's stdin: the task and the submission (never written to a file, where the
    submission could read it)."""
    return json.dumps(
        {
            "referee": REFEREE_SOURCE,
            "setup": task.setup,
            "code": code,
            "tests": task.tests,
            "entry_point": task.entry_point,
            "calls_check": task.calls_check,
        }
    )


async def grade(
    pool: SandboxPool, task: CodeTask, code: str, timeout_s: float | None = None
) -> Verdict:
    result = await run_in_pool(
        pool, REFEREE_SOURCE, stdin=referee_input(task, code), timeout_s=timeout_s
    )
    verdict = _read_verdict(result)
    if verdict is None:
        return Verdict(False, _why(result), result)
    passed = verdict.get("passed") is True
    return Verdict(passed, "passed" if passed else str(verdict.get("why", ""))[:300], result)


def _read_verdict(result: RunResult) -> dict[str, object] | None:
    if result.status is not Status.OK:
        return None
    try:
        verdict = json.loads(result.stdout)
    except ValueError:
        return None
    return verdict if isinstance(verdict, dict) else None


def _why(result: RunResult) -> str:
    if result.status is Status.TIMEOUT:
        return "the tests ran past the time limit"
    if result.status is Status.MEMORY:
        return "the tests ran out of memory"
    return "the tests stopped before they finished"
