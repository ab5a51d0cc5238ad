"""How a harness's result is scored: by the env's own checker (its answer tool, called with
the result, on the instance reset with the episode's task), or by an answer reward by name
("exact", "contains", "number", or "package.module:function" called as
function(result, task data))."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from toolgym.envs.answer_checks import CHECKS, answer_check, checked_reward
from toolgym.envs.episode_env import EpisodeEnv
from toolgym.envs.tool_env import ToolEnv
from toolgym.errors import ConfigError
from toolgym.tools.records import ToolCall

ENV_CHECKER = "env"
RESULT = "result"
"""The trajectory score the harness records its result's reward under (and the reward source
that reads it)."""
AGENT = "agent"
"""The trajectory score an agent reports to its session (`POST .../v1/reward`), and the reward
source that pays it: a proxy the config weighs, never the verdict success counts."""


@dataclass(frozen=True)
class Verdict:
    score: float
    said: str
    """What the checker said of the result (the env's answer tool's reply), kept with the
    episode so it can be read afterwards."""


class ResultCheck(Protocol):
    async def score(self, env: EpisodeEnv, task: dict[str, Any] | None, result: Any) -> Verdict:
        """The episode's verdict on `result`; `env` was reset with `task` (the drawn task's
        data, which the agent never sees)."""
        ...


class EnvTool:
    """The env's tool `tool` (its one parameter given the result): the env's own verdict."""

    def __init__(self, tool: str) -> None:
        self.tool = tool

    async def score(self, env: EpisodeEnv, task: dict[str, Any] | None, result: Any) -> Verdict:
        tool_env = env.unwrapped
        if not isinstance(tool_env, ToolEnv):
            raise ConfigError(f"{type(tool_env).__name__} has no tools to check a result with")
        schemas = {s["function"]["name"]: s["function"] for s in tool_env.tool_schemas()}
        if self.tool not in schemas:
            raise ConfigError(
                f"the env has no tool {self.tool!r} to check a result with (its tools: "
                f"{', '.join(schemas)}); set harness.answer_tool"
            )
        parameters = list(schemas[self.tool].get("parameters", {}).get("properties", {}))
        if len(parameters) != 1:
            raise ConfigError(
                f"the env's tool {self.tool!r} takes {len(parameters)} parameters; a result "
                "fills exactly one: score with a reward function instead (harness.reward)"
            )
        call = ToolCall(self.tool, {parameters[0]: result})
        reply, reward, _, _ = await tool_env.acall(call)
        return Verdict(checked_reward(reward, f"the env's {self.tool} tool"), reply.content)


class AnswerFunction:
    """An answer reward by name; the shipped ones read the result as text."""

    def __init__(self, name: str) -> None:
        self.name, self.function = name, answer_check(name)

    async def score(self, env: EpisodeEnv, task: dict[str, Any] | None, result: Any) -> Verdict:
        given = str(result) if self.name in CHECKS else result
        score = checked_reward(self.function(given, task or {}), self.name)
        return Verdict(score, f"{self.name}: {score:g}")


def result_check(name: str, answer_tool: str = "answer") -> ResultCheck:
    return EnvTool(answer_tool) if name == ENV_CHECKER else AnswerFunction(name)
