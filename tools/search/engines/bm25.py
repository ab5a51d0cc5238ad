"""bm25 over an index directory, with bm25s: sparse scores saved as numpy arrays and loaded
memory-mapped; English stopwords, no stemming (names in a knowledge base are not English)."""

from __future__ import annotations

from pathlib import Path

import bm25s
from bm25s.tokenization import Tokenizer

from toolgym.tools.search.docstore import DocStore
from toolgym.tools.search.engines.base import Hit, IndexEngine

SUBDIR = "bm25"


def build_bm25(out: Path, docs: DocStore) -> None:
    tokenizer = Tokenizer(stopwords="en")
    texts = (d.contents for d in docs)
    tokens = tokenizer.tokenize(texts, length=len(docs), return_as="tuple", show_progress=False)
    retriever = bm25s.BM25()
    retriever.index(tokens, show_progress=False)
    retriever.save(out / SUBDIR, show_progress=False)
    tokenizer.save_vocab(out / SUBDIR)


class BM25Engine(IndexEngine):
    name = "bm25"

    def __init__(self, directory: Path, docs: DocStore | None = None) -> None:
        self.docs = docs or DocStore(directory)
        self.retriever = bm25s.BM25.load(directory / SUBDIR, mmap=True, show_progress=False)
        self.tokenizer = Tokenizer(stopwords="en")
        self.tokenizer.load_vocab(directory / SUBDIR)

    def search_sync(self, queries: list[str], topk: int) -> list[list[Hit]]:
        k = min(topk, len(self.docs))
        if not queries or k <= 0:
            return [[] for _ in queries]
        ids = self.tokenizer.tokenize(
            queries, update_vocab=False, return_as="ids", show_progress=False
        )
        rows, scores = self.retriever.retrieve(ids, k=k, show_progress=False)
        # a document sharing no term with the query scores 0: it is no match, and is not
        # returned to fill topk (a query of stopwords alone finds nothing)
        return [
            [Hit(self.docs[int(r)], float(s)) for r, s in zip(row, score, strict=True) if s > 0]
            for row, score in zip(rows, scores, strict=True)
        ]
