"""toolgym/Search-v0 and toolgym/SearchR1-v0: answer a question by searching a corpus.

Observation: the question; search results as "Doc 1 [id 42] (Title: ...) text" lines, each
    document cut to `doc_chars`.
Tools (Search-v0, tool calls): search(query, top_k), open(doc_id) to read a document from
    earlier results in full, answer(text) to finish.
Tags (SearchR1-v0, Search-R1's format): <search>query</search> is answered with
    <information>...</information>; <answer>text</answer> finishes. <think> is prose.
Reward: on answering, exact match (`reward="em"`, SQuAD normalisation, best over the gold
    aliases) or token F1 (`reward="f1"`); `format_reward` when a well-formed answer scores 0;
    `invalid_action_reward` per malformed turn (ToolEnv's). Solved when the answer scores 1:
    an exact match, or under F1 every token matching (a partial F1 is a reward, not a
    success).
Episode end: terminated by an answer; truncated after `max_turns` turns.
state_key: the set of document ids retrieved so far, so trajectories that found the same
    documents share a state whatever words their queries used (GiGPO's anchors).
Infrastructure: a search server that cannot be reached flags the step `infra_error` (masked
    from training), never reward 0.
Arguments: tasks (JSONL path or list of {"question", "answers"}; Search-R1's "golden_answers"
    is read too; a task with "documents" (a list of texts) is a reading task: they are shown
    with the question and searching is off, as self-play's grounding check asks; default: `n_questions` `hops`-hop questions over World(world_seed,
    world_size)); the engine: server_url (a `/retrieve` server), index (a directory from
    `toolgym index build`), simulator (a model directory that writes the results, with
    noise = (p_start, p_end, base) over training, read at the step of the run's clock,
    `Resources.clock`, which the trainer moves), engine (any SearchEngine instance, e.g.
    `SimulatedEngine.self_search(EngineWriter(policy, renderer))` for SSRL), or none of them
    (in-process bm25 over the world); topk, doc_chars, reward, format_reward, max_turns, plus
    ToolEnv's.
    The engine is a shared resource: instances with the same engine arguments share one.
Tasks: a `ListTasks` (task_source()); without a "split" field a tenth of the distinct
    questions is held out for evaluation, chosen by a hash of their content.
Versions: v0, first release.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from toolgym.envs.search.engine import choose_engine
from toolgym.envs.search.scoring import exact_match, f1
from toolgym.envs.search.world import World
from toolgym.envs.tasks import ListTasks, TaskSource
from toolgym.envs.tasks import client as client_tasks
from toolgym.envs.tool_env import Outcome, ToolEnv
from toolgym.errors import ConfigError
from toolgym.tools.parsers import XmlTagParser
from toolgym.tools.records import ToolCall
from toolgym.tools.search.corpus import Document
from toolgym.tools.search.engines.base import Hit, SearchEngine
from toolgym.tools.tool import ToolCallError, tool

MAX_TOPK = 10
MAX_DOCUMENTS = 8
"""The most documents a reading task shows."""
R1_TAGS = {"search": ("search", "query"), "answer": ("answer", "text")}


class _SearchEnvBase(ToolEnv):
    """Tasks, engine, scoring and the answer tool, shared by both action formats."""

    def __init__(
        self,
        tasks: str | Path | Iterable[Mapping[str, Any]] | None = None,
        server_url: str | None = None,
        index: str | Path | None = None,
        simulator: str | Path | None = None,
        noise: tuple[float, float, float] | list[float] = (0.0, 0.5, 4.0),
        engine: SearchEngine | None = None,
        world_seed: int = 0,
        world_size: str = "small",
        hops: int = 2,
        n_questions: int = 200,
        topk: int = 3,
        doc_chars: int = 400,
        reward: Literal["em", "f1"] = "em",
        format_reward: float = 0.0,
        max_turns: int = 6,
        max_calls_per_turn: int | None = 1,
        **kwargs: Any,
    ) -> None:
        super().__init__(max_turns=max_turns, max_calls_per_turn=max_calls_per_turn, **kwargs)
        if reward not in ("em", "f1"):
            raise ConfigError(f"reward {reward!r}: choose em or f1")
        if not 1 <= topk <= MAX_TOPK:
            raise ConfigError(f"topk {topk}: it must be between 1 and {MAX_TOPK}")
        self.engine_choice = choose_engine(
            server_url, index, world_seed, world_size, simulator, _noise(noise), engine
        )
        self.engine: SearchEngine | None = engine
        """The engine in use: made (or taken from the shared resources) on the first reset."""
        self.tasks = ListTasks.load(
            tasks if tasks is not None else _world_tasks(world_seed, world_size, n_questions, hops),
            check=check_task,
        )
        self.topk, self.doc_chars = topk, doc_chars
        self.score = exact_match if reward == "em" else f1
        self.format_reward = format_reward
        self.task: dict[str, Any] = {}
        self.seen: dict[str, Document] = {}
        self.answered: float | None = None
        self.reading = False
        """The task gave its documents (a self-play grounding check): search is off."""

    def expected_answer(self) -> str | None:
        """The task's accepted answers (ExposesAnswer)."""
        return " | ".join(str(a) for a in (self.task or {}).get("answers") or []) or None

    def client_task(self, task: Mapping[str, Any]) -> dict[str, Any]:
        """A question, its accepted answers and, for a reading task, its documents."""
        fields = ("question", "answers", "documents")
        given = client_tasks.only_fields(task, fields, "search task")
        check_task(given)
        client_tasks.text(given["question"], "question")
        answers = given["answers"]
        client_tasks.texts([answers] if isinstance(answers, str) else answers, "answers")
        if "documents" in given:
            client_tasks.texts(given["documents"], "documents", MAX_DOCUMENTS)
        return given

    async def start(self, seed: int | None, options: dict[str, Any] | None) -> list[dict[str, Any]]:
        task_seed = seed if seed is not None else int(self.np_random.integers(2**31))
        options = options or {}
        if self.engine is None:
            choice = self.engine_choice
            made: SearchEngine = await self.shared(choice.key, lambda: choice.open(self.resources))
            self.engine = made
        engine: SearchEngine = self.engine
        clock = self.resources.clock  # the run's, for a simulated engine's noise curriculum
        if clock.steps is not None:
            engine.set_training_step(clock.step, clock.steps)
        # Without a task (play, a bare reset), the seed picks one of the training tasks.
        given = options.get("task")
        task = dict(given) if given is not None else self.tasks.task("train", task_seed)
        check_task(task)
        answers: Any = task.get("answers", task.get("golden_answers"))
        self.task = {**task, "answers": [answers] if isinstance(answers, str) else list(answers)}
        self.seen, self.answered = {}, None
        documents = task.get("documents")
        self.reading = isinstance(documents, list) and bool(documents)
        # a reading task: the evidence is given and searching is off
        if isinstance(documents, list) and documents:
            shown = "\n".join(f"Doc {i} {_cut(str(d), self.doc_chars)}"
                              for i, d in enumerate(documents[:MAX_DOCUMENTS], 1))  # fmt: skip
            return [{"role": "user", "content": f"Documents:\n{shown}\n\nQuestion: {task['question']}"
                     "\nAnswer from these documents alone."}]  # fmt: skip
        return [{"role": "user", "content": f"Question: {task['question']}"}]

    @tool
    async def answer(self, text: str) -> str:
        """Give your final answer; this ends the episode.

        Args:
            text: the answer alone, as short as possible, e.g. "Paris".
        """
        score = self.score(text, self.task["answers"])
        self.answered = score if score > 0 else self.format_reward
        return f"Your answer scored {score:.2f}."

    def task_source(self) -> TaskSource:
        return self.tasks

    def outcome(self) -> Outcome:
        return Outcome() if self.answered is None else Outcome(self.answered, True)

    def state_key(self) -> Hashable:
        return frozenset(self.seen)

    def scripted_action(self) -> str | None:
        """Follow the gold path of a world question: search each hop's name, then answer."""
        answer = ToolCall("answer", {"text": self.task["answers"][0]}) if self.task else None
        if self.reading and answer is not None:
            return self.parser.render([answer])
        return self.follow_gold_path(answer) if answer is not None else None

    def follow_gold_path(self, last: ToolCall) -> str | None:
        """The next search of the task's gold path (each hop's name in turn), then `last`;
        None for a task without one."""
        hops = self.task.get("hops")
        if not hops:
            return None
        missing = [h for h in hops if h["doc_id"] not in self.seen]
        call = ToolCall("search", {"query": missing[0]["entity"]}) if missing else last
        return self.parser.render([call])

    async def _retrieve(self, query: str, topk: int) -> list[Hit]:
        assert self.engine is not None  # made by reset; tools only run after it
        if self.reading:
            raise ToolCallError("searching is off for this question: answer from the documents")
        hits = (await self.engine.search([query], topk))[0]
        self.seen.update((h.document.id, h.document) for h in hits)
        return hits

    def _results(self, hits: list[Hit]) -> str:
        if not hits:
            return "No documents found."
        return "\n".join(
            f"Doc {i} [id {h.document.id}] (Title: {h.document.title}) {_cut(h.document.body, self.doc_chars)}"
            for i, h in enumerate(hits, 1)
        )


