"""toolgym/ProposeSearch-v0: the proposer's side of search self-play (Search Self-Play).

Observation: an answer (an entity or value of the corpus) and how many hops the question
    should take, the example questions the reset task carries ("examples"; without them, two
    of the env's own), and the request to write a question whose answer it is.
Tools: search(query, top_k) and open(doc_id), as Search-v0's; propose(question) ends the
    episode.
Result: a ProposedTask (kind "search.Nhop"): the question, the given answer, and in `check`
    the documents the proposer retrieved (up to `evidence` of them, each cut to
    `evidence_chars`), which the self-play builder's grounding check shows a reader with
    distractors: a question that cannot be answered from its proposer's own evidence is
    refused.
Reward: 0 (the builder pays the proposer from its solvers' results).
Arguments: Search-v0's (the answer comes from its tasks, drawn by the reset's seed; the
    hidden question and its gold path drive only the scripted proposer, for SFT), evidence,
    evidence_chars.
Versions: v0, first release.
"""

from __future__ import annotations

import json
from typing import Any

from toolgym.envs.search.env import SearchEnv
from toolgym.envs.tasks.proposed import MAX_INSTRUCTION_CHARS, example_lines, example_tasks
from toolgym.envs.tool_env import Outcome
from toolgym.tools.records import ToolCall
from toolgym.tools.tool import tool

MAX_EXAMPLES = 4
OWN_EXAMPLES = 2


class ProposeSearchEnv(SearchEnv):
    instructions = (
        "Write a question whose answer is the one given. Search the corpus (one search per "
        "turn) and open documents to find facts that lead to the answer, then write the "
        "question with propose. The question must not contain the answer."
    )
    answer = None  # a proposer proposes; it does not answer
    shared_items = (
        "a proposer writes questions for training answers only, whatever split it is drawn "
        "from, so that no held-out answer reaches training through a proposal; the solver's "
        "held-out questions are what a run evaluates"
    )

    def __init__(self, evidence: int = 4, evidence_chars: int = 400, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.evidence, self.evidence_chars = evidence, evidence_chars
        self.proposed = False

    async def start(self, seed: int | None, options: dict[str, Any] | None) -> list[dict[str, Any]]:
        given = dict((options or {}).get("task") or {})
        await super().start(seed, None)  # the seed's task: its answer, hops and gold path
        self.proposed = False
        hops = len(self.task.get("hops") or []) or 1
        answer = self.task["answers"][0]
        return [{"role": "user", "content": f"Answer: {answer}\nHops: {hops}"
                 f"{_examples(self.shown_examples(given, seed))}\n\nWrite a question whose answer is "
                 f"{json.dumps(answer)}."}]  # fmt: skip

    def shown_examples(self, given: dict[str, Any], seed: int | None) -> Any:
        """The reset task's examples; played alone (sft, eval), two of the env's own
        questions, as a pool shows them."""
        if "examples" in given:
            return given["examples"]
        first = seed if seed is not None else 0
        own = [self.tasks.task("train", first + k + 1) for k in range(OWN_EXAMPLES)]
        return [{"instruction": t["question"], "answer": t["answers"][0]} for t in own]

    @tool
    async def propose(self, question: str) -> str:
        """Propose your question (its answer is the one you were given); this ends the episode.

        Args:
            question: the question alone, e.g. "In which city was the founder of X born?".
        """
        hops = len(self.task.get("hops") or []) or 1
        documents = [
            f"(Title: {d.title}) {d.body}"[: self.evidence_chars]
            for d in list(self.seen.values())[: self.evidence]
        ]
        self.hand_back(
            {
                "kind": f"search.{hops}hop",
                "instruction": str(question)[: MAX_INSTRUCTION_CHARS + 1],
                "answer": self.task["answers"][0],
                "check": {"documents": documents},
            }
        )
        self.proposed = True
        return "Proposed."

    def outcome(self) -> Outcome:
        return Outcome(0.0, True) if self.proposed else Outcome()

    def scripted_action(self) -> str | None:
        """Follow the hidden question's gold path, then propose it."""
        if not self.task:
            return None
        return self.follow_gold_path(ToolCall("propose", {"question": self.task["question"]}))


def _examples(examples: Any) -> str:
    shown = example_tasks(examples, MAX_EXAMPLES, 300, lambda e: f"answer: {e['answer']}")
    texts = example_lines(shown)
    return "\n\nExample questions:\n" + "\n".join(f"- {t}" for t in texts) if texts else ""
