"""The taskset toolgym/Verifiers-v0 plays by default, written with verifiers as any
verifiers environment is: arithmetic questions (toolgym's generator), a calculator served by
a verifiers `Toolset` (an MCP server), and a `@vf.reward` that reads the final reply's
<answer>. It is a demo that needs nothing else, and what `toolgym check` runs."""

from __future__ import annotations

import math
import re

import verifiers.v1 as vf

from toolgym.envs.arithmetic.calculator import evaluate
from toolgym.envs.arithmetic.env import generate_task

SYSTEM = (
    "Answer the question. You may use the calculator tool first. "
    "Give the final number as <answer>NUMBER</answer>."
)
_ANSWER = re.compile(r"<answer>\s*(.*?)\s*</answer>", re.DOTALL)


class CalculatorToolset(vf.Toolset[vf.ToolsetConfig]):
    TOOL_PREFIX = None  # its tool is advertised as `calculator`

    @vf.tool
    def calculator(self, expression: str) -> str:
        """Evaluate an arithmetic expression (+ - * / // % ** and parentheses)."""
        try:
            return str(evaluate(expression))
        except Exception as exc:  # the model's expression: its mistake, told in words
            return f"cannot evaluate: {exc}"


class ArithmeticConfig(vf.TaskConfig):
    tools: vf.ToolsetConfig = vf.ToolsetConfig()


class ArithmeticData(vf.TaskData):
    answer: float
    expression: str


class ArithmeticTask(vf.Task[ArithmeticData, vf.State, ArithmeticConfig]):
    @classmethod
    def toolsets(cls, config: ArithmeticConfig) -> list[vf.Toolset]:
        return [CalculatorToolset(config.tools)]

    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        found = _ANSWER.search(trace.last_reply or "")
        try:
            value = float(found.group(1)) if found else math.nan
        except ValueError:
            return 0.0
        return float(abs(value - self.data.answer) < 1e-6)


class ArithmeticTasksetConfig(vf.TasksetConfig):
    task: ArithmeticConfig = ArithmeticConfig()
    num_tasks: int = 1000


class ArithmeticTaskset(vf.Taskset[ArithmeticTask, ArithmeticTasksetConfig]):
    def load(self) -> list[ArithmeticTask]:
        tasks = []
        for seed in range(self.config.num_tasks):
            task = generate_task(seed)
            data = ArithmeticData(
                prompt=task["question"], system_prompt=SYSTEM,
                answer=float(task["answer"]), expression=task["expression"],
            )  # fmt: skip
            tasks.append(ArithmeticTask(data, self.config.task))
        return tasks


__all__ = ["ArithmeticTaskset"]

if __name__ == "__main__":
    CalculatorToolset.run()
