"""Indexes: built by `toolgym index build` or `build_index`, loaded memory-mapped, and finding
each document of the synthetic world by its name with bm25, every faiss kind and RRF."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from toolgym.envs.search.world import World
from toolgym.errors import ConfigError
from toolgym.tools.search.corpus import Document, write_corpus
from toolgym.tools.search.engines.base import Hit, SearchEngine
from toolgym.tools.search.engines.bm25 import BM25Engine
from toolgym.tools.search.engines.dense import DenseEngine, Encoder
from toolgym.tools.search.engines.hybrid import HybridEngine
from toolgym.tools.search.index import build_index, load_engine, read_meta


def top_ids(engine: SearchEngine, queries: list[str], k: int) -> list[list[str]]:
    hits = asyncio.run(engine.search(queries, k))
    return [[h.document.id for h in row] for row in hits]


def found_by_title(engine: SearchEngine, documents: list[Document], k: int) -> float:
    ranked = top_ids(engine, [d.title for d in documents], k)
    return sum(d.id in ids for d, ids in zip(documents, ranked, strict=True)) / len(documents)


def test_bm25_index_from_the_cli_finds_every_document_by_name(world_bm25_index):
    documents = World(0).documents()
    engine = load_engine(world_bm25_index)
    assert isinstance(engine, BM25Engine)
    assert read_meta(world_bm25_index)["documents"] == len(documents) == len(engine.docs)
    assert found_by_title(engine, documents, 1) == 1.0
    # Loaded memory-mapped: the sparse scores and the document offsets stay on disk.
    assert isinstance(engine.retriever.scores["data"], np.memmap)
    assert isinstance(engine.docs.offsets, np.memmap)
    assert engine.docs[0] == documents[0]


def test_topk_larger_than_the_corpus_and_queries_with_no_known_word(world_bm25_index):
    engine = load_engine(world_bm25_index)
    rows = asyncio.run(engine.search(["zzzqqq", "the of and", "born"], 1000))
    # no document shares a term with the first two: none is returned (not topk at score 0)
    assert [len(r) for r in rows[:2]] == [0, 0]
    assert 0 < len(rows[2]) < len(engine.docs) and all(h.score > 0 for h in rows[2])  # type: ignore[attr-defined]
    assert asyncio.run(engine.search([], 3)) == []


@pytest.mark.parametrize("faiss_kind", ["flat", "hnsw"])
def test_dense_indexes_find_every_document_by_name(world_corpus, tmp_path, faiss_kind):
    out = build_index(world_corpus, "dense", tmp_path / "idx", faiss_kind=faiss_kind)
    engine = load_engine(out)
    assert isinstance(engine, DenseEngine) and engine.faiss_kind == faiss_kind
    assert found_by_title(engine, World(0).documents(), 1) >= 0.98


def test_ivfpq_trains_on_a_larger_corpus_and_refuses_a_tiny_one(world_corpus, tmp_path):
    with pytest.raises(
        ConfigError, match=r"ivfpq needs at least 256 documents .* use --faiss flat"
    ):
        build_index(world_corpus, "dense", tmp_path / "tiny", faiss_kind="ivfpq")
    documents = World(0, size=200).documents()
    corpus = write_corpus(tmp_path / "corpus.jsonl", documents)
    out = build_index(corpus, "dense", tmp_path / "idx", faiss_kind="ivfpq", ivf_lists=8, pq_m=16)  # fmt: skip
    engine = load_engine(out, nprobe=8)
    # Product quantization is lossy: names are still found near the top.
    assert found_by_title(engine, documents, 5) >= 0.9


def test_e5_prefixes_change_what_is_encoded():
    plain, e5 = Encoder(), Encoder(e5=True)
    assert (e5.query_prefix, e5.passage_prefix) == ("query: ", "passage: ")
    text = ["Ilna Varos was born in Trelix."]
    assert np.allclose(plain.encode(text), plain.model.encode(text, normalize_embeddings=True))
    assert np.allclose(
        e5.encode(text), plain.model.encode(["query: " + text[0]], normalize_embeddings=True)
    )
    assert np.allclose(
        e5.encode(text, passages=True),
        plain.model.encode(["passage: " + text[0]], normalize_embeddings=True),
    )


def test_hybrid_index_fuses_bm25_and_dense(world_corpus, tmp_path):
    out = build_index(world_corpus, "hybrid", tmp_path / "idx")
    engine = load_engine(out)
    assert isinstance(engine, HybridEngine)
    assert [e.name for e in engine.engines] == ["bm25", "dense"]
    assert found_by_title(engine, World(0).documents(), 1) == 1.0


class Ranked(SearchEngine):
    """Returns a fixed ranking: the inputs of the fusion arithmetic below."""

    def __init__(self, ids: list[str]) -> None:
        self.ids = ids

    async def search(self, queries: list[str], topk: int) -> list[list[Hit]]:
        return [[Hit(Document(i, i), 0.0) for i in self.ids[:topk]] for _ in queries]


def test_reciprocal_rank_fusion_by_hand():
    fused = HybridEngine([Ranked(["a", "b", "c"]), Ranked(["c", "a"])], k=60)
    hits = asyncio.run(fused.search(["q"], 3))[0]
    # a: 1/61 + 1/62; c: 1/63 + 1/61; b: 1/62.
    assert [h.document.id for h in hits] == ["a", "c", "b"]
    assert [h.score for h in hits] == pytest.approx([1 / 61 + 1 / 62, 1 / 63 + 1 / 61, 1 / 62])
    with pytest.raises(ValueError, match="at least two engines"):
        HybridEngine([Ranked(["a"])])


def test_bad_builds_and_loads_say_what_to_do(world_corpus, tmp_path, cli):
    with pytest.raises(ConfigError, match="index kind 'sparse': choose one of bm25, dense, hybrid"):
        build_index(world_corpus, "sparse", tmp_path / "a")
    with pytest.raises(ConfigError, match="corpus .*missing.jsonl does not exist"):
        build_index(tmp_path / "missing.jsonl", "bm25", tmp_path / "a")
    with pytest.raises(
        ConfigError, match="faiss index kind 'ivf': choose one of flat, hnsw, ivfpq"
    ):
        build_index(world_corpus, "dense", tmp_path / "b", faiss_kind="ivf")
    with pytest.raises(ConfigError, match="is not a local model directory"):
        build_index(
            world_corpus,
            "dense",
            tmp_path / "c",
            encoder=str(tmp_path / "nope"),
        )
    with pytest.raises(ConfigError, match="is not a toolgym index"):
        load_engine(tmp_path)
    out = build_index(world_corpus, "bm25", tmp_path / "d")
    result = cli("index", "build", "--corpus", str(world_corpus), "--out", str(out))
    assert result.returncode == 2 and "is not empty; pass --force" in result.stderr
    assert load_engine(out) is not None  # the refused build left the index as it was
    result = cli("index", "build", "--corpus", str(world_corpus), "--out", str(out), "--force")
    assert result.returncode == 0 and "indexed 102 documents (bm25)" in result.stdout
