"""Training data for a search simulator, ZeroSearch's way: questions are played against a real
engine, and each result is labelled useful or noisy by whether it holds the answer its query
was made for.

The queries for a question are the ones an oracle would search: each hop's entity (its gold
is the next hop's entity, or the answer at the last hop) and the question itself (its gold is
the answer). Every query's top-k real results are kept with their labels. A tenth of the
questions (by a hash of their text, so the split is stable) are held out for the quality
report: only what no training question asks. `tools/search/engines/simulated.py:prompt` turns a row into the chat a simulator
is fine-tuned on, the same one it is served with.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolgym.envs.search.scoring import normalize_answer
from toolgym.envs.search.world import Question
from toolgym.errors import ConfigError
from toolgym.tools.search.corpus import Document
from toolgym.tools.search.engines.base import SearchEngine


@dataclass(frozen=True)
class Result:
    """One real result for one query, labelled."""

    query: str
    gold: list[str]
    rank: int
    document: Document
    useful: bool
    """It holds one of `gold`."""
    split: str
    """train, or eval (held out for the quality report)."""

    def to_json(self) -> dict[str, Any]:
        return {"query": self.query, "gold": self.gold, "rank": self.rank,
                "document": self.document.to_json(), "useful": self.useful, "split": self.split}  # fmt: skip

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Result:
        return cls(data["query"], list(data["gold"]), int(data["rank"]),
                   Document.from_served(data["document"]), bool(data["useful"]), data["split"])  # fmt: skip


def holds(text: str, golds: Iterable[str]) -> bool:
    """Whether `text` states one of `golds` (after SQuAD's normalisation, as a whole phrase)."""
    padded = f" {normalize_answer(text)} "
    return any(f" {g} " in padded for g in map(normalize_answer, golds) if g)


def queries(question: Question, names: dict[str, str]) -> list[tuple[str, list[str]]]:
    """(query, what it should find) for each hop's entity and for the question itself."""
    out = []
    for i, hop in enumerate(question.hops):
        last = i == len(question.hops) - 1
        out.append(
            (hop.entity, list(question.answers) if last else [names[question.hops[i + 1].doc_id]])
        )
    out.append((question.question, list(question.answers)))
    return out


def split_of(question: Question, held_out: float = 0.1) -> str:
    digest = hashlib.sha1(question.question.encode()).digest()
    return "eval" if int.from_bytes(digest[:4], "big") / 2**32 < held_out else "train"


async def label_results(engine: SearchEngine, questions: Sequence[Question],
                        names: dict[str, str], topk: int) -> list[Result]:  # fmt: skip
    """Every question's queries searched once (a query shared by questions, once per gold); a
    (query, gold) that a training question also asks is not held out."""
    if topk < 1:
        raise ConfigError(f"topk must be at least 1, got {topk}")
    asked: dict[tuple[str, tuple[str, ...]], str] = {}
    for q in questions:
        for query, gold in queries(q, names):
            split = split_of(q)
            key = (query, tuple(gold))
            asked[key] = "train" if "train" in (split, asked.get(key)) else "eval"
    keys = list(asked)
    hits = await engine.search([query for query, _ in keys], topk)
    return [
        Result(query, list(gold), rank, hit.document, holds(hit.document.contents, gold), asked[(query, gold)])
        for (query, gold), row in zip(keys, hits, strict=True)
        for rank, hit in enumerate(row)
    ]  # fmt: skip


def write_results(path: str | Path, results: Iterable[Result]) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for r in results:
            f.write(json.dumps(r.to_json(), ensure_ascii=False) + "\n")
    return path


def read_results(path: str | Path) -> list[Result]:
    out = []
    with Path(path).open() as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                out.append(Result.from_json(json.loads(line)))
            except (ValueError, KeyError, TypeError) as exc:
                raise ConfigError(f"{path}:{n}: not a simulator-data row ({exc})") from None
    if not out:
        raise ConfigError(f"{path} holds no rows")
    return out
