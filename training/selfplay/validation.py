"""Validating proposed tasks in stages, cheapest first; the first stage that objects rejects
the task with its reason, and the later (dearer) stages never run.

A stage is a function (task, proposal) -> reason or None. The domain-independent one is
here: `rules` (the answer not given away by the question, no tool-call markup in it, enough
distinct exploring calls by the proposer). Domains add theirs (execution twice with the same
result, grounding against distractors) after it; repeats within a step are the builder's. Format (the typed task's shape and sizes) is
checked before any stage, when the result is read.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from toolgym.agents.trajectory import ResultError, Trajectory
from toolgym.envs.search.scoring import normalize_answer
from toolgym.envs.tasks.proposed import ProposedTask
from toolgym.tools.parsers import PARSERS
from toolgym.tools.parsers.base import parse_safely


@dataclass
class Proposal:
    """A proposer's episode and the task it handed back (None when it handed back none or a
    malformed one; `rejected` then says why)."""

    trajectory: Trajectory
    task: ProposedTask | None = None
    rejected: str | None = None
    """Which stage refused it, and why: "format: ...", "rules: ...", ..."""
    stage: str | None = None


Stage = Callable[[ProposedTask, Proposal], str | None]


FORMAT = "format"
"""The stage of a proposal whose task could not be read."""


def read_task(trajectory: Trajectory) -> Proposal:
    """The proposal in a proposer's episode: its last step's result read as a ProposedTask
    (the format stage)."""
    proposal = Proposal(trajectory)
    if trajectory.masked:
        proposal.rejected, proposal.stage = (
            f"{FORMAT}: the episode failed ({trajectory.infra_error})",
            FORMAT,
        )
        return proposal
    try:
        tasks = trajectory.results_as(ProposedTask)
    except ResultError as exc:
        proposal.rejected, proposal.stage = f"{FORMAT}: {exc}", FORMAT
        return proposal
    if not tasks:
        proposal.rejected, proposal.stage = f"{FORMAT}: the episode handed back no task", FORMAT
        return proposal
    proposal.task = tasks[-1]
    return proposal


@dataclass(frozen=True)
class Rules:
    """Cheap checks on the task's text and on how the proposer came to it. Texts are
    compared after the normalisation answers are graded by (envs/search/scoring.py)."""

    min_instruction_chars: int = 10
    needs_answer: bool = False
    """The domain grades by a reference answer (search), so a task without one is refused."""
    min_distinct_tool_calls: int = 0
    """Distinct (tool, arguments) calls to `explored_with` the proposer must have made (a
    search proposer that never searched wrote from memory, not from the world)."""
    explored_with: tuple[str, ...] | None = None
    """The tools that explore (search, run_sql); None counts every call. The calls that
    write the task (write_question, propose) are not exploration."""
    markup: tuple[str, ...] = ("hermes", "xml")
    """Parsers (tools/parsers) whose tool calls an instruction may not hold: a question that
    looks like a call or its result is an injection, not a task. Fenced code is left out by
    default, since a code task shows code."""

    def __call__(self, task: ProposedTask, proposal: Proposal) -> str | None:
        question = normalize_answer(task.instruction)
        if len(question) < self.min_instruction_chars:
            return f"the instruction has {len(question)} characters (at least {self.min_instruction_chars})"
        answer = normalize_answer(task.answer or "")
        if self.needs_answer and not answer:
            return "the task has no answer"
        if answer and gives_away(task.instruction, answer):
            return "the instruction gives its answer away"
        for name in self.markup:
            if parse_safely(PARSERS[name](), task.instruction).calls:
                return f"the instruction holds tool-call markup ({name})"
        calls = {
            (c.get("name"), repr(c.get("arguments")))
            for s in proposal.trajectory.steps
            for c in s.tool_calls
            if self.explored_with is None or c.get("name") in self.explored_with
        }
        if len(calls) < self.min_distinct_tool_calls:
            tools = " or ".join(self.explored_with or ("any tool",))
            return (
                f"the proposer made {len(calls)} distinct calls to {tools} "
                f"(at least {self.min_distinct_tool_calls})"
            )
        return None


def gives_away(instruction: str, answer: str) -> bool:
    """Whether the instruction holds the (normalised) answer: as words, with its invisible
    characters dropped (a soft hyphen, a zero-width space), reversed, or spelled out letter
    by letter ("P-a-r-i-s", "p a r i s")."""
    visible = "".join(c for c in unicodedata.normalize("NFKC", instruction)
                      if unicodedata.category(c) != "Cf")  # fmt: skip
    question = f" {normalize_answer(visible)} "
    wanted = [answer, *([answer[::-1]] if len(answer) >= 3 else [])]
    if any(f" {w} " in question for w in wanted):
        return True
    compact = {w.replace(" ", "") for w in wanted}
    return any(word in compact for word in _spelled_words(visible))


def _spelled_words(text: str) -> list[str]:
    """The words a text spells out one character at a time (runs of single characters
    between separators, articles included), each joined."""
    spelled, run = [], ""
    for token in "".join(c if c.isalnum() else " " for c in text.casefold()).split():
        if len(token) == 1:
            run += token
            continue
        if len(run) > 1:
            spelled.append(run)
        run = ""
    if len(run) > 1:
        spelled.append(run)
    return spelled


def validate(proposals: Sequence[Proposal], stages: Sequence[tuple[str, Stage]]) -> None:
    """Run each proposal that has a task through `stages` in order; the first reason given
    rejects it (`rejected`, `stage`). A stage that raises rejects with what it raised: a
    hostile proposal never stops the step."""
    for proposal in proposals:
        task = proposal.task
        if task is None or proposal.rejected is not None:
            continue
        for name, stage in stages:
            try:
                reason = stage(task, proposal)
            except Exception as exc:
                reason = f"the check raised {type(exc).__name__}: {str(exc)[:200]}"
            if reason is not None:
                proposal.rejected, proposal.stage = f"{name}: {reason}", name
                break
