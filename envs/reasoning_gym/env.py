"""toolgym/ReasoningGym-v0: reasoning-gym's procedural tasks, answered in one turn.

Observation: the dataset's question.
Action: the model's text with the final answer inside <answer> and </answer> (reasoning
    before it is free).
Reward: the dataset's own score of the answer (0 to 1; most datasets give 1 or 0). Solved
    only at 1: a partial score (reasoning-gym's default scorer credits an answer that merely
    contains the right one) is a reward, not a success.
Episode end: terminated by the answer, or (one turn allowed, the default) by a turn without
    one: a one-turn task cannot go on, so it has failed, not been cut short. With
    max_turns > 1 a turn without an answer gets the format hint and the episode goes on.
state_key: a hash of the latest observation (the default).
Arguments: datasets (a reasoning-gym spec: "leg_counting", "leg_counting,basic_arithmetic",
    or {name: {weight, ...the dataset's settings}}; see envs/reasoning_gym/tasks.py), seed
    (of the datasets and the mixture), eval_fraction, plus ToolEnv's. The same tasks go to
    the tool envs with `tasks: reasoning_gym:<dataset>`: toolgym/Arithmetic-v0 (a calculator),
    toolgym/MathCode-v0 (a Python sandbox), toolgym/MCP-v0 (any MCP server).
Versions: v0, first release.
"""

from __future__ import annotations

from typing import Any

from toolgym.envs.reasoning_gym.tasks import PREFIX, ReasoningGymTasks, is_reasoning_gym
from toolgym.envs.tasks import TaskSource, choose_task
from toolgym.envs.tool_env import Outcome, ToolEnv
from toolgym.errors import ConfigError
from toolgym.tools.parsers import XmlTagParser
from toolgym.tools.records import ToolCall
from toolgym.tools.tool import tool


class ReasoningGymEnv(ToolEnv):
    instructions = (
        "Answer the question. You may reason first; then give the final answer alone inside "
        "<answer> and </answer>, exactly in the form the question asks for."
    )

    def __init__(
        self,
        datasets: Any = "leg_counting",
        seed: int = 0,
        eval_fraction: float = 0.1,
        max_turns: int = 1,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("parser", XmlTagParser({"answer": ("answer", "text")}))
        kwargs.setdefault("max_calls_per_turn", 1)
        super().__init__(max_turns=max_turns, **kwargs)
        spec = datasets if is_reasoning_gym(datasets) else _as_spec(datasets)
        self.tasks = ReasoningGymTasks(spec, seed=seed, eval_fraction=eval_fraction)
        self.task: dict[str, Any] = {}
        self.score: float | None = None

    def task_source(self) -> TaskSource:
        return self.tasks

    async def start(self, seed: int | None, options: dict[str, Any] | None) -> list[dict[str, Any]]:
        task_seed = seed if seed is not None else int(self.np_random.integers(2**31))
        self.task = choose_task(task_seed, options, None, self.tasks.for_seed)
        self.score = None
        return [{"role": "user", "content": str(self.task.get("question", ""))}]

    @tool
    async def answer(self, text: str) -> str:
        """Give the final answer; this ends the episode.

        Args:
            text: the answer, in the form the question asks for.
        """
        self.score = self.tasks.score(text, self.task)
        return f"Score: {self.score:g}"

    async def astep(
        self, action: str
    ) -> tuple[list[dict[str, Any]], float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = await super().astep(action)
        if truncated and self.max_turns == 1:
            terminated, truncated = True, False
        return obs, reward, terminated, truncated, info

    def outcome(self) -> Outcome:
        return Outcome() if self.score is None else Outcome(self.score, True)

    def scripted_action(self) -> str | None:
        answer = self.task.get("answer")
        if answer is None:
            return None
        return self.parser.render([ToolCall("answer", {"text": str(answer)})])


def _as_spec(datasets: Any) -> Any:
    if isinstance(datasets, str):
        return PREFIX + datasets
    if isinstance(datasets, list | dict):
        return {"reasoning_gym": datasets}
    raise ConfigError(
        f"datasets is a name, a comma-separated list, a list or a mapping, got {datasets!r}"
    )
