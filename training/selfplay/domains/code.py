"""Code self-play (Absolute Zero's three kinds): the proposer writes a program and inputs
(toolgym/ProposeCode-v0), the sandbox computes the outputs, and solvers on CodeReason-v0
predict an output (deduction), find an input (abduction, checked by running it) or write the
program from examples (induction, checked on held-out pairs).

The `execution` stage refuses what the proposer env found wrong before or while running: a
banned module (`random`, `os`, ...) or builtin, an input that is not a literal, a program that
failed or timed out, or one whose two runs disagree. A proposal never runs outside the
sandbox.
"""

from __future__ import annotations

import json
from typing import Any

from toolgym.envs.code.programs import KINDS
from toolgym.envs.code.reason import generated_task, prompt
from toolgym.envs.proposed import ProposedTask
from toolgym.envs.ref import EnvRef
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


class CodeDomain:
    name = "code"

    def __init__(self, solver: EnvRef, proposer_kwargs: dict[str, Any] | None = None) -> None:
        self.solver = solver
        shared = {k: v for k, v in solver.kwargs.items() if k in (*SANDBOX, "kinds")}
        self.proposer = EnvRef("propose-code", "toolgym/ProposeCode-v0",
                               {**shared, **(proposer_kwargs or {})})  # fmt: skip

    def stages(self) -> list[tuple[str, Stage]]:
        return [("rules", Rules()), ("execution", execution)]

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
