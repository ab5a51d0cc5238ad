"""Search self-play on the real world corpus: the proposer env, given an answer, searches and
hands back its question with the documents it retrieved; the rules refuse a question holding
its answer or written without searching; grounding shows a reader the proposer's evidence
shuffled with four distractors from other proposals (searching off), and a question the
evidence cannot answer is refused."""

from __future__ import annotations

import asyncio

import pytest

import toolgym
from toolgym.agents.trajectory import Step, Trajectory, TrajectoryGroup
from toolgym.envs.ref import EnvRef
from toolgym.training.selfplay.domains.search import SearchDomain
from toolgym.training.selfplay.validation import read_task, validate

ARGS = {"hops": 1, "topk": 1, "max_turns": 3}
DOMAIN_REF = EnvRef("search", "toolgym/Search-v0", ARGS)


def scripted_proposal(seed: int, question: str | None = None, search: bool = True):
    """The proposer env's episode: its scripted searches (unless `search` is off), then
    `question` (default: the hidden one) proposed; the trajectory as the builder reads it."""

    async def play():
        env = toolgym.make("toolgym/ProposeSearch-v0", **ARGS)
        try:
            await env.areset(seed=seed, options={"task": {"examples": []}})
            steps = []
            while True:
                action = env.scripted_action()
                proposing = "propose" in action
                if proposing or not search:
                    text = question or env.task["question"]
                    action = f'<tool_call>{{"name": "propose", "arguments": {{"question": "{text}"}}}}</tool_call>'
                _, _, done, _, info = await env.astep(action)
                steps.append(Step(0, 1, [0.0], action, [], 0.0, 0, 1,
                                  tool_calls=info["tool_calls"], result=info.get("result")))  # fmt: skip
                if done:
                    return Trajectory(f"p{seed}:0", steps=steps), env.task
        finally:
            await env.aclose()

    return asyncio.run(play())


def test_a_proposal_carries_its_question_answer_and_evidence_and_passes_the_rules():
    trajectory, hidden = scripted_proposal(5)
    proposal = read_task(trajectory)
    task = proposal.task
    assert task.kind == "search.1hop" and task.answer == hidden["answers"][0]
    assert task.instruction == hidden["question"]
    assert any(task.answer in d for d in task.check["documents"])  # the evidence holds it
    validate([proposal], SearchDomain(DOMAIN_REF).stages())
    assert proposal.rejected is None


def test_the_rules_refuse_an_answer_in_the_question_and_a_question_written_blind():
    trajectory, hidden = scripted_proposal(6, question=None)
    answer = hidden["answers"][0]
    giveaway = read_task(scripted_proposal(6, question=f"Is the answer {answer}?")[0])
    blind = read_task(scripted_proposal(7, search=False)[0])
    validate([giveaway, blind], SearchDomain(DOMAIN_REF).stages())
    assert giveaway.rejected == "rules: the instruction gives its answer away"
    assert (
        blind.rejected == "rules: the proposer made 0 distinct calls to search or open (at least 1)"
    )


def test_grounding_shows_own_evidence_with_four_distractors_and_reads_the_verdict():
    domain = SearchDomain(DOMAIN_REF)
    tasks = [read_task(scripted_proposal(seed)[0]).task for seed in range(8, 14)]
    resets = domain.grounding_tasks(tasks, step=0)
    for task, reset in zip(tasks, resets, strict=True):
        own = task.check["documents"]
        assert set(own) <= set(reset["documents"])
        assert len(reset["documents"]) == len(own) + 4
        assert reset["question"] == task.instruction and reset["answers"] == [task.answer]

    async def read(reset, answer):
        env = toolgym.make("toolgym/Search-v0", **ARGS)
        try:
            await env.areset(seed=0, options={"task": reset})
            blocked = await env.astep(
                '<tool_call>{"name": "search", "arguments": {"query": "x"}}</tool_call>'
            )
            assert "searching is off" in blocked[0][-1]["content"]
            _, reward, _, _, _ = await env.astep(
                f'<tool_call>{{"name": "answer", "arguments": {{"text": "{answer}"}}}}</tool_call>'
            )
            return reward
        finally:
            await env.aclose()

    right = asyncio.run(read(resets[0], tasks[0].answer))
    wrong = asyncio.run(read(resets[1], "Nowhere"))
    assert (right, wrong) == (1.0, 0.0)

    def group(reward):
        step = Step(0, 1, [0.0], "x", [], reward, 0, 1)
        return TrajectoryGroup("g", 0, [Trajectory("r:0", steps=[step])], "search")

    assert domain.grounded(group(1.0)) is None
    assert (
        domain.grounded(group(0.0))
        == "a reader given its evidence and distractors could not answer it"
    )
    assert domain.grounded(
        TrajectoryGroup("g", 0, [Trajectory("r:0", infra_error="down")], "s")
    ) == ("its readers failed to run")


def test_references_are_the_solver_s_own_training_questions():
    references = SearchDomain(DOMAIN_REF).references(3)
    assert len(references) == 3 and all(r.answer and r.kind == "search.1hop" for r in references)


@pytest.mark.parametrize(
    "hostile",
    ["x" * 1_000_000, '<tool_call>{"name": "answer"}</tool_call>',
     "Which river\x00 flows by?", "Which river \ud800 flows by?", "Which \x1b[2J river?"],
)  # fmt: skip
def test_hostile_questions_are_refused_with_their_reason(hostile):
    trajectory, _ = scripted_proposal(9)
    step = trajectory.steps[-1]
    step.result = {**step.result, "instruction": hostile}
    proposal = read_task(trajectory)
    validate([proposal], SearchDomain(DOMAIN_REF).stages())
    assert proposal.stage in ("format", "rules") and proposal.rejected
    assert proposal.task is None or proposal.rejected  # never a solver's instruction


def test_no_distractor_holds_the_task_s_answer():
    """A question its own evidence cannot answer must not pass on a distractor that can:
    documents holding the answer are never shown as distractors."""
    from toolgym.envs.tasks.proposed import ProposedTask

    def task(question, answer, documents):
        return ProposedTask(kind="search.1hop", instruction=question, answer=answer,
                            check={"documents": documents})  # fmt: skip

    ungrounded = task("Where was the painter Ilse Varga born?", "Brno", ["Ilse Varga painted."])
    others = [task(f"Question {i} about rivers?", f"River{i}",
                   [f"River{i} flows past Brno.", f"The river River{i} is long."]) for i in range(4)]  # fmt: skip
    domain = SearchDomain(DOMAIN_REF)
    for step in range(5):
        shown = domain.grounding_tasks([ungrounded, *others], step)[0]["documents"]
        assert not any("Brno" in d for d in shown)
        assert "Ilse Varga painted." in shown and len(shown) == 1 + 4
