"""toolgym/MCP-v0: tasks answered with an MCP server's tools, declared in config with no
Python: a server, a task list and a reward.

Observation: the task's question; each tool's result as a tool message (images in a user
    message after it).
Tools: the server's own (name, description, JSON schema as it publishes them; `tools` in the
    server's settings keeps some), plus answer(text), which ends the episode.
Reward: the named reward of the answer and the task ("exact", "contains", "number", or
    "package.module:function"), given when the answer is submitted. Solved when it pays 1
    ("contains" pays only an answer that adds at most 6 words to the accepted one, so a list
    of every option is not paid).
Episode end: terminated by `answer`; truncated after `max_turns` turns.
state_key: a hash of the latest observation (the default).
Infrastructure: a server that cannot start, exits or cannot be reached flags the step (or
    the reset) as an infrastructure error, masked from training; it is started again.
Arguments: server (a command list, a URL, or a mapping of settings: see docs/mcp.md),
    tasks (JSONL path or list of {"question", "answer", ...}; split as in `ListTasks.load`;
    or "reasoning_gym:<dataset>", whose scorer is then the reward), reward, instructions (the system message's guidance), tool_prefix, tool_timeout_s,
    max_turns, plus ToolEnv's. With no server and no tasks it plays generated arithmetic
    questions with toolgym's own calculator, served over MCP by `toolgym serve mcp
    toolgym/Arithmetic-v0` (a demo that needs nothing else, and what `toolgym check` runs). A task's "calls" (a list of {"name", "arguments"}) is a
    reference solution that the scripted solver plays before answering, for SFT
    demonstrations.
Versions: v0, first release.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from toolgym.envs.answer_checks import answer_check, checked_reward
from toolgym.envs.arithmetic.env import generate_task
from toolgym.envs.tasks import SeedTasks, TaskSource, choose_task, needs_keys
from toolgym.envs.tasks.loading import GradesAnswers, load_tasks, source_grade
from toolgym.envs.tool_env import Outcome, ToolEnv
from toolgym.errors import ConfigError
from toolgym.tools.records import ToolCall
from toolgym.tools.tool import DEFAULT_TIMEOUT_S, tool

check_task = needs_keys("an MCP task", "question", "answer")
CALCULATOR = {
    "command": [sys.executable, "-m", "toolgym", "serve", "mcp", "toolgym/Arithmetic-v0",
                "--episode-per-call"],
    "tools": ["calculator"],
}  # fmt: skip
"""The default server: toolgym's calculator, served over MCP by toolgym itself. Every env
instance shares the one server process, so each call is an episode of its own there: one
served episode shared by all would run out of turns and refuse every episode's calls."""
DEFAULT_INSTRUCTIONS = "Use the tools to find the answer, then give it with the answer tool."


class MCPEnv(ToolEnv):
    def __init__(
        self,
        server: Any = None,
        tasks: str | Path | Iterable[Mapping[str, Any]] | None = None,
        reward: str | None = None,
        instructions: str = DEFAULT_INSTRUCTIONS,
        tool_prefix: str = "",
        tool_timeout_s: float = DEFAULT_TIMEOUT_S,
        max_turns: int = 8,
        **kwargs: Any,
    ) -> None:
        from toolgym.tools.mcp import MCPTools  # the mcp extra, needed only here

        source = MCPTools(
            CALCULATOR if server is None else server, prefix=tool_prefix, timeout_s=tool_timeout_s
        )
        super().__init__(max_turns=max_turns, tool_sources=[source], **kwargs)
        self.instructions = instructions
        self.tasks = load_tasks(tasks, _check) if tasks is not None else None
        self.reward_given = reward is not None
        """A reward named here wins over a task source's own grader."""
        self.reward_name = reward or ("exact" if tasks is not None else "number")
        self.reward_function = answer_check(self.reward_name)
        self.task: dict[str, Any] = {}
        self.answered: str | None = None
        self._reward: float | None = None

    def task_source(self) -> TaskSource:
        return self.tasks if self.tasks is not None else SeedTasks()

    async def start(self, seed: int | None, options: dict[str, Any] | None) -> list[dict[str, Any]]:
        task_seed = seed if seed is not None else int(self.np_random.integers(2**31))
        task = choose_task(task_seed, options, self.tasks, arithmetic_task)
        if not isinstance(self.tasks, GradesAnswers):
            _check(task)
        self.task, self.answered, self._reward = task, None, None
        return [{"role": "user", "content": str(task["question"])}]

    @tool
    async def answer(self, text: str) -> str:
        """Give your final answer; this ends the episode.

        Args:
            text: the answer.
        """
        self.answered = text
        return "Answer received."

    def outcome(self) -> Outcome:
        if self.answered is None:
            return Outcome()
        if self._reward is None:  # scored once; a user's function runs outside the tool
            graded = (
                None if self.reward_given else source_grade(self.tasks, self.task, self.answered)
            )
            if graded is not None:
                self._reward = graded
            else:
                value = self.reward_function(self.answered, dict(self.task))
                self._reward = checked_reward(value, self.reward_name)
        return Outcome(self._reward, True)

    def scripted_action(self) -> str | None:
        """The task's reference calls in turn, then its answer (None without "calls")."""
        calls = self.task.get("calls")
        if not isinstance(calls, list):
            return None
        made = sum(1 for m in self.transcript if m["role"] == "tool")
        if made < len(calls):
            step = calls[made]
            return self.parser.render([ToolCall(step["name"], dict(step.get("arguments") or {}))])
        accepted = self.task["answer"]
        text = accepted[0] if isinstance(accepted, list) else accepted
        return self.parser.render([ToolCall("answer", {"text": str(text)})])


def arithmetic_task(seed: int) -> dict[str, Any]:
    """The default tasks: a generated arithmetic question whose reference solution asks the
    served calculator first."""
    task = generate_task(seed)
    calls = [{"name": "calculator", "arguments": {"expression": task["expression"]}}]
    return {"question": task["question"], "answer": task["answer"], "calls": calls}


def _check(task: Mapping[str, Any]) -> None:
    check_task(task)
    calls = task.get("calls")
    if calls is None:
        return
    if not isinstance(calls, list) or not all(
        isinstance(c, Mapping) and isinstance(c.get("name"), str) for c in calls
    ):
        raise ConfigError('"calls" is a list of {"name": ..., "arguments": {...}}')
