"""Grading a program against a task's tests in the sandbox.

The test program is the task's setup (its imports and helpers), then the submitted code,
then the tests, then a line that prints a fresh random token. A submission passes only if
the run exits 0 *and* printed that token last: code that exits early (`sys.exit(0)`,
`os._exit(0)`) before the tests ran does not pass.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from toolgym.envs.code.sandbox_access import run_in_pool
from toolgym.envs.code.tasks import CodeTask
from toolgym.sandbox import RunResult, SandboxPool, Status


@dataclass(frozen=True)
class Verdict:
    passed: bool
    feedback: str
    """What went wrong, as the model may read it (the error's last line), or "passed"."""
    result: RunResult


def test_program(task: CodeTask, code: str, token: str) -> str:
    parts = [task.setup, code, "", task.tests]
    if task.calls_check:
        parts.append(f"check({task.entry_point})")
    parts.append(f"print({token!r})")
    return "\n".join(parts) + "\n"


async def grade(
    pool: SandboxPool, task: CodeTask, code: str, timeout_s: float | None = None
) -> Verdict:
    token = secrets.token_hex(16)
    result = await run_in_pool(pool, test_program(task, code, token), timeout_s=timeout_s)
    lines = result.stdout.rstrip("\n").splitlines()
    if result.status is Status.OK and lines and lines[-1] == token:
        return Verdict(True, "passed", result)
    return Verdict(False, _why(result), result)


def _why(result: RunResult) -> str:
    if result.status is Status.TIMEOUT:
        return "the tests ran past the time limit"
    if result.status is Status.MEMORY:
        return "the tests ran out of memory"
    if result.status is Status.OUTPUT_LIMIT:
        return "the program printed too much"
    errors = [line for line in result.stderr.strip().splitlines() if line.strip()]
    if errors:
        last = errors[-1].strip()
        return "a test failed (AssertionError)" if last == "AssertionError" else last[:300]
    if result.status is Status.OK:
        return "the program stopped before the tests finished"
    return f"the program exited with code {result.exit_code}"
