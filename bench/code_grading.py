"""What an unforgeable verdict costs: Code-v0's grade of each HumanEval canonical solution
through the referee (the tests in one process, the submission in a fresh interpreter beside
it, every call over a pipe), next to the same tests run in the submission's own process (one
program: setup, solution, tests), which is what a forgeable grader costs. Alternated task by
task on the same warm pool, in the same run (these machines are shared and noisy).

    python bench/code_grading.py [--tasks 164] [--backend bubblewrap]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from toolgym.envs.code import CodeTask
from toolgym.envs.code.grading import grade
from toolgym.envs.code.tasks import humaneval_rows
from toolgym.sandbox import SandboxPool, Status


def one_process(task: CodeTask, code: str) -> str:
    parts = [task.setup, code, "", task.tests]
    if task.calls_check:
        parts.append(f"check({task.entry_point})")
    return "\n".join(parts) + "\n"


async def main(tasks: int, backend: str) -> None:
    rows = [CodeTask.from_record(r) for r in humaneval_rows()[:tasks]]
    referee, plain = [], []
    async with SandboxPool(backend, size=1) as pool:
        for task in rows:
            assert task.solution is not None
            started = time.perf_counter()
            verdict = await grade(pool, task, task.solution)
            referee.append(time.perf_counter() - started)
            assert verdict.passed, (task.task_id, verdict.feedback)
            started = time.perf_counter()
            result = await pool.run(one_process(task, task.solution))
            plain.append(time.perf_counter() - started)
            assert result.status is Status.OK, (task.task_id, result.stderr[-300:])
    for name, times in (("one process (forgeable)", plain), ("referee", referee)):
        ms = sorted(t * 1000 for t in times)
        print(
            f"{name:26s} p50 {statistics.median(ms):7.1f} ms   p90 {ms[int(0.9 * len(ms))]:7.1f} ms"
        )
    ratio = statistics.median(referee) / statistics.median(plain)
    print(f"referee / one process, median: {ratio:.2f}x over {len(rows)} tasks ({backend})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=164)
    parser.add_argument("--backend", default="bubblewrap")
    args = parser.parse_args()
    asyncio.run(main(args.tasks, args.backend))
