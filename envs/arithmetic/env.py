"""toolgym/Arithmetic-v0: answer an arithmetic question, using a calculator if you like.

Observation: the question ("What is (17 * 23) - 45?"); calculator results as tool messages.
Tools: calculator(expression) evaluates + - * / // % ** and parentheses;
    answer(value) submits the final number and ends the episode.
Reward: 1.0 for an answer within 1e-6 of the truth, else 0.
Episode end: terminated by `answer`; truncated after `max_turns` turns.
state_key: a hash of the latest observation (the default), so trajectories that asked the
    calculator the same thing share a state.
Arguments: tasks (JSONL path or list of {"question", "answer"} dicts, split as in
    `ListTasks.load`, or "reasoning_gym:<dataset>": graded by the dataset's scorer; default:
    generated from seeds, `ContentTasks`, split by the question), n_operands, max_turns, plus
    ToolEnv's. `reset(options={"task": {...}})` plays one given task ({"seed": s}: the
    problem generated from s).
Versions: v0, first release.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from toolgym.envs.arithmetic.calculator import evaluate
from toolgym.envs.tasks import TaskSource, needs_keys
from toolgym.envs.tasks import client as client_tasks
from toolgym.envs.tasks.content import ContentTasks
from toolgym.envs.tasks.loading import GradesAnswers, load_tasks, source_grade
from toolgym.envs.tool_env import Outcome, ToolEnv
from toolgym.tools.records import ToolCall
from toolgym.tools.tool import ToolCallError, tool

check_task = needs_keys("an arithmetic task", "question", "answer")


def generate_task(seed: int, n_operands: int = 3) -> dict[str, Any]:
    """A random expression over small integers, e.g. '(17 * 23) - 45', and its value."""
    rng = np.random.default_rng(seed)
    expression = str(int(rng.integers(2, 100)))
    for i in range(n_operands - 1):
        left = f"({expression})" if i > 0 else expression
        expression = f"{left} {rng.choice(['+', '-', '*'])} {int(rng.integers(2, 100))}"
    return {
        "question": f"What is {expression}?",
        "expression": expression,
        "answer": evaluate(expression),
    }


class ArithmeticEnv(ToolEnv):
    instructions = "Answer the question with the answer tool. You may use the calculator first."

    def __init__(
        self,
        tasks: str | Path | Iterable[Mapping[str, Any]] | None = None,
        n_operands: int = 3,
        max_turns: int = 4,
        **kwargs: Any,
    ) -> None:
        super().__init__(max_turns=max_turns, **kwargs)
        self.tasks = load_tasks(tasks, check_task) if tasks is not None else None
        self.n_operands = n_operands
        self.task: dict[str, Any] = {}
        self.submitted: float | None = None
        self._reward = 0.0

    async def start(self, seed: int | None, options: dict[str, Any] | None) -> list[dict[str, Any]]:
        task_seed = seed if seed is not None else int(self.np_random.integers(2**31))
        given = (options or {}).get("task")
        if given is not None and set(given) == {"seed"} and isinstance(given["seed"], int):
            task = generate_task(given["seed"], self.n_operands)  # a generated task (ContentTasks)
        elif given is not None:
            task = dict(given)
        elif self.tasks is not None:  # no task given: the seed picks a training task
            task = self.tasks.task("train", task_seed)
        else:
            task = generate_task(task_seed, self.n_operands)
        if not isinstance(self.tasks, GradesAnswers):
            check_task(task)
        self.task, self.submitted, self._reward = task, None, 0.0
        return [{"role": "user", "content": task["question"]}]

    def task_source(self) -> TaskSource:
        return (
            self.tasks
            if self.tasks is not None
            else ContentTasks.of_generator(lambda seed: generate_task(seed, self.n_operands))
        )

    def expected_answer(self) -> str | None:
        """The question's number (ExposesAnswer)."""
        return None if "answer" not in self.task else _format(self.task["answer"])

    def client_task(self, task: Mapping[str, Any]) -> dict[str, Any]:
        """A question and its number; none when the env's own tasks are graded by their
        source (a client's task would not be)."""
        if isinstance(self.tasks, GradesAnswers):
            return super().client_task(task)
        given = client_tasks.only_fields(task, ("question", "answer"), "arithmetic task")
        check_task(given)
        client_tasks.text(given["question"], "question")
        client_tasks.number(given["answer"], "answer")
        return given

    @tool
    async def calculator(self, expression: str) -> str:
        """Evaluate an arithmetic expression.

        Args:
            expression: numbers with + - * / // % ** and parentheses, e.g. "(3 + 4) * 5".
        """
        try:
            return _format(evaluate(expression))
        except ValueError as exc:  # the model's expression, not a bug in the calculator
            raise ToolCallError(str(exc)) from None

    @tool
    async def answer(self, value: float) -> str:
        """Submit your final answer; this ends the episode.

        Args:
            value: the number you believe answers the question.
        """
        self.submitted = value
        grade = source_grade(self.tasks, self.task, _format(value))
        if grade is not None:
            self._reward = grade
            return f"Score: {grade:g}"
        correct = math.isclose(value, float(self.task["answer"]), rel_tol=0, abs_tol=1e-6)
        self._reward = 1.0 if correct else 0.0
        return "Correct." if correct else "Incorrect."

    def outcome(self) -> Outcome:
        return Outcome() if self.submitted is None else Outcome(self._reward, True)

    def scripted_action(self) -> str | None:
        if "expression" not in self.task:
            call = ToolCall("answer", {"value": self.task["answer"]})
        elif not any(m["role"] == "tool" for m in self.transcript):
            call = ToolCall("calculator", {"expression": self.task["expression"]})
        else:
            call = ToolCall("answer", {"value": float(self.task["answer"])})
        return self.parser.render([call])


def _format(value: int | float) -> str:
    return (
        str(int(value)) if isinstance(value, int) or float(value).is_integer() else f"{value:.10g}"
    )