class SearchEnv(_SearchEnvBase):
    instructions = (
        "Answer the question. Search the corpus as often as you need (one search per turn), "
        "open a document from the results to read all of it, then give a short answer."
    )

    @tool
    async def search(
        self, query: str, top_k: Annotated[int, Field(ge=1, le=MAX_TOPK)] | None = None
    ) -> str:
        """Search the corpus.

        Args:
            query: what to look for, e.g. a name.
            top_k: how many documents to return (1 to 10; default 3).
        """
        return self._results(await self._retrieve(query, top_k or self.topk))

    @tool
    async def open(self, doc_id: str) -> str:
        """Read a document from your earlier search results in full.

        Args:
            doc_id: the id shown in the results, e.g. "42".
        """
        document = self.seen.get(doc_id)
        if document is None:
            return f"Document {doc_id!r} is not among your search results; search for it first."
        return f"(Title: {document.title}) {document.body}"


class SearchR1Env(_SearchEnvBase):
    instructions = (
        "Answer the question. Think inside <think> and </think> whenever you get new "
        "information. To look something up, write <search> your query </search>; the results "
        "come back between <information> and </information>. Search as often as you need. "
        "When you know the answer, write it alone inside <answer> and </answer>, e.g. "
        "<answer> Paris </answer>."
    )

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("parser", XmlTagParser(R1_TAGS))
        super().__init__(**kwargs)

    @tool
    async def search(self, query: str) -> str:
        """Search the corpus.

        Args:
            query: what to look for, e.g. a name.
        """
        hits = await self._retrieve(query, self.topk)
        return f"<information>{self._results(hits)}</information>"


