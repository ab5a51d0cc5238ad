"""toolgym/ProposeCode-v0: the proposer's side of code self-play (Absolute Zero's kinds).

Observation: the task kind to propose (deduction, abduction or induction: by the reset's
    seed, or the reset task's "kind"), example tasks from the self-play pool (without them,
    two curated ones), and what to write.
Actions (tags): <program>def f(x): ...</program> and <input>literal</input> (one input for
    deduction and abduction, `pairs` for induction). The proposal is complete, and the episode
    ends, once the program and its inputs are written.
Result: a ProposedTask (kind "code.KIND") whose `check` holds the program, its inputs and
    the outputs the sandbox computed, or why none were: a static problem (a banned module such
    as `random`, a banned builtin such as `hash` or `id`, an input that is not a literal) or a
    run that failed, timed out, or gave a different output the second time (each run in a
    fresh interpreter with its own hash seed and allocator, so a set's order or an address
    shows). Every run is in the sandbox, each
    within `timeout_s`; the self-play builder's execution stage turns what went wrong into
    the rejection's reason.
Reward: 0 (the builder pays the proposer from its solvers' results).
Arguments: kinds, pairs (induction inputs, default 4), max_turns, and the sandbox's backend,
    pool_size, timeout_s (default 2), memory_mb, plus ToolEnv's.
Versions: v0, first release.
"""

from __future__ import annotations

from typing import Any

from toolgym.envs.code.programs import (
    KINDS,
    PROGRAM_CHARS,
    TWO_RUNS,
    call_f,
    generate_program,
    other_inputs,
    same_value,
    static_problem,
)
from toolgym.envs.code.reason import INDUCTION_PAIRS, generated_task, prompt
from toolgym.envs.code.sandbox_access import SandboxConfig, UsesSandbox
from toolgym.envs.tasks import SeedTasks, TaskSource
from toolgym.envs.tasks.proposed import example_lines, example_tasks
from toolgym.envs.tool_env import Outcome, ToolEnv
from toolgym.errors import ConfigError
from toolgym.sandbox import SandboxPool
from toolgym.tools.parsers import XmlTagParser
from toolgym.tools.records import ToolCall
from toolgym.tools.tool import ToolCallError, tool

TAGS = {"program": ("program", "code"), "input": ("input", "value")}
MAX_EXAMPLES = 4
OWN_EXAMPLES = 2
"""Examples shown when the reset task brings none (a pool's are the same shape), so a
demonstration's prompt looks like a self-play step's."""
ASK = {
    "deduction": "a program and one input; a solver will predict the output",
    "abduction": "a program and one input; a solver will be shown the output and find an input",
    "induction": "a program and {n} inputs; a solver will see some input/output pairs and write the program",
}


