"""toolgym/MathCode-v0: arithmetic word problems solved by running code (ToRL and
R1-Code-Interpreter style).

Observation: the question; the output of each `<python>` block as `<output>...</output>`.
Actions (tags): <python>code</python> runs in the episode's Python session (variables
    persist); <answer>number</answer> ends the episode. Other text (<think>) is prose.
Reward: 1.0 when the answer equals the truth (as a number), else `format_reward` for a
    well-formed wrong answer (0 by default). Solved only by the right answer.
Episode end: terminated by an answer; truncated after `max_turns` turns.
state_key: a hash of the latest observation (the default): trajectories whose code printed
    the same output share a state.
Infrastructure: a sandbox that cannot start or dies under a call flags the step
    `infra_error` (masked from training), never reward 0.
Arguments: tasks (JSONL path or list of {"question", "answer"}, or "reasoning_gym:<dataset>":
    graded by the dataset's scorer; default: generated problems, `ContentTasks`, split by the
    problem), templates (which generated problem shapes: pens, trees, pages, coins, cards,
    bare; default all), max_turns, format_reward, solver_slips (the share of episodes in which the
    scripted solver miscopies one digit into its code: a weaker demonstrator, whose SFT
    student RL can then surpass), the sandbox's backend, pool_size, timeout_s and
    memory_mb, plus ToolEnv's.
Versions: v0, first release.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from toolgym.envs.code.math_problems import check_templates, generate_problem
from toolgym.envs.code.sandbox_access import EpisodeSession, SandboxConfig, UsesSandbox
from toolgym.envs.tasks import TaskSource, choose_task, needs_keys
from toolgym.envs.tasks import client as client_tasks
from toolgym.envs.tasks.content import ContentTasks
from toolgym.envs.tasks.loading import GradesAnswers, load_tasks, source_grade
from toolgym.envs.tool_env import Outcome, ToolEnv
from toolgym.errors import ConfigError
from toolgym.tools.parsers import XmlTagParser
from toolgym.tools.records import ToolCall
from toolgym.tools.tool import tool

TAGS = {"python": ("python", "code"), "answer": ("answer", "text")}
OUTPUT_CHARS = 1000


check_task = needs_keys("a math task", "question", "answer")


class MathCodeEnv(UsesSandbox, ToolEnv):
    instructions = (
        "Solve the problem. To compute, write Python inside <python> and </python>; its output "
        "comes back inside <output> and </output>. Give the final number alone inside <answer> "
        "and </answer>, e.g. <answer> 42 </answer>."
    )

    def __init__(
        self,
        tasks: str | Path | Iterable[Mapping[str, Any]] | None = None,
        templates: list[str] | None = None,
        max_turns: int = 4,
        format_reward: float = 0.0,
        solver_slips: float = 0.0,
        backend: str = "bubblewrap",
        pool_size: int = 2,
        timeout_s: float = 5.0,
        memory_mb: int = 512,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("parser", XmlTagParser(TAGS))
        kwargs.setdefault("max_calls_per_turn", 1)
        super().__init__(max_turns=max_turns, **kwargs)
        self.tasks = load_tasks(tasks, check_task) if tasks is not None else None
        self.templates = check_templates(templates)
        if not 0.0 <= solver_slips <= 1.0:
            raise ConfigError(f"solver_slips {solver_slips}: it must be between 0 and 1")
        self.format_reward = format_reward
        self.solver_slips = solver_slips
        self.slip: random.Random | None = None
        self.sandbox = SandboxConfig(backend, pool_size, timeout_s, memory_mb)
        self.task: dict[str, Any] = {}
        self.python_session = EpisodeSession(self.sandbox)
        self.answered: float | None = None
        self.last_output: str | None = None

    async def start(self, seed: int | None, options: dict[str, Any] | None) -> list[dict[str, Any]]:
        await self.python_session.end()
        task_seed = seed if seed is not None else int(self.np_random.integers(2**31))
        task = choose_task(task_seed, options, self.tasks, self._generate)
        if not isinstance(self.tasks, GradesAnswers):
            check_task(task)
        self.task, self.answered, self.last_output = task, None, None
        chooser = random.Random(f"slip-{task_seed}")
        self.slip = chooser if chooser.random() < self.solver_slips else None
        return [{"role": "user", "content": task["question"]}]

    def task_source(self) -> TaskSource:
        return self.tasks if self.tasks is not None else ContentTasks.of_generator(self._generate)

    def _generate(self, seed: int) -> dict[str, Any]:
        return generate_problem(seed, self.templates)

    def client_task(self, task: Mapping[str, Any]) -> dict[str, Any]:
        """A question and its numeric answer; none when the env's own tasks are graded by
        their source."""
        if isinstance(self.tasks, GradesAnswers):
            return super().client_task(task)
        given = client_tasks.only_fields(task, ("question", "answer"), "math task")
        check_task(given)
        client_tasks.text(given["question"], "question")
        if isinstance(given["answer"], str):
            client_tasks.text(given["answer"], "answer", 200)
        else:
            client_tasks.number(given["answer"], "answer")
        return given

    @tool
    async def python(self, code: str) -> str:
        """Run Python in your session; variables persist. Print what you want to see.

        Args:
            code: Python source, e.g. "print(37 * 24)".
        """
        result = await self.python_session.run(self, code)
        self.last_output = result.observation(OUTPUT_CHARS)
        return f"<output>{self.last_output}</output>"

    @tool
    async def answer(self, text: str) -> str:
        """Give the final answer; this ends the episode.

        Args:
            text: the number alone, e.g. "42".
        """
        grade = source_grade(self.tasks, self.task, text)
        if grade is not None:
            self.answered = grade if grade > 0 else self.format_reward
            return f"Score: {grade:g}"
        correct = _same_number(text, self.task["answer"])
        self.answered = 1.0 if correct else self.format_reward
        return "Correct." if correct else "Incorrect."

    def outcome(self) -> Outcome:
        return Outcome() if self.answered is None else Outcome(self.answered, True)

    def scripted_action(self) -> str | None:
        """Print the expression, then answer with what it printed."""
        if "expression" not in self.task:
            return self.parser.render([ToolCall("answer", {"text": str(self.task["answer"])})])
        if self.last_output is None:
            expression = self.task["expression"]
            if self.slip is not None:
                expression = miscopy(expression, self.slip)
            return self.parser.render([ToolCall("python", {"code": f"print({expression})"})])
        return self.parser.render([ToolCall("answer", {"text": self.last_output.strip()})])

    async def on_episode_end(self) -> None:
        await self.python_session.end()

    async def aclose(self) -> None:
        await self.python_session.end()
        await super().aclose()


def miscopy(expression: str, rng: random.Random) -> str:
    """`expression` with one digit of one number changed (never to a leading zero)."""
    numbers = list(re.finditer(r"\d+", expression))
    if not numbers:
        return expression
    number = rng.choice(numbers)
    position = rng.randrange(number.start(), number.end())
    leading = position == number.start() and number.end() - number.start() > 1
    allowed = [d for d in "0123456789" if d != expression[position] and not (leading and d == "0")]
    return expression[:position] + rng.choice(allowed) + expression[position + 1 :]


def _same_number(text: str, truth: Any) -> bool:
    """The answer as a number (commas and a trailing period allowed) equals the truth."""
    cleaned = text.strip().replace(",", "").rstrip(".")
    try:
        value, expected = float(cleaned), float(truth)
    except (TypeError, ValueError):
        return str(text).strip() == str(truth).strip()
    return math.isfinite(value) and math.isclose(value, expected, rel_tol=1e-9, abs_tol=1e-6)
