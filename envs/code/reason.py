"""toolgym/CodeReason-v0: reason about a small program (Absolute Zero's three task kinds).

Observation, by the task's kind:
    deduction: a program and an input; give f(input).
    abduction: a program and an output; give an input x with f(x) == output.
    induction: input/output examples (and the function's name); write the program.
Actions (tags): <answer>...</answer> ends the episode: a Python literal for deduction and
    abduction, the program's source for induction.
Reward: 1.0 when right, else 0. Deduction compares values ("[1,2]" equals "[1, 2]"); an
    abduction input is run through the program in the sandbox and its output compared; an
    induction program is run on the held-out inputs in the sandbox and must give every
    held-out output. A program with a banned module or builtin is wrong, unrun.
Episode end: terminated by an answer; truncated after `max_turns` turns.
Infrastructure: a sandbox that cannot start or dies flags the step `infra_error` (masked).
Arguments: tasks (JSONL path or list of {kind, program, inputs, outputs}: one pair for
    deduction and abduction; for induction the first `shown` pairs are shown and the rest
    held out; default: generated programs from programs.py's templates, kinds in turn,
    `ContentTasks`, split by the task), kinds (which kinds the generated tasks take), shown (induction pairs shown,
    default 2, of 4), max_turns, and the sandbox's backend, pool_size, timeout_s, memory_mb,
    plus ToolEnv's.
Versions: v0, first release.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from toolgym.envs.code.programs import (
    KINDS,
    call_f,
    generate_program,
    literal_problem,
    same_value,
    static_problem,
)
from toolgym.envs.code.sandbox_access import SandboxConfig, UsesSandbox
from toolgym.envs.tasks import ListTasks, TaskSource, choose_task
from toolgym.envs.tasks.content import ContentTasks
from toolgym.envs.tool_env import Outcome, ToolEnv
from toolgym.errors import ConfigError
from toolgym.tools.parsers import XmlTagParser
from toolgym.tools.records import ToolCall
from toolgym.tools.tool import tool

TAGS = {"answer": ("answer", "text")}
INDUCTION_PAIRS = 4


class CodeReasonEnv(UsesSandbox, ToolEnv):
    instructions = (
        "Reason about the Python function f. Give your answer alone inside <answer> and "
        "</answer>: a Python value when asked for an output or an input, the whole program "
        "when asked to write f."
    )

    def __init__(
        self,
        tasks: str | Path | Iterable[Mapping[str, Any]] | None = None,
        kinds: list[str] | tuple[str, ...] = KINDS,
        shown: int = 2,
        max_turns: int = 2,
        backend: str = "bubblewrap",
        pool_size: int = 2,
        timeout_s: float = 5.0,
        memory_mb: int = 512,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("parser", XmlTagParser(TAGS))
        super().__init__(max_turns=max_turns, **kwargs)
        unknown = sorted(set(kinds) - set(KINDS))
        if unknown or not kinds:
            raise ConfigError(f"kinds {list(kinds)}: choose among {', '.join(KINDS)}")
        if not 1 <= shown < INDUCTION_PAIRS:
            raise ConfigError(f"shown {shown}: between 1 and {INDUCTION_PAIRS - 1}")
        self.tasks = ListTasks.load(tasks) if tasks is not None else None
        self.kinds, self.shown = tuple(kinds), shown
        self.sandbox = SandboxConfig(backend, pool_size, timeout_s, memory_mb)
        self.task: dict[str, Any] = {}
        self.score: float | None = None

    def task_source(self) -> TaskSource:
        return self.tasks if self.tasks is not None else ContentTasks(self.opening_item)

    async def start(self, seed: int | None, options: dict[str, Any] | None) -> list[dict[str, Any]]:
        task_seed = seed if seed is not None else int(self.np_random.integers(2**31))
        task = choose_task(task_seed, options, self.tasks, self._generate)
        if task.get("kind") not in KINDS or not task.get("program") or not task.get("inputs"):
            raise ConfigError(
                f"a code reasoning task needs kind, program, inputs and outputs; got {sorted(task)}"
            )
        self.task, self.score = task, None
        return [{"role": "user", "content": prompt(task, self.shown_of(task))}]

    def shown_of(self, task: Mapping[str, Any]) -> int:
        """Induction pairs shown: the task's own count (a proposal's), else the env's."""
        shown = task.get("shown")
        return shown if isinstance(shown, int) and 1 <= shown < len(task["inputs"]) else self.shown

    def opening_item(self, seed: int) -> str:
        """What identifies generated task `seed`: its prompt (tasks that differ only in the
        pairs it does not show open alike)."""
        task = self._generate(seed)
        return prompt(task, self.shown_of(task))

    def _generate(self, seed: int) -> dict[str, Any]:
        return generated_task(seed, self.kinds)

    @tool
    async def answer(self, text: str) -> str:
        """Give your answer; this ends the episode.

        Args:
            text: a Python value (deduction, abduction) or the program (induction).
        """
        right, why = await self._grade(str(text).strip())
        self.score = 1.0 if right else 0.0
        return "Correct." if right else f"Incorrect: {why}."

    async def _grade(self, text: str) -> tuple[bool, str]:
        kind, task = self.task["kind"], self.task
        if kind == "deduction":
            return same_value(text, task["outputs"][0]), "that is not f's output"
        pool = await self.sandbox.pool(self)
        if kind == "abduction":
            problem = literal_problem(text)
            if problem is not None:
                return False, problem
            call = await call_f(pool, task["program"], text)
            if call.output is None:
                return False, f"f failed on it ({call.error})"
            return same_value(call.output, task["outputs"][0]), f"f gives {call.output[:80]}"
        held_out = list(zip(task["inputs"], task["outputs"], strict=True))[self.shown_of(task) :]
        problem = static_problem(text, [i for i, _ in held_out])
        if problem is not None:
            return False, problem
        for value, expected in held_out:
            call = await call_f(pool, text, value)
            if call.output is None or not same_value(call.output, expected):
                return False, f"a held-out input gives {call.output or call.error}"
        return True, ""

    def outcome(self) -> Outcome:
        return Outcome() if self.score is None else Outcome(self.score, True)

    def scripted_action(self) -> str | None:
        if not self.task:
            return None
        kind = self.task["kind"]
        text = {"deduction": self.task["outputs"][0], "abduction": self.task["inputs"][0],
                "induction": self.task["program"]}[kind]  # fmt: skip
        return self.parser.render([ToolCall("answer", {"text": text})])


def generated_task(seed: int, kinds: tuple[str, ...] = KINDS) -> dict[str, Any]:
    """Curated task `seed`: its kind in turn from `kinds`, a templated program and inputs."""
    kind = kinds[seed % len(kinds)]
    made = generate_program(seed, INDUCTION_PAIRS if kind == "induction" else 1)
    return {"kind": kind, "program": made.program, "inputs": made.inputs,
            "outputs": made.outputs}  # fmt: skip


def prompt(task: Mapping[str, Any], shown: int) -> str:
    """The solver's question for a task of either origin (curated or proposed)."""
    program, inputs, outputs = task["program"], task["inputs"], task["outputs"]
    if task["kind"] == "deduction":
        return f"```python\n{program}\n```\nInput: {inputs[0]}\nWhat does f return?"
    if task["kind"] == "abduction":
        return f"```python\n{program}\n```\nOutput: {outputs[0]}\nGive an input x with f(x) == that output."
    pairs = "\n".join(f"f({i}) == {o}" for i, o in list(zip(inputs, outputs, strict=True))[:shown])
    return f"{pairs}\nWrite the program that defines f."