class ProposeCodeEnv(UsesSandbox, ToolEnv):
    instructions = (
        "Propose a Python reasoning task. Write a function f of one argument inside <program> "
        "and </program>, then each input (a Python literal) inside <input> and </input>. The "
        "sandbox computes the outputs; the task should be hard but solvable."
    )

    def __init__(
        self,
        kinds: list[str] | tuple[str, ...] = KINDS,
        pairs: int = INDUCTION_PAIRS,
        max_turns: int = 2,
        backend: str = "bubblewrap",
        pool_size: int = 2,
        timeout_s: float = 2.0,
        memory_mb: int = 512,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("parser", XmlTagParser(TAGS))
        kwargs.setdefault("max_calls_per_turn", 1 + max(pairs, 1))
        super().__init__(max_turns=max_turns, **kwargs)
        if sorted(set(kinds) - set(KINDS)) or not kinds:
            raise ConfigError(f"kinds {list(kinds)}: choose among {', '.join(KINDS)}")
        if pairs < 2:
            raise ConfigError(f"pairs {pairs}: at least 2 (some shown, some held out)")
        self.kinds, self.pairs = tuple(kinds), pairs
        self.sandbox = SandboxConfig(backend, pool_size, timeout_s, memory_mb)
        self.kind = self.kinds[0]
        self.hidden: dict[str, Any] = {}
        self.source: str | None = None
        self.inputs: list[str] = []
        self.done_proposing = False

    def task_source(self) -> TaskSource:
        return SeedTasks()

    async def start(self, seed: int | None, options: dict[str, Any] | None) -> list[dict[str, Any]]:
        task_seed = seed if seed is not None else int(self.np_random.integers(2**31))
        given = dict((options or {}).get("task") or {})
        kind = given.get("kind")
        self.kind = kind if kind in self.kinds else self.kinds[task_seed % len(self.kinds)]
        made = generate_program(task_seed, self.wanted)
        self.hidden = {"program": made.program, "inputs": made.inputs}
        self.source, self.inputs, self.done_proposing = None, [], False
        ask = ASK[self.kind].format(n=self.pairs)
        examples = given.get("examples")
        if examples is None:  # played alone (sft, eval): examples of its own, as a pool shows
            own = [generated_task(task_seed + k + 1) for k in range(OWN_EXAMPLES)]
            examples = [{"instruction": prompt(task, 2), "check": task} for task in own]
        return [{"role": "user", "content": f"Kind: {self.kind}.{_examples(examples)}\n\n"
                 f"Write {ask}."}]  # fmt: skip

    @property
    def wanted(self) -> int:
        return self.pairs if self.kind == "induction" else 1

    @tool
    async def program(self, code: str) -> str:
        """Write the program: Python defining a function f of one argument.

        Args:
            code: e.g. "def f(x):\\n    return x * 2".
        """
        self.source = str(code)[: PROGRAM_CHARS + 1]
        return f"Program noted; now write {self.wanted - len(self.inputs)} input(s)."

    @tool
    async def input(self, value: str) -> str:
        """Write an input for f (a Python literal).

        Args:
            value: e.g. "3", "'abc'" or "[1, 2]".
        """
        if self.source is None:
            raise ToolCallError("write the program first (<program>...</program>)")
        self.inputs.append(str(value).strip()[:400])
        if len(self.inputs) < self.wanted:
            return f"Input noted; {self.wanted - len(self.inputs)} more."
        return await self._propose()

    async def _propose(self) -> str:
        assert self.source is not None
        program, inputs = self.source, self.inputs
        error = static_problem(program, inputs)
        outputs: list[str] = []
        if error is None:
            pool = await self.sandbox.pool(self)
            for value in inputs:  # two fresh interpreters set up apart: one answer
                first, second = [await call_f(pool, program, value, fresh=f) for f in TWO_RUNS]
                if first.output is None or second.output is None:
                    error = f"f({value[:40]}) failed: {first.error or second.error}"
                    break
                if first.output != second.output:
                    error = f"f({value[:40]}) gave {first.output[:40]}, then {second.output[:40]}"
                    break
                outputs.append(first.output)
        task: dict[str, Any] = {
            "kind": self.kind, "program": program, "inputs": inputs, "outputs": outputs
        }  # fmt: skip
        if error is None and self.kind == "abduction":
            task["any_input"] = await self._any_input_answers(pool, program, inputs[0], outputs[0])
        shown = max(self.pairs // 2, 1)
        instruction = prompt(task, shown) if error is None else f"{self.kind}: {program[:1500]}"
        self.hand_back({"kind": f"code.{self.kind}", "instruction": instruction,
                        "check": {**task, "shown": shown, "error": error}})  # fmt: skip
        self.done_proposing = True
        return (
            f"Not a task: {error}"
            if error
            else f"Proposed; f gives {', '.join(o[:40] for o in outputs)}."
        )

    async def _any_input_answers(
        self, pool: SandboxPool, program: str, value: str, output: str
    ) -> bool:
        """Whether f gives `output` for inputs near `value` too (all that ran): then an
        abduction solver need not reason, any input is an answer. An input f fails on is
        one a solver would be marked wrong for, so it counts as another answer."""
        outputs = [(await call_f(pool, program, near)).output for near in other_inputs(value)]
        return bool(outputs) and all(o is not None and same_value(o, output) for o in outputs)

    def outcome(self) -> Outcome:
        return Outcome(0.0, True) if self.done_proposing else Outcome()

    def scripted_action(self) -> str | None:
        """Propose a curated program with inputs of its own."""
        if not self.hidden:
            return None
        calls = [ToolCall("program", {"code": self.hidden["program"]})]
        calls += [ToolCall("input", {"value": v}) for v in self.hidden["inputs"]]
        return self.parser.render(calls)


def _examples(examples: Any) -> str:
    """Pool tasks shown as examples, each with its solution: what its program gives (and, for
    an induction, the program, which the instruction leaves out)."""

    def solved(example: dict[str, Any]) -> str:
        check = example["check"]
        pairs = zip(check["inputs"], check["outputs"], strict=True)
        given = "; ".join(f"f({i}) == {o}" for i, o in pairs)
        return f"{check['program']}\n  {given}" if check.get("kind") == "induction" else given

    texts = example_lines(example_tasks(examples, MAX_EXAMPLES, 400, solved))
    return "\n\nExample tasks:\n" + "\n---\n".join(texts) if texts else ""