def check_task(task: Mapping[str, Any]) -> None:
    """A search task: {"question": str, "answers": str or [str, ...]} (Search-R1's
    "golden_answers" is read as "answers"), optionally "documents" to answer from."""
    answers = task.get("answers", task.get("golden_answers"))
    if not isinstance(task.get("question"), str) or not task["question"].strip():
        raise ConfigError(
            f"a search task needs a 'question' string and 'answers'; got keys {sorted(task)}"
        )
    if isinstance(answers, str):
        answers = [answers]
    if not isinstance(answers, list) or not answers or not all(isinstance(a, str) for a in answers):
        raise ConfigError(
            "a search task needs 'answers' (or 'golden_answers'): a string or a list of "
            f"strings, got {type(answers).__name__ if answers is not None else 'none'}"
        )


def _world_tasks(seed: int, size: str, n: int, hops: int) -> list[dict[str, Any]]:
    return [q.to_task() for q in World(seed, size).questions(n, hops)]


def _noise(noise: tuple[float, float, float] | list[float]) -> tuple[float, float, float]:
    if len(noise) != 3:
        raise ConfigError(f"noise is (p_start, p_end, base), got {noise!r}")
    return (float(noise[0]), float(noise[1]), float(noise[2]))


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit].rstrip() + " ..."
