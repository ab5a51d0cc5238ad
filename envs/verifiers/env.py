"""toolgym/Verifiers-v0: an environment built with the verifiers package, played in
toolgym's rollouts and scored by its own rubric.

Observation: the task's system prompt and prompt as verifiers gives them; each tool's result
    as a tool message.
Tools: the tools of the task's and the taskset's verifiers Toolsets (MCP servers, started
    with their own `run()` or reached at their `url`), named as verifiers names them
    (`<server>_<tool>`).
Reward: the task's own `@vf.reward` functions (weighted, summed as verifiers sums them) on a
    verifiers Trace of the episode, given when it ends; the rewards and `@vf.metric`s by
    name are the last step's `result`. Solved when the summed reward reaches 1.
Episode end: terminated by a reply without a tool call (the final reply, as in verifiers'
    tool loop) or by one of the task's `@vf.stop`s; at `max_turns` the episode is truncated
    and scored as it stands.
state_key: a hash of the latest observation (the default).
Arguments: taskset (a verifiers taskset id: an installed package, `pkg.module`, or
    `pkg.module:Class`; default: toolgym's arithmetic taskset with a calculator toolset,
    written with verifiers), settings (the taskset config's fields), eval_fraction (tasks held
    out for eval, by content), max_turns, plus ToolEnv's. `reset(options={"task": {...}})`
    plays one task given as its TaskData fields.
Refused, with the reason, when the env is made: a verifiers feature toolgym cannot run here
    (judges, a runtime box, container tasks, per-task toolset setup, a custom multi-agent Env).
Versions: v0, first release.
"""

from __future__ import annotations

import inspect
import math
from typing import Any

import verifiers.v1 as vf
from pydantic import ValidationError
from verifiers.v1.utils.decorators import invoke

from toolgym.envs.core import Message
from toolgym.envs.tasks import ListTasks, TaskSource, choose_task
from toolgym.envs.tool_env import ToolEnv
from toolgym.envs.verifiers.loading import make_taskset, read_tasks, unsupported
from toolgym.envs.verifiers.toolsets import ToolsetTools
from toolgym.envs.verifiers.trace import episode_trace
from toolgym.errors import ConfigError
from toolgym.tools.text import clip
from toolgym.tools.tool import DEFAULT_TIMEOUT_S

DEMO_TASKSET = "toolgym.envs.verifiers.demo"
FINAL_REPLY = "Your reply has no tool call: it is your final answer, and ends the episode."


class VerifiersEnv(ToolEnv):
    def __init__(
        self,
        taskset: str = DEMO_TASKSET,
        settings: dict[str, Any] | None = None,
        eval_fraction: float = 0.1,
        max_turns: int = 8,
        **kwargs: Any,
    ) -> None:
        made = make_taskset(taskset, dict(settings or {}))
        tasks = read_tasks(made)
        if not tasks:
            raise ConfigError(f"the verifiers taskset {taskset!r} has no tasks")
        problems = unsupported(taskset, made, tasks[0])
        if problems:
            listed = "\n".join(f"- {p}" for p in problems)
            raise ConfigError(f"toolgym cannot run the verifiers taskset {taskset!r}:\n{listed}")
        task_type = made.task_type()
        toolsets = [*task_type.toolsets(made.config.task), *type(made).toolsets(made.config)]
        sources = [ToolsetTools(t, DEFAULT_TIMEOUT_S) for t in toolsets]
        super().__init__(max_turns=max_turns, tool_sources=sources, **kwargs)
        self.toolset_servers = sources
        self.taskset = made
        self.task_type = task_type
        self.tasks = ListTasks.load([task_row(t) for t in tasks], eval_fraction)
        self.task: vf.Task | None = None
        self._final = False
        self._scored = False
        self._stop_hooks: list[Any] = []
        """The task's `@vf.stop`s, found once per episode."""

    def task_source(self) -> TaskSource:
        return self.tasks

    async def start(self, seed: int | None, options: dict[str, Any] | None) -> list[Message]:
        for server in self.toolset_servers:  # one that died is back for this episode
            await server.ensure_running(self.shared)
        task_seed = seed if seed is not None else int(self.np_random.integers(2**31))
        row = choose_task(task_seed, options, self.tasks, lambda s: self.tasks.task("train", s))
        try:
            data = self.task_type.data_type().model_validate(row)
        except ValidationError as exc:
            raise ConfigError(f"not a task of this taskset: {clip(str(exc), 2000)}") from None
        self.task = self.task_type(data, self.taskset.config.task)
        self._final = self._scored = False
        self._stop_hooks = self.task.hooks("stop")
        prompt = data.prompt
        opening = (
            [{"role": "user", "content": prompt}]
            if isinstance(prompt, str)
            else [m.model_dump(exclude_none=True) for m in prompt or []]
        )
        system = [m["content"] for m in opening if m["role"] == "system"]
        self.instructions = "\n\n".join(str(s) for s in [data.system_prompt or "", *system] if s)
        return [m for m in opening if m["role"] != "system"]

    async def on_text(self, text: str) -> str | None:
        """A reply without a tool call is the final answer (verifiers' tool loop)."""
        self._final = True
        return FINAL_REPLY

    async def astep(self, action: str) -> tuple[list[Message], float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = await super().astep(action)
        if self._scored or self.task is None:
            return obs, reward, terminated, truncated, info
        if not (self._final or truncated or self._stop_hooks):
            return obs, reward, terminated, truncated, info  # nothing can end it: no trace
        trace = episode_trace(self.task, self.transcript, self.tool_schemas(), self.parser)
        stopped = self._final or await self._stops(trace)
        if stopped or truncated:
            reward += await self._score(trace)
            info["result"] = {"rewards": _values(trace.rewards), "metrics": dict(trace.metrics)}
            terminated, truncated = stopped, not stopped
            self.done, self._scored = True, True
        return obs, reward, terminated, truncated, info

    async def _stops(self, trace: vf.Trace) -> bool:
        assert self.task is not None
        for fn in self._stop_hooks:
            result = invoke(fn, {"trace": trace, vf.Trace: trace, "task": self.task.data})
            if await result if inspect.isawaitable(result) else result:
                return True
        return False

    async def _score(self, trace: vf.Trace) -> float:
        """The task's own scoring (its rewards and metrics, no runtime); the weighted sum."""
        assert self.task is not None
        await self.task.score(trace)
        value = trace.reward
        if not math.isfinite(value):
            raise ConfigError(f"the taskset's rewards gave {value} ({_values(trace.rewards)})")
        return float(value)


def task_row(task: vf.Task) -> dict[str, Any]:
    """A task as plain JSON (its TaskData fields that are set), without its position."""
    row = task.data.model_dump(mode="json", exclude_defaults=True)
    row.pop("idx", None)
    return row


def _values(rewards: dict[str, Any]) -> dict[str, float | None]:
    return {name: None if r is None else r.score for name, r in rewards.items()}
