"""Code self-play (Absolute Zero's three kinds): the proposer writes a program and inputs
(toolgym/ProposeCode-v0), the sandbox computes the outputs, and solvers on CodeReason-v0
predict an output (deduction), find an input (abduction, checked by running it) or write the
program from examples (induction, checked on held-out pairs).

The `execution` stage refuses what the proposer env found wrong before or while running: a
banned module (`random`, `os`, ...) or builtin, an input that is not a literal, a program that
failed or timed out, or one whose two runs disagree. The `skill` stage refuses a task a
wrong answer passes: a deduction whose output is its input, an abduction f that gives the
same output for nearby inputs (the proposer env ran them), an induction whose outputs are
one constant or the inputs themselves. A proposal never runs outside the sandbox.
"""

from __future__ import annotations

import json
from typing import Any

from toolgym.envs.code.programs import KINDS, same_value
from toolgym.envs.code.reason import generated_task, prompt
from toolgym.envs.ref import EnvRef
from toolgym.envs.tasks.proposed import ProposedTask
from toolgym.training.selfplay.validation import Proposal, Rules, Stage

SANDBOX = ("backend", "pool_size", "memory_mb")
"""Solver arguments the proposer shares (its own timeout_s caps a proposal's runs)."""
REFERENCE_SEEDS = 10**8


def execution(task: ProposedTask, proposal: Proposal) -> str | None:
    check = task.check
    if check.get("error"):
        return str(check["error"])
    if not check.get("outputs") or len(check["outputs"]) != len(check.get("inputs") or []):
        return "the sandbox computed no output"
    return None


def skill(task: ProposedTask, proposal: Proposal) -> str | None:
    """A wrong answer must fail: a deduction whose output is its input asks for a copy, an
    abduction f answers with any input, and an induction whose outputs are all one value, or
    each its input, a constant or the identity program passes."""
    check = task.check
    inputs, outputs = [str(v) for v in check["inputs"]], [str(v) for v in check["outputs"]]
    kind = check.get("kind")
    if kind == "deduction" and same_value(outputs[0], inputs[0]):
        return "the output is the input: a copy answers it"
    if kind == "abduction" and check.get("any_input") is True:
        return "f gives the same output for other inputs too: any input answers it"
    if kind == "induction":
        if all(same_value(o, outputs[0]) for o in outputs):
            return "every input gives one output: a program that returns it passes"
        if all(same_value(o, i) for i, o in zip(inputs, outputs, strict=True)):
            return "every output is its input: the identity program passes"
    return None


class CodeDomain:
    name = "code"

    def __init__(self, solver: EnvRef, proposer_kwargs: dict[str, Any] | None = None) -> None:
        self.solver = solver
        shared = {k: v for k, v in solver.kwargs.items() if k in (*SANDBOX, "kinds")}
        self.proposer = EnvRef("propose-code", "toolgym/ProposeCode-v0",
                               {**shared, **(proposer_kwargs or {})})  # fmt: skip

    def stages(self) -> list[tuple[str, Stage]]:
        return [("rules", Rules()), ("execution", execution), ("skill", skill)]

    def solver_task(self, task: ProposedTask) -> dict[str, Any]:
        check = task.check
        return {k: check[k] for k in ("kind", "program", "inputs", "outputs", "shown")}

    def identity(self, task: ProposedTask) -> str:
        """The kind, the program and its inputs: what the solver is asked about."""
        check = task.check
        return json.dumps([check.get("kind"), check.get("program"), check.get("inputs")])

    def references(self, k: int) -> list[ProposedTask]:
        """k of the solver env's curated (generated) tasks."""
        kinds = tuple(self.solver.kwargs.get("kinds") or KINDS)
        shown = int(self.solver.kwargs.get("shown", 2))
        out = []
        for i in range(k):
            task = {**generated_task(REFERENCE_SEEDS + i, kinds), "shown": shown}
            out.append(ProposedTask(kind=f"code.{task['kind']}", instruction=prompt(task, shown),
                                    check=task))  # fmt: skip
        return out
