"""Index directories: `build_index` writes one from a JSONL corpus, `load_engine` serves it.

DIR/meta.json          kind (bm25, dense or hybrid), document count, build options
DIR/documents.jsonl    the corpus as read (DocStore, memory-mapped by row)
DIR/bm25/              bm25s sparse arrays and vocabulary      (bm25, hybrid)
DIR/dense/             faiss index and encoder settings        (dense, hybrid)
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from toolgym.errors import ConfigError
from toolgym.tools.search.corpus import Document, iter_corpus
from toolgym.tools.search.docstore import DocStore, write_docstore
from toolgym.tools.search.engines.base import SearchEngine

Progress = Callable[[str, int, int | None], None]
"""`progress(stage, done, total)`: how far an index build is (the CLI shows it)."""

KINDS = ("bm25", "dense", "hybrid")
FORMAT = "toolgym-index/1"


def build_index(
    corpus: str | Path,
    kind: str,
    out: str | Path,
    force: bool = False,
    progress: Progress | None = None,
    **dense_options: Any,
) -> Path:
    """Index `corpus` into `out`. `dense_options` go to `build_dense` (faiss_kind, encoder, ...).
    `progress(stage, done, total)` hears how far each stage is (total None: not known)."""
    report: Progress = progress or (lambda stage, done, total: None)
    if kind not in KINDS:
        raise ConfigError(f"index kind {kind!r}: choose one of {', '.join(KINDS)}")
    corpus, out = Path(corpus), Path(out)
    if not corpus.is_file():
        raise ConfigError(f"corpus {corpus} does not exist")
    if out.exists() and any(out.iterdir()):
        if not force:
            raise ConfigError(f"{out} is not empty; pass --force to replace it")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    count = write_docstore(
        out, _unique(iter_corpus(corpus), lambda n: report("reading the corpus", n, None), corpus)
    )
    if count == 0:
        raise ConfigError(f"{corpus}: the corpus has no documents")
    docs = DocStore(out)
    if kind in ("bm25", "hybrid"):
        from toolgym.tools.search.engines.bm25 import build_bm25

        report("bm25 indexing", 0, len(docs))
        build_bm25(out, docs)
        report("bm25 indexing", len(docs), len(docs))
    if kind in ("dense", "hybrid"):
        from toolgym.tools.search.engines.dense import build_dense

        encoded = 0

        def advance(n: int) -> None:
            nonlocal encoded
            encoded += n
            report("encoding passages", encoded, len(docs))

        build_dense(out, docs, progress=advance, **dense_options)
    meta = {"format": FORMAT, "kind": kind, "documents": count, "corpus": str(corpus.resolve()),
            "options": dense_options}  # fmt: skip
    (out / "meta.json").write_text(json.dumps(meta, indent=2, default=str))
    return out


def read_meta(directory: str | Path) -> dict[str, Any]:
    path = Path(directory) / "meta.json"
    if not path.is_file():
        raise ConfigError(
            f"{directory} is not a toolgym index (no meta.json); build one with `toolgym index build`"
        )
    meta = json.loads(path.read_text())
    if meta.get("format") != FORMAT:
        raise ConfigError(f"{path}: format {meta.get('format')!r}, this toolgym reads {FORMAT!r}")
    return meta


def load_engine(directory: str | Path, **dense_options: Any) -> SearchEngine:
    """The engine an index directory was built for (hybrid: bm25 and dense fused by RRF)."""
    directory = Path(directory)
    kind = read_meta(directory)["kind"]
    docs = DocStore(directory)
    engines: list[SearchEngine] = []
    if kind in ("bm25", "hybrid"):
        from toolgym.tools.search.engines.bm25 import BM25Engine

        engines.append(BM25Engine(directory, docs))
    if kind in ("dense", "hybrid"):
        from toolgym.tools.search.engines.dense import DenseEngine

        engines.append(DenseEngine(directory, docs, **dense_options))
    if len(engines) == 1:
        return engines[0]
    from toolgym.tools.search.engines.hybrid import HybridEngine

    return HybridEngine(engines)


def _unique(documents: Iterator[Document], report: Any, corpus: Path) -> Iterator[Document]:
    seen: set[str] = set()
    for number, d in enumerate(documents, 1):
        if d.id in seen:
            raise ConfigError(f"{corpus}: document id {d.id!r} appears more than once")
        seen.add(d.id)
        if number % 4096 == 0:
            report(number)
        yield d
