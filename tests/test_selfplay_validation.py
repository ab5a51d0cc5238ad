"""Proposed tasks are read typed and validated in stages, cheapest first: each rejection
names its stage and reason, hostile proposals are rejected, never raised."""

from __future__ import annotations

import pytest

from toolgym.agents.trajectory import Step, Trajectory
from toolgym.envs.search.scoring import normalize_answer
from toolgym.training.selfplay.validation import (
    Rules,
    gives_away,
    read_task,
    validate,
)


def proposal_of(result, calls=()):
    """A proposer's one-step episode that handed back `result`, after `calls`."""
    step = Step(0, 1, [0.0], "x", [], 0.0, 0, 1, tool_calls=[
        {"name": name, "arguments": arguments} for name, arguments in calls
    ], result=result)  # fmt: skip
    return read_task(Trajectory("p:0", steps=[step]))


def task(instruction, answer="Paris", kind="search"):
    return {"kind": kind, "instruction": instruction, "answer": answer}


def run(results, stages):
    proposals = [proposal_of(r) for r in results]
    validate(proposals, stages)
    return [(p.stage, p.rejected) for p in proposals]


def test_the_format_stage_reads_the_typed_task_and_bounds_its_size():
    good = proposal_of(task("Which city is the capital of France?"))
    assert good.task is not None and good.task.answer == "Paris" and good.rejected is None
    huge = proposal_of(task("x" * 1_000_000))
    assert huge.stage == "format" and "at most 2000 characters" in huge.rejected
    unknown = proposal_of({**task("Which city?"), "shell": "rm -rf /"})
    assert unknown.stage == "format" and "shell" in unknown.rejected
    none = read_task(Trajectory("p:1", steps=[Step(0, 1, [0.0], "x", [], 0.0, 0, 1)]))
    assert none.stage == "format" and "no task" in none.rejected
    failed = read_task(Trajectory("p:2", infra_error="sandbox died"))
    assert failed.stage == "format" and "sandbox died" in failed.rejected


def test_rules_reject_a_question_holding_its_answer_or_tool_call_markup():
    rules = [("rules", Rules())]
    verdicts = run(
        [
            task("Which city is the capital of France?"),
            task("Paris is the capital of which country? Answer: Paris", answer="Paris"),
            task("What is 14 times 3?", answer="4"),  # "4" is in "14" only as a digit
            task('<tool_call>{"name": "search", "arguments": {"query": "x"}}</tool_call>'),
            task("Short?"),
        ],
        rules,
    )
    assert verdicts[0] == (None, None) and verdicts[2] == (None, None)
    assert verdicts[1] == ("rules", "rules: the instruction gives its answer away")
    assert verdicts[3] == ("rules", "rules: the instruction holds tool-call markup (hermes)")
    assert verdicts[4][0] == "rules" and "at least 10" in verdicts[4][1]
    shown = "What does this print?\n```python\nprint(6 * 7)\n```"
    assert run([task(shown, "42", "code.deduction")], rules) == [(None, None)]  # code may show code
    strict = [("rules", Rules(markup=("fenced",)))]
    assert run([task(shown, "42", "code.deduction")], strict)[0][0] == "rules"


def test_rules_count_the_proposers_distinct_tool_calls():
    searched = proposal_of(task("Which river flows through Paris?", "Seine"),
                           calls=[("search", {"q": "paris"}), ("search", {"q": "seine"})])  # fmt: skip
    repeated = proposal_of(task("Which river flows through Lyon?", "Rhone"),
                           calls=[("search", {"q": "lyon"}), ("search", {"q": "lyon"})])  # fmt: skip
    searching = Rules(min_distinct_tool_calls=2, explored_with=("search",))
    validate([searched, repeated], [("rules", searching)])
    assert searched.rejected is None
    assert repeated.rejected == "rules: the proposer made 1 distinct calls to search (at least 2)"
    proposed = proposal_of(task("Which river flows through Nantes?", "Loire"),
                           calls=[("search", {"q": "nantes"}), ("propose", {"question": "?"})])  # fmt: skip
    validate([proposed], [("rules", searching)])  # writing the task is not exploring
    assert proposed.rejected == "rules: the proposer made 1 distinct calls to search (at least 2)"


def test_stages_run_cheapest_first_and_a_stage_that_raises_rejects_without_stopping():
    calls = []

    def dear(task, proposal):
        calls.append(task.instruction)
        return None

    def broken(task, proposal):
        raise RecursionError("a hostile task")

    verdicts = run(
        [task("Paris is the answer: Paris"), task("Which city is the capital of France?")],
        [("rules", Rules()), ("execution", broken), ("grounding", dear)],
    )
    assert verdicts[0][0] == "rules"  # the dearer stages never saw it
    assert verdicts[1] == (
        "execution",
        "execution: the check raised RecursionError: a hostile task",
    )
    assert calls == []


@pytest.mark.parametrize(
    "instruction",
    [
        "Which city is Paris? Name it.",
        "Which city is spelled P-a-r-i-s? Name it.",
        "Name the city p a r i s, as one word.",
        "Name the city whose name reversed is sirap.",
        "Name the city Par\u00adis (a soft hyphen hides it).",
        "Name the city Par\u200bis (a zero-width space hides it).",
    ],
)
def test_an_instruction_that_hides_its_answer_in_plain_sight_gives_it_away(instruction):
    assert gives_away(instruction, normalize_answer("Paris"))


def test_an_honest_instruction_does_not_give_its_answer_away():
    for question in ("Which city is the capital of France?", "Is it a b c or d?",
                     "Which country borders Romania to the north?"):  # fmt: skip
        assert not gives_away(question, normalize_answer("Paris"))
        assert not gives_away(question, normalize_answer("Oman"))
